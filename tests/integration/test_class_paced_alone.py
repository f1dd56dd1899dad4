"""A class of containers pacing EC2 alone (each root its own pacer, no group between them):
EC2 throttles some of their calls, which is never an answer, and a container EC2 throttled
drops its bucket's tokens and paces at EC2's published rate at most
(``throttle.AdaptiveBucket.throttled``).

Everything runs on the emulator's clock (``EmulatedTime``): EC2's buckets refill by it at
their published sizes (mutating 50, 5 a second), and every pacer's waits read and move it.
Several roots ("containers") take turns on one thread, each probe run to its end before the
next starts, so a burst of them is as many calls as EC2 can see at one instant. Counts of
calls are asserted, never durations.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from capacity_broker.adapters.throttle import Pacer
from capacity_broker.client.in_process import run_function
from capacity_broker.config import Settings
from capacity_broker.domain.buckets import MUTATING
from capacity_broker.root import Adapters, Root

pytestmark = pytest.mark.integration

REGION = "us-east-1"
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]
SUBNETS = ["subnet-0a00000000000bd01", "subnet-0b00000000000bd02", "subnet-0c00000000000bd03"]
TYPE = "m7i.large"
CONTAINERS = 8
PROBES_EACH = 4


def world() -> dict[str, Any]:
    """Three subnets; the first two AZs empty, so every right answer is the third (each
    probe creates and cancels in all three: ≥ 6 mutating calls)."""
    return {
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "name": "alone",
                        "cidr": "10.24.0.0/16",
                        "subnets": [
                            {
                                "id": s,
                                "name": f"b{i}",
                                "availability_zone": az,
                                "cidr": f"10.24.{i}.0/24",
                            }
                            for i, (s, az) in enumerate(zip(SUBNETS, AZS, strict=True))
                        ],
                    }
                ],
                "pools": [
                    {"availability_zone": az, "instance_type": TYPE, "capacity": cap}
                    for az, cap in zip(AZS, (0, 0, 10_000), strict=True)
                ],
            }
        }
    }


@pytest.fixture
def burst(emulated_time: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The world with EC2's buckets on the emulator's clock."""
    emu = emulated_time.emu
    emu.load_scenario(world())
    emu.freeze()
    emu.throttle(emulator_clock=True)
    monkeypatch.setenv("BROKER_MAX_CONCURRENCY", "1")
    return emulated_time


def container(time: Any) -> Root:
    """A new container's root on the emulator's clock: its own session, clients and pacer."""
    settings = Settings.from_env({"BROKER_CLUSTER_ID": "demo-cluster", "AWS_REGION": REGION})
    adapters = Adapters(boto3.session.Session())
    adapters.pacer = Pacer(clock=time.monotonic, sleep=time.sleep)
    return Root(
        settings,
        adapters=adapters,
        clock=time.utcnow,
        monotonic=time.monotonic,
        sleep=time.sleep,
    )


def test_a_class_paced_alone_is_throttled_never_answered_wrong_and_slows_down(
    burst: Any,
) -> None:
    """Each container starts with EC2's whole burst, so the class is throttled (and still
    answered right: throttling is not an answer); every container EC2 throttled then paces its
    creates at the published 5 a second at most, not from a burst of its own."""
    emu = burst.emu
    emu.clear_calls()
    roots = [container(burst) for _ in range(CONTAINERS)]
    answers = [
        run_function(
            "probe",
            {"request_id": f"alone-{i:04d}", "instance_type": TYPE, "subnet_ids": SUBNETS},
            roots[i % CONTAINERS],
        )
        for i in range(CONTAINERS * PROBES_EACH)
    ]
    mutating = [
        c
        for c in emu.calls()
        if c.action in ("CreateCapacityReservation", "CancelCapacityReservation")
    ]
    assert {a["subnet_id"] for a in answers if a["status"] == "available"} <= {SUBNETS[2]}
    assert sum(1 for c in mutating if c.outcome == "RequestLimitExceeded") > 0
    creates = [root.pacer.bucket(REGION, "CreateCapacityReservation") for root in roots]
    throttled = [b for b in creates if b.counts["throttled"]]
    assert throttled
    assert all(b.rate <= MUTATING.refill for b in throttled)
