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

Throttling is not an answer about capacity (contract v3): a place's creates may be throttled,
or their answers lost, a couple of times (the broker's retries get past that) or past the
invocation's budget, and then the answer is ``error`` with that place's code, never a later
place. The broker runs on the emulator's clock (``EmulatedTime``), so waiting out a budget costs
no wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from capacity_broker.domain.memory import MemoryKey, Observation, Seen
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.handlers.probe import handler as probe
from capacity_broker.handlers.reserve import handler as reserve
from hypothesis import HealthCheck, example, given, settings
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
    # (type, AZ) -> how its creates fail first: "throttled" or "lost" (twice: the broker's
    # retries get past it), or past the budget ("throttled_past", "lost_past").
    faults: dict[tuple[str, str], str] = field(default_factory=dict)

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
    holds_allowed = draw(st.one_of(st.none(), st.integers(0, 2)))
    # A lost create may have made its reservation, which then takes quota the broker never
    # learns of: with a quota, lost answers stay short.
    kinds = ["throttled", "lost", "throttled_past"]
    if holds_allowed is None:
        kinds.append("lost_past")
    faults = {cell: draw(st.sampled_from(kinds)) for cell in cells if draw(st.integers(0, 5)) == 0}
    return World(
        subnets=subnets,
        types=types,
        count=count,
        capacity=capacity,
        unsupported=unsupported,
        holds_allowed=holds_allowed,
        memory=memory,
        latency_known=draw(st.booleans()),
        faults=faults,
    )


@dataclass(frozen=True)
class Expected:
    winner: int | None
    stopped: int | None
    outcomes: tuple[str, ...]  # up to the decisive place
    code: str | None = None  # the answer's error_code when it is an error


# A place whose creates fail past the budget: its outcome and code (EC2 throttles before it
# looks at anything; a lost answer hides whatever EC2 said).
PAST = {
    "throttled_past": ("throttled", "RequestLimitExceeded"),
    "lost_past": ("error", "RequestTimeout"),
}


def one_at_a_time(world: World) -> Expected:
    """The sequential oracle, as EC2 answers one create with nothing else of the request
    held: unsupported, then the quota, then capacity (the emulator's order, EC2's codes); a
    place that never answers about capacity within the budget (throttled, answers lost) ends
    the request with its code (contract v3), one that does after a retry or two is as if it
    had answered at once."""
    outcomes: list[str] = []
    for index, place in enumerate(world.places()):
        cell = (place.instance_type, place.az)
        if world.faults.get(cell) in PAST:
            outcome, code = PAST[world.faults[cell]]
            outcomes.append(outcome)
            return Expected(None, index, tuple(outcomes), code)
        if cell in world.unsupported:
            outcomes.append("unsupported")
        elif world.holds_allowed is not None and world.holds_allowed < 1:
            outcomes.append("limit_exceeded")
            # EC2's code for a Capacity Reservation over the On-Demand limit (its error table).
            return Expected(None, index, tuple(outcomes), "InstanceLimitExceeded")
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
    zones = emu.capacity(REGION).zones
    now = time.time()
    CONTAINER.root().memory.remember(
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


def holding(emu: Emulator, request_id: str, world: World) -> list[str]:
    """The request's reservations EC2 still holds, but those that a create whose every answer
    was lost made (the broker never learnt of them: its EndDate and the cleaner's)."""
    capacity = emu.capacity(REGION)
    lost = {cell for cell, fault in world.faults.items() if fault == "lost_past"}
    return [
        r.availability_zone
        for r in capacity.reservations.values()
        if r.state in ("active", "pending")
        and capacity.tags_of(r.id).get("capacity-broker:request-id") == request_id
        and (r.instance_type, r.availability_zone) not in lost
    ]


# The broker's Lambda here: long enough for every place that answers within a couple of retries
# to be tried and answered even while others are throttled past it (the emulated clock runs
# faster while several threads sleep at once), and EC2's pace compressed likewise
# (BROKER_EC2_RATE_SCALE): both sides see the same clock.
BUDGET_MS = 120_000
PACE = 10


@pytest.fixture
def fresh(
    broker: Any, context: Any, emulated_time: Any, monkeypatch: pytest.MonkeyPatch
) -> Callable[[World], Any]:
    """``fresh(world)``: the emulator reset to ``world`` (its faults injected), a cold broker
    container on the emulator's clock with the world's memory; the Lambda context to use."""

    def load(world: World) -> Any:
        broker.reset()
        broker.load_scenario(scenario(world))
        # A new root for the handlers (no memory, caches or pacer of the last example), on
        # the emulator's clock; the world's memory goes into it.
        emulated_time.install(monkeypatch, scale=PACE)
        seed_memory(broker, world)
        broker.throttle(time_scale=PACE, emulator_clock=True)
        zones = broker.capacity(REGION).zones
        for (instance_type, az), fault in world.faults.items():
            broker.fail(
                "CreateCapacityReservation",
                None if fault.startswith("lost") else "RequestLimitExceeded",
                times=2 if fault in ("throttled", "lost") else 100_000,
                mode="timeout" if fault.startswith("lost") else "error",
                when={"AvailabilityZoneId": zones[az], "InstanceType": instance_type},
            )
        context.remaining_ms = BUDGET_MS
        return context

    return load


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


def first_place_blocked(types: int, subnets: int, fault: str) -> World:
    """Room everywhere; the first place's creates fail past the budget (issue 23's case)."""
    cells = [(t, az) for t in TYPES[:types] for az in AZS[:subnets]]
    return World(
        subnets=subnets,
        types=types,
        count=1,
        capacity=dict.fromkeys(cells, 2),
        unsupported=frozenset(),
        holds_allowed=None,
        memory={},
        latency_known=False,
        faults={cells[0]: fault},
    )


@EXAMPLES
@given(world=worlds(types=1))
@example(world=first_place_blocked(types=1, subnets=3, fault="throttled_past"))
def test_probe_answers_as_one_subnet_at_a_time(broker: Any, fresh: Any, world: World) -> None:
    context = fresh(world)
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
        assert (answer["status"], answer["error_code"]) == ("error", expected.code), answer
    else:
        assert answer["status"] == "unavailable", answer
    assert holding(broker, request_id, world) == []
    assert answer.get("cleanup") is None
    assert answer["reservation_seconds"] >= 0


@EXAMPLES
@given(world=worlds(types=2))
@example(world=first_place_blocked(types=2, subnets=1, fault="lost_past"))
def test_reserve_answers_as_one_pair_at_a_time(broker: Any, fresh: Any, world: World) -> None:
    context = fresh(world)
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
        assert holding(broker, request_id, world) == [won.az]
    elif expected.stopped is not None:
        assert (answer["status"], answer["error_code"]) == ("error", expected.code), answer
        assert holding(broker, request_id, world) == []
    else:
        assert answer["status"] == "no_capacity", answer
        assert holding(broker, request_id, world) == []
    assert answer.get("cleanup") is None
