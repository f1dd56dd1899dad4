"""The meeting protocol of grouped probes (``logic.grouping.meeting``) over the in-memory store,
on a clock the test moves: its named states, its two ends (published or abandoned, never both),
and a class's answers equal to each desktop alone in arrival order (the sequential oracle),
however the class's arrivals fall around its groups' closes. No moto, no threads."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from capacity_broker.domain.errors import ErrorClass
from capacity_broker.domain.group import (
    PROMISE_SECONDS,
    ArrivalState,
    GroupKey,
    GroupState,
)
from capacity_broker.domain.group_plan import (
    GroupPlan,
    Said,
    held,
    oracle,
)
from capacity_broker.logic.grouping.answers import ALONE
from capacity_broker.logic.grouping.meeting import Meeting, Seat, kind_id
from capacity_broker.logic.grouping.store import MemoryStore
from hypothesis import given, settings
from hypothesis import strategies as st

KEY = GroupKey(
    "us-east-1", "g6.xlarge", ("subnet-a", "subnet-b", "subnet-c"), "Linux/UNIX", "default"
)
PATIENCE = 20.0


@dataclass
class Clock:
    """The test's clock: a pause moves it on at once."""

    moment: float = 100.0
    paused: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.moment

    def pause(self, seconds: float) -> None:
        self.paused.append(seconds)
        self.moment += seconds


def meeting(store: MemoryStore | None = None, clock: Clock | None = None) -> Meeting:
    clock = clock or Clock()
    return Meeting(
        store or MemoryStore(), window=0.25, max_window=4.0, now=clock.now, pause=clock.pause
    )


def test_a_lone_probe_is_alone_and_marked_and_a_burst_opens_a_group() -> None:
    place = meeting()
    first = place.arrive(KEY, "first", PATIENCE)
    assert first.state is ArrivalState.ALONE and first.marked
    lead = place.arrive(KEY, "second", PATIENCE)  # the first is in flight: a burst
    assert lead.state is ArrivalState.LEADING and lead.group_id is not None and lead.slot == 0
    joined = [place.arrive(KEY, f"m{i}", PATIENCE) for i in range(3)]
    assert [j.state for j in joined] == [ArrivalState.JOINED] * 3
    assert [j.slot for j in joined] == [1, 2, 3]  # the order of their joins
    assert {j.group_id for j in joined} == {lead.group_id}
    # Another subnet order, count or set of tags is another kind: its own burst only.
    for other in (
        GroupKey(KEY.region, KEY.instance_type, KEY.subnet_ids[::-1], KEY.platform, KEY.tenancy),
        GroupKey(*list(KEY.__dict__.values())[:5], count=2),
        GroupKey(*list(KEY.__dict__.values())[:5], tags=(("team", "a"),)),
    ):
        assert place.arrive(other, "o", PATIENCE).state is ArrivalState.ALONE


def test_probes_one_after_another_are_never_grouped() -> None:
    place = meeting()
    for n in range(5):
        seat = place.arrive(KEY, f"r{n}", PATIENCE)
        assert seat.state is ArrivalState.ALONE
        place.leave(seat)
    assert place.store.kind(kind_id(KEY)).seen is None  # type: ignore[attr-defined]


def test_a_leader_closes_when_nobody_joined_for_the_window_and_the_marks_go() -> None:
    clock = Clock()
    place = meeting(clock=clock)
    place.arrive(KEY, "first", PATIENCE)
    lead = place.arrive(KEY, "lead", PATIENCE)
    place.arrive(KEY, "m1", PATIENCE)
    assert place.close(lead, latest=clock.now() + 30) == 2
    assert clock.moment - lead.since == pytest.approx(0.5)  # a look, then idle a window
    found = place.store.kind(kind_id(KEY))  # type: ignore[attr-defined]
    assert found.state is GroupState.CLOSED and found.seen is None
    # After the close: the next arrival is alone (nothing in flight that it can see), the one
    # after it opens the next group.
    assert place.arrive(KEY, "late", PATIENCE).state is ArrivalState.ALONE
    assert place.arrive(KEY, "later", PATIENCE).state is ArrivalState.LEADING


def test_a_member_joins_only_a_leader_that_promises_no_later_than_it_may_wait() -> None:
    """The leader promises its answers ``PROMISE_SECONDS`` before it would give up itself: a
    member whose patience is a moment shorter than the leader's (its arrival came later in its
    invocation) joins; one that could not wait for the promise goes alone."""
    place = meeting()
    place.arrive(KEY, "first", PATIENCE)
    assert place.arrive(KEY, "lead", PATIENCE).state is ArrivalState.LEADING
    short = place.arrive(KEY, "short", PATIENCE - PROMISE_SECONDS - 0.1)
    assert short.state is ArrivalState.ALONE and not short.marked
    assert place.arrive(KEY, "a moment", PATIENCE - 0.1).state is ArrivalState.JOINED
    assert place.arrive(KEY, "long", PATIENCE + 1).state is ArrivalState.JOINED


def test_a_group_takes_no_more_than_its_slots() -> None:
    store = MemoryStore()
    place = Meeting(store, window=0.25, max_window=4.0, max_members=3)
    place.arrive(KEY, "first", PATIENCE)
    place.arrive(KEY, "lead", PATIENCE)
    states = [place.arrive(KEY, f"m{i}", PATIENCE).state for i in range(3)]
    assert states == [ArrivalState.JOINED, ArrivalState.JOINED, ArrivalState.ALONE]
    big = GroupKey(*list(KEY.__dict__.values())[:5], count=1000)  # a group's whole count
    place.arrive(big, "b1", PATIENCE)
    assert place.arrive(big, "b2", PATIENCE).state is ArrivalState.ALONE


def _class_of(place: Meeting, size: int) -> tuple[Seat, list[Seat]]:
    place.arrive(KEY, "first", PATIENCE)
    lead = place.arrive(KEY, "lead", PATIENCE)
    return lead, [place.arrive(KEY, f"m{i}", PATIENCE) for i in range(size - 1)]


def test_published_first_the_members_read_their_answers() -> None:
    clock = Clock()
    place = meeting(clock=clock)
    lead, members = _class_of(place, 3)
    assert place.close(lead, clock.now() + 10) == 3
    assert place.publish(lead, {1: "one", 2: "two"})
    waited = [place.wait(m, clock.now() + 10, clock.now() + 20) for m in members]
    assert [(w.text, w.give_back) for w in waited] == [("one", False), ("two", False)]


def test_a_member_that_stops_waiting_abandons_the_group_and_the_leader_cannot_publish() -> None:
    """The two ends are one conditional write: a member that gave up first gives the group's
    holds; the leader's answers are then never written (its members probe alone)."""
    clock = Clock()
    place = meeting(clock=clock)
    lead, (member, other) = _class_of(place, 3)
    waited = place.wait(member, clock.now() + 5, clock.now() + 10)
    assert (waited.text, waited.give_back) == (None, True)  # it abandoned: it gives the holds back
    assert place.close(lead, clock.now() + 10) is None  # (it closed the group as it left)
    assert not place.publish(lead, {1: "one", 2: "two"})
    # Another member that stops waiting finds it abandoned: it waits a moment for that give-back,
    # then gives them back itself (the first may have died with it).
    assert place.wait(other, clock.now() + 1, clock.now() + 10).give_back
    place.given_back(member)
    assert place.store.ending(lead.group_id or "").given_back  # type: ignore[attr-defined]


def test_a_group_given_back_sends_its_other_members_alone_without_a_second_give_back() -> None:
    clock = Clock()
    place = meeting(clock=clock)
    _, (member, other) = _class_of(place, 3)
    assert place.wait(member, clock.now() + 5, clock.now() + 10).give_back
    place.given_back(member)
    waited = place.wait(other, clock.now() + 1, clock.now() + 10)
    assert (waited.text, waited.give_back) == (None, False)


def test_a_member_that_finds_the_group_published_late_reads_its_answer_in_the_grace() -> None:
    clock = Clock()
    store = MemoryStore()
    place = meeting(store, clock)
    lead, (member,) = _class_of(place, 2)
    assert place.close(lead, clock.now() + 10) == 2
    # The leader settled PUBLISHED and is writing its answers as the member gives up.
    assert store.settle(lead.group_id or "", GroupState.PUBLISHED, lead.stamp) is None
    real_settle = store.settle

    def settle_then_answer(group_id: str, state: GroupState, by: str) -> object:
        found = real_settle(group_id, state, by)
        store.publish(group_id, {1: "late"})
        return found

    store.settle = settle_then_answer  # type: ignore[method-assign]
    assert place.wait(member, clock.now() + 2, clock.now() + 10).text == "late"


def test_a_leader_that_gives_up_sends_its_members_alone_at_once() -> None:
    clock = Clock()
    place = meeting(clock=clock)
    lead, members = _class_of(place, 3)
    place.give_up(lead)
    ending = place.store.ending(lead.group_id or "")  # type: ignore[attr-defined]
    assert ending.state is GroupState.ABANDONED and ending.given_back  # nothing was held
    start = clock.now()
    waited = [place.wait(m, start + 10, start + 20) for m in members]
    assert [w.text for w in waited] == [ALONE, ALONE] and not any(w.give_back for w in waited)
    assert clock.now() - start < 1  # at its first look, not at its give-up


class DownStore(MemoryStore):
    def join(self, *_: object) -> object:  # type: ignore[override]
        from capacity_broker.domain.group import StoreDown

        raise StoreDown("the table hangs")


def test_a_store_that_is_down_leaves_every_arrival_alone_and_unmarked() -> None:
    place = meeting(DownStore())
    seats = [place.arrive(KEY, f"r{n}", PATIENCE) for n in range(3)]
    assert [(s.state, s.marked) for s in seats] == [(ArrivalState.ALONE, False)] * 3


# -- a class against the sequential oracle -----------------------------------------------------


@dataclass
class World:
    """A tiny EC2: a create holds ``count`` of a subnet's free capacity or is refused; a hold
    given back frees it; a launch takes it for good."""

    free: list[int]
    holds: dict[str, tuple[int, int]] = field(default_factory=dict)

    def create(self, subnet: int, count: int) -> Said:
        if self.free[subnet] < count:
            return Said(error_class=ErrorClass.CAPACITY, error_code="InsufficientInstanceCapacity")
        self.free[subnet] -= count
        rid = f"cr-{len(self.holds) + 1:017x}"
        self.holds[rid] = (subnet, count)
        return held(rid)

    def give_back(self, rid: str) -> None:
        subnet, count = self.holds.pop(rid)
        self.free[subnet] += count

    def alone(self) -> int | None:
        """A lone probe and its launch: the first subnet with room, taken."""
        for subnet, free in enumerate(self.free):
            if free >= 1:
                self.free[subnet] -= 1
                return subnet
        return None


def _answer_group(place: Meeting, lead: Seat, world: World, clock: Clock) -> dict[int, int | None]:
    """The leader's part: close, answer with the group's plan, give every hold back, publish;
    the launches of the answered members then take their capacity."""
    size = place.close(lead, clock.now() + 30)
    assert size is not None
    plan = GroupPlan((1,) * size, len(world.free), clock.now())
    while (ask := plan.next_ask(clock.now())) is not None:
        plan.answered(ask, world.create(ask.subnet, ask.count), clock.now())
    for hold in plan.to_give_back():
        world.give_back(hold.reservation_id)
        plan.returned(hold.reservation_id, True, clock.now())
    answers = plan.answers()
    assert place.publish(lead, {slot: str(answers[slot].subnet) for slot in range(1, size)})
    where = {slot: answers[slot].subnet for slot in range(size)}
    for subnet in where.values():
        if subnet is not None:
            world.free[subnet] -= 1
    return where


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.lists(st.integers(0, 12), min_size=1, max_size=4),
    arrivals=st.lists(st.booleans(), min_size=1, max_size=30),
)
def test_a_class_is_answered_as_each_desktop_alone_in_arrival_order(
    capacity: list[int], arrivals: list[bool]
) -> None:
    """Desktops arrive one by one; before each, the group taking members may close (``True``:
    its leader answers it then). Whatever the interleaving, each desktop's subnet is the
    oracle's: the first with room left by the desktops that arrived before it."""
    clock = Clock()
    store = MemoryStore()
    place = meeting(store, clock)
    world = World(list(capacity))
    in_flight = place.arrive(KEY, "in-flight", PATIENCE)  # a probe alike, still asking
    order: list[str] = []
    answered: dict[str, int | None] = {}
    lead: Seat | None = None
    members: dict[int, str] = {}

    def answer_open_group() -> None:
        nonlocal lead
        if lead is None:
            return
        where = _answer_group(place, lead, world, clock)
        answered[members[0]] = where[0]
        for slot, name in members.items():
            if slot:
                waited = place.wait(
                    Seat(ArrivalState.JOINED, KEY, "", False, lead.group_id, slot),
                    clock.now() + 5,
                    clock.now() + 10,
                )
                assert waited.text == str(where[slot])
                answered[name] = where[slot]
        lead = None
        members.clear()

    for n, close_first in enumerate(arrivals):
        if close_first:
            answer_open_group()
        name = f"d{n}"
        order.append(name)
        seat = place.arrive(KEY, name, PATIENCE)
        if seat.state is ArrivalState.ALONE:
            # A lone probe answers (and launches) before the next desktop arrives... unless a
            # group it cannot see is open ahead of it: the oracle's order is arrival order, so
            # the open group is answered first.
            answer_open_group()
            answered[name] = world.alone()
            place.leave(seat)
        elif seat.state is ArrivalState.LEADING:
            lead = seat
            members[0] = name
        else:
            members[seat.slot] = name
    answer_open_group()
    place.leave(in_flight)
    expected = oracle([1] * len(order), capacity)
    assert [answered[name] for name in order] == expected


def test_a_member_that_cannot_know_its_slot_gives_the_group_up_and_waits_out_its_leader() -> None:
    """A join whose answer was lost after another join came: the member may hold a slot it
    cannot name. The group would answer the members after that slot from a hold one too large,
    so the member abandons it at once (its leader will not publish), and waits until its
    give-up (by when the leader has given its holds back) before it probes alone."""
    clock = Clock()
    place = meeting(clock=clock)
    lead, _ = _class_of(place, 2)
    lost = Seat(ArrivalState.JOINED, KEY, "lost", False, lead.group_id, None, clock.now())
    start = clock.now()
    waited = place.wait(lost, start + 15, start + 30)
    assert (waited.text, waited.give_back) == (None, True)
    assert clock.now() == pytest.approx(start + 15)
    assert not place.publish(lead, {1: "one"})  # the leader cannot publish


def test_arrivals_that_find_no_group_within_one_round_trip_are_a_burst() -> None:
    """Two arrivals whose joins both found no group: the first to mark is alone, the other sees
    its mark (its own mark is refused) and opens a group, which the rest join."""
    store = MemoryStore()
    clock = Clock()
    place = meeting(store, clock)
    kind = kind_id(KEY)
    assert store.mark(kind, "a") is None
    assert store.mark(kind, "b") is not None  # (b's join had found no group either)
    assert place.arrive(KEY, "b", PATIENCE).state is ArrivalState.LEADING
