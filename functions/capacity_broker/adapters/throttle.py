"""Client-side pacing at EC2's request rates, adapted to the account's real buckets.

EC2 throttles each API action on its own, per account and region, with a token bucket: a
burst, then a steady refill ("Request throttling for the Amazon EC2 API",
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/throttling.html). The page publishes
the defaults per category (non-mutating ``Describe*``/``List*``/``Search*``/``Get*``: 100, 20/s;
a few unfiltered and unpaginated describes: 50, 10/s; mutating: 50, 5/s) and for actions with
their own sizes (the Capacity Block actions: 10, 0.15/s). Accounts get them raised on request,
and every tool of the account draws from the same buckets, so the defaults are where pacing
starts, not what it must stay at.

Each (region, bucket) of a container has one ``AdaptiveBucket``, shared by its threads:

- it starts at the published default (``scale``, the settings' ``BROKER_EC2_RATE_SCALE``,
  multiplies the refill rate), and
  paces inside it until EC2 shows more room;
- while callers wait for it, and once calls at its current rate were answered (one until the
  first throttle, five after), it lets one **probe** through beyond its own bucket. A probe
  EC2 answers is evidence of more room: the rate doubles (until the first throttle: every
  round trip, as TCP's slow start) or, after one, climbs back in steps towards the share EC2
  last allowed, then past it in steps that double while probes keep being answered (150
  tokens of the share apart at first: 30 s at the mutating default, then halving). A probe EC2
  throttles changes no share, and the next probe waits twice as long (up to 30 s): when the
  bucket is what was assumed, probing costs one throttled call now and then;
- a throttle of a call paced inside the bucket means the bucket is smaller than assumed or
  someone else takes from it. The calls EC2 let through since the last such throttle measure
  our share of the bucket's refill (the bucket was empty at both ends), and the pace drops just
  below it; too soon after the last one to measure (less than 5 tokens' time at the published
  rate and fewer than 20 calls answered), it drops by 30% and climbs back to the share
  measured before. Calls sent before a cut do not cut again.

An EC2 throttling answer (``RequestLimitExceeded`` and the other codes ``domain.errors``
classifies as throttles) says the account's bucket is spent, whoever spent it: the container's
own bucket drops to zero tokens, and its next token comes no sooner than EC2's published refill
for that bucket (times ``scale``) brings one, or the share EC2 was counted to give this
container between two throttles if that is larger, so a container that is throttled slows to
what the account's bucket refills instead of retrying at its own burst (``throttled``). This is how
a class whose probes do not meet in a group (each container pacing alone, with EC2's whole
burst in hand) stays near EC2's one bucket once EC2 says it is empty.

botocore's adaptive retry mode (``botocore/retries/adaptive.py``, ``throttling.py``,
``bucket.py``) was read and not reused: its limiter stays off until the first throttle (a
sweep first bursts past the bucket), its token bucket holds one second of its rate where EC2's
holds ten, its CUBIC curve has an absolute constant (0.4 calls/s^3) that probes past a bucket
of a few calls a second every few seconds, and its ``TokenBucket`` waits on the real clock. A
model of the benchmark's three cases (``python -m bench.pacing_model``) with botocore's own
``CubicCalculator`` and ``RateClocker`` gave 2.0x the bound under a bucket 10x the default and
17% throttled calls with half the bucket taken, against 1.02x and 1.3% for this pacer.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from ..domain.buckets import Limits, bucket_of
from ..domain.errors import RATE_BUDGET_EXHAUSTED, ErrorClass
from .aws import AwsError

T = TypeVar("T")


class Tuning(NamedTuple):
    """How the pacer adapts (the numbers are discussed in docs/performance.md). Durations are
    counted in tokens of the starting rate (5 tokens: 1 s at the mutating default of 5/s, 33 s
    in the Capacity Block bucket), so they scale with the bucket and BROKER_EC2_RATE_SCALE.
    (Named tuples, not dataclasses: every handler imports this module, cold.)"""

    cut: float = 0.7  # rate kept after a throttle of a paced call, before a share is measured
    margin: float = 0.05  # kept below the measured share (what the climb back stops at)
    step: float = 0.05  # growth per answered probe after a throttle, share of the limit
    confirm: int = 5  # paced calls answered at a new rate before the next probe
    confirm_start: int = 1  # ... before the next doubling, while no throttle was seen (the
    # slow start: a bucket raised tenfold is found in 4 round trips, not in 2 s)
    window: float = 5  # least time between two throttles to measure the share from ...
    measure_calls: int = 20  # ... unless at least this many calls were answered in between
    probe_backoff: float = 5  # time to the next probe after a throttled one, doubling ...
    probe_backoff_max: float = 150  # ... up to this (30 s at 5/s); also the time between
    # probes above the measured share, in tokens of it (``AdaptiveBucket._tick``)
    floor: float = 0.1  # lowest rate, share of the starting rate
    ceiling: float = 100.0  # highest rate, multiple of the starting rate (a safety bound)


class NoToken(Exception):
    """The bucket, at the pace EC2 allows this container, has no token before the deadline."""

    def __init__(self, late: float) -> None:
        super().__init__(f"no token before the deadline (the next one is {late:.2f} s late)")


class Ticket(NamedTuple):
    """One admitted call: when it was let through, and whether it was a probe."""

    sent: float
    probe: bool


class AdaptiveBucket:
    """One EC2 bucket as this container sees it: a token bucket whose rate follows what EC2
    answers. ``try_take`` and the answers take "now" as an argument (tests drive the clock);
    ``acquire`` waits with the clock and sleep it was given."""

    def __init__(
        self,
        limits: Limits,
        scale: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        tuning: Tuning | None = None,
    ) -> None:
        self.tuning = tuning or Tuning()
        self.burst = max(1.0, limits.burst)
        # The published refill (times the rate scale): where the pace starts, and how soon a
        # throttled bucket's next token comes at the earliest (``throttled``).
        self.start = limits.refill * scale
        self.rate = self.start
        self.tokens = self.burst  # a bucket starts full, as EC2's does
        self.limit: float | None = None  # our share of EC2's bucket, once a throttle showed it
        self.measured: float | None = None  # that share as last counted between two throttles
        self._clock = clock
        self._sleep = sleep
        self._stamp = clock()
        self._last_cut = -math.inf
        self._answered_since_cut = 0
        # Paced calls EC2 answered since the rate last changed: a probe waits for ``confirm``.
        self._changed_at = -math.inf
        self._confirmed = 0
        self._probe_out = False
        self._next_probe = -math.inf
        # The tuning's durations in seconds, at this bucket's starting rate.
        tick = 1 / self.start
        self._window = self.tuning.window * tick
        self._backoff_min = self.tuning.probe_backoff * tick
        self._backoff_max = self.tuning.probe_backoff_max * tick
        self._backoff = self._backoff_min
        self._streak = 0  # probes above the measured share answered in a row
        self._lock = threading.Lock()
        self.counts = {"paced": 0, "probes": 0, "answered": 0, "throttled": 0, "cuts": 0}

    # -- admission ------------------------------------------------------------------------
    def _alone(self, now: float, since: float) -> float:
        """The tokens the bucket holds at ``now``, refilled at its rate since ``since``."""
        return min(self.burst, self.tokens + max(0.0, now - since) * self.rate)

    def _refill(self, now: float) -> None:
        if now > self._stamp:
            self.tokens = self._alone(now, self._stamp)
            self._stamp = now

    def try_take(self, now: float) -> Ticket | float:
        """A ticket if a call may go now, else the seconds to wait before asking again."""
        with self._lock:
            self._refill(now)
            if self.tokens >= 1:
                self.tokens -= 1
                self.counts["paced"] += 1
                return Ticket(now, probe=False)
            confirm = self.tuning.confirm if self.limit is not None else self.tuning.confirm_start
            may_probe = not self._probe_out and self._confirmed >= confirm
            if may_probe and now >= self._next_probe:
                self._probe_out = True
                self.counts["probes"] += 1
                return Ticket(now, probe=True)
            wait = (1 - self.tokens) / self.rate
            if may_probe:
                wait = min(wait, self._next_probe - now)
            return max(wait, 1e-3)

    @property
    def short(self) -> bool:
        """No token to spare now: fewer than two in hand. Reads only: the bucket's state is
        what its calls left."""
        with self._lock:
            return self._alone(self._clock(), self._stamp) < 2

    def acquire(self, deadline: float | None = None) -> Ticket:
        """Wait for a ticket; ``NoToken`` if none can come before ``deadline`` (this clock)."""
        while True:
            now = self._clock()
            got = self.try_take(now)
            if isinstance(got, Ticket):
                return got
            if deadline is not None and now + got >= deadline:
                raise NoToken(now + got - deadline)
            self._sleep(got)

    # -- what EC2 answered ------------------------------------------------------------------
    def _target(self) -> float:
        """The rate to climb back to after a throttle: just below our measured share."""
        assert self.limit is not None
        return self.limit * (1 - self.tuning.margin)

    def answered(self, ticket: Ticket, now: float | None = None) -> None:
        """EC2 answered without throttling (an error other than a throttle counts: the call
        had its token)."""
        with self._lock:
            self._answered_since_cut += 1
            if not ticket.probe:
                if ticket.sent >= self._changed_at:
                    self._confirmed += 1
                return
            now = self._clock() if now is None else now
            self._refill(now)
            self._probe_out = False
            self.counts["answered"] += 1
            self._backoff = self._backoff_min
            if self.limit is None:
                # No throttle seen yet: double, as TCP's slow start does.
                self.rate *= 2
                self._next_probe = now
            elif self.rate < self._target():
                # Climbing back after a cut: EC2 had a token to spare, so we are below our share.
                self.rate = min(self.rate + self.tuning.step * self.limit, self._target())
                self._next_probe = now
            else:
                # Room above our share: the bucket was raised or another client left. Step up,
                # and probe again only after a while (a token to spare may also be the margin
                # we keep below our share, saved up in EC2's bucket).
                # Each answer in a row doubles the step and halves the wait (a share that was
                # measured low, or has grown, is found again in a few probes).
                self.rate += self.tuning.step * self.limit * 2**self._streak
                self.limit = max(self.limit, self.rate)
                wait = self.tuning.probe_backoff_max * self._tick()
                self._next_probe = now + wait / 2**self._streak
                self._streak = min(self._streak + 1, 3)
            self.rate = min(self.rate, self.start * self.tuning.ceiling)
            self._changed(now)

    def throttled(self, ticket: Ticket, now: float | None = None) -> None:
        """EC2 answered ``RequestLimitExceeded`` (or another throttling code)."""
        with self._lock:
            now = self._clock() if now is None else now
            self._refill(now)
            self.counts["throttled"] += 1
            if ticket.probe:
                self._probe_throttled(now)
            elif ticket.sent >= self._last_cut:
                self._cut(now)  # (one sent before the last cut is of a round answered already)
            # Whatever the pace: the account's bucket is spent (EC2 said so, whoever spent it),
            # so this one holds no token either, and its next token comes no sooner than EC2's
            # published refill brings one, or the share EC2 was counted to give this container
            # if larger (``_tick``; a debt when the pace is above it, which only answered
            # probes raise it to). A throttled container then waits a token's time for
            # its next call, its retry's too, instead of spending its own burst into a bucket
            # that is empty for every container of the account. Its pace after that token is
            # the one above: capped for good at the published rate, a bucket raised for the
            # account would be found again only probe by probe (1.54x the bound, not 1.02x, in
            # ``bench.pacing_model``'s bucket 10x the default).
            self.tokens = min(0.0, 1 - self.rate * self._tick())

    def _probe_throttled(self, now: float) -> None:
        """A probe EC2 throttled: no token to spare, the bucket is as assumed. The share
        stays, the climb (if any) ends here, and the next probe waits longer."""
        self._probe_out = False
        self._streak = 0
        if self.limit is not None and self.rate < self._target():
            self.limit = self.rate / (1 - self.tuning.margin)
        self._next_probe = now + self._backoff
        self._backoff = min(self._backoff * 2, self._backoff_max)

    def _cut(self, now: float) -> None:
        """A paced call EC2 throttled: the pace was too fast for our share."""
        # Between two throttles EC2's bucket was empty at both ends: what it let through in
        # between is what refilled for us, i.e. our share of its rate (a lower bound if the
        # bucket overflowed meanwhile, which it cannot while we keep it busy). Twenty calls
        # count it to about a tenth, however short the time (a bucket raised tenfold answers
        # them in 0.4 s): cutting by 30% instead, round after round, only throttles more.
        elapsed = now - self._last_cut if self.limit is not None else 0.0
        answered = self._answered_since_cut
        if (
            answered >= 3
            and elapsed > 0
            and (elapsed >= self._window or answered >= self.tuning.measure_calls)
        ):
            self.limit = self.measured = min(answered / elapsed, self.rate)
            rate = self._target()
        else:
            # Too soon to measure: cut, and keep the last measured share (if any) as where
            # the climb back goes; probes will show if it is still there.
            self.limit = max(self.limit or 0.0, self.rate)
            rate = self.rate * self.tuning.cut
        self.rate = max(rate, self.start * self.tuning.floor)
        self._answered_since_cut = 0
        self._streak = 0
        self._last_cut = now
        self._changed(now)
        self.counts["cuts"] += 1

    def _tick(self) -> float:
        """A token's time in the account's bucket as this container knows it: at EC2's
        published refill, or at the share EC2 was counted to give it between two throttles if
        larger (a bucket raised for the account). The wait after a throttle, and the time
        between probes above the share (in tokens of it), are counted in it: at the published
        tick, a bucket raised tenfold would leave ten of EC2's tokens unspent at each throttle,
        and probe once per 1,500 calls."""
        return 1 / max(self.start, self.measured or 0.0)

    def _changed(self, now: float) -> None:
        self._changed_at = now
        self._confirmed = 0

    def unanswered(self, ticket: Ticket) -> None:
        """No answer (a timeout, a dropped connection): nothing learnt."""
        with self._lock:
            if ticket.probe:
                self._probe_out = False


class Pacer:
    """One ``AdaptiveBucket`` per (region, bucket), shared by every thread and EC2 adapter of
    a root (``root.Root``: one pacer per root, so per Lambda container)."""

    def __init__(
        self,
        scale: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        tuning: Tuning | None = None,
    ) -> None:
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"the rate scale must be a number greater than 0, not {scale!r}")
        self.scale = scale
        self.tuning = tuning
        self._clock = clock
        self._sleep = sleep
        self._buckets: dict[tuple[str, str], AdaptiveBucket] = {}
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Start again at EC2's published defaults (what a new container's pacer knows): the
        benchmarks' fresh start before each timed run, on a container that is warm otherwise."""
        with self._lock:
            self._buckets.clear()

    def bucket(
        self, region: str, action: str, params: Mapping[str, Any] | None = None
    ) -> AdaptiveBucket:
        name, limits = bucket_of(action, params)
        key = (region, name)
        with self._lock:
            found = self._buckets.get(key)
            if found is None:
                found = self._buckets[key] = AdaptiveBucket(
                    limits, self.scale, self._clock, self._sleep, self.tuning
                )
            return found

    def short(self, region: str, action: str) -> bool:
        """Whether ``action``'s bucket in ``region`` has no token to spare (``AdaptiveBucket.
        short``); a bucket not made yet is not."""
        found = self._buckets.get((region, bucket_of(action)[0]))
        return found is not None and found.short

    def acquire(
        self,
        region: str,
        action: str,
        params: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> tuple[AdaptiveBucket, Ticket]:
        bucket = self.bucket(region, action, params)
        try:
            return bucket, bucket.acquire(deadline)
        except NoToken as late:
            # Not an answer from EC2 (nothing was sent): the broker's own rate budget ran out
            # before the call's deadline, and says so in its own words (contract v3); the
            # retry loop stops on it, as no pause within that deadline can bring a token.
            raise AwsError(
                action, RATE_BUDGET_EXHAUSTED, f"paced by this container: {late}"
            ) from late

    def now(self) -> float:
        """The root's clock, on which the pacer's and its callers' deadlines are read."""
        return self._clock()

    def call(
        self,
        region: str,
        action: str,
        params: Mapping[str, Any],
        fn: Callable[[], T],
        deadline: float | None = None,
    ) -> T:
        """One attempt of an EC2 call: wait for the bucket (up to ``deadline``), make it, tell
        the bucket what EC2 answered. A throttle met here, by a first try or by a retry, is
        what cuts the rate."""
        bucket, ticket = self.acquire(region, action, params, deadline)
        try:
            result = fn()
        except AwsError as error:
            if error.error_class is ErrorClass.THROTTLE:
                bucket.throttled(ticket)
            elif error.code is None:
                bucket.unanswered(ticket)
            else:
                bucket.answered(ticket)
            raise
        except BaseException:
            bucket.unanswered(ticket)
            raise
        bucket.answered(ticket)
        return result
