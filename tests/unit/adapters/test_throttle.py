"""The adaptive pacer: EC2's published buckets, probing, cuts and the measured share, on a
driven clock (no sleeps, no timing)."""

from __future__ import annotations

import threading

import pytest
from capacity_broker.adapters.aws import AwsError, RetryPolicy
from capacity_broker.adapters.throttle import (
    AdaptiveBucket,
    NoToken,
    Pacer,
    Ticket,
    Tuning,
)
from capacity_broker.domain.buckets import Limits, bucket_of
from capacity_broker.domain.errors import ErrorClass, is_retryable
from hypothesis import given, settings
from hypothesis import strategies as st

DEFAULT = Limits(50, 5)


class Clock:
    """A clock the test moves; ``sleep`` moves it too (what ``acquire`` waits on)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds


def bucket(limits: Limits = DEFAULT, scale: float = 1.0) -> tuple[AdaptiveBucket, Clock]:
    clock = Clock()
    return AdaptiveBucket(limits, scale, clock=clock, sleep=clock.sleep), clock


def take(b: AdaptiveBucket, now: float) -> Ticket:
    got = b.try_take(now)
    assert isinstance(got, Ticket), f"no call admitted at {now}: wait {got}"
    return got


def drain(b: AdaptiveBucket, now: float) -> list[Ticket]:
    """Every paced call the bucket admits at ``now`` (stops at a probe or a wait)."""
    tickets = []
    while True:
        got = b.try_take(now)
        if not isinstance(got, Ticket):
            return tickets
        assert not got.probe, "drain meets a probe: answer calls first"
        tickets.append(got)


def answer(b: AdaptiveBucket, tickets: list[Ticket], now: float) -> None:
    for ticket in tickets:
        b.answered(ticket, now)


def admit(b: AdaptiveBucket, now: float, wanted: int, out: list[Ticket]) -> None:
    """Up to ``wanted`` calls, as many as the bucket lets through now, added to ``out``."""
    for _ in range(wanted):
        got = b.try_take(now)
        if not isinstance(got, Ticket):
            return
        assert not (got.probe and any(t.probe for t in out)), "two probes out at once"
        out.append(got)


def until_probe(b: AdaptiveBucket, now: float, step: float = 0.01) -> tuple[Ticket, float]:
    """A saturated caller whose paced calls EC2 answers at once: the next probe, and when."""
    for _ in range(100_000):
        got = b.try_take(now)
        if isinstance(got, Ticket):
            if got.probe:
                return got, now
            b.answered(got, now)
        else:
            now += step
    raise AssertionError("no probe")


# -- which bucket, which size ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "params", "expected"),
    [
        ("CreateCapacityReservation", {}, ("CreateCapacityReservation", Limits(50, 5))),
        ("CancelCapacityReservation", {}, ("CancelCapacityReservation", Limits(50, 5))),
        ("CreateFleet", {}, ("CreateFleet", Limits(50, 5))),
        ("DescribeCapacityReservations", {}, ("DescribeCapacityReservations", Limits(100, 20))),
        ("SearchTransitGatewayRoutes", {}, ("SearchTransitGatewayRoutes", Limits(100, 20))),
        (
            "DescribeCapacityBlockOfferings",
            {},
            ("DescribeCapacityBlockOfferings", Limits(10, 0.15)),
        ),
        ("PurchaseCapacityBlock", {}, ("PurchaseCapacityBlock", Limits(10, 0.15))),
        ("CreateLaunchTemplateVersion", {}, ("CreateLaunchTemplateVersion", Limits(100, 5))),
        ("DescribeInstances", {}, ("DescribeInstances (unfiltered)", Limits(50, 10))),
        ("DescribeInstances", {"MaxResults": 1000}, ("DescribeInstances", Limits(100, 20))),
        ("DescribeInstances", {"Filters": [{"Name": "x"}]}, ("DescribeInstances", Limits(100, 20))),
    ],
)
def test_the_published_bucket_of_each_call(action, params, expected) -> None:
    assert bucket_of(action, params) == expected


def test_each_action_region_has_its_own_bucket_shared_by_threads() -> None:
    pacer = Pacer(scale=1.0)
    seen: list[AdaptiveBucket] = []

    def look() -> None:
        seen.append(pacer.bucket("us-east-1", "CancelCapacityReservation"))

    threads = [threading.Thread(target=look) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(b is seen[0] for b in seen)
    assert pacer.bucket("us-west-2", "CancelCapacityReservation") is not seen[0]
    assert pacer.bucket("us-east-1", "CreateCapacityReservation") is not seen[0]
    blocks = pacer.bucket("us-east-1", "PurchaseCapacityBlock")
    assert (blocks.burst, blocks.rate) == (10, 0.15)


def test_the_rate_scale_multiplies_the_starting_refill(monkeypatch: pytest.MonkeyPatch) -> None:
    # The scale comes from the settings (BROKER_EC2_RATE_SCALE), never from the environment
    # at import: the pacer reads nothing of the process.
    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", "fast")
    b = Pacer(scale=4).bucket("us-east-1", "CancelCapacityReservation")
    assert (b.burst, b.start, b.rate) == (50, 20, 20)
    assert Pacer().scale == 1.0


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_a_rate_scale_that_would_stop_or_break_pacing_is_refused(scale: float) -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        Pacer(scale=scale)


# -- the published bucket, before any evidence -------------------------------------------------


def test_a_full_bucket_admits_its_burst_then_paces_at_the_refill_rate() -> None:
    b, _ = bucket()
    assert len(drain(b, 0.0)) == 50
    assert b.try_take(0.0) == pytest.approx(0.2)  # 1 token at 5 a second
    take(b, 0.2)
    assert b.try_take(0.2) == pytest.approx(0.2)


def test_one_probe_goes_beyond_the_bucket_once_a_call_at_its_rate_is_answered() -> None:
    # Before any throttle (the climb from the published rate), one answered call at the
    # current rate is enough: the rate may double every round trip, as TCP's slow start does.
    b, _ = bucket()
    burst = drain(b, 0.0)
    assert not isinstance(b.try_take(0.1), Ticket)  # nothing answered: no probe
    answer(b, burst[:1], 0.1)
    probe = take(b, 0.1)
    assert probe.probe
    assert b.try_take(0.1) == pytest.approx(0.1)  # one probe at a time: wait for the token


def test_after_a_throttle_a_probe_waits_for_five_calls_answered_at_the_new_rate() -> None:
    b, clock = bucket()
    burst = drain(b, 0.0)
    b.throttled(burst[0], 0.1)  # cut: 5 -> 3.5 a second
    answer(b, burst[1:], 0.1)  # sent before the cut: not at the new rate
    clock.now = 0.1
    paced = [b.acquire() for _ in range(5)]
    assert not any(t.probe for t in paced)
    answer(b, paced[:4], clock.now)
    assert not isinstance(b.try_take(clock.now), Ticket)  # 4 answers: not yet
    answer(b, paced[4:], clock.now)
    assert take(b, clock.now).probe


def test_acquire_sleeps_until_a_token_is_there() -> None:
    b, clock = bucket(Limits(1, 2))
    assert b.acquire().probe is False
    assert clock.now == 0.0
    assert b.acquire().probe is False
    assert clock.now == pytest.approx(0.5)


def test_a_wait_past_the_deadline_is_refused_at_once() -> None:
    b, clock = bucket(Limits(1, 0.5))
    b.acquire(deadline=1.0)  # the burst
    with pytest.raises(NoToken):
        b.acquire(deadline=1.0)  # the next token comes at 2.0
    assert clock.now == 0.0  # refused without waiting
    assert not b.acquire(deadline=2.5).probe
    assert clock.now == pytest.approx(2.0)


def test_the_pacer_refuses_a_call_it_cannot_pace_before_the_deadline_in_its_own_words() -> None:
    # Contract v3: RequestLimitExceeded only when EC2 said so; the broker's own budget running
    # out is RateBudgetExhausted, a throttled outcome that no retry within the deadline helps.
    clock = Clock()
    pacer = Pacer(scale=1.0, clock=clock, sleep=clock.sleep)
    made = []
    for _ in range(11):  # the bucket of 10, then one probe past it (answered)
        pacer.call("us-east-1", "PurchaseCapacityBlock", {}, lambda: made.append(1), 1.0)
    with pytest.raises(AwsError) as refused:  # the next token: 1 / 0.3 s away
        pacer.call("us-east-1", "PurchaseCapacityBlock", {}, lambda: made.append(1), 1.0)
    assert refused.value.code == "RateBudgetExhausted"
    assert refused.value.error_class is ErrorClass.RATE_BUDGET
    assert not is_retryable(refused.value.error_class)
    assert refused.value.status is None  # not EC2's answer: nothing was sent
    assert "paced by this container" in refused.value.message
    assert len(made) == 11 and clock.now == 0.0


def test_a_retry_the_pacer_cannot_pace_reports_what_ec2_answered_the_try_before() -> None:
    # EC2 throttled the call; the pacer, cut by that throttle, has no token for the retry
    # before the deadline. EC2 said RequestLimitExceeded: that is the call's answer, not the
    # pacer's own RateBudgetExhausted (which is only for a call EC2 never answered).
    clock = Clock()
    pacer = Pacer(scale=1.0, clock=clock, sleep=clock.sleep)
    sent = []

    def ec2_throttles() -> None:
        sent.append(clock.now)
        raise AwsError("PurchaseCapacityBlock", "RequestLimitExceeded", "slow down", 503)

    def once() -> None:
        pacer.call("us-east-1", "PurchaseCapacityBlock", {}, ec2_throttles, 5.0)

    with pytest.raises(AwsError) as raised:
        RetryPolicy(base=0.01).run("PurchaseCapacityBlock", once, 5.0, clock.sleep, clock)
    assert raised.value.code == "RequestLimitExceeded"
    assert raised.value.status == 503
    assert len(sent) == 1  # the retry was refused by the pacer (its next token: ~10 s away)
    # With nothing answered by EC2 first, the pacer's refusal is the answer, at once.
    with pytest.raises(AwsError) as refused:
        RetryPolicy(base=0.01).run("PurchaseCapacityBlock", once, 5.0, clock.sleep, clock)
    assert refused.value.code == "RateBudgetExhausted"
    assert len(sent) == 1


Event = st.one_of(
    st.tuples(st.just("wait"), st.floats(min_value=0.0, max_value=3.0)),
    st.tuples(st.just("take"), st.integers(min_value=1, max_value=40)),
    st.tuples(st.sampled_from(["answer", "throttle", "lost"]), st.integers(0, 1000)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(Event, max_size=80), st.sampled_from([DEFAULT, Limits(10, 0.15), Limits(1, 1)]))
def test_without_an_answered_probe_it_never_passes_the_published_bucket(events, limits) -> None:
    """Answers to paced calls, throttles and lost answers are no evidence of a bigger bucket:
    the paced calls stay inside burst + refill x time, and at most one probe is out at a time
    (its answer would be the evidence; here probes are only ever throttled or lost)."""
    b, clock = bucket(limits)
    paced, out = 0, []
    for kind, value in events:
        if kind == "wait":
            clock.now += value
        elif kind == "take":
            before = len(out)
            admit(b, clock.now, value, out)
            paced += sum(not t.probe for t in out[before:])
        elif out:
            ticket = out.pop(value % len(out))
            if kind == "answer" and not ticket.probe:
                b.answered(ticket, clock.now)
            elif kind == "lost":
                b.unanswered(ticket)
            else:
                b.throttled(ticket, clock.now)
        assert paced <= limits.burst + limits.refill * clock.now + 1e-9
        assert b.rate <= limits.refill + 1e-12
        assert b.counts["answered"] == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(Event, max_size=80), st.floats(min_value=0.2, max_value=50))
def test_a_throttle_never_raises_the_rate_and_the_rate_stays_bounded(events, refill) -> None:
    b, clock = bucket(Limits(50, refill))
    out: list[Ticket] = []
    for kind, value in events:
        if kind == "wait":
            clock.now += value
        elif kind == "take":
            admit(b, clock.now, value, out)
        elif out:
            ticket = out.pop(value % len(out))
            before = b.rate
            if kind == "throttle":
                b.throttled(ticket, clock.now)
                assert b.rate <= before
                # The account's bucket is spent: no token left here, and the next one comes
                # no sooner than EC2's published refill brings one, or the share EC2 was
                # counted to give this container between two throttles, if larger.
                assert b.tokens <= 0
                token = 1 / max(b.start, b.measured or 0.0)
                assert (1 - b.tokens) / b.rate >= token - 1e-9
            else:
                b.answered(ticket, clock.now)  # answered here: growth is allowed
                assert b.rate >= before
        assert b.start * b.tuning.floor - 1e-9 <= b.rate <= b.start * b.tuning.ceiling + 1e-9


# -- a throttle: the account's bucket is spent -------------------------------------------------


def test_a_throttle_empties_the_bucket_and_the_next_call_waits_a_tokens_time() -> None:
    # A container pacing alone still holds most of EC2's burst (49 of 50 creates) when EC2
    # says the account's bucket is empty (another container spent it): its next call, the
    # retry's, waits a token's time on its clock instead of going at once from its own burst.
    clock = Clock()
    pacer = Pacer(scale=1.0, clock=clock, sleep=clock.sleep)
    b = pacer.bucket("us-east-1", "CreateCapacityReservation")
    with pytest.raises(AwsError):
        pacer.call("us-east-1", "CreateCapacityReservation", {}, failing("RequestLimitExceeded"))
    assert b.tokens == 0
    assert b.short and pacer.short("us-east-1", "CreateCapacityReservation")
    pacer.call("us-east-1", "CreateCapacityReservation", {}, lambda: None)
    assert b.rate <= 5  # EC2's published refill for a create, at most
    assert clock.now == pytest.approx(1 / b.rate)
    # Not a burst after it either: one token a token's time.
    pacer.call("us-east-1", "CreateCapacityReservation", {}, lambda: None)
    assert clock.now == pytest.approx(2 / b.rate)


@pytest.mark.parametrize("probe", [True, False], ids=["probe", "paced call"])
def test_after_a_throttle_the_next_token_comes_at_the_published_rate_whatever_the_pace(
    probe: bool,
) -> None:
    # Answered probes doubled the pace to 40 a second (8x the published 5); then EC2 throttles
    # a call: the account's bucket is empty, and refills at 5 a second for everyone, so this
    # container's next call waits a fifth of a second, not a fortieth. Then it goes on at the
    # pace EC2 showed it (the probes' evidence of a raised bucket is kept).
    b, clock = bucket()
    now = 0.0
    for _ in range(3):
        answered, now = until_probe(b, now)
        b.answered(answered, now)
    assert b.rate == 40
    clock.now = now
    if probe:
        ticket, clock.now = until_probe(b, now)
    else:
        ticket = b.acquire()  # (no probe: none before five calls answered at 40 a second)
        assert not ticket.probe
    now = clock.now
    b.throttled(ticket, now)
    assert b.tokens <= 0
    pace = b.rate
    assert pace == (40 if probe else 28)  # a throttled probe keeps the pace; a paced call cuts
    b.acquire()
    assert clock.now == pytest.approx(now + 0.2, abs=2e-3)  # (one wait, and a float's step)
    b.acquire()
    assert clock.now == pytest.approx(now + 0.2 + 1 / pace, abs=2e-3)


# -- growth on evidence --------------------------------------------------------------------------


def test_answered_probes_double_the_rate_until_the_first_throttle() -> None:
    b, _ = bucket()
    rates, now = [], 0.0
    for _ in range(4):
        paced, before = b.counts["paced"], now
        probe, now = until_probe(b, now)
        assert b.counts["paced"] - paced >= 1  # answered at the current rate first ...
        assert now - before <= 1 / b.rate + 0.011  # ... its first token: no longer to wait
        b.answered(probe, now)
        rates.append(b.rate)
    assert rates == [10, 20, 40, 80]


def test_a_throttled_probe_keeps_the_rate_and_backs_off_the_next_probe() -> None:
    b, _ = bucket()
    probe, now = until_probe(b, 0.0)
    times = []
    for _ in range(4):
        b.throttled(probe, now)
        assert b.rate == 5 and b.counts["cuts"] == 0
        probe, later = until_probe(b, now)
        times.append(round(later - now, 2))
        now = later
    assert times == pytest.approx([1.0, 2.0, 4.0, 8.0], abs=0.02)


# -- cuts and the measured share -----------------------------------------------------------------


def test_a_throttled_paced_call_cuts_the_rate_once_per_round() -> None:
    b, _ = bucket()
    tickets = drain(b, 0.0)
    b.throttled(tickets[0], 0.1)
    assert b.rate == pytest.approx(3.5)
    assert b.tokens <= 0  # EC2's bucket is empty: no burst after a throttle
    b.throttled(tickets[1], 0.1)  # sent before the cut: the same round
    assert b.rate == pytest.approx(3.5)
    later = take(b, 1.0)
    b.throttled(later, 1.1)  # sent after the cut: the rate was still too high
    assert b.rate == pytest.approx(3.5 * 0.7)


def test_between_two_throttles_the_answered_calls_measure_our_share() -> None:
    b, _ = bucket()
    first = drain(b, 0.0)
    b.throttled(first[0], 0.1)  # cut at 0.1 s: 5 -> 3.5
    # Another client takes half: over the next 4 s EC2 lets 10 of ours through (2.5 a second).
    for i in range(10):
        b.answered(Ticket(0.2 + 0.4 * i, probe=False), 0.3 + 0.4 * i)
    b.throttled(Ticket(4.0, probe=False), 4.1)
    assert b.limit == pytest.approx(10 / 4.0)
    assert b.rate == pytest.approx(2.5 * (1 - Tuning().margin))


def cut_after_climbing(to: float) -> tuple[AdaptiveBucket, Clock]:
    """A bucket whose answered probes doubled its rate from 5 to ``to`` a second, then the
    first throttle of a paced call: cut by 30%, nothing measured yet (no earlier throttle)."""
    b, clock = bucket()
    now = 0.0
    while b.rate < to:
        probe, now = until_probe(b, now)
        b.answered(probe, now)
    clock.now = now
    ticket = b.acquire()
    assert not ticket.probe
    b.throttled(ticket, clock.now)
    assert b.rate == pytest.approx(to * 0.7) and b.measured is None
    return b, clock


def count_share(b: AdaptiveBucket, clock: Clock, share: float, seconds: float) -> None:
    """EC2 answers ``share`` calls a second for ``seconds``, then throttles one: the calls it
    let through between the two throttles."""
    n = round(share * seconds)
    start = clock.now
    for i in range(n):
        b.answered(Ticket(start + seconds * i / n, probe=False), start + seconds * (i + 1) / n)
    clock.now = start + seconds
    b.throttled(Ticket(clock.now - 0.1, probe=False), clock.now)


def test_many_calls_answered_between_two_throttles_measure_the_share_sooner() -> None:
    # A bucket raised to 50 a second: 25 calls answered in the half second between two
    # throttles count a share of 50 a second, well before the window (a second at the
    # published 5 a second) has passed.
    b, clock = cut_after_climbing(80)
    count_share(b, clock, 50, 0.5)
    assert b.limit == b.measured == pytest.approx(50)
    assert b.rate == pytest.approx(50 * (1 - Tuning().margin))


def test_fewer_calls_answered_too_soon_after_a_throttle_measure_nothing() -> None:
    b, clock = cut_after_climbing(80)
    count_share(b, clock, 38, 0.5)  # 19 calls in half a second: too few to count on
    assert b.measured is None
    assert b.rate == pytest.approx(80 * 0.7 * 0.7)


@pytest.mark.parametrize(("climb", "share", "token"), [(80, 50.0, 1 / 50), (5, 2.5, 1 / 5)])
def test_after_a_throttle_the_next_token_comes_at_the_measured_share_if_above_the_published(
    climb: float, share: float, token: float
) -> None:
    # The share EC2 was counted to give this container between two throttles (50 a second,
    # ten times the published 5) is the account's refill as this container sees it: after the
    # next throttle its next token comes no sooner than a fiftieth of a second later, not a
    # fifth (a fifth would leave ten of EC2's tokens unspent at every throttle). A share below
    # the published rate (another client takes the rest) waits the published token's time.
    b, clock = cut_after_climbing(climb)
    count_share(b, clock, share, 4.0)
    assert b.measured == pytest.approx(share)
    ticket = b.acquire()
    start = clock.now
    b.throttled(ticket, start)  # too soon to measure again: cut, the share stays
    assert b.measured == pytest.approx(share)
    b.acquire()
    # A token's time, or its own pace's if slower (the cut took it below the share).
    assert clock.now - start == pytest.approx(max(token, 1 / b.rate), abs=2e-3)
    if share > 5:
        assert clock.now - start < 0.05  # not the published fifth of a second


def test_above_a_measured_share_probes_wait_150_tokens_of_it() -> None:
    # Above the share, probes come 150 tokens apart (30 s at the published 5 a second): at a
    # measured 50 a second, 3 s, then halving while they are answered, so a sweep of ten
    # seconds finds the margin it keeps below the share, saved up in EC2's bucket.
    b, clock = cut_after_climbing(80)
    count_share(b, clock, 50, 4.0)
    assert b.measured == pytest.approx(50)
    now = clock.now
    probe, now = until_probe(b, now, step=0.001)  # at 95% of the share: a step above it
    b.answered(probe, now)
    assert b.rate == pytest.approx(50)
    waits = []
    for _ in range(2):
        probe, later = until_probe(b, now, step=0.001)
        waits.append(later - now)
        b.answered(probe, later)
        now = later
    assert waits == pytest.approx([3.0, 1.5], abs=0.01)


def test_a_cut_too_soon_to_measure_keeps_the_last_measured_share_to_climb_back_to() -> None:
    # Another client catching up drains the bucket twice in a row: the second cut comes too
    # soon after the first to measure anything, so the share measured before still stands.
    b, _ = bucket()
    first = drain(b, 0.0)
    b.throttled(first[0], 0.1)
    for i in range(10):
        b.answered(Ticket(0.2 + 0.4 * i, probe=False), 0.3 + 0.4 * i)
    b.throttled(Ticket(4.0, probe=False), 4.1)  # measured: 2.5 a second
    b.throttled(Ticket(4.2, probe=False), 4.3)  # 0.2 s later: cut, nothing measured
    assert b.rate == pytest.approx(2.5 * 0.95 * 0.7)
    assert b.limit == pytest.approx(2.5)
    probe, now = until_probe(b, 4.3)
    b.answered(probe, now)  # climbing back towards 95% of 2.5, a twentieth of it at a time
    assert b.rate == pytest.approx(2.5 * 0.95 * 0.7 + 0.125)


def test_after_a_cut_answered_probes_climb_back_below_the_share_then_step_rarely() -> None:
    b, _ = bucket()
    burst = drain(b, 0.0)
    b.throttled(burst[0], 0.1)  # no share measured yet: limit 5, rate 3.5
    assert (b.limit, b.rate) == (5, pytest.approx(3.5))
    now, rates = 0.1, []
    while b.rate < 5 * 0.95 - 1e-9:
        probe, now = until_probe(b, now)
        b.answered(probe, now)
        rates.append(round(b.rate, 2))
    assert rates == [3.75, 4.0, 4.25, 4.5, 4.75]  # a twentieth of the limit per probe
    # At the margin below the share, a probe EC2 answers steps above it ...
    probe, now = until_probe(b, now)
    b.answered(probe, now)
    assert b.rate == pytest.approx(5.0)
    assert b.limit == pytest.approx(5.0)
    # ... and the next one waits 30 s; answered ones in a row double the step and halve the
    # wait (a share measured low is found again in a few probes).
    factors, waits = [], []
    for _ in range(4):
        before, limit = b.rate, b.limit
        probe, later = until_probe(b, now)
        waits.append(later - now)
        b.answered(probe, later)
        factors.append((b.rate - before) / (0.05 * limit))
        now = later
    assert waits == pytest.approx([30, 15, 7.5, 3.75], abs=0.02)
    assert factors == pytest.approx([2, 4, 8, 8])  # doubling, up to 8 times the step
    probe, later = until_probe(b, now)
    b.throttled(probe, later)  # the streak ends with the first throttled probe
    before, limit = b.rate, b.limit
    probe, again = until_probe(b, later)
    b.answered(probe, again)
    assert (b.rate - before) / (0.05 * limit) == pytest.approx(1)


def test_a_bucket_is_short_when_its_burst_is_spent() -> None:
    # ``short`` (what makes a fan-out frugal): fewer than two tokens to spare now.
    b, clock = bucket()
    for _ in range(48):
        b.acquire()
    assert not b.short  # two left
    b.acquire()
    assert b.short
    clock.now += 1.0  # 5 a second: refilled
    assert not b.short


# -- the pacer around a call -----------------------------------------------------------------------


def failing(code: str | None):
    def fn() -> None:
        raise AwsError("CancelCapacityReservation", code, "boom", 503 if code else None)

    return fn


def test_the_call_tells_the_bucket_what_ec2_answered() -> None:
    clock = Clock()
    pacer = Pacer(scale=1.0, clock=clock, sleep=clock.sleep)
    b = pacer.bucket("us-east-1", "CancelCapacityReservation")
    for _ in range(50):
        pacer.call("us-east-1", "CancelCapacityReservation", {}, lambda: None)
    with pytest.raises(AwsError):
        pacer.call("us-east-1", "CancelCapacityReservation", {}, failing("RequestLimitExceeded"))
    assert b.counts["throttled"] == 1
    with pytest.raises(AwsError):  # a timeout: no answer, nothing learnt (the probe is back)
        pacer.call("us-east-1", "CancelCapacityReservation", {}, failing(None))
    with pytest.raises(AwsError):  # an answer that is not a throttle: EC2 had a token
        pacer.call("us-east-1", "CancelCapacityReservation", {}, failing("IncorrectState"))

    def broken() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):  # not an AWS answer at all: nothing learnt either
        pacer.call("us-east-1", "CancelCapacityReservation", {}, broken)
    assert b.counts["throttled"] == 1
    assert not b._probe_out


def test_every_attempt_of_an_adapter_call_goes_through_the_roots_pacer() -> None:
    from capacity_broker.adapters.aws import Clients
    from capacity_broker.adapters.ec2.base import Ec2Base

    seen = []

    class Recording(Pacer):
        def call(self, region, action, params, fn, deadline=None):  # type: ignore[override]
            seen.append((region, action, dict(params)))
            return fn()

    answers = [AwsError("DescribeVpcs", "RequestLimitExceeded", "slow down", 503), {"Vpcs": []}]

    def describe_vpcs(**params):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    class Fake(Ec2Base):
        @property
        def _client(self):
            return type("C", (), {"describe_vpcs": staticmethod(describe_vpcs)})()

    # The adapter is handed its pacer (a root hands every EC2 adapter its one pacer).
    ec2 = Fake("eu-west-1", Clients(), Recording(scale=1.0), retry=RetryPolicy(base=0.0))
    assert ec2._call("DescribeVpcs", VpcIds=["vpc-1"]) == {"Vpcs": []}
    # The retry after the throttle waited for the pacer again.
    assert seen == [("eu-west-1", "DescribeVpcs", {"VpcIds": ["vpc-1"]})] * 2
