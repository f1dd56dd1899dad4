"""The fan-out engine in named scenarios, on the simulated clock: what it starts when, what it
answers, and what it costs (creates, holds, reservation-seconds)."""

from __future__ import annotations

from capacity_broker.domain.errors import Outcome
from capacity_broker.domain.fanout import DecisionKind
from capacity_broker.domain.memory import (
    HEDGE_CEILING,
    MemoryKey,
    MemoryView,
    Seen,
    Tally,
    hour_of,
)
from fanout_sim import REGION, TYPE, SimEc2, Spec, oracle, run

NOW = 1_000_000.0  # the sim's wall clock at t=0 (see fanout_sim.run)


def remembered(
    seen: dict[int, Seen], ago: float = 30.0, quota_carried: int | None = None
) -> MemoryView:
    """A memory in which candidate i (AZ use1-az{i+1}) answered ``seen[i]`` ``ago`` seconds
    ago, with create latencies of about 0.1 s."""
    tally = Tally(REGION, TYPE, hour_of(NOW))
    for index, what in seen.items():
        tally.counts[(f"use1-az{index + 1}", what)] = 1
        tally.last[(f"use1-az{index + 1}", what)] = NOW - ago
    tally.latency = {1: 40}
    if quota_carried is not None:
        tally.quota_at, tally.quota_carried = NOW - ago, quota_carried
    return MemoryView([tally], moment=NOW)


def creates_at(done) -> list[tuple[int, float]]:
    return [
        (task.index, round(at, 6)) for at, task in done.runtime.submitted if task.action == "try"
    ]


def test_capacity_everywhere_without_memory_costs_one_hold() -> None:
    ec2 = SimEc2([Spec("available")] * 6)
    done = run(ec2)
    assert done.result.decision.kind is DecisionKind.WON and done.result.decision.index == 0
    assert ec2.created == [0]  # one create ...
    assert ec2.given_back == ["cr-0-0"]  # ... and one cancel: 2 mutating calls, not 12
    assert [r.outcome for r in done.result.reports] == [Outcome.AVAILABLE] + [Outcome.NOT_TRIED] * 5
    assert done.result.reports[0].cancelled is True
    # The hold lived from the create's answer to the cancel's: one cancel round trip.
    assert abs(done.result.reservation_seconds - 0.1) < 1e-9


def test_capacity_only_in_the_last_with_warm_memory_starts_all_at_once() -> None:
    ec2 = SimEc2([Spec("insufficient")] * 5 + [Spec("available")])
    memory = remembered(dict.fromkeys(range(5), Seen.INSUFFICIENT) | {5: Seen.AVAILABLE})
    done = run(ec2, memory=memory)
    assert done.result.decision.index == 5
    assert creates_at(done) == [(i, 0.0) for i in range(6)]
    assert round(done.runtime.clock, 6) == 0.2  # one create round trip, one cancel round trip


def test_capacity_only_in_the_last_without_memory_widens_at_the_first_no() -> None:
    ec2 = SimEc2([Spec("insufficient")] * 5 + [Spec("available")])
    done = run(ec2)
    assert done.result.decision.index == 5
    assert creates_at(done) == [(0, 0.0)] + [(i, 0.1) for i in range(1, 6)]
    # The first alone, then the other five, then the cancel.
    assert round(done.runtime.clock, 6) == 0.3


def test_memory_of_out_capacity_first_starts_everything() -> None:
    ec2 = SimEc2([Spec("available")] * 4)
    done = run(ec2, memory=remembered({0: Seen.INSUFFICIENT, 1: Seen.UNSUPPORTED}))
    # Memory never decides the answer: the first is tried now and wins.
    assert done.result.decision.index == 0
    assert sorted(ec2.created) == [0, 1, 2, 3]


def test_stale_memory_is_no_memory() -> None:
    ec2 = SimEc2([Spec("available")] * 4)
    done = run(ec2, memory=remembered({0: Seen.INSUFFICIENT, 1: Seen.INSUFFICIENT}, ago=181))
    assert ec2.created == [0]
    assert done.result.decision.index == 0


def test_a_known_good_later_candidate_bounds_the_widening() -> None:
    # The first was good a moment ago and is not any more; memory says the third is good:
    # widen through it only, and the rest only if it fails too.
    ec2 = SimEc2([Spec("insufficient"), Spec("insufficient"), Spec("available"), Spec("available")])
    memory = remembered({0: Seen.AVAILABLE, 2: Seen.AVAILABLE})
    done = run(ec2, memory=memory)
    assert done.result.decision.index == 2
    assert ec2.created == [0, 1, 2]


def test_a_slow_first_answer_is_hedged_after_the_measured_delay() -> None:
    ec2 = SimEc2([Spec("available", latency=3.0)] + [Spec("available")] * 3)
    done = run(ec2, memory=remembered({}))
    # Measured creates answer within 0.1 s: hedge at the floor (0.2 s), not at a constant.
    assert creates_at(done) == [(0, 0.0), (1, 0.2), (2, 0.2), (3, 0.2)]
    # Whatever the later ones say, the answer is the first (it has capacity now).
    assert done.result.decision.index == 0
    assert done.result.reports[0].cancelled is True
    assert all(r.cancelled is True for r in done.result.reports[1:])
    assert ec2.live == {}


def test_without_any_latency_measured_the_hedge_waits_the_ceiling() -> None:
    ec2 = SimEc2([Spec("available", latency=HEDGE_CEILING + 1), Spec("available")])
    done = run(ec2)
    assert creates_at(done) == [(0, 0.0), (1, HEDGE_CEILING)]
    assert done.result.decision.index == 0


def test_quota_room_for_one_hold_probe_answers_the_first_subnet() -> None:
    # Capacity everywhere, the quota carries one hold, the first AZ answers late: the hedge's
    # holds trip the quota for the first; it is retried once they are given back (slowly:
    # EC2 confirms the cancel a second later).
    ec2 = SimEc2(
        [Spec("available", latency=1.0, effect=0.9)] + [Spec("available")] * 5,
        limit=1,
        give_back_latency=1.0,
    )
    done = run(ec2, memory=remembered({}))
    assert done.result.decision.kind is DecisionKind.WON
    assert done.result.decision.index == 0
    assert done.result.reports[0].outcome is Outcome.AVAILABLE
    assert ec2.max_live == 1
    assert ec2.live == {}
    assert ec2.created.count(0) == 2  # refused once (our own hold), then held


def test_quota_room_for_one_hold_reserve_gives_the_worse_hold_back_to_make_room() -> None:
    ec2 = SimEc2(
        [Spec("available", latency=1.0, effect=0.9)] + [Spec("available")] * 3,
        limit=1,
    )
    done = run(ec2, keep=True, memory=remembered({}))
    assert done.result.decision.index == 0
    assert done.result.kept_index == 0
    assert list(ec2.live) == [done.result.kept]
    assert done.result.reports[0].kept is True
    # The hold that made the first one's create fail went back.
    assert done.result.reports[1].cancelled is True


def test_reserve_keeps_a_hold_and_gives_it_back_when_a_better_one_wins() -> None:
    ec2 = SimEc2([Spec("available", latency=0.5), Spec("available")])
    done = run(ec2, keep=True, memory=remembered({0: Seen.INSUFFICIENT}))
    assert done.result.decision.index == 0
    assert [h.cancelled for h in done.result.reports[1].holds] == [True]
    assert list(ec2.live) == [done.result.kept]


def test_the_request_alone_over_the_quota_stops() -> None:
    ec2 = SimEc2([Spec("available", weight=2)] + [Spec("available")] * 3, limit=1)
    done = run(ec2)
    assert done.result.decision.kind is DecisionKind.STOPPED
    assert done.result.decision.index == 0
    assert [r.outcome for r in done.result.reports] == [Outcome.LIMIT_EXCEEDED] + [
        Outcome.NOT_TRIED
    ] * 3


def test_a_permission_error_after_an_untried_candidate_does_not_decide() -> None:
    # The third answers first, with a permission error; the first two are still open: the
    # sequential way would have tried them first.
    specs = [Spec("insufficient", latency=0.3), Spec("available", latency=0.3), Spec("permission")]
    ec2 = SimEc2(specs)
    done = run(ec2, memory=remembered({0: Seen.INSUFFICIENT, 1: Seen.INSUFFICIENT}))
    expected = oracle(specs, ec2.limit, ec2.quota_first)
    assert done.result.decision.kind is expected.decision is DecisionKind.WON
    assert done.result.decision.index == expected.index == 1


def test_the_quota_cap_from_memory_bounds_holds_at_once() -> None:
    ec2 = SimEc2([Spec("insufficient")] * 3 + [Spec("available")] * 3)
    memory = remembered(dict.fromkeys(range(3), Seen.INSUFFICIENT), quota_carried=2)
    done = run(ec2, memory=memory)
    assert done.result.decision.index == 3
    assert max(busy for _, busy, _ in done.result.starts) < 2
    assert done.runtime.max_in_flight["try"] <= 2


def test_a_cancel_ec2_does_not_confirm_is_reported_and_leaves_the_answer() -> None:
    ec2 = SimEc2([Spec("available")] * 2, give_back_ok=lambda index: False)
    done = run(ec2)
    assert done.result.decision.index == 0
    assert done.result.reports[0].cancelled is False
    assert done.result.cleanup_pending


def test_the_deadline_stops_new_creates_and_says_what_is_open() -> None:
    ec2 = SimEc2([Spec("insufficient", latency=1.0)] * 2 + [Spec("available")])
    done = run(ec2, deadline=0.5)
    assert done.result.decision.kind is DecisionKind.TIMED_OUT
    assert ec2.created == [0]
    assert [r.outcome for r in done.result.reports] == [
        Outcome.INSUFFICIENT_CAPACITY,
        Outcome.NOT_TRIED,
        Outcome.NOT_TRIED,
    ]


def test_a_parked_candidate_at_the_deadline_reports_the_quota_error_with_its_cause() -> None:
    ec2 = SimEc2(
        [Spec("available", latency=1.0, effect=0.9), Spec("available", latency=0.2)],
        limit=1,
        give_back_latency=2.0,
    )
    done = run(ec2, memory=remembered({}), deadline=1.5)
    report = done.result.reports[0]
    assert done.result.decision.kind is DecisionKind.TIMED_OUT
    assert report.outcome is Outcome.LIMIT_EXCEEDED
    assert "own reservations" in (report.message or "")
    assert ec2.live == {}


def test_an_earlier_invocations_hold_enters_as_answered() -> None:
    ec2 = SimEc2([Spec("insufficient"), Spec("available"), Spec("available")])
    done = run(ec2, keep=True, earlier=(2, "cr-earlier", "cr-earlier"))
    # Only the better candidates are tried; the better winner replaces the earlier hold.
    assert ec2.created == [0, 1]
    assert done.result.decision.index == 1
    assert ec2.given_back[0] == "cr-earlier" or "cr-earlier" in ec2.given_back


def test_a_try_that_raises_is_an_error_answer_not_a_hang() -> None:
    ec2 = SimEc2([Spec("available")] * 2)
    original = ec2.try_one

    def flaky(index: int, round_: int):
        if index == 0:
            raise RuntimeError("boom")
        return original(index, round_)

    ec2.try_one = flaky  # type: ignore[method-assign]
    done = run(ec2)
    assert done.result.reports[0].outcome is Outcome.ERROR
    assert done.result.reports[0].error_code == "InternalError"
    assert done.result.decision.index == 1


def test_observations_feed_the_memory() -> None:
    ec2 = SimEc2([Spec("insufficient"), Spec("available")])
    done = run(ec2)
    seen = [(o.key, o.seen) for o in done.result.observations if o.seen is not None]
    assert seen == [
        (MemoryKey(REGION, "use1-az1", TYPE), Seen.INSUFFICIENT),
        (MemoryKey(REGION, "use1-az2", TYPE), Seen.AVAILABLE),
    ]
    spent = [o.reservation_seconds for o in done.result.observations if o.seen is None]
    assert spent == [done.result.reservation_seconds]


def test_a_retry_next_to_a_kept_hold_is_not_taken_for_the_request_alone() -> None:
    # Reserve: pair 1 holds (kept) while pair 0's slow create is refused for the quota. When
    # pair 0 is retried with pair 1's hold still live and is refused again, that is still our
    # own doing (not "the request alone"): pair 1's hold goes back and pair 0, alone, fits.
    ec2 = SimEc2(
        [Spec("available", weight=2, latency=1.0, effect=0.9)] + [Spec("available")] * 2,
        limit=2,
        give_back_latency=1.0,
    )
    done = run(ec2, keep=True, memory=remembered({}))
    assert done.result.decision.kind is DecisionKind.WON
    assert done.result.decision.index == 0
    assert ec2.created.count(0) == 3  # refused twice by our own holds, then held
    assert list(ec2.live) == [done.result.kept]


def test_after_a_quota_error_starts_go_one_at_a_time() -> None:
    # Memory says the first four are out: all five start at once. The fast fifth holds, and
    # the quota (room for one) refuses the other four: the cap drops to what the quota carried,
    # and their retries go one at a time.
    ec2 = SimEc2(
        [Spec("insufficient")] * 4 + [Spec("available", latency=0.05)],
        limit=1,
        quota_first=True,
    )
    memory = remembered(dict.fromkeys(range(4), Seen.INSUFFICIENT))
    done = run(ec2, memory=memory)
    assert done.result.decision.index == 4
    first, retries = done.result.starts[:5], done.result.starts[5:]
    assert [index for index, _, _ in first] == [0, 1, 2, 3, 4]
    assert [index for index, _, _ in retries] == [0, 1, 2, 3]
    assert all(busy == 0 and cap == 1 for _, busy, cap in retries)
    assert [r.outcome for r in done.result.reports] == [Outcome.INSUFFICIENT_CAPACITY] * 4 + [
        Outcome.AVAILABLE
    ]


def test_the_decision_is_signalled_while_the_give_backs_still_run() -> None:
    ec2 = SimEc2([Spec("insufficient"), Spec("available")], give_back_latency=0.5)
    seen: list[tuple[float, list[Seen | None]]] = []
    runtimes: list = []

    from capacity_broker.logic.fanout import Fanout
    from fanout_sim import SimRuntime, candidates

    def runtime(workers: int) -> SimRuntime:
        runtimes.append(SimRuntime(ec2, workers))
        return runtimes[-1]

    engine = Fanout(ec2.try_one, ec2.give_back, keep=False, max_concurrency=4, runtime=runtime)
    result = engine.run(
        candidates(2),
        1e9,
        on_decided=lambda observations: seen.append(
            (runtimes[0].clock, [o.seen for o in observations])
        ),
    )
    # Decided when the second answered (t=0.2); its cancel confirms half a second later.
    assert seen == [(0.2, [Seen.INSUFFICIENT, Seen.AVAILABLE])]
    assert result.decided_observations == 2
    assert [round(o.reservation_seconds, 9) for o in result.observations[2:]] == [0.5]


# -- throttling is not an answer about capacity (contract v3) ------------------------------


def test_a_throttled_first_candidate_is_asked_again_and_still_wins() -> None:
    # The first subnet's creates are throttled twice (after the adapters' own retries), the
    # second has room and answers at once (memory: all at once). The answer waits for the
    # first: it is tried again after 0.5 s, then 1 s, with the same token, and holds.
    ec2 = SimEc2([Spec("available", unanswered=("throttled", "throttled")), Spec("available")])
    memory = remembered({0: Seen.INSUFFICIENT, 1: Seen.AVAILABLE})
    done = run(ec2, memory=memory)
    assert done.result.decision.kind is DecisionKind.WON and done.result.decision.index == 0
    assert creates_at(done) == [(0, 0.0), (1, 0.0), (0, 0.6), (0, 1.7)]
    assert [r.outcome for r in done.result.reports] == [Outcome.AVAILABLE, Outcome.AVAILABLE]
    assert done.result.reports[0].tries == 3
    assert ec2.live == {}  # the second's hold, a better answer's loser, was given back


def test_a_candidate_unanswered_past_the_budget_blocks_every_later_hold() -> None:
    # Reserve keeps its best hold, but not over an earlier candidate EC2 never answered: at
    # the deadline the answer is BLOCKED, with the first's code, and the kept hold goes back.
    ec2 = SimEc2([Spec("available", forever=True), Spec("available")])
    done = run(ec2, keep=True, memory=remembered({1: Seen.AVAILABLE}), deadline=20.0)
    assert done.result.decision.kind is DecisionKind.BLOCKED
    assert done.result.decision.index == 0
    first, second = done.result.reports
    assert (first.outcome, first.error_code) == (Outcome.THROTTLED, "RequestLimitExceeded")
    assert (second.outcome, second.cancelled, second.kept) == (Outcome.AVAILABLE, True, False)
    assert done.result.kept is None and ec2.live == {}
    # Asked again until the deadline, with pauses doubling to 5 s: not a storm of creates.
    assert [at for index, at in creates_at(done) if index == 0] == [
        0.0,
        0.6,
        1.7,
        3.8,
        7.9,
        13.0,
        18.1,
    ]


def test_an_unanswered_candidate_does_not_widen_the_fan_out() -> None:
    # EC2's buckets are the account's: another create now would meet the same throttle. Only
    # the hedge delay (2 s, nothing measured) starts the next candidate.
    ec2 = SimEc2([Spec("insufficient", unanswered=("throttled",) * 3), Spec("available")])
    done = run(ec2)
    assert creates_at(done)[:3] == [(0, 0.0), (0, 0.6), (0, 1.7)]
    assert (1, 2.0) in creates_at(done)
    assert done.result.decision.index == 1
    assert [r.outcome for r in done.result.reports] == [
        Outcome.INSUFFICIENT_CAPACITY,
        Outcome.AVAILABLE,
    ]


def test_the_budget_running_out_in_the_broker_never_hides_what_ec2_said() -> None:
    throttled_then_paced = Spec("available", unanswered=("throttled", "budget"), forever=True)
    paced_only = Spec("available", unanswered=("budget",), forever=True)
    lost = Spec("available", unanswered=("lost",), forever=True)
    for spec, outcome, code in [
        (throttled_then_paced, Outcome.THROTTLED, "RequestLimitExceeded"),
        (paced_only, Outcome.THROTTLED, "RateBudgetExhausted"),
        (lost, Outcome.ERROR, "RequestTimeout"),
    ]:
        done = run(SimEc2([spec, Spec("available")]), deadline=10.0)
        report = done.result.reports[0]
        assert done.result.decision.kind is DecisionKind.BLOCKED
        assert (report.outcome, report.error_code) == (outcome, code)
        assert oracle([spec, Spec("available")], 1000, True).code == code


def test_while_short_of_creates_it_goes_one_place_at_a_time() -> None:
    """Issue 23: with no token to spare (the pacer's word, asked before every step), the
    first subnet out of capacity starts only the next, not all the rest: 2 creates, not 4."""
    ec2 = SimEc2([Spec("insufficient"), Spec("available"), Spec("available"), Spec("available")])
    spare = run(ec2)
    assert [i for i, _ in creates_at(spare)] == [0, 1, 2, 3]
    ec2 = SimEc2([Spec("insufficient"), Spec("available"), Spec("available"), Spec("available")])
    frugal = run(ec2, short=lambda t: True)
    assert [i for i, _ in creates_at(frugal)] == [0, 1]
    assert frugal.result.decision.index == spare.result.decision.index == 1
    assert ec2.live == {}


def test_while_short_memory_s_out_places_start_together_but_nothing_after_them() -> None:
    """The places memory says were out a moment ago must be tried now: they start with the
    first promising one. Their answers (out again) start nothing more while it runs."""
    ec2 = SimEc2(
        [Spec("insufficient"), Spec("insufficient"), Spec("available", latency=1.0)]
        + [Spec("available")] * 2
    )
    done = run(
        ec2, memory=remembered({0: Seen.INSUFFICIENT, 1: Seen.INSUFFICIENT}), short=lambda t: True
    )
    assert creates_at(done) == [(0, 0.0), (1, 0.0), (2, 0.0)]
    assert done.result.decision.index == 2


def test_a_hedge_waits_while_short_and_goes_once_tokens_are_spare() -> None:
    """A slow first create: while short the hedge waits, and the engine asks the pacer again
    at the hedge's time and every hedge delay after, so it goes soon after tokens are spare
    again (1.0 s here: the hedge delay is 0.2 s), not when the slow create answers (4 s)."""
    ec2 = SimEc2([Spec("available", latency=4.0), Spec("available")])
    done = run(ec2, memory=remembered({}), short=lambda t: t < 1.0)
    assert creates_at(done) == [(0, 0.0), (1, 1.0)]
    assert done.result.decision.index == 0
