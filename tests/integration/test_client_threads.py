"""One direct ``CapacityBroker`` used from 8 threads at once: 8 correct answers, the same as
the same calls made one at a time.

A direct broker runs the entry points in its own process on a root of its own (issue 20):
nothing of the process is changed for a call (no environment, no process lock), so calls of
one broker run side by side. The creates are gated on the broker's session: none goes on until
every create-making call has reached EC2, so the calls really are in flight together (one at
a time, the gate would never open)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from capacity_broker import CapacityBroker

pytestmark = pytest.mark.integration

REGION = "us-east-1"
CLUSTER = "threads-cluster"
SUBNET_A = "subnet-0a00000000000071a"
SUBNET_B = "subnet-0b00000000000071b"
TAG_REQUEST = "capacity-broker:request-id"
TAG_JOB = "capacity-broker:job-id"

WORLD = {
    "settings": {"expiry_lag_seconds": 0, "pending_seconds": 0},
    "regions": {
        REGION: {
            "vpcs": [
                {
                    "id": "vpc-0c0000000000007c1",
                    "name": "threads",
                    "cidr": "10.7.0.0/16",
                    "subnets": [
                        {
                            "id": SUBNET_A,
                            "name": "a",
                            "availability_zone": "us-east-1a",
                            "cidr": "10.7.1.0/24",
                        },
                        {
                            "id": SUBNET_B,
                            "name": "b",
                            "availability_zone": "us-east-1b",
                            "cidr": "10.7.2.0/24",
                        },
                    ],
                }
            ],
            "pools": [
                {"availability_zone": "us-east-1a", "instance_type": "g6.xlarge", "capacity": 0},
                {"availability_zone": "us-east-1b", "instance_type": "g6.xlarge", "capacity": 40},
                {"availability_zone": "us-east-1a", "instance_type": "c7i.large", "capacity": 40},
                {"availability_zone": "us-east-1b", "instance_type": "c7i.large", "capacity": 40},
            ],
        }
    },
}

# The 8 calls: 3 probes and 3 reserves (each one create-making call) and 2 releases of holds
# made before; every request id distinct.
PROBES = [f"thr-probe-{i}" for i in range(3)]
RESERVES = [f"thr-job-{i}" for i in range(3)]
RELEASED = ["thr-old-0", "thr-old-1"]
CREATING = len(PROBES) + len(RESERVES)


def calls(broker: CapacityBroker) -> list[Callable[[], Any]]:
    made: list[Callable[[], Any]] = []
    for request_id in PROBES:
        made.append(
            lambda r=request_id: broker.probe("g6.xlarge", [SUBNET_A, SUBNET_B], request_id=r)
        )
    for job in RESERVES:
        made.append(
            lambda j=job: broker.reserve(j, ["c7i.large"], [SUBNET_B], 2, request_id=f"req-{j}")
        )
    for job in RELEASED:
        made.append(lambda j=job: broker.release(job_id=j, request_id=f"release-{j}"))
    return made


def shape(answer: Any) -> tuple[Any, ...]:
    """What an answer says, without what differs from run to run (ids, seconds)."""
    data = answer.model_dump(mode="json")
    if "subnet_id" in data and "instance_type" in data and "attempts" in data:  # probe
        return (
            data["status"],
            data["subnet_id"],
            [(a["subnet_id"], a["outcome"], a.get("cancelled")) for a in data["attempts"]],
        )
    if "reservation" in data:  # reserve
        held = data["reservation"] or {}
        return (
            data["status"],
            held.get("instance_type"),
            held.get("availability_zone"),
            held.get("instance_count"),
            held.get("owned"),
        )
    return (data["status"], len(data.get("cancelled") or []), data.get("skipped"))


def world_with_old_holds(emu: Any) -> CapacityBroker:
    """The world, and the holds the releases will give back (made one at a time)."""
    emu.reset()
    emu.load_scenario(WORLD)
    setup = CapacityBroker(regions=[REGION], cluster_id=CLUSTER)
    for job in RELEASED:
        assert setup.reserve(job, ["c7i.large"], [SUBNET_A], 1).status == "reserved"
    return setup


def holds(emu: Any, tag: str, value: str) -> list[str]:
    """Reservations holding capacity with ``tag`` = ``value``, from the emulator's model (its
    truth: listings may still lag what was made a moment ago)."""
    model = emu.capacity(REGION)
    model.refresh()
    return [
        rid
        for rid, reservation in model.reservations.items()
        if reservation.state in ("active", "pending") and model.tags_of(rid).get(tag) == value
    ]


def test_one_broker_from_eight_threads_answers_as_one_at_a_time(emu: Any) -> None:
    # One at a time: the reference answers.
    world_with_old_holds(emu)
    alone = CapacityBroker(regions=[REGION], cluster_id=CLUSTER)
    expected = [shape(call()) for call in calls(alone)]
    assert [e[0] for e in expected] == ["available"] * 3 + ["reserved"] * 3 + ["released"] * 2

    # The same calls, on one broker, from 8 threads at once.
    world_with_old_holds(emu)
    session = boto3.session.Session(region_name=REGION)
    arrived: set[str] = set()
    all_in = threading.Event()
    lock = threading.Lock()
    # Nothing of the process is changed for a call (the old transport set BROKER_CLUSTER_ID,
    # AWS_REGION, BROKER_REGIONS and POWERTOOLS_METRICS_DISABLED around each run).
    environment = dict(os.environ)
    changed: list[str] = []

    def gate(params: dict[str, Any], **_: Any) -> None:
        tags = {
            t["Key"]: t["Value"]
            for spec in params.get("TagSpecifications", [])
            for t in spec.get("Tags", [])
        }
        with lock:
            changed.extend(
                k
                for k in set(os.environ) | set(environment)
                if os.environ.get(k) != environment.get(k)
            )
            arrived.add(tags[TAG_REQUEST])
            if len(arrived) == CREATING:
                all_in.set()
        if not all_in.wait(20):
            raise RuntimeError(f"only {sorted(arrived)} reached EC2 together")

    session.events.register("before-parameter-build.ec2.CreateCapacityReservation", gate)
    broker = CapacityBroker(regions=[REGION], session=session, cluster_id=CLUSTER)
    work = calls(broker)
    answers: list[Any] = [None] * len(work)
    failures: list[BaseException] = []
    start = threading.Barrier(len(work))

    def run(i: int) -> None:
        start.wait()
        try:
            answers[i] = work[i]()
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    assert all_in.is_set()
    assert changed == []
    assert [shape(a) for a in answers] == expected
    # And the world says the same: the probes left nothing held, each new job holds once,
    # the released jobs hold nothing.
    for request_id in PROBES:
        assert holds(emu, TAG_REQUEST, request_id) == []
    for job in RESERVES:
        assert len(holds(emu, TAG_JOB, job)) == 1
    for job in RELEASED:
        assert holds(emu, TAG_JOB, job) == []
