"""The broker's adaptive pacer against the emulator's EC2 throttling: throttled calls are
retried, the rate follows the account's real bucket (raised, or shared with another client),
and the Capacity Block actions are paced in their own bucket.

Time is compressed alike on both sides (the emulator's ``time_scale`` and
``BROKER_EC2_RATE_SCALE``), as the benchmarks do; no assertion is about time.
"""

from __future__ import annotations

from typing import Any

import pytest
from capacity_broker.adapters import throttle
from capacity_broker.handlers import cleaner as cleaner_handler

pytestmark = pytest.mark.integration

REGION = "us-east-1"
CLUSTER = "demo-cluster"
# Time compression: 20 puts the mutating default at 100 calls a second. Under a raised bucket
# the test needs the pacer, not this process's CPU, to be what limits the sweep: 4 (20 a second).
SCALE = 20.0
RAISED_SCALE = 4.0


@pytest.fixture
def paced(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The broker with its pacer compressed by SCALE (``compress`` for another scale), its
    cleaner on the emulator's clock."""
    monkeypatch.setenv("BROKER_REGIONS", REGION)
    compress(container, monkeypatch, SCALE)
    return broker


def compress(container: Any, monkeypatch: pytest.MonkeyPatch, scale: float) -> None:
    """A fresh root whose pacer starts at ``scale`` times EC2's published rates."""
    import emulator

    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", f"{scale:g}")
    container.build(cleaner_clock=emulator.Emulator().now)


def leaked(broker: Any, count: int) -> set[str]:
    """``count`` of this cluster's probe reservations, long past the probe grace."""
    reservations = [
        {
            "name": f"leaked-{i}",
            "instance_type": "c7i.large",
            "availability_zone": f"{REGION}a",
            "count": 1,
            "match": "targeted",
            "created": "-10m",
            "end_date": "+1h",
            "tags": {
                "capacity-broker:cluster-id": CLUSTER,
                "capacity-broker:purpose": "probe",
                "capacity-broker:request-id": f"req-{i}",
                "capacity-broker:subnet-id": "subnet-0a00000000000000a",
            },
        }
        for i in range(count)
    ]
    ids = broker.load_scenario({"regions": {REGION: {"reservations": reservations}}})
    return set(ids.reservations.values())


def sweep(context: Any) -> dict[str, Any]:
    answer: dict[str, Any] = cleaner_handler.handler({"action": "sweep", "dry_run": False}, context)
    return answer


def cancels(broker: Any) -> list[Any]:
    return broker.calls("CancelCapacityReservation")


def every_throttled_cancel_was_retried(calls: list[Any]) -> None:
    done = {c.params["CapacityReservationId"] for c in calls if c.outcome == "ok"}
    throttled = {
        c.params["CapacityReservationId"] for c in calls if c.outcome == "RequestLimitExceeded"
    }
    assert throttled <= done


def cancel_bucket(container: Any) -> throttle.AdaptiveBucket:
    """The cancel bucket of the root the handlers ran on (its pacer: one per root)."""
    bucket: throttle.AdaptiveBucket = container.root.pacer.bucket(
        REGION, "CancelCapacityReservation"
    )
    return bucket


def test_under_a_raised_bucket_the_pace_grows(
    paced: Any, container: Any, context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    compress(container, monkeypatch, RAISED_SCALE)
    ids = leaked(paced, 200)
    paced.throttle(raised=10, time_scale=RAISED_SCALE)
    answer = sweep(context)
    assert answer["status"] == "ok"
    assert {item["id"] for item in answer["cancelled"]} == ids
    bucket = cancel_bucket(container)
    assert bucket.counts["answered"] >= 1  # a probe past the published bucket went through
    assert bucket.rate > bucket.start
    every_throttled_cancel_was_retried(cancels(paced))


def test_with_another_client_on_the_bucket_the_pace_falls_to_our_share(
    paced: Any, container: Any, context: Any
) -> None:
    ids = leaked(paced, 200)
    paced.throttle(time_scale=SCALE, others={"CancelCapacityReservation": 0.5})
    answer = sweep(context)
    assert answer["status"] == "ok"
    assert {item["id"] for item in answer["cancelled"]} == ids
    calls = cancels(paced)
    assert any(c.outcome == "RequestLimitExceeded" for c in calls), "the throttle never bit"
    every_throttled_cancel_was_retried(calls)
    bucket = cancel_bucket(container)
    assert bucket.counts["cuts"] >= 1
    assert bucket.rate < bucket.start
    assert bucket.limit is not None and bucket.limit < bucket.start
    assert paced.throttled_others()  # the other client did take its share


def test_a_throttle_met_by_the_retry_loop_cuts_the_pace(paced: Any, container: Any) -> None:
    [rid] = leaked(paced, 1)
    paced.fail("CancelCapacityReservation", "RequestLimitExceeded", times=1)
    container.root.ec2(REGION).cancel_reservation(rid)
    outcomes = [c.outcome for c in cancels(paced)]
    assert outcomes == ["RequestLimitExceeded", "ok"]  # retried by RetryPolicy ...
    bucket = cancel_bucket(container)
    assert bucket.counts["throttled"] == 1  # ... and the pacer heard of the throttle
    assert bucket.counts["cuts"] == 1
    assert bucket.rate == pytest.approx(bucket.start * bucket.tuning.cut)


def test_capacity_block_offerings_are_paced_in_their_own_small_bucket(
    paced: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # EC2 gives DescribeCapacityBlockOfferings its own bucket of 10, refilled at 0.15/s (the
    # "Request throttling" page). The pacer used to draw it from the non-mutating default (100,
    # 20/s), so 40 lookups in a row met 10 throttles (measured); paced in the right bucket only its
    # probes past the bucket are throttled (one at a time, backing off).
    compress(container, monkeypatch, 100)  # 15 a second
    paced.throttle(time_scale=100)
    ec2 = container.root.ec2(REGION)
    for _ in range(40):
        ec2.block_offerings("p5.48xlarge", 1, 24)
    calls = paced.calls("DescribeCapacityBlockOfferings")
    throttled = [c for c in calls if c.outcome == "RequestLimitExceeded"]
    assert len(calls) - len(throttled) == 40
    assert len(throttled) <= 5
    bucket = container.root.pacer.bucket(REGION, "DescribeCapacityBlockOfferings")
    assert (bucket.burst, bucket.start) == (10, pytest.approx(0.15 * 100))
    assert len(throttled) <= bucket.counts["probes"] + 1
