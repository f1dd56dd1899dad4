"""Capacity memory: what recent attempts learned per (region, AZ id, instance type), and what
that may decide (how many attempts start at once, how long to wait before hedging; never the
answer).

The unit kept is a ``Tally``: one (region, instance type, hour) with, per AZ id, how many
attempts answered what, when each answer was last seen, and the reservation-seconds spent
there; plus the create latencies (a coarse histogram) and the last quota error of the region
and type. Tallies merge by addition (counts, seconds, latencies) and by maximum (last times),
so the container's and the state table's views combine without double-deciding anything, and
concurrent containers can each add theirs (DynamoDB ``ADD``) without lost updates.

Freshness: an answer older than ``DECISION_WINDOW`` says nothing about capacity any more.
Three minutes, as Karpenter's ICE cache (``UnavailableOfferingsTTL = 3 * time.Minute`` in
aws/karpenter-provider-aws ``pkg/cache/cache.go``): long enough that a burst of probes (a VDI
morning, a Slurm array) reuses what its first probe learned, short enough that capacity EC2
frees within minutes is tried again. History keeps much longer (``HISTORY_SECONDS``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

DECISION_WINDOW = 180.0  # seconds an answer counts for decisions
HOUR = 3600
HISTORY_SECONDS = 7 * 24 * HOUR  # how long the state table keeps a tally (its TTL)

# Hedge delay bounds (seconds). Below the floor a hedge costs a hold for ordinary jitter; above
# the ceiling waiting costs the caller more than a second hold costs the account. Without any
# measured latency the ceiling is used: ignorance pays in latency, not in reservations.
HEDGE_FLOOR = 0.2
HEDGE_CEILING = 2.0
HEDGE_QUANTILE = 0.95  # hedge an answer later than 95 % of answers ("The Tail at Scale")

# Upper bounds (seconds) of the create-latency histogram's buckets; the last is open.
LATENCY_BOUNDS: tuple[float, ...] = (
    0.05,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    0.75,
    1.0,
    1.5,
    2.0,
    3.0,
    5.0,
    math.inf,
)


# -- what a fact read from outside may say ------------------------------------------------------
# The state table is shared: every container of the cluster writes it, and so can anyone with
# access to the table (or a bug). The memory is advice, so a value read from it is checked
# against these bounds before anything decides on it; one outside them is dropped (the reader
# logs it), never an error and never a different answer.
CLOCK_SKEW = 300.0  # seconds another container's clock may run ahead of this one's
# Answers per AZ, instance type and hour: EC2's mutating bucket refills 5 calls a second per
# account and region (18,000 an hour), so this is far beyond what the broker can have seen.
MAX_COUNT = 1_000_000
# Reservation-seconds per AZ, instance type and hour: every such answer holding a whole hour.
MAX_SECONDS = float(MAX_COUNT * HOUR)
# Regions, AZ ids and instance types as EC2 spells them (us-east-1, use1-az1, g6.xlarge).
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_NAME_LENGTH = 64


class Seen(StrEnum):
    """What one create answered, as the memory keeps it."""

    AVAILABLE = "available"
    INSUFFICIENT = "insufficient"
    UNSUPPORTED = "unsupported"
    QUOTA = "quota"
    ERROR = "error"


class Hint(StrEnum):
    """What fresh memory says about one candidate."""

    AVAILABLE = "available"  # it had capacity a moment ago
    OUT = "out"  # it had none (or could not be reserved) a moment ago
    UNKNOWN = "unknown"  # nothing fresh


@dataclass(frozen=True, order=True)
class MemoryKey:
    """Where a fact about capacity was learnt: a region, an Availability Zone (by its id, the
    same zone in every account) and an instance type."""

    region: str
    availability_zone_id: str
    instance_type: str


@dataclass(frozen=True)
class Observation:
    """One fact a fan-out learned: a create's answer (``seen``, with its latency) or the
    reservation-seconds of a hold it gave back (``seen`` None). ``at`` is wall-clock epoch
    seconds (the memory is shared between containers); ``carried`` is, for a quota error, how
    many of the request's holds were live when EC2 refused one more."""

    key: MemoryKey
    at: float
    seen: Seen | None = None
    latency: float | None = None
    carried: int | None = None
    reservation_seconds: float = 0.0


def hour_of(at: float) -> int:
    """The start (epoch seconds) of the hour ``at`` falls in."""
    return int(at // HOUR) * HOUR


def checked_name(text: str) -> str:
    """A region, AZ id or instance type read from outside."""
    if not 0 < len(text) <= _NAME_LENGTH or not _NAME_CHARACTERS.issuperset(text):
        raise ValueError(f"{text[:80]!r} is not a region, AZ id or instance type")
    return text


def checked_hour(hour: float, now: float) -> int:
    """The start of a tally's hour read from outside: a whole hour, not in the future."""
    if not math.isfinite(hour) or hour < 0 or hour % HOUR:
        raise ValueError(f"hour {hour!r} is not the start of an hour")
    if hour > now + CLOCK_SKEW:
        raise ValueError(f"hour {hour!r} is in the future")
    return int(hour)


def checked_count(n: float) -> int:
    """A count read from outside: a whole number in [0, ``MAX_COUNT``]."""
    if not math.isfinite(n) or n < 0 or n > MAX_COUNT or not float(n).is_integer():
        raise ValueError(f"count {n!r} is not a whole number in [0, {MAX_COUNT}]")
    return int(n)


def checked_moment(at: float, hour: int, now: float) -> float:
    """A time read from outside (epoch seconds): within its tally's hour (``fold`` puts every
    fact in the hour it happened; its end included, where the table's microseconds may round
    a time) and no later than ``now`` plus the clock skew, so that no time stays fresh for
    longer than the decision window."""
    if not math.isfinite(at) or not hour <= at <= hour + HOUR:
        raise ValueError(f"time {at!r} is not within its hour")
    if at > now + CLOCK_SKEW:
        raise ValueError(f"time {at!r} is in the future")
    return float(at)


def checked_seconds(seconds: float) -> float:
    """Reservation-seconds read from outside: in [0, ``MAX_SECONDS``]."""
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_SECONDS:
        raise ValueError(f"seconds {seconds!r} not in [0, {MAX_SECONDS:.0f}]")
    return float(seconds)


def checked_bucket(bucket: float) -> int:
    """A latency bucket read from outside: an index of ``LATENCY_BOUNDS``."""
    if not math.isfinite(bucket) or not float(bucket).is_integer():
        raise ValueError(f"latency bucket {bucket!r} is not a whole number")
    if not 0 <= bucket < len(LATENCY_BOUNDS):
        raise ValueError(f"latency bucket {bucket!r} not in [0, {len(LATENCY_BOUNDS) - 1}]")
    return int(bucket)


def latency_bucket(seconds: float) -> int:
    for index, bound in enumerate(LATENCY_BOUNDS):
        if seconds <= bound:
            return index
    return len(LATENCY_BOUNDS) - 1


@dataclass
class Tally:
    """One (region, instance type, hour) of memory; also one item of the state table."""

    region: str
    instance_type: str
    hour: int
    counts: dict[tuple[str, Seen], int] = field(default_factory=dict)  # (AZ id, seen) -> n
    last: dict[tuple[str, Seen], float] = field(default_factory=dict)  # (AZ id, seen) -> at
    reservation_seconds: dict[str, float] = field(default_factory=dict)  # AZ id -> seconds
    latency: dict[int, int] = field(default_factory=dict)  # bucket -> n
    quota_at: float | None = None
    quota_carried: int | None = None

    @property
    def slot(self) -> tuple[str, str, int]:
        return (self.region, self.instance_type, self.hour)

    def add(self, other: Tally) -> None:
        """Merge ``other`` (same slot) into this one: sums and maxima, never a lost fact."""
        if other.slot != self.slot:
            raise ValueError(f"cannot merge tally {other.slot} into {self.slot}")
        for key, n in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        for key, at in other.last.items():
            self.last[key] = max(at, self.last.get(key, at))
        for az, seconds in other.reservation_seconds.items():
            self.reservation_seconds[az] = self.reservation_seconds.get(az, 0.0) + seconds
        for bucket, n in other.latency.items():
            self.latency[bucket] = self.latency.get(bucket, 0) + n
        if other.quota_at is not None and (
            self.quota_at is None or other.quota_at >= self.quota_at
        ):
            self.quota_at = other.quota_at
            self.quota_carried = other.quota_carried

    def copy(self) -> Tally:
        fresh = Tally(self.region, self.instance_type, self.hour)
        fresh.add(self)
        return fresh


def fold(observations: Iterable[Observation]) -> list[Tally]:
    """Observations as tallies, one per (region, instance type, hour) they touch."""
    tallies: dict[tuple[str, str, int], Tally] = {}
    for seen in observations:
        key = seen.key
        slot = (key.region, key.instance_type, hour_of(seen.at))
        tally = tallies.get(slot)
        if tally is None:
            tally = tallies[slot] = Tally(*slot)
        az = key.availability_zone_id
        if seen.seen is not None:
            tally.counts[(az, seen.seen)] = tally.counts.get((az, seen.seen), 0) + 1
            tally.last[(az, seen.seen)] = max(seen.at, tally.last.get((az, seen.seen), seen.at))
            if seen.latency is not None and seen.latency >= 0:
                bucket = latency_bucket(seen.latency)
                tally.latency[bucket] = tally.latency.get(bucket, 0) + 1
            if seen.seen is Seen.QUOTA and (tally.quota_at is None or seen.at >= tally.quota_at):
                tally.quota_at = seen.at
                tally.quota_carried = seen.carried
        if seen.reservation_seconds:
            tally.reservation_seconds[az] = (
                tally.reservation_seconds.get(az, 0.0) + seen.reservation_seconds
            )
    return list(tallies.values())


def merge(tallies: Iterable[Tally]) -> dict[tuple[str, str, int], Tally]:
    merged: dict[tuple[str, str, int], Tally] = {}
    for tally in tallies:
        found = merged.get(tally.slot)
        if found is None:
            merged[tally.slot] = tally.copy()
        else:
            found.add(tally)
    return merged


def hedge_delay(latency: Mapping[int, int]) -> float:
    """How long the first attempts may run before the next ones start anyway: the
    ``HEDGE_QUANTILE`` of measured create latencies (the upper bound of its histogram bucket),
    within [``HEDGE_FLOOR``, ``HEDGE_CEILING``]."""
    # Total for any histogram: a bucket that is not an index of LATENCY_BOUNDS, or a count
    # that is not positive, says nothing (whatever reached here from outside).
    counted = {
        bucket: n for bucket, n in latency.items() if 0 <= bucket < len(LATENCY_BOUNDS) and n > 0
    }
    total = sum(counted.values())
    if total == 0:
        return HEDGE_CEILING
    rank = math.ceil(HEDGE_QUANTILE * total)
    seen = 0
    quantile = LATENCY_BOUNDS[-1]
    for bucket in sorted(counted):
        seen += counted[bucket]
        if seen >= rank:
            quantile = LATENCY_BOUNDS[bucket]
            break
    return min(HEDGE_CEILING, max(HEDGE_FLOOR, quantile))


class MemoryView:
    """What the memory says at one moment (``moment``, epoch seconds), for decisions only."""

    def __init__(
        self,
        tallies: Iterable[Tally] = (),
        moment: float = 0.0,
        latency: Mapping[int, int] | None = None,
        window: float = DECISION_WINDOW,
    ) -> None:
        self.moment = moment
        self.window = window
        self._last: dict[tuple[str, str, str, Seen], float] = {}
        self._quota: dict[tuple[str, str], tuple[float, int | None]] = {}
        histogram: dict[int, int] = {}
        for tally in tallies:
            for (az, seen), at in tally.last.items():
                key = (tally.region, az, tally.instance_type, seen)
                self._last[key] = max(at, self._last.get(key, at))
            if tally.quota_at is not None:
                slot = (tally.region, tally.instance_type)
                known = self._quota.get(slot)
                if known is None or tally.quota_at >= known[0]:
                    self._quota[slot] = (tally.quota_at, tally.quota_carried)
            for bucket, n in tally.latency.items():
                histogram[bucket] = histogram.get(bucket, 0) + n
        self.latency = dict(latency) if latency is not None else histogram

    def _fresh(self, at: float | None) -> bool:
        # A time a little in the future (another container's clock) is fresh too; one further
        # ahead than any clock is off is not (else it would stay fresh until then).
        return at is not None and -CLOCK_SKEW <= self.moment - at <= self.window

    def hint(self, key: MemoryKey) -> Hint:
        """AVAILABLE or OUT by the latest fresh capacity answer there; UNKNOWN without one."""

        def last(seen: Seen) -> float | None:
            at = self._last.get((key.region, key.availability_zone_id, key.instance_type, seen))
            return at if self._fresh(at) else None

        available = last(Seen.AVAILABLE)
        out = max(
            (at for at in (last(Seen.INSUFFICIENT), last(Seen.UNSUPPORTED)) if at is not None),
            default=None,
        )
        if available is None and out is None:
            return Hint.UNKNOWN
        if out is None or (available is not None and available >= out):
            return Hint.AVAILABLE
        return Hint.OUT

    def hints(self, keys: Sequence[MemoryKey]) -> list[Hint]:
        return [self.hint(key) for key in keys]

    def quota_cap(self, keys: Iterable[MemoryKey]) -> int | None:
        """How many holds at once the quota carried when it last refused one more (fresh
        only), the smallest over the keys' (region, instance type); None when unknown."""
        caps = [
            max(1, carried or 0)
            for slot in {(k.region, k.instance_type) for k in keys}
            for at, carried in [self._quota.get(slot, (None, None))]
            if self._fresh(at)
        ]
        return min(caps) if caps else None

    def hedge_delay(self) -> float:
        return hedge_delay(self.latency)
