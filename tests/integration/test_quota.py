"""Quota-correct answers (issue 13, contract v2 "Rules that hold however the attempts are
scheduled"): EC2 counts the broker's own unused reservations toward the On-Demand quotas, so
its concurrent attempts can trip a quota that one attempt alone would not. Such an error is no
answer: the attempt is tried again once the request's other reservations are given back, and
the answer is the first subnet (probe) or the best pair (reserve) with capacity now.

The world (``scenarios/quotas.yaml``): capacity in every AZ, quota room for one reservation at a
time (vCPUs for g6.xlarge and the .48xlarge types, an instance count for hpc7a.96xlarge). The
first place's create reaches EC2 a moment after the others (EC2 takes 100 ms a call here),
which is what made the all-at-once broker answer the second place: its own reservation there
held the quota when the first place's create arrived.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from capacity_broker.domain.memory import MemoryKey, Observation, Seen
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.handlers.probe import handler as probe
from capacity_broker.handlers.reserve import handler as reserve

from emulator import Emulator

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).parent / "scenarios" / "quotas.yaml"
REGION = "us-east-1"
SUBNETS = ["subnet-0ba0000000000000a", "subnet-0ba0000000000000b", "subnet-0ba0000000000000c"]
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]
LATENCY = 0.1


@pytest.fixture
def quotas(broker: Any) -> Any:
    broker.load_scenario(SCENARIO)
    broker.latency(LATENCY)
    return broker


def zone_id(emu: Any, az: str) -> str:
    return str(emu.capacity(REGION).zones[az])


def first_arrives_late(emu: Any, instance_type: str, az: str, seconds: float) -> None:
    """The create for ``instance_type`` in ``az`` leaves the broker ``seconds`` later than it
    is started (the EC2 client of the handlers' root: a botocore hook), every time it is
    sent."""
    where = zone_id(emu, az)

    def before(params: dict[str, Any], model: Any, **_: Any) -> None:
        if (
            model.name == "CreateCapacityReservation"
            and params.get("AvailabilityZoneId") == where
            and params.get("InstanceType") == instance_type
        ):
            time.sleep(seconds)

    # (On the root's EC2 client and on its session, for the clients it makes later: a call
    # with little time left goes through a client whose read timeout fits.)
    clients = CONTAINER.root().clients
    for events in (
        clients.client("ec2", REGION).meta.events,
        getattr(clients.session, "_session", clients.session).get_component("event_emitter"),
    ):
        events.register("before-parameter-build.ec2.CreateCapacityReservation", before)


def remember(emu: Any, instance_type: str, seen: dict[str, Seen], latency: float = 0.1) -> None:
    """The capacity memory of the handlers' root: what each AZ answered 10 s ago (and how
    fast)."""
    now = time.time()
    CONTAINER.root().memory.remember(
        [
            Observation(
                MemoryKey(REGION, zone_id(emu, az), instance_type),
                now - 10,
                what,
                latency=latency,
            )
            for az, what in seen.items()
        ]
    )


def model_holds(request_id: str) -> list[tuple[str, str]]:
    """(AZ, state) of the request's reservations, from the emulator's model (no API call)."""
    capacity = Emulator().capacity(REGION)
    return sorted(
        (r.availability_zone, r.state)
        for r in capacity.reservations.values()
        if capacity.tags_of(r.id).get("capacity-broker:request-id") == request_id
    )


# -- probe ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "instance_type", ["g6.xlarge", "hpc7a.96xlarge"], ids=["vcpu-limit", "instance-limit"]
)
def test_probe_with_room_for_one_answers_the_first_subnet(
    quotas: Any, context: Any, instance_type: str
) -> None:
    count = 1 if instance_type == "g6.xlarge" else 8
    first_arrives_late(quotas, instance_type, AZS[0], 0.05)
    # The first AZ was out of capacity a moment ago: every subnet is tried at once.
    remember(quotas, instance_type, {AZS[0]: Seen.INSUFFICIENT})
    answer = probe(
        {
            "request_id": f"quota-probe-{instance_type}",
            "instance_type": instance_type,
            "subnet_ids": SUBNETS,
            "instance_count": count,
        },
        context,
    )
    assert answer["status"] == "available", answer
    assert answer["subnet_id"] == SUBNETS[0]
    assert answer["attempts"][0]["outcome"] == "available"
    assert answer["attempts"][0]["cancelled"] is True
    # Its own reservation elsewhere held the quota when the first subnet's create arrived:
    # EC2 refused it, and the probe asked again once that reservation was given back.
    first_creates = [
        c.outcome
        for c in quotas.calls("CreateCapacityReservation")
        if c.params.get("AvailabilityZoneId") == zone_id(quotas, AZS[0])
    ]
    # A Capacity Reservation over the On-Demand limit is InstanceLimitExceeded ("Error codes
    # for the Amazon EC2 API"); the emulator used to answer VcpuLimitExceeded.
    assert first_creates[0] == "InstanceLimitExceeded"
    assert first_creates[-1] == "ok"
    assert answer["reservation_seconds"] > 0
    assert all(state == "cancelled" for _, state in model_holds(answer["request_id"]))


def test_probe_that_hedges_past_a_slow_first_subnet_still_answers_it(
    quotas: Any, context: Any
) -> None:
    # Nothing known of these subnets, creates known to answer in ~0.1 s: the first alone,
    # the others once it is late (the hedge); their reservation holds the quota meanwhile.
    first_arrives_late(quotas, "g6.xlarge", AZS[0], 0.4)
    remember(quotas, "g6.xlarge", {"us-east-1d": Seen.AVAILABLE})
    answer = probe(
        {"request_id": "quota-hedge", "instance_type": "g6.xlarge", "subnet_ids": SUBNETS},
        context,
    )
    assert answer["status"] == "available", answer
    assert answer["subnet_id"] == SUBNETS[0]
    assert len(quotas.calls("CreateCapacityReservation")) >= 2  # the hedge did start


def test_probe_alone_over_the_limit_is_limit_exceeded(quotas: Any, context: Any) -> None:
    # Two instances need 8 vCPUs of G; the account has 4: no retry can help.
    remember(quotas, "g6.xlarge", {AZS[0]: Seen.INSUFFICIENT})  # every subnet at once
    answer = probe(
        {
            "request_id": "quota-alone",
            "instance_type": "g6.xlarge",
            "subnet_ids": SUBNETS,
            "instance_count": 2,
        },
        context,
    )
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "InstanceLimitExceeded"
    assert [a["outcome"] for a in answer["attempts"]] == [
        "limit_exceeded",
        "not_tried",
        "not_tried",
    ]
    assert model_holds("quota-alone") == []


# -- reserve ----------------------------------------------------------------------------------

TYPES = ["c7i.48xlarge", "m7i.48xlarge"]
# A job of 8 instances: one hold of it fills the Standard quota.
EIGHT = {"instance_types": TYPES, "subnet_ids": SUBNETS, "instance_count": 8}


def test_reserve_with_room_for_one_hold_answers_the_best_pair(quotas: Any, context: Any) -> None:
    first_arrives_late(quotas, TYPES[0], AZS[0], 0.05)
    remember(quotas, TYPES[0], {AZS[0]: Seen.INSUFFICIENT})  # every pair at once
    answer = reserve({**EIGHT, "request_id": "quota-reserve", "job_id": "q1"}, context)
    assert answer["status"] == "reserved", answer
    assert answer["reservation"]["instance_type"] == TYPES[0]
    assert answer["subnet_ids"] == [SUBNETS[0]]
    assert answer["attempts"][0]["outcome"] == "available"
    held = model_holds("quota-reserve")
    assert [h for h in held if h[1] == "active"] == [(AZS[0], "active")]
    # The worse hold that occupied the quota was given back before the best pair was asked
    # again, and said so.
    given_back = [a for a in answer["attempts"][1:] if a.get("reservation_id")]
    assert given_back and all(a["cancelled"] is True for a in given_back)
    assert answer["reservation_seconds"] > 0


def test_reserve_alone_over_the_limit_is_an_error(quotas: Any, context: Any) -> None:
    remember(quotas, TYPES[0], {AZS[0]: Seen.INSUFFICIENT})
    answer = reserve(
        {
            "request_id": "quota-reserve-alone",
            "job_id": "q2",
            "instance_types": TYPES,
            "subnet_ids": SUBNETS,
            "instance_count": 9,  # 1,728 vCPUs of Standard; the account has 1,536
        },
        context,
    )
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "InstanceLimitExceeded"
    assert answer["attempts"][0]["outcome"] == "limit_exceeded"
    assert {a["outcome"] for a in answer["attempts"][1:]} == {"not_tried"}
    assert model_holds("quota-reserve-alone") == []


def test_concurrent_probes_share_the_quota_and_each_answers_truthfully(
    quotas: Any, context: Any
) -> None:
    """Two probes at once in an account with room for one reservation: each one's quota
    error may be the other's doing, which the broker cannot see. Neither answers a subnet
    without EC2 having said yes there, and nothing is left held."""
    answers: list[dict[str, Any]] = []

    def run(n: int) -> None:
        answers.append(
            probe(
                {
                    "request_id": f"quota-pair-{n}",
                    "instance_type": "g6.xlarge",
                    "subnet_ids": SUBNETS,
                },
                context,
            )
        )

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 2
    for answer in answers:
        if answer["status"] == "available":
            won = next(a for a in answer["attempts"] if a["subnet_id"] == answer["subnet_id"])
            assert won["outcome"] == "available" and won["cancelled"] is True
        else:
            assert answer["status"] == "error" and answer["error_code"] == "InstanceLimitExceeded"
    for n in range(2):
        assert all(state == "cancelled" for _, state in model_holds(f"quota-pair-{n}"))


def test_a_quota_error_right_after_a_give_back_is_retried_not_believed(
    quotas: Any, context: Any
) -> None:
    """EC2 keeps counting a cancelled reservation toward the quota for a while ("terminated
    instances count toward your instance limit for a while", EC2's eventual consistency): the
    best pair's create, retried alone right after the worse hold was given back, can still
    meet the limit. That is no answer: it is asked again after a pause, and the best pair wins.
    The broker used to take the solo error as decisive and answer ``error``."""
    remember(quotas, TYPES[0], {AZS[0]: Seen.INSUFFICIENT})  # every pair at once
    # The best pair's first create (beside the others) and its solo retry right after the
    # give-back both meet the limit, as EC2 answers while it still counts the cancelled hold.
    quotas.fail(
        "CreateCapacityReservation",
        "InstanceLimitExceeded",  # EC2's code for a reservation over the On-Demand limit
        times=2,
        when={"AvailabilityZoneId": zone_id(quotas, AZS[0]), "InstanceType": TYPES[0]},
    )
    answer = reserve({**EIGHT, "request_id": "quota-still-counted", "job_id": "q3"}, context)
    assert answer["status"] == "reserved", answer
    assert (answer["reservation"]["instance_type"], answer["subnet_ids"]) == (
        TYPES[0],
        [SUBNETS[0]],
    )
    first = [
        c.outcome
        for c in quotas.calls("CreateCapacityReservation")
        if c.params.get("AvailabilityZoneId") == zone_id(quotas, AZS[0])
        and c.params.get("InstanceType") == TYPES[0]
    ]
    # The two above, then as many as the emulator's own count of the cancelled hold gives
    # (a cancel keeps counting for a quota check or more), then the win.
    assert len(first) >= 3
    assert first == ["InstanceLimitExceeded"] * (len(first) - 1) + ["ok"]
    held = model_holds("quota-still-counted")
    assert [h for h in held if h[1] == "active"] == [(AZS[0], "active")]
