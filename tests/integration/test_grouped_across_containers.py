"""Grouped probes across containers (contract v3, v4; ``logic.grouping`` over the state table):
each desktop of a class probes from its own container (a root with its own session, clients,
pacer and memory), and they meet in the state table, against the emulator, on the emulator's
clock.

A first desktop's probe is in flight (its create held back by the test) when the class arrives,
so the class has seen a burst: one of them opens a group in the table and the rest join it. The
group's window closes when the emulator's clock passes it (the test moves it once every member
has joined, read from the table; the meeting pauses in real time meanwhile), so which probes
meet never depends on how fast the machine is. Counts of calls are asserted, never durations.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import boto3
import pytest
from capacity_broker.adapters.dynamodb_group import TableStore
from capacity_broker.adapters.dynamodb_group_items import PREFIX, group_item
from capacity_broker.client.in_process import IN_PROCESS_TIMEOUT_MS, run_function
from capacity_broker.config import GROUP_MAX_WINDOW_SECONDS, Settings
from capacity_broker.domain.group import (
    MOST_PATIENCE_SECONDS,
)
from capacity_broker.domain.group_plan import (
    oracle,
)
from capacity_broker.root import Adapters, Root

pytestmark = pytest.mark.integration

REGION = "us-east-1"
TABLE = "broker-state"
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]
SUBNETS = ["subnet-0a00000000000d401", "subnet-0b00000000000d402", "subnet-0c00000000000d403"]
TYPE = "g6.xlarge"
# The emulator's clock moves past a group's longest window: its leader closes it.
WINDOW = GROUP_MAX_WINDOW_SECONDS


def world(capacity: list[int]) -> dict[str, Any]:
    return {
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "name": "class",
                        "cidr": "10.34.0.0/16",
                        "subnets": [
                            {
                                "id": s,
                                "name": f"c{i}",
                                "availability_zone": az,
                                "cidr": f"10.34.{i}.0/24",
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


def dynamodb() -> Any:
    return boto3.client("dynamodb", region_name=REGION)


class Classroom:
    """A first desktop's probe in flight, then ``size`` desktops at once, each in a container
    of its own; ``answers`` by request id."""

    def __init__(self, time: Any, monkeypatch: pytest.MonkeyPatch, capacity: list[int]) -> None:
        emu = time.emu
        emu.reset()
        emu.load_scenario(world(capacity))
        emu.freeze()
        emu.throttle(emulator_clock=True)
        emu.clear_calls()
        dynamodb().create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        monkeypatch.setenv("BROKER_MAX_CONCURRENCY", "1")
        self.time = time
        self.emu = emu
        self.answers: dict[str, dict[str, Any]] = {}
        self.failures: list[BaseException] = []
        self.first_in = threading.Event()
        self.go = threading.Event()

    def container(self, *, hold_first: bool = False, skew: float = 0.0) -> Root:
        """A new container's root on the emulator's clock (``skew`` seconds off it, its wall
        clock and its monotonic one both), its probes meeting in the table."""
        time = self.time
        settings = Settings.from_env(
            {
                "BROKER_CLUSTER_ID": "demo-cluster",
                "AWS_REGION": REGION,
                "BROKER_STATE_TABLE": TABLE,
            }
        )
        root = Root(
            settings,
            adapters=Adapters(boto3.session.Session()),
            clock=lambda: time.utcnow() + timedelta(seconds=skew),
            monotonic=lambda: time.monotonic() + skew,
            sleep=time.sleep,
        )
        grouping = root.probe.grouping
        assert grouping is not None
        assert isinstance(grouping.meeting.store, TableStore)
        grouping.meeting.pause = time.pause  # real pauses, the verdicts on the emulator's clock
        if hold_first:
            real_hold = root.core.hold

            def hold(spec: Any, *args: Any, **kwargs: Any) -> Any:
                if spec.request_id == "first":
                    self.first_in.set()
                    assert self.go.wait(120)
                return real_hold(spec, *args, **kwargs)

            root.core.hold = hold  # type: ignore[method-assign]
        return root

    def probe(self, root: Root, request_id: str) -> None:
        event = {"request_id": request_id, "instance_type": TYPE, "subnet_ids": SUBNETS}
        try:
            self.answers[request_id] = run_function("probe", event, root)
        except BaseException as error:
            self.failures.append(error)

    def start_first(self) -> threading.Thread:
        first = threading.Thread(target=self.probe, args=(self.container(hold_first=True), "first"))
        first.start()
        assert self.first_in.wait(120)
        return first

    def members(self) -> int:
        """How many probes the group taking members holds (the table's own count: the slots
        the kind's item says its OPEN group has taken, its leader's included)."""
        items = dynamodb().scan(TableName=TABLE, ConsistentRead=True)["Items"]
        return sum(int(i["n"]["N"]) for i in items if i.get("st", {}).get("S") == "open")

    def run(
        self,
        size: int,
        containers: list[Root] | None = None,
        after_join: Callable[[], None] | None = None,
    ) -> list[dict[str, Any]]:
        first = self.start_first()
        roots = containers or [self.container() for _ in range(size)]
        threads = [
            threading.Thread(target=self.probe, args=(root, f"desk-{i:02d}"))
            for i, root in enumerate(roots)
        ]
        for thread in threads:
            thread.start()
        for _ in range(12_000):
            if self.members() == size or self.failures:
                break
            threading.Event().wait(0.01)
        assert self.members() == size, "the class did not meet in one group"
        if after_join is not None:
            after_join()
        else:
            self.time.sleep(WINDOW + 1)  # the window closes (the emulator's clock)
        for thread in threads:
            thread.join(180)
        self.go.set()
        first.join(180)
        assert not self.failures, self.failures
        return [self.answers[f"desk-{i:02d}"] for i in range(size)]


@pytest.fixture
def classroom(emulated_time: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Classroom]:
    def make(capacity: list[int]) -> Classroom:
        return Classroom(emulated_time, monkeypatch, capacity)

    return make


def held_now(emu: Any) -> list[str]:
    model = emu.capacity(REGION)
    model.refresh()
    return [r.id for r in model.reservations.values() if r.state in ("active", "pending")]


def creates(emu: Any) -> list[Any]:
    return [c for c in emu.calls() if c.action == "CreateCapacityReservation"]


def test_a_class_in_separate_containers_fills_a_then_spills_to_c_never_b(
    classroom: Any,
) -> None:
    room = classroom([25, 0, 1000])
    answers = room.run(40)
    where = [a.get("subnet_id") for a in answers]
    assert [a["status"] for a in answers] == ["available"] * 40
    # What each desktop alone, in the order they joined, would have found: 25 A, then C.
    expected = oracle([1] * 40, [25, 0, 1000])
    assert sorted(where) == sorted(SUBNETS[s] for s in expected if s is not None)
    assert where.count(SUBNETS[0]) == 25 and where.count(SUBNETS[2]) == 15
    assert SUBNETS[1] not in where
    groups = {a["group"]["id"] for a in answers}
    assert len(groups) == 1 and {a["group"]["size"] for a in answers} == {40}
    # One group of 40 answered with O(log n) creates per subnet, not 40 probes' 70.
    assert len(creates(room.emu)) < 20
    assert held_now(room.emu) == []  # the first's was given back too


def test_plenty_of_capacity_answers_the_class_with_one_create(classroom: Any) -> None:
    room = classroom([0, 0, 1000])
    answers = room.run(12)
    assert {a["status"] for a in answers} == {"available"}
    assert {a["subnet_id"] for a in answers} == {SUBNETS[2]}
    # The group of 12 asks 12, then its first member alone, in each empty subnet (refused:
    # the other 11 are as large as what was refused, so they are not asked), then holds all
    # 12 in C with one create and gives it back with one cancel (halving would have asked
    # 12, 6, 3, 2, 1 in each); the first desktop made its three creates and one cancel.
    made = [
        (c.action, int(c.params.get("InstanceCount", 0)), c.outcome)
        for c in room.emu.calls()
        if c.action in ("CreateCapacityReservation", "CancelCapacityReservation")
    ]
    group = [m for m in made if m[0] == "CreateCapacityReservation" and m[1] > 1]
    assert sorted(m[1] for m in group) == [12, 12, 12]
    assert [m[0] for m in made].count("CreateCapacityReservation") == 5 + 3, made
    assert [m[0] for m in made].count("CancelCapacityReservation") == 1 + 1, made
    reservation = {a["group"]["reservation_id"] for a in answers}
    assert len(reservation) == 1 and None not in reservation
    assert held_now(room.emu) == []


def test_a_member_whose_leader_vanishes_answers_on_its_own(classroom: Any) -> None:
    """The leader's container stops before publishing (its answers never written): the members
    give up on their own clocks and probe alone, still the first subnet with capacity."""
    room = classroom([0, 0, 1000])
    roots = [room.container() for _ in range(5)]
    for root in roots:
        grouping = root.probe.grouping
        assert grouping is not None
        # A leader that vanished: it closes its group, answers itself and is never heard of
        # again (its group neither published nor abandoned).
        grouping.meeting.publish = lambda *_: True  # type: ignore[method-assign]

    def after_join() -> None:
        # The window closes; the leader answers itself and vanishes. Then the clock passes
        # every member's give-up: three quarters of its budget (the in-process budget), the
        # rest is the member's to probe alone.
        room.time.sleep(WINDOW + 1)
        for _ in range(12_000):
            if any(k.startswith("desk-") for k in room.answers):
                break
            threading.Event().wait(0.01)
        room.time.sleep(IN_PROCESS_TIMEOUT_MS / 1000 * 0.75)

    answers = room.run(5, roots, after_join=after_join)
    assert [a["status"] for a in answers] == ["available"] * 5
    assert {a["subnet_id"] for a in answers} == {SUBNETS[2]}
    # The leader answered itself from its group; the four members each probed alone.
    assert sum(1 for a in answers if a.get("group")) <= 1
    assert held_now(room.emu) == []


def test_a_leader_slower_than_its_members_answer_by_still_answers_them(classroom: Any) -> None:
    """A leader whose look-ups end after its members' answer-by (half their budget: a cold
    container on a busy machine) still answers the members that wait for it (three quarters
    of their budget), instead of leaving each to probe alone, late, at a lone probe's cost in
    EC2 calls. Before, its plan expired before its first create and every member probed
    alone."""
    room = classroom([0, 0, 1000])
    roots = [room.container() for _ in range(5)]
    joined = threading.Event()
    for root in roots:
        looked_up = root.probe._place

        def slow(asked: Any, looked_up: Any = looked_up) -> Any:
            assert joined.wait(120)  # every member is in the group first
            # Past every answer-by (half a budget, two thirds of the longest patience at most).
            room.time.sleep(min(IN_PROCESS_TIMEOUT_MS / 1000 * 0.55, MOST_PATIENCE_SECONDS * 0.7))
            return looked_up(asked)

        root.probe._place = slow  # type: ignore[method-assign]

    answers = room.run(5, roots, after_join=joined.set)
    assert [a["status"] for a in answers] == ["available"] * 5
    assert {a["subnet_id"] for a in answers} == {SUBNETS[2]}
    assert [a.get("group", {}).get("size") for a in answers] == [5] * 5
    # The group's creates of more than one: 5 in each empty subnet (then its first member
    # alone, refused: the rest is inferred) and 5 in C.
    group = [
        int(c.params["InstanceCount"]) for c in creates(room.emu) if c.params["InstanceCount"] > 1
    ]
    assert sorted(group) == [5, 5, 5]
    assert held_now(room.emu) == []


def test_a_forged_answer_in_the_table_is_not_taken(classroom: Any) -> None:
    """Whatever the table holds for a member is checked: an answer naming a subnet outside
    the member's list is dropped, and the member probes alone."""
    room = classroom([0, 0, 1000])
    roots = [room.container() for _ in range(3)]
    table = roots[0].probe.grouping.meeting.store  # type: ignore[union-attr]
    real_publish = table.publish

    def forged(group_id: str, answers: Any) -> None:
        real_publish(group_id, {slot: a.replace('"s":2', '"s":7') for slot, a in answers.items()})

    for root in roots:
        root.probe.grouping.meeting.store.publish = forged  # type: ignore[union-attr]
    answers = room.run(3, roots)
    assert [a["status"] for a in answers] == ["available"] * 3
    assert {a["subnet_id"] for a in answers} == {SUBNETS[2]}
    assert sum(1 for a in answers if a.get("group")) == 1  # only the leader's own


def test_lone_probes_in_turn_are_never_grouped_and_pay_three_table_calls(
    classroom: Any,
) -> None:
    """A probe with nothing alike in flight: a join that finds no group and its mark as it
    arrives (two conditional UpdateItems), one as it leaves, the same EC2 calls as without
    grouping, and no wait."""
    room = classroom([0, 0, 1000])
    root = room.container()
    grouping = root.probe.grouping
    assert grouping is not None
    table = grouping.meeting.store
    assert isinstance(table, TableStore)
    for n in range(4):
        before_calls, before_table = len(room.emu.calls()), table.counts["calls"]
        room.probe(root, f"alone-{n}")
        answer = room.answers[f"alone-{n}"]
        assert answer["status"] == "available" and "group" not in answer
        assert table.counts["calls"] - before_table == 3
        made = [c.action for c in room.emu.calls()[before_calls:]]
        assert made.count("CreateCapacityReservation") == 3  # A, B: none; C: held
        assert made.count("CancelCapacityReservation") == 1
    item = dynamodb().get_item(TableName=TABLE, Key={"id": {"S": _any_key()}}).get("Item")
    assert item is None or "seen" not in item


def test_a_leader_whose_flags_cannot_be_read_gives_its_group_up(
    classroom: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader that stops before it answers its group (its flags could not be read) closes
    the group and stops naming it: nobody joins a group no one will answer, and those who
    joined are told at once to probe alone (they used to wait most of their budget)."""
    from capacity_broker.adapters.aws import AwsError

    room = classroom([0, 0, 1000])
    first = room.start_first()
    leader = room.container()

    def unreadable(*_: Any, **__: Any) -> Any:
        raise AwsError("GetParametersByPath", "ThrottlingException", "Rate exceeded")

    monkeypatch.setattr(leader.flags, "read", unreadable)
    room.probe(leader, "leader")
    room.go.set()
    first.join(180)
    assert not room.failures, room.failures
    answer = room.answers["leader"]
    assert answer["status"] == "error" and answer["error_code"] == "ThrottlingException"
    items = dynamodb().scan(TableName=TABLE, ConsistentRead=True)["Items"]
    kinds = [i for i in items if "gid" in i]
    assert len(kinds) == 1, items  # the leader did open one: it arrived in a burst
    assert kinds[0]["st"]["S"] == "closed"  # nobody joins it any more
    (ended,) = [i for i in items if i["id"]["S"] == group_item(kinds[0]["gid"]["S"])]
    # Abandoned, with nothing held to give back.
    assert ended["st"]["S"] == "abandoned" and ended["given_back"]["BOOL"] is True


def test_a_member_s_container_never_makes_an_ec2_client(classroom: Any) -> None:
    """A cold container makes its EC2 client (the parse of EC2's model: the costly one) only
    once its probe knows it will ask EC2: the group's leader does, its members never do."""
    room = classroom([0, 0, 1000])
    roots = [room.container() for _ in range(6)]
    answers = room.run(6, containers=roots)
    assert [a["status"] for a in answers] == ["available"] * 6
    assert all(a["subnet_id"] == SUBNETS[2] and "group" in a for a in answers)
    made = [("ec2", REGION) in root.clients.made() for root in roots]
    assert made.count(True) == 1, made  # the leader's
    assert all(("ssm", REGION) in root.clients.made() for root in roots)


def test_a_member_never_reads_the_capacity_memory(classroom: Any) -> None:
    """A member asks EC2 nothing, so it has no use for the capacity memory: only the probes
    that ask EC2 (the leader, and a probe alone) read it, once each (in a class of 200, 190
    reads of the state table saved while the class arrives)."""
    room = classroom([0, 0, 1000])
    roots = [room.container() for _ in range(6)]
    reads: list[int] = [0] * len(roots)
    for i, root in enumerate(roots):
        memory = root.probe.memory
        assert memory is not None
        real = memory.recall

        def recall(*args: Any, _i: int = i, _real: Any = real, **kwargs: Any) -> Any:
            reads[_i] += 1
            return _real(*args, **kwargs)

        memory.recall = recall  # type: ignore[method-assign]
    answers = room.run(6, containers=roots)
    assert all(a["status"] == "available" and "group" in a for a in answers)
    assert sorted(reads) == [0, 0, 0, 0, 0, 1], reads  # the leader's read only


def test_a_lone_probe_s_arrival_overlaps_its_flags_read(classroom: Any, side_by_side: Any) -> None:
    """The arrival (a round trip to the table) is not a step before the flags' read but beside
    it: each waits to see the other under way (a probe that made them one after the other
    would never see both at once; the 60 s only guards a hang)."""
    room = classroom([0, 0, 1000])
    root = room.container()
    grouping = root.probe.grouping
    assert grouping is not None
    table = grouping.meeting.store
    assert isinstance(table, TableStore)
    seen = side_by_side((table, "join"), (root.flags, "read"))
    room.probe(root, "alone")
    assert seen == {"join saw read": True, "read saw join": True}
    answer = room.answers["alone"]
    assert answer["status"] == "available" and answer["subnet_id"] == SUBNETS[2]
    assert table.counts["calls"] == 3  # its join, its mark and its leaving


def test_a_lone_probe_s_look_ups_overlap_its_flags_read(classroom: Any, side_by_side: Any) -> None:
    """Once its arrival says it is not a group's member, a probe looks its places up beside
    its flags' read, not after it: each waits to see the other under way (the 60 s only guard
    a hang)."""
    room = classroom([0, 0, 1000])
    root = room.container()
    seen = side_by_side((root.ec2(REGION), "subnets"), (root.flags, "read"))
    room.probe(root, "alone")
    assert seen == {"subnets saw read": True, "read saw subnets": True}
    answer = room.answers["alone"]
    assert answer["status"] == "available" and answer["subnet_id"] == SUBNETS[2]


def test_only_the_probes_that_ask_ec2_look_their_places_up(classroom: Any) -> None:
    """Each container is cold, yet the class's members look nothing up (their leader does
    it for the group): the subnets are asked for twice, by the first desktop and the
    leader."""
    room = classroom([0, 0, 1000])
    answers = room.run(6)
    assert all(a["status"] == "available" and "group" in a for a in answers)
    assert len(room.emu.calls("DescribeSubnets")) == 2, room.emu.calls("DescribeSubnets")


def _any_key() -> str:
    items = dynamodb().scan(TableName=TABLE)["Items"]
    keys = [i["id"]["S"] for i in items if i["id"]["S"].startswith(PREFIX + REGION)]
    return keys[0] if keys else PREFIX + "none"


def test_a_table_that_fails_leaves_every_probe_alone(
    classroom: Any, caplog: pytest.LogCaptureFixture
) -> None:
    room = classroom([0, 0, 1000])
    room.emu.fail("UpdateItem", "InternalServerError", service="dynamodb", times=10_000, status=500)
    root = room.container()
    with caplog.at_level("WARNING"):
        for n in range(3):
            room.probe(root, f"down-{n}")
    assert [room.answers[f"down-{n}"]["status"] for n in range(3)] == ["available"] * 3
    said = {id(r) for r in caplog.records if "probe groups" in r.getMessage()}
    assert len(said) == 1


def test_the_group_item_is_the_broker_s_own(classroom: Any) -> None:
    """Every item grouping writes is under ``meet#`` and expires (TTL)."""
    room = classroom([0, 0, 1000])
    room.run(3)
    items = dynamodb().scan(TableName=TABLE)["Items"]
    mine = [i for i in items if i["id"]["S"].startswith(PREFIX)]
    assert mine and all("expiration" in i for i in mine)
    assert any(i["id"]["S"] == group_item(a) for a in _groups(room) for i in mine)


def _groups(room: Classroom) -> set[str]:
    return {a["group"]["id"] for a in room.answers.values() if a.get("group")}


def test_containers_whose_clocks_differ_by_a_minute_answer_as_containers_in_step(
    classroom: Any,
) -> None:
    """Contract v4, time across hosts: no decision compares one host's clock with another's
    (a group's window is its leader's, a member's give-up its own, the leader's promise a
    duration). Containers up to 60 s ahead of and behind the others meet in one group and get
    the answers of containers in step: the oracle's, 25 in A, then C."""
    skews = [-60.0, 60.0, 0.0, 45.0, -45.0, 60.0, -60.0, 30.0]
    room = classroom([5, 0, 1000])
    roots = [room.container(skew=skews[i % len(skews)]) for i in range(8)]
    answers = room.run(8, roots)
    assert [a["status"] for a in answers] == ["available"] * 8
    expected = oracle([1] * 8, [5, 0, 1000])
    where = [a["subnet_id"] for a in answers]
    assert sorted(where) == sorted(SUBNETS[s] for s in expected if s is not None)
    assert {a["group"]["size"] for a in answers} == {8}
    assert held_now(room.emu) == []
