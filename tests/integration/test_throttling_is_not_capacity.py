"""Throttling is not an answer about capacity (contract v3, issue 23): an attempt that ends
throttled before the winner in the caller's order blocks the answer. The broker asks it again
within its budget, with the same ClientToken, or answers ``error`` with its code; it never
answers a later subnet (probe) or pair (reserve) over it. ``RequestLimitExceeded`` only when EC2
said so; the broker's own pacer running out is ``RateBudgetExhausted``.

EC2's throttling is injected into one AZ's creates with the emulator's fault knob (``when``:
that AZ's id), every other AZ having room. The broker runs on the emulator's clock
(``EmulatedTime``): its real RetryPolicy (0.2 s doubling to 5 s, 10 tries per call) and its
real pacer at EC2's published buckets, which EC2's throttles cut to half a call a second, in a
one-minute Lambda, all in milliseconds; one create at a time, so that the emulated clock moves
as one thread's sleeps would. At EC2's published rates the throttles leave the pacer no token to
spare, so the fan-out is frugal and the later place is never tried; with limits raised
(``raised_limits``) it still has tokens to spare, and the later place is tried (the hedge) once
the first one's call gave up, and held, and still not the answer. Counts of calls, never
durations, are asserted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.handlers.probe import handler as probe
from capacity_broker.handlers.reserve import handler as reserve

from emulator import Emulator

pytestmark = pytest.mark.integration

REGION = "us-east-1"
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]
SUBNETS = ["subnet-0a00000000000ba01", "subnet-0b00000000000ba02", "subnet-0c00000000000ba03"]
TYPE = "g6.xlarge"
HPC_TYPES = ["c7i.48xlarge", "hpc7a.96xlarge"]
# More throttles than one call's RetryPolicy tries (10): the broker asks again after its
# retries gave up, as the budget allows.
A_WHILE = 12
PAST_THE_BUDGET = 100_000


def world() -> dict[str, Any]:
    """Three subnets, one per AZ; every AZ has room for every type asked for."""
    return {
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "name": "throttled",
                        "cidr": "10.23.0.0/16",
                        "subnets": [
                            {
                                "id": s,
                                "name": f"t{i}",
                                "availability_zone": az,
                                "cidr": f"10.23.{i}.0/24",
                            }
                            for i, (s, az) in enumerate(zip(SUBNETS, AZS, strict=True))
                        ],
                    }
                ],
                "pools": [
                    {"availability_zone": az, "instance_type": t, "capacity": 8}
                    for az in AZS
                    for t in (TYPE, *HPC_TYPES)
                ],
            }
        }
    }


@pytest.fixture
def throttled(emulated_time: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The world, with the broker's probe and reserve on the emulator's clock: one create at a
    time, and room for reserve's kept hold beside it (a hold counts toward the fan-out's
    concurrency while it lives)."""
    emulated_time.emu.load_scenario(world())
    root = emulated_time.install(monkeypatch, max_concurrency=1)
    root.reserve.race.max_concurrency = 2  # this test's root only
    return emulated_time.emu


class Lambda:
    """A Lambda context: ``seconds`` of budget (the broker keeps 3 s of it for itself)."""

    function_name = "capacity-broker-throttled"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:throttled"
    aws_request_id = "00000000-0000-0000-0000-000000000023"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


def throttle_creates_in(emu: Any, az: str, times: int, instance_type: str | None = None) -> None:
    """EC2 answers ``RequestLimitExceeded`` to the next ``times`` creates in ``az``."""
    when = {"AvailabilityZoneId": emu.capacity(REGION).zones[az]}
    if instance_type is not None:
        when["InstanceType"] = instance_type
    emu.fail("CreateCapacityReservation", "RequestLimitExceeded", times=times, when=when)


def creates_in(emu: Any, az: str) -> list[Any]:
    zone = emu.capacity(REGION).zones[az]
    return [
        c
        for c in emu.calls("CreateCapacityReservation")
        if c.params.get("AvailabilityZoneId") == zone
    ]


def holding(request_id: str) -> list[str]:
    """The request's reservations EC2 still holds, from the emulator's model (no API call)."""
    capacity = Emulator().capacity(REGION)
    return [
        r.availability_zone
        for r in capacity.reservations.values()
        if r.state in ("active", "pending")
        and capacity.tags_of(r.id).get("capacity-broker:request-id") == request_id
    ]


def probe_for(request_id: str, seconds: float = 30) -> dict[str, Any]:
    event = {"request_id": request_id, "instance_type": TYPE, "subnet_ids": SUBNETS}
    return probe(event, Lambda(seconds))  # type: ignore[no-any-return]


def reserve_for(request_id: str, seconds: float = 30) -> dict[str, Any]:
    """Two pairs in one AZ: (c7i.48xlarge, us-east-1a), then (hpc7a.96xlarge, us-east-1a)."""
    event = {
        "request_id": request_id,
        "job_id": request_id,
        "instance_types": HPC_TYPES,
        "subnet_ids": SUBNETS[:1],
        "instance_count": 2,
        "strict": True,
    }
    return reserve(event, Lambda(seconds))  # type: ignore[no-any-return]


def pacer_cut_to_its_floor() -> None:
    """EC2 throttled this container's creates a moment ago (another tool of the account takes
    its bucket): the handlers' pacer (their root's) cut its pace to its floor, 0.5 a second, and
    has no token now."""
    bucket = CONTAINER.root().pacer.bucket(REGION, "CreateCapacityReservation")
    for _ in range(10):
        bucket.throttled(bucket.acquire())
    assert bucket.rate == pytest.approx(bucket.start * bucket.tuning.floor)


# -- probe ----------------------------------------------------------------------------------


def test_probe_waits_for_a_first_az_throttled_for_a_while(throttled: Any) -> None:
    throttle_creates_in(throttled, "us-east-1a", A_WHILE)
    answer = probe_for("vdi-throttled-a-while", seconds=60)
    assert answer["status"] == "available", answer
    assert answer["subnet_id"] == SUBNETS[0]
    first = answer["attempts"][0]
    assert (first["outcome"], first["cancelled"]) == ("available", True)
    # Asked again after its call's own retries gave up, always with the same ClientToken.
    tried = creates_in(throttled, "us-east-1a")
    assert Counter(c.outcome for c in tried) == {"RequestLimitExceeded": A_WHILE, "ok": 1}
    assert len({c.params["ClientToken"] for c in tried}) == 1
    assert holding("vdi-throttled-a-while") == []


def raised_limits(emulated_time: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The handlers' root again, its pacer at 100 times EC2's published refill (an account
    whose limits were raised, ``BROKER_EC2_RATE_SCALE``): cut by EC2's throttles, it still
    refills fast enough to have tokens to spare, so its fan-out is not frugal and hedges."""
    root = emulated_time.install(monkeypatch, max_concurrency=1, scale=100)
    root.reserve.race.max_concurrency = 2


@pytest.mark.parametrize("limits", ["published", "raised"])
def test_probe_answers_error_when_the_first_az_stays_throttled_past_the_budget(
    throttled: Any, emulated_time: Any, monkeypatch: pytest.MonkeyPatch, limits: str
) -> None:
    if limits == "raised":
        raised_limits(emulated_time, monkeypatch)
    throttle_creates_in(throttled, "us-east-1a", PAST_THE_BUDGET)
    answer = probe_for("vdi-throttled-past", seconds=60)
    assert (answer["status"], answer.get("error_code")) == ("error", "RequestLimitExceeded"), answer
    assert "subnet_id" not in answer
    first = answer["attempts"][0]
    assert (first["outcome"], first["error_code"]) == ("throttled", "RequestLimitExceeded")
    if limits == "raised":
        # The next AZ had room and was tried meanwhile (the hedge): its hold was cancelled,
        # and it is not the answer.
        second = answer["attempts"][1]
        assert (second["outcome"], second["cancelled"]) == ("available", True)
    else:
        # EC2's throttles cut the pacer, which has no token to spare: the fan-out is frugal
        # and makes no create in case the first AZ fails (it would be throttled alike).
        assert [a["outcome"] for a in answer["attempts"][1:]] == ["not_tried"] * 2
        assert creates_in(throttled, "us-east-1b") == []
    assert holding("vdi-throttled-past") == []
    tried = creates_in(throttled, "us-east-1a")
    assert {c.outcome for c in tried} == {"RequestLimitExceeded"}
    assert len({c.params["ClientToken"] for c in tried}) == 1


def test_probe_says_rate_budget_exhausted_when_its_own_pacer_gave_up(throttled: Any) -> None:
    pacer_cut_to_its_floor()
    answer = probe_for("vdi-paced", seconds=4)  # 1 s of budget; the next token: 2 s away
    assert (answer["status"], answer.get("error_code")) == ("error", "RateBudgetExhausted"), answer
    first = answer["attempts"][0]
    assert (first["outcome"], first["error_code"]) == ("throttled", "RateBudgetExhausted")
    # EC2 said nothing: no create was sent.
    assert throttled.calls("CreateCapacityReservation") == []


# -- reserve --------------------------------------------------------------------------------


def test_reserve_waits_for_a_first_pair_throttled_for_a_while(throttled: Any) -> None:
    throttle_creates_in(throttled, "us-east-1a", A_WHILE, HPC_TYPES[0])
    answer = reserve_for("job-throttled-a-while", seconds=60)
    assert answer["status"] == "reserved", answer
    held = answer["reservation"]
    assert (held["instance_type"], answer["subnet_ids"]) == (HPC_TYPES[0], [SUBNETS[0]])
    assert holding("job-throttled-a-while") == ["us-east-1a"]  # that one hold only
    tried = [
        c for c in creates_in(throttled, "us-east-1a") if c.params["InstanceType"] == HPC_TYPES[0]
    ]
    assert Counter(c.outcome for c in tried) == {"RequestLimitExceeded": A_WHILE, "ok": 1}
    assert len({c.params["ClientToken"] for c in tried}) == 1


@pytest.mark.parametrize("limits", ["published", "raised"])
def test_reserve_answers_error_when_the_first_pair_stays_throttled_past_the_budget(
    throttled: Any, emulated_time: Any, monkeypatch: pytest.MonkeyPatch, limits: str
) -> None:
    if limits == "raised":
        raised_limits(emulated_time, monkeypatch)
    throttle_creates_in(throttled, "us-east-1a", PAST_THE_BUDGET, HPC_TYPES[0])
    answer = reserve_for("job-throttled-past", seconds=60)
    assert (answer["status"], answer.get("error_code")) == ("error", "RequestLimitExceeded"), answer
    assert answer.get("reservation") is None
    first = answer["attempts"][0]
    assert (first["outcome"], first["error_code"]) == ("throttled", "RequestLimitExceeded")
    if limits == "raised":
        # The next pair (another type, the same AZ: EC2 let its creates through) held
        # meanwhile: that hold, the best so far, was not kept over the unanswered better
        # pair, but cancelled.
        (second,) = answer["attempts"][1:]
        assert (second["outcome"], second["cancelled"]) == ("available", True)
    else:
        # Frugal (the pacer cut by EC2's throttles): the next pair is never tried.
        assert [a["outcome"] for a in answer["attempts"][1:]] == ["not_tried"]
        assert {c.params["InstanceType"] for c in throttled.calls("CreateCapacityReservation")} == {
            HPC_TYPES[0]
        }
    assert holding("job-throttled-past") == []


def test_reserve_says_rate_budget_exhausted_when_its_own_pacer_gave_up(throttled: Any) -> None:
    pacer_cut_to_its_floor()
    answer = reserve_for("job-paced", seconds=4)
    assert (answer["status"], answer.get("error_code")) == ("error", "RateBudgetExhausted"), answer
    first = answer["attempts"][0]
    assert (first["outcome"], first["error_code"]) == ("throttled", "RateBudgetExhausted")
    assert throttled.calls("CreateCapacityReservation") == []
    assert holding("job-paced") == []
