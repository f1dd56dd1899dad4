"""Grouped probes' policy (``domain.group``): the group's answers equal the sequential oracle's
(each desktop alone, in arrival order, its launch taking the capacity it found), whatever the
capacity per subnet, the members' counts and the creates throttled on the way; a lone probe is
never grouped; throttling blocks a part (contract v3).

The world is a tiny EC2 run by hand: a create holds ``count`` of a subnet's free capacity or
answers InsufficientInstanceCapacity; a hold gives its capacity back when cancelled. Time is a
number the test moves.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

import pytest
from capacity_broker.domain.errors import ErrorClass, Outcome
from capacity_broker.domain.group import (
    GIVE_BACK_SECONDS,
    MAX_GROUP_COUNT,
    MAX_MEMBERS,
    MOST_PATIENCE_SECONDS,
    PROMISE_SECONDS,
    GroupKey,
    answer_by,
    asks_until,
    closes_now,
    gives_up_at,
    look_pause,
    max_slots,
    patience,
    promise,
)
from capacity_broker.domain.group_plan import (
    Ask,
    GroupPlan,
    MemberAnswer,
    Said,
    Verdict,
    held,
    oracle,
)
from hypothesis import given, settings
from hypothesis import strategies as st

UNSUPPORTED = -1  # a subnet whose AZ does not offer the type (any count)
KEY = GroupKey(
    "us-east-1", "g6.xlarge", ("subnet-a", "subnet-b", "subnet-c"), "Linux/UNIX", "default"
)


@dataclass
class World:
    free: list[int]
    # Per ask token: how many of its creates are throttled before one is answered.
    throttled: dict[str, int] = field(default_factory=dict)
    throttle_every_ask: int = 0
    creates: int = 0
    held: dict[str, tuple[int, int]] = field(default_factory=dict)

    def create(self, ask: Ask) -> Said:
        self.creates += 1
        left = self.throttled.setdefault(ask.token, self.throttle_every_ask)
        if left:
            self.throttled[ask.token] = left - 1
            return Said(error_class=ErrorClass.THROTTLE, error_code="RequestLimitExceeded")
        if self.free[ask.subnet] == UNSUPPORTED:
            return Said(error_class=ErrorClass.UNSUPPORTED, error_code="Unsupported")
        if self.free[ask.subnet] < ask.count:
            return Said(error_class=ErrorClass.CAPACITY, error_code="InsufficientInstanceCapacity")
        self.free[ask.subnet] -= ask.count
        rid = f"cr-{len(self.held):017x}"
        self.held[rid] = (ask.subnet, ask.count)
        return held(rid)

    def cancel(self, rid: str) -> None:
        subnet, count = self.held.pop(rid)
        self.free[subnet] += count


def run(counts: list[int], world: World, budget: float = 1000.0) -> list[MemberAnswer]:
    """A leader's loop on a simulated clock: each create takes 0.1 s."""
    moment = 0.0
    plan = GroupPlan(counts, len(world.free), moment)
    while not plan.decided:
        if moment >= budget:
            plan.expire()
            break
        ask = plan.next_ask(moment)
        if ask is None:
            if plan.decided:
                break
            wake = plan.wake_at
            assert wake is not None and wake > moment, "the plan waits on nothing"
            moment = min(wake, budget)
            continue
        said = world.create(ask)
        moment += 0.1
        plan.answered(ask, said, moment)
    for hold in plan.to_give_back():
        world.cancel(hold.reservation_id)
        moment += 0.1
        plan.returned(hold.reservation_id, True, moment)
    return plan.answers()


def _capacity(free: list[int]) -> list[int]:
    return [max(0, f) for f in free]


@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(1, 4), min_size=1, max_size=40),
    free=st.lists(st.one_of(st.integers(0, 60), st.just(UNSUPPORTED)), min_size=1, max_size=5),
    throttled=st.integers(0, 2),
)
def test_grouped_answers_equal_the_sequential_oracle(
    counts: list[int], free: list[int], throttled: int
) -> None:
    world = World(list(free), throttle_every_ask=throttled)
    answers = run(counts, world)
    expected = oracle(counts, _capacity(free))
    assert [a.subnet for a in answers] == expected
    for answer, where in zip(answers, expected, strict=True):
        assert answer.verdict is (Verdict.WON if where is not None else Verdict.NONE)
        # Each answer's attempts: every subnet before its winner (or every subnet) said no.
        tried = [s.subnet for s in answer.seen]
        assert tried == list(range(len(free) if where is None else where + 1))
        assert all(s.outcome is not Outcome.AVAILABLE for s in answer.seen[:-1] if where)
    # Every hold was given back, and each member's share sums to the holds' seconds.
    assert world.held == {}
    assert world.free == free
    assert all(a.cancelled in (True, None) for a in answers)


def test_a_class_of_40_fills_a_then_spills_to_c_never_b() -> None:
    world = World([25, 0, 1000])
    answers = run([1] * 40, world)
    subnets = [a.subnet for a in answers]
    assert subnets == [0] * 25 + [2] * 15
    assert 1 not in subnets
    # Fewer creates than 40 desktops one at a time (each of whom would need 1 to 3).
    assert world.creates < 40
    # Every member of a hold names it; shares add up to the hold's seconds.
    by_hold: dict[str, list[MemberAnswer]] = {}
    for a in answers:
        assert a.reservation_id is not None
        by_hold.setdefault(a.reservation_id, []).append(a)
    assert sum(len(v) for v in by_hold.values()) == 40


def test_plenty_of_capacity_costs_one_create() -> None:
    world = World([1000, 1000])
    answers = run([1] * 200, world)
    assert {a.subnet for a in answers} == {0}
    assert world.creates == 1
    shares = [a.reservation_seconds for a in answers]
    assert sum(shares) == pytest.approx(0.1)  # the one hold's seconds, split 200 ways


def test_an_empty_subnet_costs_a_class_two_creates_not_one_per_halving() -> None:
    # The class of 200 behind two empty AZs: the whole class, then its first member
    # alone, in each; then the whole class where there is room. Halving would ask 200, 100,
    # 50, 25, 13, 7, 4, 2, 1 in each empty subnet (19 creates in all).
    world = World([0, 0, 1000])
    answers = run([1] * 200, world)
    assert {a.subnet for a in answers} == {2}
    assert world.creates == 2 + 2 + 1


@pytest.mark.parametrize("room", [1, 2, 7, 40, 80, 99])
def test_a_subnet_with_some_room_costs_at_most_one_create_more_than_halving(room: int) -> None:
    # Asking the first member alone is done once per subnet, then the rest halves as before:
    # a subnet with room for some of the class is never asked one member at a time.
    world = World([room, 1000])
    answers = run([1] * 100, world)
    assert [a.subnet for a in answers] == [0] * room + [1] * (100 - room)
    halving = 2 * math.ceil(math.log2(100)) + 1  # at most two asks per level, then the next
    assert world.creates <= halving + 1


def test_throttling_blocks_the_part_never_a_later_subnet() -> None:
    world = World([10, 10], throttle_every_ask=10**6)
    answers = run([1] * 5, world, budget=30.0)
    assert {a.verdict for a in answers} == {Verdict.BLOCKED}
    assert {a.subnet for a in answers} == {None}
    assert {a.error_code for a in answers} == {"RequestLimitExceeded"}
    assert world.held == {}
    # Retried with pauses (doubling to the cap), not at every tick.
    assert world.creates < 20


def test_throttled_for_a_while_then_answered_is_the_first_subnet() -> None:
    world = World([10, 10], throttle_every_ask=3)
    answers = run([1] * 5, world)
    assert {a.subnet for a in answers} == {0}


def test_a_permission_error_stops_every_member() -> None:
    class Denied(World):
        def create(self, ask: Ask) -> Said:
            self.creates += 1
            return Said(error_class=ErrorClass.PERMISSION, error_code="UnauthorizedOperation")

    answers = run([1, 2, 3], Denied([10, 10]))
    assert {a.verdict for a in answers} == {Verdict.STOPPED}
    assert {a.error_code for a in answers} == {"UnauthorizedOperation"}


def test_a_single_members_quota_error_while_the_group_holds_is_probed_alone() -> None:
    class Quota(World):
        limit = 6

        def create(self, ask: Ask) -> Said:
            used = sum(c for _, c in self.held.values())
            if used + ask.count > self.limit:
                self.creates += 1
                return Said(error_class=ErrorClass.QUOTA, error_code="InstanceLimitExceeded")
            return super().create(ask)

    answers = run([4, 4], Quota([100]))
    assert [a.verdict for a in answers] == [Verdict.WON, Verdict.ALONE]


def test_a_group_closes_when_idle_full_or_at_its_longest() -> None:
    """A group takes members until none has joined for the window, at most the maximum window
    from its opening (an idle period and a maximum, as Karpenter batches pods), or until its
    slots are taken; durations on the leader's own clock."""
    rule = {"window": 0.25, "max_window": 2.0, "max_slots": 10}
    assert not closes_now(0.1, 0.1, 3, **rule)
    assert closes_now(0.3, 0.25, 3, **rule)  # nobody joined for the window
    assert not closes_now(1.9, 0.2, 9, **rule)  # a class arriving steadily keeps it open
    assert closes_now(2.0, 0.0, 9, **rule)  # ... for the maximum at most
    assert closes_now(0.0, 0.0, 10, **rule)  # its slots are taken
    # A maximum shorter than the window is the window.
    assert not closes_now(0.5, 0.0, 1, window=1.0, max_window=0.1, max_slots=10)


def test_a_group_never_holds_more_than_its_count_or_members() -> None:
    assert max_slots(1) == MAX_MEMBERS
    assert max_slots(4) == MAX_MEMBERS  # 800 instances: the members bound it
    assert max_slots(8) == MAX_GROUP_COUNT // 8
    assert max_slots(MAX_GROUP_COUNT) == 1  # as large as a group may hold: always alone
    assert max_slots(3, max_members=2) == 2


def test_probes_alike_are_only_those_of_one_count_and_the_same_tags() -> None:
    from capacity_broker.logic.grouping.meeting import kind_id

    base = kind_id(KEY)
    assert kind_id(GroupKey(*KEY.__dict__.values())) == base
    assert kind_id(replace(KEY, count=2)) != base
    assert kind_id(replace(KEY, tags=GroupKey.tags_of({"team": "a"}))) != base
    assert GroupKey.tags_of({"b": "1", "a": "2"}) == (("a", "2"), ("b", "1"))
    # The caller's values are digested, never part of a pattern or a key in the clear.
    assert "subnet-a" not in base and base.startswith("us-east-1#")


def test_members_the_group_never_reached_in_its_time_probe_alone() -> None:
    """The group's deadline is its earliest member's answer-by (half that member's budget):
    members whose part was never asked by then probe alone with the time they have left, they
    are not answered TimeBudgetExceeded. Answered ones keep their answers."""
    world = World([3, 1000])
    # Creates take 0.1 s each: in A, 5 (no room), 3 (held), 2 (no room), 1 (no room); the
    # budget ends before the two left are asked in B.
    answers = run([1] * 5, world, budget=0.35)
    verdicts = [a.verdict for a in answers]
    assert verdicts[:3] == [Verdict.WON] * 3
    assert set(verdicts[3:]) == {Verdict.ALONE}
    assert all(a.error_code is None for a in answers[3:])
    assert world.held == {}


@given(
    leader_budget=st.floats(0.5, 900),
    later=st.floats(0, 10),
    member_budget=st.floats(0.5, 900),
    skew=st.floats(-60, 60),
)
def test_a_member_that_may_join_gives_up_no_sooner_than_its_leader_promised(
    leader_budget: float, later: float, member_budget: float, skew: float
) -> None:
    """Patience is a duration: a member joins only a group whose leader's promise (its patience
    less ``PROMISE_SECONDS``, read on the leader's clock at its opening) is at most its own
    patience (read on its own clock at its arrival). It arrived later, so it gives up no sooner
    than the leader promised, in real time, whatever the difference between the two hosts'
    clocks (``skew``)."""

    def patience(moment: float, budget: float) -> float:
        return gives_up_at(answer_by(moment, moment + budget), moment + budget) - moment

    leader_at = 1000.0  # real time
    promise = patience(leader_at, leader_budget) - PROMISE_SECONDS  # a duration: no skew
    member_at = leader_at + later
    member = patience(member_at + skew, member_budget)
    if promise <= member:  # the join's condition
        assert member_at + member >= leader_at + promise - 1e-9


def test_a_leader_asks_until_its_answer_by_or_into_its_patience_when_late() -> None:
    """On time, until its answer-by; late (its look-ups outlasted it), into the time its
    members still wait (no less than its own patience), keeping half of that (2 s at least) to
    give back and publish; and continuous: a leader a moment early is not worse off than one a
    moment late."""
    by, until = 15.0, 21.5
    assert asks_until(0.0, by, until) == by
    assert asks_until(15.0, by, until) == 18.25  # half of the 6.5 s left
    assert asks_until(19.0, by, until) == until - GIVE_BACK_SECONDS
    assert asks_until(25.0, by, until) <= 25.0  # past it all: nothing to ask (the plan expires)
    moments = [i / 100 for i in range(0, 2500)]
    asked = [asks_until(m, by, until) for m in moments]
    assert all(abs(b - a) <= 0.01 for a, b in itertools.pairwise(asked))


def test_a_member_looks_for_its_answer_less_often_as_it_waits() -> None:
    """About six looks in the first eight seconds (half a read unit each: eventually
    consistent reads of its own small item), growing to one every two seconds."""
    pauses = [look_pause(n) for n in range(12)]
    assert pauses[0] == pytest.approx(0.5)
    assert pauses == sorted(pauses) and pauses[-1] == pytest.approx(2.0)
    looks, waited = 1, 0.0
    while waited + look_pause(looks - 1) <= 8:
        waited += look_pause(looks - 1)
        looks += 1
    assert looks <= 7
    assert look_pause(10**6) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="looks must be >= 0"):
        look_pause(-1)


def test_no_probe_waits_for_a_group_longer_than_its_patience_allows() -> None:
    """Contract v4: nothing of a group holds past its patience, at most 30 s, whatever a
    caller's budget (a client's may be minutes): three quarters of a short budget, 28 s at
    most; and a leader promises its answers 2 s sooner than it would give up itself."""
    assert patience(100.0, 100.0 + 28) == pytest.approx(21.0)
    assert patience(100.0, 100.0 + 300) == MOST_PATIENCE_SECONDS
    assert MOST_PATIENCE_SECONDS <= 30
    assert promise(21.0) == pytest.approx(21.0 - PROMISE_SECONDS)
    assert promise(1.0) == 0.0
