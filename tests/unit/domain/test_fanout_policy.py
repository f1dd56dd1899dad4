"""The fan-out's pure rules: what an error means to it, how wide it starts and widens, and what
fresh memory says."""

from __future__ import annotations

import pytest
from capacity_broker.domain.errors import ErrorClass, Outcome
from capacity_broker.domain.fanout import Tried, first_bound, widen
from capacity_broker.domain.history import history
from capacity_broker.domain.memory import (
    DECISION_WINDOW,
    HEDGE_CEILING,
    HEDGE_FLOOR,
    Hint,
    MemoryKey,
    MemoryView,
    Observation,
    Seen,
    Tally,
    fold,
    hedge_delay,
    hour_of,
    latency_bucket,
)
from capacity_broker.domain.outcomes import Kind, kind_of

A, X, U = Hint.AVAILABLE, Hint.OUT, Hint.UNKNOWN  # X: out
KEY = MemoryKey("us-east-1", "use1-az1", "g6.xlarge")
T = 1_763_719_200.0  # an hour boundary


@pytest.mark.parametrize(
    ("error_class", "kind"),
    [
        (None, Kind.HELD),
        (ErrorClass.CAPACITY, Kind.INSUFFICIENT),
        (ErrorClass.UNSUPPORTED, Kind.UNSUPPORTED),
        (ErrorClass.QUOTA, Kind.QUOTA),
        (ErrorClass.PERMISSION, Kind.STOP),
        # Throttling (EC2's, or the broker's own budget), 5xx and lost answers say nothing
        # about capacity: never "move on" (contract v3).
        (ErrorClass.THROTTLE, Kind.UNANSWERED),
        (ErrorClass.RATE_BUDGET, Kind.UNANSWERED),
        (ErrorClass.TRANSIENT, Kind.UNANSWERED),
        (ErrorClass.INVALID, Kind.ERROR),
        (ErrorClass.IDEMPOTENCY, Kind.ERROR),
        (ErrorClass.OTHER, Kind.ERROR),
    ],
)
def test_what_an_answer_means_to_the_fanout(error_class: ErrorClass | None, kind: Kind) -> None:
    assert kind_of(error_class) is kind


def test_a_try_is_a_hold_or_an_error_never_both() -> None:
    assert Tried(hold="h").outcome is Outcome.AVAILABLE
    assert Tried(error_class=ErrorClass.THROTTLE).outcome is Outcome.THROTTLED
    assert Tried(error_class=ErrorClass.RATE_BUDGET).outcome is Outcome.THROTTLED
    assert Tried(error_class=ErrorClass.TRANSIENT).outcome is Outcome.ERROR
    with pytest.raises(ValueError, match="either"):
        Tried()
    with pytest.raises(ValueError, match="either"):
        Tried(hold="h", error_class=ErrorClass.CAPACITY)


@pytest.mark.parametrize(
    ("hints", "bound"),
    [
        ([U, U, U], 1),  # no memory: the first alone
        ([A, U, U], 1),  # it had capacity a moment ago: alone
        ([X, X, A, U], 3),  # the ones before the good one are tried with it
        ([X, U, U, U], 4),  # the first ones are out and nothing is known after: all
        ([X, U, U, A, U], 4),  # ... as far as the next one known to be good
        ([X, X, X], 3),
        ([U], 1),
    ],
)
def test_how_wide_a_fanout_starts(hints: list[Hint], bound: int) -> None:
    assert first_bound(hints) == bound


def test_widening_goes_through_the_next_known_good_candidate_else_everywhere() -> None:
    assert widen([A, U, A, U], 1) == 3
    assert widen([A, U, U, U], 1) == 4
    assert widen([U, A], 1) == 2


def test_hedge_delay_follows_the_measured_tail_within_bounds() -> None:
    assert hedge_delay({}) == HEDGE_CEILING
    assert hedge_delay({latency_bucket(0.05): 100}) == HEDGE_FLOOR
    # 95th percentile: 94 fast answers and 6 slow ones put it among the slow.
    assert hedge_delay({latency_bucket(0.1): 94, latency_bucket(0.7): 6}) == 0.75
    assert hedge_delay({latency_bucket(0.1): 96, latency_bucket(0.7): 4}) == HEDGE_FLOOR
    assert hedge_delay({latency_bucket(60.0): 3}) == HEDGE_CEILING


def test_memory_hints_follow_the_latest_fresh_capacity_answer() -> None:
    now = T + 1000
    tally = Tally("us-east-1", "g6.xlarge", hour_of(now))
    tally.last[("use1-az1", Seen.INSUFFICIENT)] = now - 100
    tally.last[("use1-az1", Seen.AVAILABLE)] = now - 10
    tally.last[("use1-az2", Seen.AVAILABLE)] = now - 100
    tally.last[("use1-az2", Seen.UNSUPPORTED)] = now - 10
    tally.last[("use1-az3", Seen.AVAILABLE)] = now - DECISION_WINDOW - 1
    tally.last[("use1-az4", Seen.QUOTA)] = now - 1  # quota says nothing about capacity
    view = MemoryView([tally], moment=now)
    keys = [MemoryKey("us-east-1", f"use1-az{i}", "g6.xlarge") for i in range(1, 6)]
    assert view.hints(keys) == [A, X, U, U, U]
    assert view.hint(MemoryKey("us-east-1", "use1-az1", "g6.2xlarge")) is U


def test_the_quota_cap_is_remembered_per_region_and_type_while_fresh() -> None:
    tally = Tally("us-east-1", "p5.48xlarge", hour_of(T))
    tally.quota_at, tally.quota_carried = T, 0
    keys = [MemoryKey("us-east-1", "use1-az1", "p5.48xlarge")]
    assert MemoryView([tally], moment=T + 10).quota_cap(keys) == 1  # one at a time at least
    assert MemoryView([tally], moment=T + DECISION_WINDOW + 1).quota_cap(keys) is None
    tally.quota_carried = 3
    assert MemoryView([tally], moment=T + 10).quota_cap(keys) == 3
    other = [MemoryKey("us-east-1", "use1-az1", "g6.xlarge")]
    assert MemoryView([tally], moment=T + 10).quota_cap(other) is None


def test_tallies_fold_observations_and_merge_without_losing_any() -> None:
    observations = [
        Observation(KEY, T + 5, Seen.AVAILABLE, latency=0.12),
        Observation(KEY, T + 7, Seen.INSUFFICIENT, latency=0.09),
        Observation(KEY, T + 8, reservation_seconds=0.25),
        Observation(KEY, T + 3600 + 1, Seen.QUOTA, latency=0.1, carried=2),
    ]
    first, second = sorted(fold(observations), key=lambda t: t.hour)
    assert first.hour == hour_of(T) and second.hour == hour_of(T) + 3600
    assert first.counts == {("use1-az1", Seen.AVAILABLE): 1, ("use1-az1", Seen.INSUFFICIENT): 1}
    assert first.reservation_seconds == {"use1-az1": 0.25}
    assert sum(first.latency.values()) == 2
    assert (second.quota_at, second.quota_carried) == (T + 3601, 2)
    again = first.copy()
    again.add(first)
    assert again.counts[("use1-az1", Seen.AVAILABLE)] == 2
    assert again.last[("use1-az1", Seen.AVAILABLE)] == T + 5
    assert again.reservation_seconds == {"use1-az1": 0.5}
    with pytest.raises(ValueError, match="cannot merge"):
        again.add(second)


def test_history_sums_per_place_and_filters() -> None:
    observations = [
        Observation(KEY, T + 10, Seen.AVAILABLE),
        Observation(KEY, T + 20, Seen.INSUFFICIENT),
        Observation(KEY, T + 30, Seen.QUOTA),
        Observation(KEY, T + 40, reservation_seconds=1.5),
        Observation(MemoryKey("us-east-1", "use1-az2", "g6.xlarge"), T + 50, Seen.UNSUPPORTED),
        Observation(MemoryKey("us-west-2", "usw2-az1", "p5.48xlarge"), T - 7200, Seen.AVAILABLE),
    ]
    rows = history(fold(observations))
    assert [(r.region, r.availability_zone_id, r.instance_type) for r in rows] == [
        ("us-east-1", "use1-az1", "g6.xlarge"),
        ("us-east-1", "use1-az2", "g6.xlarge"),
        ("us-west-2", "usw2-az1", "p5.48xlarge"),
    ]
    first = rows[0]
    assert first.attempts == 3
    assert first.success_rate == 0.5  # a quota error says nothing about capacity
    assert (first.last_available, first.last_insufficient) == (T + 10, T + 20)
    assert first.reservation_seconds == 1.5
    assert rows[1].success_rate == 0.0
    assert [r.instance_type for r in history(fold(observations), since=T)] == ["g6.xlarge"] * 2
    assert history(fold(observations), since=T + 15)[0].last_available is None
    assert len(history(fold(observations), instance_types=["p5.48xlarge"])) == 1
    assert len(history(fold(observations), regions=["us-east-1"])) == 2


def test_a_solo_quota_error_right_after_a_give_back_is_retried_after_a_pause() -> None:
    """EC2 counts a cancelled reservation toward the quota for a while: a solo quota error
    inside the window after the request's own give-back is parked and retried (after a
    growing pause); only one once the window has passed decides the answer."""
    from capacity_broker.domain.fanout import DecisionKind, Phase, Plan

    QUOTA_ERROR = Tried[str](error_class=ErrorClass.QUOTA, error_code="VcpuLimitExceeded")

    plan = Plan([X, U], keep=True, max_concurrency=4, hedge=0.5, moment=0.0, quota_settle=10.0)
    assert plan.step(0.0).start == (0, 1)
    plan.answered(1, Tried(hold="b", reservation_id="cr-b"), 0.1)
    plan.answered(0, QUOTA_ERROR, 0.2)
    assert plan.slots[0].phase is Phase.PARKED  # beside the other hold: not solo
    assert plan.step(0.2).give_back == (1,)  # the worse hold makes room
    plan.returned(1, True, 0.3)
    assert plan.step(0.3).start == (0,)
    plan.answered(0, QUOTA_ERROR, 0.4)
    assert plan.slots[0].phase is Phase.PARKED  # solo, but 0.1 s after the give-back
    step = plan.step(0.4)
    assert step.start == () and step.wake_at == pytest.approx(0.9)
    assert plan.step(0.9).start == (0,)
    plan.answered(0, Tried(hold="a", reservation_id="cr-a"), 1.0)
    assert plan.decision().kind is DecisionKind.WON and plan.decision().index == 0

    late = Plan([U], keep=True, max_concurrency=4, hedge=0.5, moment=0.0, quota_settle=10.0)
    late.given_back_at = 0.0
    assert late.step(11.0).start == (0,)  # started past the window
    late.answered(0, QUOTA_ERROR, 11.1)
    assert late.decision().kind is DecisionKind.STOPPED


def test_a_frugal_fanout_widens_one_candidate_at_a_time_and_never_hedges() -> None:
    """While the account's budget for creates is short, a create made only in case the ones
    before it fail (and its give-back) would take another desktop's calls: the fan-out goes
    one candidate at a time. Without it, the first insufficient answer starts all the rest."""
    from capacity_broker.domain.fanout import Plan

    ice = Tried[str](error_class=ErrorClass.CAPACITY, error_code="InsufficientInstanceCapacity")

    spent = Plan([U, U, U, U], keep=False, max_concurrency=8, hedge=0.5, moment=0.0)
    assert spent.step(0.0).start == (0,)
    spent.answered(0, ice, 0.1)
    assert spent.step(0.1).start == (1, 2, 3)

    frugal = Plan([U, U, U, U], keep=False, max_concurrency=8, hedge=0.5, moment=0.0, frugal=True)
    assert frugal.step(0.0).start == (0,)
    frugal.answered(0, ice, 0.1)
    step = frugal.step(0.1)
    assert step.start == (1,)
    assert step.wake_at == 0.6  # the hedge's time: the engine asks the pacer again then
    step = frugal.step(5.0)
    assert step.start == ()  # long past the hedge delay: still one at a time ...
    assert step.wake_at == 5.5  # ... and asked again a hedge delay later
    frugal.answered(1, ice, 5.1)
    assert frugal.step(5.1).start == (2,)
    frugal.answered(2, Tried(hold="c", reservation_id="cr-c"), 5.2)
    assert frugal.step(5.2).give_back == (2,)  # the probe's answer: 3 never tried
    assert frugal.decision().kind.value == "won" and frugal.decision().index == 2
    assert frugal.slots[3].phase.value == "waiting"

    # No longer short: the hedge and the full width come back.
    frugal2 = Plan([U, U, U, U], keep=False, max_concurrency=8, hedge=0.5, moment=0.0, frugal=True)
    frugal2.step(0.0)
    frugal2.answered(0, ice, 0.1)
    assert frugal2.step(0.1).start == (1,)
    frugal2.frugal = False
    assert frugal2.step(0.7).start == (2, 3)  # the hedge delay passed: everything left


def test_a_frugal_fanout_widens_past_the_answer_not_past_the_bound() -> None:
    """Memory's out places start with the first promising one (0, 1, 2); their answers, out
    again, start nothing more while 2 runs: only its own answer widens to 3."""
    from capacity_broker.domain.fanout import Plan

    ice = Tried[str](error_class=ErrorClass.CAPACITY, error_code="InsufficientInstanceCapacity")
    plan = Plan([X, X, U, U, U], keep=False, max_concurrency=8, hedge=0.5, moment=0.0, frugal=True)
    assert plan.step(0.0).start == (0, 1, 2)
    plan.answered(0, ice, 0.1)
    plan.answered(1, ice, 0.1)
    assert plan.step(0.1).start == ()
    plan.answered(2, ice, 0.2)
    assert plan.step(0.2).start == (3,)


@pytest.mark.parametrize(
    ("hints", "bound"),
    [
        ([U, U, U], 1),
        ([X, U, U, U], 2),  # the ones memory says are out must be tried now: not speculative
        ([X, X, A, U], 3),
        ([X, X, X], 3),
    ],
)
def test_a_frugal_fanout_starts_no_further_than_the_first_promising_candidate(
    hints: list[Hint], bound: int
) -> None:
    assert first_bound(hints, frugal=True) == bound
