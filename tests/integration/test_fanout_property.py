"""Property (issue 13): the real ``probe`` and ``reserve`` handlers, run against the emulator
with random capacity per AZ, a random account quota and a random capacity memory in the
container, answer what trying the places one at a time answers: the same status and place, and
the same outcome for every attempt up to it. The memory decides how many attempts start at
once, never the answer; nothing is left held but the hold a reserve answers with.

The engine's own property test (``tests/unit/fanout/test_fanout_property.py``) explores timing on
a simulated clock; this one proves the wiring: the broker's creates, give-backs, ClientToken
generations and answers on the emulator's EC2 (its quotas count unused reservations, its
eventual consistency is on). The emulator answers at once (no latency) and Hypothesis runs a
fixed, small set of examples (``derandomize``), so the test is fast and the same every run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from capacity_broker.domain.memory import MemoryKey, Observation, Seen
from capacity_broker.handlers._runtime import reset_container
from capacity_broker.handlers.probe import handler as probe
from capacity_broker.handlers.reserve import handler as reserve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator import Emulator

pytestmark = pytest.mark.integration

REGION = "us-east-1"
AZS = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]
SUBNETS = [f"subnet-0f{i:015x}" for i in range(len(AZS))]
# Same quota class (Standard, 192 vCPUs each): one vCPU limit governs them all.
TYPES = ["c7i.48xlarge", "m7i.48xlarge"]
VCPUS = 192


@dataclass(frozen=True)
class Place:
    instance_type: str
    az: str
    subnet: str


@dataclass(frozen=True)
class World:
    subnets: int
    types: int
    count: int
    capacity: dict[tuple[str, str], int]  # (type, AZ) -> free instances
    unsupported: frozenset[tuple[str, str]]
    holds_allowed: int | None  # the vCPU quota in holds of ``count`` (None: no quota)
    memory: dict[tuple[str, str], tuple[Seen, float]]  # (type, AZ) -> (seen, seconds ago)
    latency_known: bool

    def places(self) -> list[Place]:
        return [
            Place(t, AZS[s], SUBNETS[s]) for t in TYPES[: self.types] for s in range(self.subnets)
        ]


@st.composite
def worlds(draw: st.DrawFn, types: int) -> World:
    subnets = draw(st.integers(1, len(AZS)))
    count = draw(st.integers(1, 3))
    cells = [(t, az) for t in TYPES[:types] for az in AZS[:subnets]]
    capacity = {cell: draw(st.sampled_from([0, 0, count - 1, count, count + 2])) for cell in cells}
    unsupported = frozenset(cell for cell in cells if draw(st.integers(0, 9)) == 0)
    memory = {
        cell: (
            draw(st.sampled_from([Seen.AVAILABLE, Seen.INSUFFICIENT, Seen.UNSUPPORTED])),
            draw(st.sampled_from([5.0, 120.0, 600.0])),  # 600 s ago: stale
        )
        for cell in cells
        if draw(st.booleans())
    }
    return World(
        subnets=subnets,
        types=types,
        count=count,
        capacity=capacity,
        unsupported=unsupported,
        holds_allowed=draw(st.one_of(st.none(), st.integers(0, 2))),
        memory=memory,
        latency_known=draw(st.booleans()),
    )


@dataclass(frozen=True)
class Expected:
    winner: int | None
    stopped: int | None
    outcomes: tuple[str, ...]  # up to the decisive place


def one_at_a_time(world: World) -> Expected:
    """The sequential oracle, as EC2 answers one create with nothing else of the request
    held: unsupported, then the quota, then capacity (the emulator's order, EC2's codes)."""
    outcomes: list[str] = []
    for index, place in enumerate(world.places()):
        cell = (place.instance_type, place.az)
        if cell in world.unsupported:
            outcomes.append("unsupported")
        elif world.holds_allowed is not None and world.holds_allowed < 1:
            outcomes.append("limit_exceeded")
            return Expected(None, index, tuple(outcomes))
        elif world.capacity[cell] < world.count:
            outcomes.append("insufficient_capacity")
        else:
            outcomes.append("available")
            return Expected(index, None, tuple(outcomes))
    return Expected(None, None, tuple(outcomes))


def scenario(world: World) -> dict[str, Any]:
    cells = [(t, az) for t in TYPES[: world.types] for az in AZS[: world.subnets]]
    region: dict[str, Any] = {
        "vpcs": [
            {
                "name": "property",
                "cidr": "10.50.0.0/16",
                "subnets": [
                    {
                        "id": SUBNETS[i],
                        "name": f"p{i}",
                        "availability_zone": AZS[i],
                        "cidr": f"10.50.{i}.0/24",
                    }
                    for i in range(world.subnets)
                ],
            }
        ],
        "pools": [
            {"availability_zone": az, "instance_type": t, "capacity": world.capacity[(t, az)]}
            for t, az in cells
        ],
        "unsupported": [
            {"availability_zone": az, "instance_type": t} for t, az in sorted(world.unsupported)
        ],
    }
    if world.holds_allowed is not None:
        region["quotas"] = {"vcpus": {"Standard": world.holds_allowed * world.count * VCPUS}}
    return {"regions": {REGION: region}}


def seed_memory(emu: Emulator, world: World) -> None:
    from capacity_broker.logic.memory import for_container

    zones = emu.capacity(REGION).zones
    now = time.time()
    for_container(None, REGION).remember(
        [
            Observation(
                MemoryKey(REGION, zones[az], t),
                now - ago,
                seen,
                latency=0.05 if world.latency_known else None,
            )
            for (t, az), (seen, ago) in world.memory.items()
        ]
    )


def holding(emu: Emulator, request_id: str) -> list[str]:
    capacity = emu.capacity(REGION)
    return [
        r.availability_zone
        for r in capacity.reservations.values()
        if r.state in ("active", "pending")
        and capacity.tags_of(r.id).get("capacity-broker:request-id") == request_id
    ]


def fresh(emu: Emulator, world: World) -> None:
    emu.reset()
    reset_container()
    emu.load_scenario(scenario(world))
    seed_memory(emu, world)


def check_attempts(answer: dict[str, Any], expected: Expected, places: list[Place]) -> None:
    attempts = answer["attempts"]
    assert len(attempts) == len(places)
    got = tuple(a["outcome"] for a in attempts[: len(expected.outcomes)])
    assert got == expected.outcomes, (got, expected)
    # Places after the decisive one may have been tried meanwhile (the fan-out widened) and
    # say what EC2 answered; a hold there was given back, and EC2 confirmed it.
    for later in attempts[len(expected.outcomes) :]:
        if later["outcome"] == "available":
            assert later["cancelled"] is True, later


EXAMPLES = settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@EXAMPLES
@given(world=worlds(types=1))
def test_probe_answers_as_one_subnet_at_a_time(broker: Any, context: Any, world: World) -> None:
    fresh(broker, world)
    expected = one_at_a_time(world)
    places = world.places()
    request_id = f"prop-probe-{time.monotonic_ns()}"
    answer = probe(
        {
            "request_id": request_id,
            "instance_type": TYPES[0],
            "subnet_ids": [p.subnet for p in places],
            "instance_count": world.count,
        },
        context,
    )
    check_attempts(answer, expected, places)
    if expected.winner is not None:
        assert answer["status"] == "available", answer
        assert answer["subnet_id"] == places[expected.winner].subnet
    elif expected.stopped is not None:
        # EC2's code for a Capacity Reservation over the On-Demand limit (its error table).
        assert (answer["status"], answer["error_code"]) == ("error", "InstanceLimitExceeded")
    else:
        assert answer["status"] == "unavailable", answer
    assert holding(broker, request_id) == []
    assert answer.get("cleanup") is None
    assert answer["reservation_seconds"] >= 0


@EXAMPLES
@given(world=worlds(types=2))
def test_reserve_answers_as_one_pair_at_a_time(broker: Any, context: Any, world: World) -> None:
    fresh(broker, world)
    expected = one_at_a_time(world)
    places = world.places()
    request_id = f"prop-reserve-{time.monotonic_ns()}"
    answer = reserve(
        {
            "request_id": request_id,
            "job_id": "prop",
            "instance_types": TYPES[: world.types],
            "subnet_ids": SUBNETS[: world.subnets],
            "instance_count": world.count,
            "strict": True,
        },
        context,
    )
    check_attempts(answer, expected, places)
    if expected.winner is not None:
        won = places[expected.winner]
        assert answer["status"] == "reserved", answer
        assert (answer["reservation"]["instance_type"], answer["subnet_ids"]) == (
            won.instance_type,
            [won.subnet],
        )
        assert holding(broker, request_id) == [won.az]
    else:
        assert answer["status"] == ("error" if expected.stopped is not None else "no_capacity")
        assert holding(broker, request_id) == []
    assert answer.get("cleanup") is None
