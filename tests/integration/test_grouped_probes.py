"""Grouped probes within one process (contract v3; ``logic.group``), against the emulator, on the
emulator's clock.

A class arrives while one desktop's probe is in flight (its create held back by the test until
the class has arrived): the class is one group, answered with one reservation of its summed
count per subnet tried, split on insufficient capacity. The group's window closes when the
emulator's clock passes it (the test moves it once every member has joined), so which probes
meet never depends on how fast the machine is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from capacity_broker.config import GROUP_MAX_WINDOW_SECONDS
from capacity_broker.domain.group import (
    GroupKey,
    GroupState,
)
from capacity_broker.domain.group_plan import (
    oracle,
)
from capacity_broker.logic.grouping.meeting import kind_id
from capacity_broker.models import ProbeRequest, ProbeResponse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.integration

REGION = "us-east-1"
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]
SUBNETS = ["subnet-0a00000000000c301", "subnet-0b00000000000c302", "subnet-0c00000000000c303"]
TYPE = "g6.xlarge"
BUDGET = 25.0


def world(capacity: list[int]) -> dict[str, Any]:
    return {
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "name": "class",
                        "cidr": "10.33.0.0/16",
                        "subnets": [
                            {
                                "id": s,
                                "name": f"c{i}",
                                "availability_zone": az,
                                "cidr": f"10.33.{i}.0/24",
                            }
                            for i, (s, az) in enumerate(zip(SUBNETS, AZS, strict=True))
                        ],
                    }
                ],
                "pools": [
                    {"availability_zone": az, "instance_type": TYPE, "capacity": free}
                    for az, free in zip(AZS, capacity, strict=True)
                ],
            }
        }
    }


class Class:
    """One desktop probing alone (held back before its create), then ``size`` desktops at once
    on the same root, each from its thread; ``answers`` by request id."""

    def __init__(self, emulated_time: Any, monkeypatch: pytest.MonkeyPatch, capacity: list[int]):
        emulated_time.emu.reset()
        emulated_time.emu.load_scenario(world(capacity))
        self.time = emulated_time
        self.root = emulated_time.install(monkeypatch)
        self.prober = self.root.probe
        assert self.prober.grouping is not None
        self.coalescer = self.prober.grouping
        meeting = self.coalescer.meeting
        # The window closes when the test moves the emulator's clock (``run``), whatever the
        # machine's speed.
        meeting.pause = emulated_time.pause
        self.core = self.root.core
        self.real_hold = self.core.hold
        self.first_in = threading.Event()
        self.go = threading.Event()
        self.group_holds: list[Any] = []
        self.answers: dict[str, ProbeResponse] = {}
        self.failures: list[BaseException] = []
        self.breaks: Callable[[Any], None] | None = None
        self.tags: dict[str, str] = {}  # every desktop's request tags
        self.core.hold = self._hold  # this test's root only

    def _hold(self, spec: Any, *args: Any, **kwargs: Any) -> Any:
        if spec.request_id == "first":
            self.first_in.set()
            assert self.go.wait(60)
        elif spec.request_id.startswith("group-"):
            self.group_holds.append(spec)
            if self.breaks is not None:
                self.breaks(spec)
        return self.real_hold(spec, *args, **kwargs)

    def _probe(self, request_id: str) -> None:
        request = ProbeRequest(instance_type=TYPE, subnet_ids=SUBNETS, tags=self.tags or None)
        now = self.time.monotonic()
        try:
            answer, _ = self.prober.probe(request, request_id, now + BUDGET, now + BUDGET + 3)
            self.answers[request_id] = answer
        except BaseException as error:
            self.failures.append(error)

    def run(self, size: int) -> list[ProbeResponse]:
        first = threading.Thread(target=self._probe, args=("first",))
        first.start()
        assert self.first_in.wait(60)
        kind = kind_id(
            GroupKey(
                REGION,
                TYPE,
                tuple(SUBNETS),
                "Linux/UNIX",
                "default",
                tags=GroupKey.tags_of(self.tags),
            )
        )
        store = self.coalescer.meeting.store

        def waiting() -> int:
            found = store.kind(kind)
            return found.slots if found.state is GroupState.OPEN else 0

        threads = [
            threading.Thread(target=self._probe, args=(f"desk-{i:02d}",)) for i in range(size)
        ]
        for thread in threads:
            thread.start()
        for _ in range(6000):
            if waiting() == size:
                break
            threading.Event().wait(0.01)
        assert waiting() == size, "the class did not meet"
        # The group's longest window passes on the emulator's clock: its leader closes it.
        self.time.sleep(GROUP_MAX_WINDOW_SECONDS + 1)
        for thread in threads:
            thread.join(120)
        self.go.set()
        first.join(120)
        assert not self.failures, self.failures
        return [self.answers[f"desk-{i:02d}"] for i in range(size)]


@pytest.fixture
def classroom(emulated_time: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Class]:
    def make(capacity: list[int]) -> Class:
        return Class(emulated_time, monkeypatch, capacity)

    return make


def held_now(emu: Any) -> list[str]:
    model = emu.capacity(REGION)
    model.refresh()
    return [r.id for r in model.reservations.values() if r.state in ("active", "pending")]


def test_a_class_of_40_fills_a_then_spills_to_c_never_b(classroom: Any) -> None:
    room = classroom([25, 0, 1000])
    answers = room.run(40)
    where = [a.subnet_id for a in answers]
    assert where.count(SUBNETS[0]) == 25
    assert where.count(SUBNETS[2]) == 15
    assert SUBNETS[1] not in where
    assert {a.status for a in answers} == {"available"}
    group_ids = {a.group.id for a in answers if a.group is not None}
    assert len(group_ids) == 1
    assert all(a.group is not None and a.group.size == 40 for a in answers)
    for answer in answers:
        assert answer.group is not None
        assert answer.group.reservation_id is not None
        won = next(x for x in answer.attempts if x.outcome == "available")
        assert won.reservation_id == answer.group.reservation_id
        assert won.cancelled is True
        if answer.subnet_id == SUBNETS[2]:
            # What the desktop would have been told alone: A and B had no room for it.
            assert [x.outcome for x in answer.attempts] == [
                "insufficient_capacity",
                "insufficient_capacity",
                "available",
            ]
    # Far fewer creates than 40 desktops alone (40 to 120): halving at A (40 no, 20 yes, 20,
    # 10 no, 5 yes, 5, 3, 2, 1 no), at B (15, 8, 4, 2, 1 no), C (15 yes); nothing left holding.
    assert len(room.group_holds) <= 15
    assert all(s.purpose == "probe" for s in room.group_holds)
    assert held_now(room.time.emu) == []
    # The first desktop, alone, was never grouped.
    assert room.answers["first"].group is None
    assert room.answers["first"].status == "available"


def test_plenty_of_capacity_answers_a_class_with_one_create(classroom: Any) -> None:
    room = classroom([1000, 1000, 1000])
    answers = room.run(30)
    assert {a.subnet_id for a in answers} == {SUBNETS[0]}
    assert len(room.group_holds) == 1
    assert room.group_holds[0].count == 30
    calls = room.time.emu.calls("CreateCapacityReservation")
    made = [c for c in calls if c.params.get("InstanceCount") == 30]
    assert len(made) == 1
    params = made[0].params
    assert params["InstanceMatchCriteria"] == "targeted"
    assert params["EndDateType"] == "limited"
    assert params["ClientToken"].startswith("cb-probe-")
    tags = {t["Key"]: t["Value"] for s in params["TagSpecifications"] for t in s["Tags"]}
    assert tags["capacity-broker:purpose"] == "probe"
    assert tags["capacity-broker:request-id"].startswith(answers[0].group.id)  # type: ignore[union-attr]
    assert held_now(room.time.emu) == []


def test_a_member_whose_leader_dies_answers_on_its_own(classroom: Any) -> None:
    room = classroom([3, 0, 1000])

    def dies(_spec: Any) -> None:
        # 5 at A: no room; 3 at A: held; then the leader is gone with that hold made.
        if len(room.group_holds) == 3:
            raise RuntimeError("the leader's process went away")

    room.breaks = dies
    answers = room.run(5)
    assert len(room.group_holds) == 3
    assert {a.status for a in answers} == {"available"}
    assert {a.subnet_id for a in answers} <= {SUBNETS[0], SUBNETS[2]}
    assert all(a.group is None for a in answers)
    # The group's hold was given back before its members probed alone; nothing holds now.
    assert held_now(room.time.emu) == []


def test_throttling_of_the_groups_create_blocks_the_group(classroom: Any) -> None:
    room = classroom([25, 25, 25])
    emu = room.time.emu
    # EC2 throttles every create in the first AZ, past any budget.
    zone = emu.capacity(REGION).zones[AZS[0]]
    emu.fail(
        "CreateCapacityReservation",
        "RequestLimitExceeded",
        times=100_000,
        when={"AvailabilityZoneId": zone},
    )
    answers = room.run(6)
    # Never a later subnet over the first, whose creates stayed throttled (contract v3).
    assert {a.status for a in answers} == {"error"}
    assert {a.error_code for a in answers} == {"RequestLimitExceeded"}
    assert all(a.group is not None and a.group.size == 6 for a in answers)
    assert all(a.attempts[0].outcome == "throttled" for a in answers)
    assert all(a.subnet_id is None for a in answers)
    # Asked again (the same token) while the budget lasted, never in B or C.
    assert {s.subnet.subnet_id for s in room.group_holds} == {SUBNETS[0]}
    tokens = {
        c.params["ClientToken"]
        for c in emu.calls("CreateCapacityReservation")
        if c.params.get("InstanceCount") == 6
    }
    assert len(tokens) == 1
    assert held_now(emu) == []


def test_probes_one_after_another_are_never_grouped(classroom: Any) -> None:
    room = classroom([1000, 1000, 1000])
    room.go.set()
    request = ProbeRequest(instance_type=TYPE, subnet_ids=SUBNETS)
    for i in range(3):
        now = room.time.monotonic()
        answer, _ = room.prober.probe(request, f"seq-{i}", now + BUDGET, now + BUDGET + 3)
        assert answer.status == "available"
        assert answer.group is None
    assert room.group_holds == []


@settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    capacity=st.lists(st.integers(0, 12), min_size=3, max_size=3),
    size=st.integers(2, 12),
)
def test_a_class_answers_what_each_desktop_alone_in_order_would(
    classroom: Any, capacity: list[int], size: int
) -> None:
    """The engine on the emulator's EC2 gives the oracle's answers (``domain.group.oracle``):
    each desktop alone, in arrival order, its launch taking the room it found."""
    room = classroom(capacity)
    answers = room.run(size)
    expected = oracle([1] * size, capacity)
    where = [SUBNETS.index(a.subnet_id) if a.subnet_id else None for a in answers]
    # Which desktop joined first is the threads' race; how many land where is not.
    assert sorted(where, key=lambda w: (w is None, w or 0)) == sorted(
        expected, key=lambda w: (w is None, w or 0)
    )
    assert {a.status for a in answers} <= {"available", "unavailable"}
    assert all(a.group is not None and a.group.size == size for a in answers)
    assert held_now(room.time.emu) == []


def test_a_group_s_holds_carry_its_requests_tags(classroom: Any) -> None:
    """Contract v4: grouped holds carry their requests' tags (only requests with the same tags
    are grouped), so an organisation's tag policy treats a grouped probe as a lone one."""
    room = classroom([0, 0, 1000])
    room.tags = {"team": "vdi", "cost-center": "42"}
    answers = room.run(6)
    assert {a.status for a in answers} == {"available"}
    assert {a.group.size for a in answers if a.group is not None} == {6}
    assert room.group_holds and all(s.extra_tags == room.tags for s in room.group_holds)
    creates = room.time.emu.calls("CreateCapacityReservation")
    grouped = [c for c in creates if c.params.get("InstanceCount") == 6]
    assert grouped
    for call in grouped:
        (spec,) = call.params["TagSpecifications"]
        tags = {t["Key"]: t["Value"] for t in spec["Tags"]}
        assert tags["team"] == "vdi" and tags["cost-center"] == "42"
        assert tags["capacity-broker:group-id"] == answers[0].group.id  # type: ignore[union-attr]
