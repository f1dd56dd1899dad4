"""DynamoDB: EC2's request buckets as one budget per account and region, in the state table.

EC2 throttles per account and region (``adapters.throttle``), so every container, the
cleaner, the Slurm programs and the CLI draw from the same buckets. Each process paces
itself (``AdaptiveBucket``); with a state table they also keep one ledger per (EC2 region,
bucket) and take their tokens from it, so a hundred new containers no longer each start
with EC2's whole burst.

The ledger is GCRA (the "generic cell rate algorithm", a token bucket kept as one number):
``tat``, the time at which the bucket would be full again. With ``T`` = 1 / rate and the
burst ``B``, taking ``k`` tokens at ``now`` moves ``tat`` to ``max(tat, now) + k·T``, and the
tokens may be spent once ``tat − B·T <= now``. DynamoDB has no ``max``, so a lease is an
``UpdateItem`` on one of two cases: the ledger is in use (``tat`` ahead of now, or behind it by
``LAG_S`` at most: ``SET tat = tat + k·T``) or idle (``tat`` further behind, or no item:
``SET tat = now + k·T``, spendable at once). The two conditions are each other's negation, so
an update fails only when the case guessed from the last answer was wrong (the failed
condition returns the item, ``ReturnValuesOnConditionCheckFailure``, which says which case
holds: the second try is right) or when a busy bucket's slot lies beyond the caller's
``horizon``.

Why a lag: in a burst the processes' updates reach the table out of the order of the ``now``
they carry (a request waits its turn on a busy container's CPU, then on the table), and a
ledger the others draw on at about its rate hovers around now. Split at ``tat = now``, each
guess was a coin toss, and so was every retry (the answer it followed was as stale): in a
class of 200, half the leases lost all four tries, and the table served 3,000 updates for
some 300 EC2 calls. A ledger shifted from behind now forgets up to ``LAG_S`` of refill (a
full bucket is full however long it has been idle), so the burst leased against is ``LAG_S``
of tokens smaller (a bucket of a token or two lags less: never more than its burst at once).

A busy bucket's lease *books* the next free slot: ``SET tat = tat + T`` succeeds however far
``tat`` is ahead (up to the horizon, the caller's deadline), and the caller waits on its own
clock until its slot (``Grant.wait``). Every waiter holds a slot of its own, so nobody wakes
with the others to race for the next token: one round trip per token when the bucket is busy.
An idle bucket grants a small batch at once, so a lone caller makes one round trip per few
EC2 calls, and its pacer leases the next batch ahead of need (``throttle.AdaptiveBucket``).

One item per (EC2 region, bucket), under this module's own prefix of the table's ids::

    id          budget#us-east-1#CreateCapacityReservation
    tat         the time the bucket is full again (epoch seconds, the processes' wall clocks)
    expiration  TTL: a day after the last lease

Each process leases at the rate it believes (its ``AdaptiveBucket``'s, adapted to what EC2
answers it): a throttled process leases more slowly, a process whose probe found more room
faster; every lease advances the same ledger.

The budget is advice: a table that cannot be reached (an error that is not a failed
condition, a call past its short deadline) is logged once, and the caller paces on its own
(``lease`` answers None) until ``DOWN_SECONDS`` later. Its calls are retried by the adapter's
``RetryPolicy`` within that short deadline and never make a request fail.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .aws import AwsError, Clients, RetryPolicy, call, failed_item
from .dynamodb_memory import _n

PREFIX = "budget#"
EXPIRATION_SECONDS = 24 * 60 * 60
# How long a lease may take, retries included, before the caller paces on its own.
LEASE_SECONDS = 1.0
DOWN_SECONDS = 60.0  # how long a process paces alone after the table failed it
BATCH = 5  # tokens leased at once when the bucket is idle (a lone caller's round trips)
SKEW_SECONDS = 60.0  # the processes' wall clocks may disagree by this much
ATTEMPTS = 4  # conditional updates per lease (two cases, each may lose a race once)
# How far ahead a busy bucket's slot may be booked (a caller's deadline is usually nearer).
HORIZON_SECONDS = 30.0
# How long a ledger found in use by the others makes this process's next leases guess "in
# use" first (a burst lasts seconds; a lone caller never sees one and always guesses right).
CROWDED_S = 5.0
# How far behind now a ledger's tat may be and still be shifted rather than started afresh
# (the module's docstring): longer than the disorder of the processes' updates in a burst.
LAG_S = 2.0
log = logging.getLogger(__name__)


def item_id(region: str, bucket: str) -> str:
    return f"{PREFIX}{region}#{bucket}"


class Grant(NamedTuple):
    """What a lease got: ``tokens`` (0 or more), spendable ``wait`` seconds from now (0: now;
    more for a booked slot); with no tokens, the seconds until the next slot's token could be
    spent."""

    tokens: int
    wait: float


def grantable(tat: float | None, now: float, burst: float, rate: float) -> tuple[int, float]:
    """The whole tokens the ledger holds at ``now`` and, when none, the seconds to the next."""
    period = 1 / rate
    start = now if tat is None else max(tat, now)
    room = now + burst * period - start  # seconds of refill not yet spoken for
    tokens = math.floor(room / period + 1e-9)
    if tokens >= 1:
        return min(tokens, math.floor(burst)), 0.0
    return 0, max(period - room, 1e-3)


class BudgetTable:
    """The ledgers of one state table (``table`` in ``region``); ``lease`` is thread-safe."""

    def __init__(
        self,
        table: str,
        region: str,
        clients: Clients,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        retry: RetryPolicy | None = None,
        batch: int = BATCH,
    ) -> None:
        self.table = table
        self.region = region
        self.clients = clients
        self.retry = retry or RetryPolicy(base=0.05, cap=0.25, max_attempts=3)
        self.batch = max(1, batch)
        self._clock = clock
        self._monotonic = monotonic
        self._seen: dict[str, float | None] = {}  # per item: its tat at the last answer
        # Until when this process guesses every ledger busy: a failed condition showed one
        # booked ahead by the others (a burst), so a ledger it has not asked for a while, or
        # never, is most likely booked too (``_lease``).
        self._crowded_until = -math.inf
        # Until when no lease ahead of need is made: the probes' meeting saw a burst
        # (``crowd``). (A failed guess alone does not stop them: the ledger it met may still
        # have tokens free.)
        self._burst_until = -math.inf
        # Per item: the tat this process's own last write left (a failed condition that
        # finds it is this process's own threads, not a crowd).
        self._wrote: dict[str, float | None] = {}
        self._down_until = -math.inf
        self._said_down = False
        self._lock = threading.Lock()
        self.counts = {"leases": 0, "updates": 0, "tokens": 0, "down": 0}

    def ledger(self, region: str, bucket: str) -> Ledger:
        """The ledger of EC2 ``region``'s ``bucket`` (what a pacer's bucket is handed)."""
        return Ledger(self, item_id(region, bucket))

    def lease(
        self, key: str, burst: float, rate: float, horizon: float = 0.0, most: int | None = None
    ) -> Grant | None:
        """Tokens of EC2 ``region``'s ``bucket`` (``burst`` at most, refilled at ``rate``):
        a small batch when the bucket is idle, one when others are drawing from it or from
        the account's other buckets (``crowd``, a failed guess that met them);
        None when the table cannot be asked (the caller paces on its own).

        With a ``horizon`` (seconds), a busy bucket's next free slot is *booked* when it comes
        within that time: the grant's ``wait`` says how long until its token may be spent, and
        the caller waits that long on its own clock (no second ask, no race with the others
        waiting: each has its own slot). Without one, only tokens free now are granted.
        ``most``: at most that many tokens (default: the batch)."""
        if self._monotonic() < self._down_until:
            return None
        horizon = min(max(horizon, 0.0), HORIZON_SECONDS)
        if horizon <= 0 and self._clock() < self._burst_until:
            # Only tokens free now (a lease ahead of need), while the others book the ledgers
            # ahead: there are none, and asking would be a round trip for nothing (in a class
            # of 200, 429 of the 681 leases ahead found none, and the table served them all).
            return Grant(0, 1 / rate)
        try:
            return self._lease(key, burst, rate, horizon, max(1, most or self.batch))
        except AwsError as error:
            self._down(error)
            return None

    def crowd(self, seconds: float = CROWDED_S) -> None:
        """The others are drawing on the account's buckets (the probes' meeting saw a burst):
        the next leases guess every ledger booked ahead, and no lease ahead of need is made,
        for ``seconds`` (at least ``CROWDED_S``: the meeting says how long its probe may
        still ask EC2, its whole burst). A pacer's bucket whose lease ahead is so answered
        counts as short (``AdaptiveBucket.short``) until a lease in line finds tokens free: in
        a burst the fan-out spends the account's mutating calls frugally on that evidence."""
        with self._lock:
            until = self._clock() + max(CROWDED_S, min(seconds, HORIZON_SECONDS))
            self._crowded_until = max(self._crowded_until, until)
            self._burst_until = max(self._burst_until, until)

    def calm(self) -> None:
        """A probe that was told of a burst has answered: its notice ends ``CROWDED_S`` from
        now at the latest (``crowd`` made it last the probe's whole time), so the container's
        next request, a lone one as a rule, is not paced as in a burst for the rest of it."""
        with self._lock:
            until = self._clock() + CROWDED_S
            self._crowded_until = min(self._crowded_until, until)
            self._burst_until = min(self._burst_until, until)

    def _lease(self, key: str, burst: float, rate: float, horizon: float, most: int) -> Grant:
        self._count("leases")
        period = 1 / rate
        # (A shift from behind now forgets up to the lag's refill: kept back from the burst.
        # A bucket too small to keep it back, one or two tokens, lags less: never more than
        # its burst is granted.)
        lag = min(LAG_S, max(0.0, (burst - 1) / rate))
        burst = burst - lag * rate
        deadline = self._monotonic() + LEASE_SECONDS
        seen = self._seen.get(key)  # the ledger's tat at this process's last lease
        for attempt in range(ATTEMPTS):
            if attempt >= 2 and self._monotonic() >= deadline:
                # The lease's time is up, retries included: a table answering in seconds
                # (in a class of 200, each update waited 3 to 20 s) must not hold a call four
                # round trips long, past its own deadline. Lost, as when every try lost. The
                # try that follows the first one's answer is always made: a first guess made
                # blind (a crowded process guesses "in use", and a ledger with no item is
                # not) would otherwise lose every lease, and nobody would ever write it.
                break
            now = self._clock()
            # Not booked ahead: half of what the ledger held last time, up to a batch (a lone
            # caller leases a few tokens per round trip). Booked ahead: one slot, the next
            # (what the ledger held at the last look is gone to the others by now: a batch
            # would be booked ahead of them and most of it left unspent). The first try
            # guesses the case: in use when the ledger was at the last look, or when this
            # process has just seen a ledger in use by the others (in a burst, a new
            # container's first lease of each bucket and a lease after a pause guessed idle
            # and failed: 60% of a mixed class's updates). A later try follows what the failed
            # condition returned.
            busy = seen is not None and seen > now
            in_use = seen is not None and seen >= now - lag
            crowded = now < self._crowded_until
            if attempt == 0 and crowded:
                busy = in_use = True
            room, _ = grantable(seen, now, burst, rate)
            # One token at a time while the others draw on the account's ledgers too: in a
            # burst a batch is taken ahead of them and, as a rule, left unspent.
            want = 1 if busy or crowded else max(1, min(most, room // 2))
            taken, tat = self._update(
                key, in_use, now - lag, want, burst, rate, horizon, deadline, now
            )
            self._seen[key] = tat
            if taken:
                self._wrote[key] = tat
                self._count("tokens", want)
                # The booked tokens may be spent once the ledger's bucket holds them: when
                # ``tat`` is no further ahead than a full bucket.
                ready = 0.0 if tat is None else tat - burst * period - now
                return Grant(want, max(ready, 0.0))
            seen = tat
            met = tat is not None and tat >= now - lag
            if met and not in_use and tat != self._wrote.get(key):
                # An idle guess met a ledger in use, and not by this process's own last write
                # (its threads racing, its probe's overdraw): others are drawing on it. (An
                # in-use guess refused past the horizon proves nothing: the slots booked ahead
                # may all be this process's own waiters'.)
                with self._lock:
                    self._crowded_until = max(self._crowded_until, now + CROWDED_S)
            if tat is not None and tat > now:
                # Busy, and no slot within the horizon: the seconds until the next slot's
                # token could be spent (beyond the horizon; a caller with a deadline that near
                # gives up at once: the slot only moves later).
                later = tat + period - burst * period - now
                if later > horizon:
                    return Grant(0, max(later, 1e-3))
            # Otherwise the other case holds (the answer said which), or fewer tokens fit.
        return Grant(0, period)  # lost every race: ask again after one token's time

    def _update(
        self,
        key: str,
        in_use: bool,
        recent: float,
        want: int,
        burst: float,
        rate: float,
        horizon: float,
        deadline: float,
        now: float,
    ) -> tuple[bool, float | None]:
        """One conditional update of the ledger: (True, the new tat) when it took ``want``
        tokens, else (False, the tat the item holds; None: no item, or not a sound one). The
        ledger is in use while its tat is at ``recent`` or later."""
        period = 1 / rate
        absurd = now + burst * period + HORIZON_SECONDS + SKEW_SECONDS
        values: dict[str, Any] = {
            ":recent": _n(recent),
            ":exp": _n(math.ceil(now) + EXPIRATION_SECONDS),
        }
        if in_use:
            # Take the next ``want`` slots: unconditional but for the case (tat no further
            # behind now than the lag) and the horizon (the last slot no later than
            # ``horizon`` from now).
            expression = "SET tat = tat + :take, expiration = :exp"
            condition = "tat >= :recent AND tat <= :last"
            values[":take"] = _n(want * period)
            values[":last"] = _n(now + horizon + (burst - want) * period)
        else:
            # Idle, or a value no lease could have written (not a number, or further ahead
            # than a full bucket, the horizon and a skew between the processes' clocks): start
            # afresh.
            expression = "SET tat = :then, expiration = :exp"
            condition = (
                "attribute_not_exists(tat) OR NOT attribute_type(tat, :number) "
                "OR tat < :recent OR tat > :absurd"
            )
            values[":then"] = _n(now + want * period)
            values[":number"] = {"S": "N"}
            values[":absurd"] = _n(absurd)
        params = {
            "TableName": self.table,
            "Key": {"id": {"S": key}},
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ReturnValues": "UPDATED_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        client = self.clients.client("dynamodb", self.region)
        self._count("updates")
        try:
            answer = self.retry.run(
                "UpdateItem",
                lambda: call("UpdateItem", client.update_item, **params),
                deadline=deadline,
                clock=self._monotonic,
            )
        except AwsError as error:
            if error.code != "ConditionalCheckFailedException":
                raise
            tat = _tat(failed_item(error))
            if tat is not None and tat > absurd:
                tat = None  # the idle case's condition takes it over
            return False, tat
        return True, _tat(answer.get("Attributes"))

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:  # leases ahead run on their own threads
            self.counts[name] += n

    def overdraw(self, key: str, rate: float) -> None:
        """Spend one token beyond the ledger (a pacer's probe, ``AdaptiveBucket``): the
        others wait one token longer, so the account's pace stays the ledger's while the probe
        tells whether EC2 has room beyond it."""
        if self._monotonic() < self._down_until:
            return
        now = self._clock()
        params = {
            "TableName": self.table,
            "Key": {"id": {"S": key}},
            "UpdateExpression": "SET tat = if_not_exists(tat, :now) + :take, expiration = :exp",
            "ExpressionAttributeValues": {
                ":now": _n(now),
                ":take": _n(1 / rate),
                ":exp": _n(math.ceil(now) + EXPIRATION_SECONDS),
            },
            "ReturnValues": "UPDATED_NEW",
        }
        client = self.clients.client("dynamodb", self.region)
        self._count("updates")
        try:
            answer = self.retry.run(
                "UpdateItem",
                lambda: call("UpdateItem", client.update_item, **params),
                deadline=self._monotonic() + LEASE_SECONDS,
                clock=self._monotonic,
            )
        except AwsError as error:
            self._down(error)
            return
        # The ledger is where this write left it (the next lease's failed condition that
        # finds it is this process's own doing, not a crowd).
        self._wrote[key] = _tat(answer.get("Attributes"))

    def _down(self, error: AwsError) -> None:
        """The table failed a lease: pace alone for a while, and say so once."""
        with self._lock:
            self.counts["down"] += 1  # (under the lock already)
            self._down_until = self._monotonic() + DOWN_SECONDS
            if self._said_down:
                return
            self._said_down = True
        log.warning(
            "EC2 rate budget: the state table %s cannot be used (%s); this process paces EC2 "
            "calls on its own",
            self.table,
            str(error)[:300],
            extra={"budget_table": self.table},
        )


class Ledger(NamedTuple):
    """One (EC2 region, bucket)'s ledger in the table (``throttle.SharedLedger``)."""

    table: BudgetTable
    key: str

    def lease(
        self, burst: float, rate: float, horizon: float = 0.0, most: int | None = None
    ) -> Grant | None:
        return self.table.lease(self.key, burst, rate, horizon, most)

    def overdraw(self, rate: float) -> None:
        self.table.overdraw(self.key, rate)


def _tat(item: dict[str, Any] | None) -> float | None:
    """The ledger's ``tat``; None for no item or a value that is not a finite number (the
    table is shared: a broken value reads as an idle bucket, the next lease rewrites it)."""
    if item is None:
        return None
    value = item.get("tat")
    try:
        tat = float(str(value["N"])[:64]) if isinstance(value, dict) else math.nan
    except (KeyError, ValueError):
        return None
    return tat if math.isfinite(tat) else None
