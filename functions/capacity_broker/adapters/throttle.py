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
- while callers wait for it, and once a few calls at its current rate were answered, it lets
  one **probe** through beyond its own bucket. A probe EC2 answers is evidence of more room:
  the rate doubles (until the first throttle) or, after one, climbs back in steps towards the
  share EC2 last allowed, then past it in steps that double while probes keep being answered
  (30 s apart at first at the mutating default, then halving). A probe EC2 throttles changes
  nothing but the time to the next probe, which doubles (up to 30 s): when the bucket is
  what was assumed, probing costs one throttled call now and then;
- a throttle of a call paced inside the bucket means the bucket is smaller than assumed or
  someone else takes from it. The calls EC2 let through since the last such throttle measure
  our share of the bucket's refill (the bucket was empty at both ends), and the pace drops just
  below it; too soon after the last one to measure, it drops by 30% and climbs back to the
  share measured before. Calls sent before a cut do not cut again.

With a state table, the buckets of every process of the account and region also take their
tokens from one ledger there (``dynamodb_budget``): a bucket then holds only what it leased,
a few tokens at a time, instead of starting with EC2's whole burst, and everything above
(the pace, the cuts, the probes) still adapts to what EC2 answers this process. A probe is
spent beyond the ledger (``overdraw``): the others wait one token longer. When the table
cannot be asked the bucket refills on its own, as without a table. Where the two meet:

- a busy ledger *books* the caller's own slot (a ``Slot``), no later than its call's deadline,
  and the caller waits for it on its own clock and sends (no other ask, no race with the other
  waiters, each thread in the account's queue on its own);
- an idle ledger grants a batch; when two tokens are left, and the call is one of a run (the
  bucket's previous call less than ``hold_s`` before it), the next batch is leased ahead, on
  a daemon thread, so a lone caller's calls do not wait for the table; a region's first
  call (a describe, as a rule), or a probe about to ask EC2 while its client is made
  (``Pacer.warm``), starts the leases of the buckets a probe uses first, and its first create
  those of the describes after it (``WARM``), so they overlap (one token each); a scarce
  bucket's (a create's, a cancel's) are otherwise leased two at a time, or one for each call
  waiting, one while the account is crowded, and never after a call for the next one;
- leased tokens kept unspent longer than ``hold_s`` (2 s) are dropped: the ledger
  counted them when it granted them, and spent much later they could meet a bucket the other
  processes have emptied since.

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

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol, TypeVar

from ..domain.errors import RATE_BUDGET_EXHAUSTED, ErrorClass
from .aws import AwsError

T = TypeVar("T")


class Limits(NamedTuple):
    """A token bucket: ``burst`` tokens at most, refilled at ``refill`` tokens a second."""

    burst: float
    refill: float


# EC2's published request buckets (the page above, "Request token bucket sizes and refill rates").
NON_MUTATING = Limits(100, 20)
UNFILTERED_NON_MUTATING = Limits(50, 10)
MUTATING = Limits(50, 5)
NON_MUTATING_PREFIXES = ("Describe", "List", "Search", "Get")
# Smaller bucket when called with neither a filter nor pagination.
UNFILTERED_ACTIONS = frozenset(
    {
        "DescribeInstances",
        "DescribeInstanceStatus",
        "DescribeNetworkInterfaces",
        "DescribeSecurityGroups",
        "DescribeSnapshots",
        "DescribeSpotInstanceRequests",
        "DescribeVolumes",
    }
)
# "Uncategorized actions" with their own sizes, of those the broker calls or may call
# (every other action takes its category's).
OWN_LIMITS: Mapping[str, Limits] = {
    "DescribeCapacityBlockOfferings": Limits(10, 0.15),
    "DescribeCapacityBlockExtensionOfferings": Limits(10, 0.15),
    "PurchaseCapacityBlock": Limits(10, 0.15),
    "PurchaseCapacityBlockExtension": Limits(10, 0.15),
    "CreateLaunchTemplateVersion": Limits(100, 5),
    "ModifyLaunchTemplate": Limits(100, 5),
    "CreateTags": Limits(100, 10),
    "DeleteTags": Limits(100, 10),
    "DescribeInstanceTopology": Limits(1, 1),
    "RunInstances": Limits(5, 2),
    "TerminateInstances": Limits(100, 5),
}
_FILTER_OR_PAGE = ("Filters", "MaxResults", "NextToken")
# A bucket refilled this slowly or slower is scarce: a lease takes two tokens (one, for a
# bucket refilled slower than a token a second), or one for each call waiting for it, this
# many at most, and none is leased after a call for the next one (``AdaptiveBucket``).
SCARCE_REFILL = MUTATING.refill
SCARCE_BATCH = 2
SCARCE_MOST = 5


def bucket_of(action: str, params: Mapping[str, Any] | None = None) -> tuple[str, Limits]:
    """The bucket an EC2 call draws from (its name) and its published default size."""
    own = OWN_LIMITS.get(action)
    if own is not None:
        return action, own
    if not action.startswith(NON_MUTATING_PREFIXES):
        return action, MUTATING
    if action in UNFILTERED_ACTIONS and not any((params or {}).get(k) for k in _FILTER_OR_PAGE):
        return f"{action} (unfiltered)", UNFILTERED_NON_MUTATING
    return action, NON_MUTATING


class Leased(Protocol):
    """What a ledger answers a lease (``dynamodb_budget.Grant``)."""

    @property
    def tokens(self) -> int: ...

    @property
    def wait(self) -> float: ...


class SharedLedger(Protocol):
    """One bucket's tokens shared with every process of the account and region
    (``dynamodb_budget.Ledger``)."""

    def lease(
        self, burst: float, rate: float, horizon: float = 0.0, most: int | None = None
    ) -> Leased | None:
        """Some tokens, ``most`` at most (spendable after ``wait``: a slot booked within
        ``horizon`` seconds), or how long until one; None: pace alone (the ledger is
        unavailable)."""
        ...

    def overdraw(self, rate: float) -> None: ...


class SharedBudget(Protocol):
    """Every bucket's ledger (``dynamodb_budget.BudgetTable``)."""

    def ledger(self, region: str, bucket: str) -> SharedLedger: ...


class Tuning(NamedTuple):
    """How the pacer adapts (the numbers are discussed in docs/performance.md). Durations are
    counted in tokens of the starting rate (5 tokens: 1 s at the mutating default of 5/s, 33 s
    in the Capacity Block bucket), so they scale with the bucket and BROKER_EC2_RATE_SCALE.
    (Named tuples, not dataclasses: every handler imports this module, cold.)"""

    cut: float = 0.7  # rate kept after a throttle of a paced call, before a share is measured
    margin: float = 0.05  # kept below the measured share (what the climb back stops at)
    step: float = 0.05  # growth per answered probe after a throttle, share of the limit
    confirm: int = 5  # paced calls answered at a new rate before the next probe
    window: float = 5  # least time between two throttles to measure the share from
    probe_backoff: float = 5  # time to the next probe after a throttled one, doubling ...
    probe_backoff_max: float = 150  # ... up to this (30 s at 5/s); also the time between
    # probes above the measured share
    floor: float = 0.1  # lowest rate, share of the starting rate
    ceiling: float = 100.0  # highest rate, multiple of the starting rate (a safety bound)
    # Seconds (not tokens) leased tokens are kept unspent before they are dropped: long
    # enough for a probe's lookups, short enough that a warm container's batch is not spent
    # into a bucket the others have emptied since.
    hold_s: float = 2.0
    low: float = 2  # tokens left in hand when the next lease goes out ahead, in the background


# The buckets leased ahead (with a ledger) when a region sees its first call (None) or its
# first call of an action: what a probe calls next, leased while that call is on its way. In
# stages, so a burst's containers do not lease what they will only spend after waiting for
# their creates (leased tokens left unspent are dropped, ``Tuning.hold_s``).
WARM: Mapping[str | None, tuple[str, ...]] = {
    None: (
        "DescribeVpcs",
        "DescribeSubnets",
        "DescribeInstanceTypeOfferings",
        "CreateCapacityReservation",
    ),
    # (Not the cancel's: it comes after the fan-out has decided and the hold is active,
    # often later than ``hold_s``, and its token leased at the first create was dropped.)
    "CreateCapacityReservation": ("DescribeCapacityReservations",),
}


# How far ahead a caller without a nearer deadline books its slot on a busy ledger.
HORIZON_S = 30.0


# How long, at most, a caller that ran dry waits for a lease ahead still on its way before it
# leases in line (and half of what is left to its deadline at most). A lease takes the table's
# round trip, and a busy table's is long: 1.7 s while a class of 200 arrives. Waiting 1 s, a
# leader's three look-ups each gave up on the lease ahead and leased in line beside it, a
# second round trip on the same busy table under the bucket's lock: 4.9 s for its look-ups,
# 1.9 s waiting it out.
# (Waited for, not polled: a poll every 2 ms took a burst's CPU.)
AHEAD_WAIT_S = 5.0


def in_background(run: Callable[[], None]) -> None:
    """Run a lease ahead on a daemon thread (it never holds a request open)."""
    threading.Thread(target=run, name="ec2-budget-lease", daemon=True).start()


class Slot(float):
    """Seconds until a slot booked on the shared ledger for this caller: its call goes then,
    without asking again (``AdaptiveBucket.acquire``)."""


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
        ledger: SharedLedger | None = None,
        ahead: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.tuning = tuning or Tuning()
        self.burst = max(1.0, limits.burst)
        self.start = limits.refill * scale
        self.rate = self.start
        # Alone, a bucket starts full, as EC2's does; sharing a ledger, with what it leases.
        self.ledger = ledger
        self.tokens = self.burst if ledger is None else 0.0
        # Sharing a ledger: at most this many tokens per lease (None: the ledger's batch). A
        # scarce bucket's (a create's or a cancel's, 5 a second for the whole account) are
        # leased two at a time, or one for each call waiting for the bucket (``_most``): a
        # batch leased for a probe that then needs fewer is dropped unspent after
        # ``hold_s``, and the others wait for it (in a mixed class of 50, 102 cancel tokens
        # were leased for 40 cancels, 5 at a time). But a lone probe's creates after its first
        # and its cancels come in turns a few milliseconds apart (the fan-out's next subnets,
        # its two holds), not waiting together, and leased one at a time each waited for a
        # round trip to the table of its own (12 updates for 15 calls, 10 with two). A token
        # of two left unspent is one of the 40 an idle ledger holds; a busier one grants
        # fewer (half of what it held, ``BudgetTable``), and one at a time while the account
        # is crowded. A Capacity Block action's bucket refills 0.15 a second: a token left
        # unspent there is 7 s of the account's, so one at a time. A describe's bucket is 20
        # a second: a batch there saves round trips to the table and costs the others little.
        self.scarce = limits.refill <= SCARCE_REFILL
        self.most: int | None = (SCARCE_BATCH if limits.refill >= 1 else 1) if self.scarce else None
        self._waiting = 0  # callers in ``acquire`` (``waiting``)
        self._waiting_lock = threading.Lock()
        # Sharing a ledger: how a lease ahead is run (a daemon thread), whether one is out,
        # when tokens were last leased.
        self._ahead = ahead or in_background
        self._ahead_out = False
        self._ahead_done = threading.Event()  # set while no lease ahead is on its way
        self._ahead_done.set()
        self._idle = True  # the last lease got tokens free at once: the next may go ahead
        self._ledger_down = False  # the last lease could not ask the ledger: alone for now
        self._leased_at = -math.inf
        self._took_at = -math.inf  # when a call last took a token (``try_take``)
        self.limit: float | None = None  # our share of EC2's bucket, once a throttle showed it
        self._clock = clock
        self._sleep = sleep
        self._stamp = clock()
        self._asked = self._stamp  # when the ledger was last asked
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
        self._hold = self.tuning.hold_s
        self._backoff = self._backoff_min
        self._streak = 0  # probes above the measured share answered in a row
        self._lock = threading.Lock()
        self.counts = {"paced": 0, "probes": 0, "answered": 0, "throttled": 0, "cuts": 0}

    # -- admission ------------------------------------------------------------------------
    def _alone(self, now: float, since: float) -> float:
        """The tokens a bucket alone would have at ``now``, refilled at its rate since ``since``."""
        return min(self.burst, self.tokens + max(0.0, now - since) * self.rate)

    def _kept(self, now: float) -> float:
        """Sharing a ledger: the tokens still spendable at ``now``. Those kept unspent longer
        than ``hold_s`` are not (the ledger counted them when it granted them: spent much
        later they could meet a bucket others have emptied since)."""
        return 0.0 if now - self._leased_at > self._hold else self.tokens

    def _refill(self, now: float) -> None:
        if now > self._stamp:
            if self.ledger is None:
                self.tokens = self._alone(now, self._stamp)
            self._stamp = now

    def _settle(self, now: float) -> None:
        """Sharing a ledger: drop the tokens no longer kept (``_kept``)."""
        self.tokens = self._kept(now)

    def _terms(self) -> tuple[float, float]:
        """The (burst, rate) this bucket leases with. Every process must read the ledger with
        one window (a full bucket's time, ``burst / start``: where a booked slot's token may
        be spent), so a token costs a process ``1 / rate`` of it at the pace EC2 allows it,
        never less than at the starting rate: a throttled process leases more slowly, and
        room above the starting rate is taken by the probes (overdrawn), not by the leases.

        The window is a full bucket's less ``hold_s``: a token leased free now may be spent
        up to ``hold_s`` later (``_kept``), so the tokens leased over the last ``hold_s`` can
        reach EC2 together, and a ledger read with EC2's whole burst would let them ask for
        more than EC2's bucket holds (40 of a create's 50 here)."""
        rate = min(self.rate, self.start)
        return max(1.0, self.burst - self.start * self._hold) * rate / self.start, rate

    def _lease(self, now: float, deadline: float | None) -> float:
        """Out of tokens with a ledger: lease some (0.0), book the caller's own slot before the
        deadline (a ``Slot``), or the seconds until the ledger may have one. A ledger that
        cannot be asked refills the bucket as if alone since it was last asked."""
        assert self.ledger is not None
        horizon = HORIZON_S if deadline is None else min(max(0.0, deadline - now - 1e-3), HORIZON_S)
        grant = self.ledger.lease(*self._terms(), horizon, most=self._most())
        if grant is None:
            self.tokens = max(self.tokens, self._alone(now, self._asked))
            self._leased_at = now  # (refilled here, not leased: nothing to drop)
            wait = 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate
        elif grant.tokens and grant.wait > 0:
            # A busy ledger's slot (one token): the caller's own, not the bucket's, so each
            # waiting thread books its own place in the account's queue.
            wait = Slot(grant.wait)
        else:
            self.tokens += grant.tokens
            self._leased_at = now
            wait = 0.0 if self.tokens >= 1 else grant.wait
            if (
                not grant.tokens
                and grant.wait > horizon
                and (deadline is None or deadline - now > HORIZON_S)
            ):
                # Refused past the horizon, with time to wait: ask again when the queue is
                # within it (with a deadline inside the horizon, the wait says "never"). A
                # lease that lost its races, or ran out of its time, says a token's time: asked
                # again at once, each ask would be another round trip to a table that is slow.
                wait = max(grant.wait - horizon, 1e-3)
        # A busy ledger books slots in line; only an idle one is leased from ahead of need
        # (a lease ahead that finds no token free is a round trip for nothing).
        self._idle = grant is not None and grant.tokens > 0 and grant.wait <= 0
        self._ledger_down = grant is None
        self._asked = now
        return wait

    def _most(self) -> int | None:
        """The most tokens a lease in line asks for: a scarce bucket's batch, or one for each
        caller waiting for it (itself included), ``SCARCE_MOST`` at most."""
        if not self.scarce or self.most is None:
            return self.most
        return max(self.most, min(self._waiting, SCARCE_MOST))

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """A caller waits for this bucket (``acquire``): while it does, a scarce bucket's
        lease takes a token for it too."""
        with self._waiting_lock:
            self._waiting += 1
        try:
            yield
        finally:
            with self._waiting_lock:
                self._waiting -= 1

    def lease_ahead(self) -> None:
        """Sharing a ledger: lease one token now, in the background, unless some are in
        hand, booked or on their way (a new container's first call then finds it leased; one,
        not a batch: in a burst, a batch leased before its calls are due is left unspent)."""
        with self._lock:
            now = self._clock()
            self._settle(now)
            start = self._start_ahead(now, need=1)
        if start:
            self._ahead(lambda: self._leased_ahead(most=1))

    def _start_ahead(self, now: float, need: float) -> bool:
        if self.ledger is None or self._ahead_out or self.tokens >= need:
            return False
        if not self._idle:
            return False
        self._ahead_out = True
        self._ahead_done.clear()
        return True

    def _leased_ahead(self, most: int | None = None) -> None:
        """A lease ahead (its own thread): only tokens free now, never a slot booked ahead
        (no caller waits for it)."""
        assert self.ledger is not None
        grant = None
        try:
            grant = self.ledger.lease(*self._terms(), most=most or self.most)
        finally:
            with self._lock:
                self._ahead_out = False
                self._ahead_done.set()
                self._idle = grant is not None and grant.tokens > 0 and grant.wait <= 0
                self._ledger_down = grant is None
                if grant is not None and grant.tokens and grant.wait <= 0:
                    now = self._clock()
                    self._settle(now)
                    self.tokens += grant.tokens
                    self._leased_at = now

    def try_take(self, now: float, deadline: float | None = None) -> Ticket | float:
        """A ticket if a call may go now, else the seconds to wait before asking again, or
        (sharing a busy ledger) a ``Slot``: the seconds until the caller's own booked slot,
        when its call goes without asking again. ``deadline`` (this clock): no slot is booked
        beyond it."""
        with self._lock:
            got = self._try_take(now, deadline)
            # A scarce bucket's next token is leased when a call needs it, not after a call:
            # most probes make their last create or cancel with the token in hand, and one
            # leased after it would be dropped unspent. Nor is a bucket's next batch leased
            # after a call that is not one of a run (its previous call longer than ``hold_s``
            # ago): a probe makes each look-up once, and in a class of 100 the batches
            # leased after them were dropped unspent (a describe's ledger leased three tokens
            # for each call, and the others waited for them).
            running = now - self._took_at <= self._hold
            if isinstance(got, Ticket):
                self._took_at = now
            elif isinstance(got, Slot):
                self._took_at = now + got  # (its call goes at its slot)
            ahead = (
                isinstance(got, Ticket)
                and running
                and not self.scarce
                and self._start_ahead(now, need=self.tuning.low)
            )
        if ahead:
            self._ahead(self._leased_ahead)
        return got

    def _try_take(self, now: float, deadline: float | None) -> Ticket | float:
        self._refill(now)
        shared_wait = None
        # Sharing a ledger, a call whose deadline has passed asks the ledger nothing and is
        # no probe (no slot can come in time: in a collapsed class of 200 such leases were
        # 215 of the table's); a ledger that cannot be asked refills the bucket as before.
        late = (
            self.ledger is not None
            and not self._ledger_down
            and deadline is not None
            and now >= deadline
        )
        if self.ledger is not None:
            self._settle(now)
            if self.tokens < 1 and not late:
                shared_wait = self._lease(now, deadline)
                if isinstance(shared_wait, Slot):
                    self.counts["paced"] += 1
                    return shared_wait
        if self.tokens >= 1:
            self.tokens -= 1
            self.counts["paced"] += 1
            return Ticket(now, probe=False)
        may_probe = not late and not self._probe_out and self._confirmed >= self.tuning.confirm
        if may_probe and now >= self._next_probe:
            self._probe_out = True
            self.counts["probes"] += 1
            if self.ledger is not None:
                self.ledger.overdraw(self._terms()[1])
            return Ticket(now, probe=True)
        wait = (1 - self.tokens) / self.rate if shared_wait is None else shared_wait
        if may_probe:
            wait = min(wait, self._next_probe - now)
        return max(wait, 1e-3)

    @property
    def short(self) -> bool:
        """No token to spare now: fewer than two in hand, and (sharing a ledger) the last
        lease found the account's bucket busy (a slot booked in line, or nothing free). A
        bucket that has made no call yet is not short: it knows nothing of the others. A
        ledger that could not be asked is a bucket alone (what its next call does). Reads
        only: the bucket's state is what its calls left."""
        with self._lock:
            now = self._clock()
            if self.ledger is None:
                return self._alone(now, self._stamp) < 2
            if self._ledger_down:
                return self._alone(now, self._asked) < 2
            return not self._idle and self._kept(now) < 2

    def acquire(self, deadline: float | None = None) -> Ticket:
        """Wait for a ticket; ``NoToken`` if none can come before ``deadline`` (this clock)."""
        with self.waiting():
            return self._acquire(deadline)

    def _acquire(self, deadline: float | None) -> Ticket:
        while True:
            if self._ahead_out and self.tokens < 1:
                # A lease ahead is on its way: wait for it (a real wait on its round trip,
                # not a poll) rather than lease beside it (both would guess the ledger idle,
                # and one would be a failed condition); for half the caller's time at most, so
                # that a lease ahead that does not come back leaves it time to lease in line.
                left = AHEAD_WAIT_S if deadline is None else (deadline - self._clock()) / 2
                self._ahead_done.wait(min(AHEAD_WAIT_S, max(0.0, left)))
            now = self._clock()
            got = self.try_take(now, deadline)
            if isinstance(got, Ticket):
                return got
            if isinstance(got, Slot):
                self._sleep(got)  # (booked before the deadline: the call goes at its slot)
                return Ticket(self._clock(), probe=False)
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
                self._next_probe = now + self._backoff_max / 2**self._streak
                self._streak = min(self._streak + 1, 3)
            self.rate = min(self.rate, self.start * self.tuning.ceiling)
            self._changed(now)

    def throttled(self, ticket: Ticket, now: float | None = None) -> None:
        """EC2 answered ``RequestLimitExceeded`` (or another throttling code)."""
        with self._lock:
            now = self._clock() if now is None else now
            self._refill(now)
            self.counts["throttled"] += 1
            self.tokens = min(self.tokens, 0.0)  # EC2's bucket is empty right now
            if ticket.probe:
                # No token to spare: the bucket is as assumed. The pace stays, the climb (if
                # any) ends here, and the next probe waits longer.
                self._probe_out = False
                self._streak = 0
                if self.limit is not None and self.rate < self._target():
                    self.limit = self.rate / (1 - self.tuning.margin)
                self._next_probe = now + self._backoff
                self._backoff = min(self._backoff * 2, self._backoff_max)
                return
            if ticket.sent < self._last_cut:
                return  # sent at the old rate: that round of calls was answered already
            # Between two throttles EC2's bucket was empty at both ends: what it let through in
            # between is what refilled for us, i.e. our share of its rate (a lower bound if the
            # bucket overflowed meanwhile, which it cannot while we keep it busy).
            elapsed = now - self._last_cut if self.limit is not None else 0.0
            if elapsed >= self._window and self._answered_since_cut >= 3:
                self.limit = min(self._answered_since_cut / elapsed, self.rate)
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
    a root (``root.Root``: one pacer per root, so per Lambda container); with ``shared`` (the
    state table's ledgers) every bucket also draws from its ledger, one per account."""

    def __init__(
        self,
        scale: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        tuning: Tuning | None = None,
        shared: SharedBudget | None = None,
        stages: Mapping[str | None, tuple[str, ...]] = WARM,
        ahead: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"the rate scale must be a number greater than 0, not {scale!r}")
        self.scale = scale
        self.tuning = tuning
        # The account's ledgers (the state table's), or None: this pacer alone.
        self.shared = shared
        # With a ledger: the buckets leased ahead when a flow is about to call a region
        # (``warm``) or its first call of an action is made, and how a lease ahead runs
        # (None: on a daemon thread).
        self.stages = stages
        self._ahead = ahead
        self._warmed: set[tuple[str, str | None]] = set()  # (region, action; None: any)
        self._clock = clock
        self._sleep = sleep
        self._buckets: dict[tuple[str, str], AdaptiveBucket] = {}
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Start again at EC2's published defaults (what a new container's pacer knows): the
        benchmarks' fresh start before each timed run, on a container that is warm otherwise."""
        with self._lock:
            self._buckets.clear()
            self._warmed.clear()

    def bucket(
        self, region: str, action: str, params: Mapping[str, Any] | None = None
    ) -> AdaptiveBucket:
        found = self._buckets.get((region, bucket_of(action, params)[0]))
        if found is not None and (self.shared is None or (region, action) in self._warmed):
            return found
        with self._lock:
            found = self._made(region, action, params)
            warm = self._to_warm(region, (None, action))
        # A region's first call (a describe, as a rule) starts the leases of the buckets the
        # next calls draw from, so they overlap with it instead of waiting ahead of them (its
        # own bucket leases in line: the call is on its way now).
        for bucket in warm:
            if bucket is not found:
                bucket.lease_ahead()
        return found

    def warm(self, region: str) -> None:
        """A flow is about to call EC2 in ``region`` (a probe that will ask EC2, while its
        client is made): the leases of the buckets its first calls draw from go out now, on
        their own threads, instead of in line ahead of its first call. Once per region, and
        only with a ledger (nothing to lease without one)."""
        with self._lock:
            warm = self._to_warm(region, (None,))
        for bucket in warm:
            bucket.lease_ahead()

    def _to_warm(self, region: str, triggers: tuple[str | None, ...]) -> list[AdaptiveBucket]:
        """The buckets to lease ahead for ``triggers`` not met before in ``region`` (under the
        lock): a region's first call (None), a first call of an action."""
        warm: list[AdaptiveBucket] = []
        for trigger in triggers:
            if self.shared is not None and (region, trigger) not in self._warmed:
                self._warmed.add((region, trigger))
                warm += [self._made(region, a) for a in self.stages.get(trigger, ())]
        return warm

    def _made(
        self, region: str, action: str, params: Mapping[str, Any] | None = None
    ) -> AdaptiveBucket:
        name, limits = bucket_of(action, params)
        key = (region, name)
        found = self._buckets.get(key)
        if found is None:
            ledger = self.shared.ledger(region, name) if self.shared else None
            found = self._buckets[key] = AdaptiveBucket(
                limits, self.scale, self._clock, self._sleep, self.tuning, ledger, self._ahead
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
