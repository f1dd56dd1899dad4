"""How long a Capacity Block can run instances, and what it takes to make it longer: the one
home of EC2's end-of-block rule and of its extension rules.

EC2 begins terminating a block's instances before the block ends: "Thirty minutes before the
reservation expires, we begin to terminate any instances that are still running in the
Capacity Block" (EC2 User Guide, "Work with Capacity Blocks"); UltraServer blocks an hour
before: a third party's word only (dev.classmethod.jp, "ec2-capacity-blocks-for-ml-instance-
cb-vs-ultraserver-cb", summarising the P6e-GB200 UltraServer terms: users must have ended
their instances 60 minutes before the end). AWS's own pages at hand say thirty minutes for
every block; the broker plans with the hour so that neither reading ends a run early.
So a block covers a run only when the run ends by ``usable_until``, never by the block's
``EndDate``: everything that offers, validates or counts a block's hours (``plan``, the
capacity listing's ``hours_left``, the extension an outliving run needs) asks this module.

Extensions (EC2 User Guide, "Extend Capacity Blocks"): a block that is ``active`` or
``scheduled`` with no extension ``payment-pending`` can be extended "up to a minimum of 1 hour
or a maximum of 56 days before it expires", by "1-day increments up to 14 days, and 7-day
increments up to 182 days"; the reservation id stays the same and the end date moves once the
payment succeeds.

Pure: times come in as aware datetimes, ``now`` included.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .clock import utc
from .discovery import (
    DAILY_STEPS_UP_TO_DAYS,
    HOURS_PER_DAY,
    MAX_BLOCK_DAYS,
    block_hours_for_days,
    valid_block_hours,
)

RECLAIM_LEAD = timedelta(minutes=30)
ULTRASERVER_RECLAIM_LEAD = timedelta(minutes=60)
# Instance types EC2 sells only inside UltraServers (botocore 1.44.5's InstanceType enum):
# P6e-GB200 and Trn2 UltraServer instances. A block of them stops an hour early even when
# DescribeCapacityReservations (which has no UltraserverType) is all that was read.
ULTRASERVER_FAMILIES = frozenset({"p6e-gb200", "trn2u"})

# "up to a minimum of 1 hour or a maximum of 56 days before it expires"
EXTEND_AT_LEAST_BEFORE_END = timedelta(hours=1)
EXTEND_AT_MOST_BEFORE_END = timedelta(days=56)
EXTENDABLE_STATES = frozenset({"active", "scheduled"})


def is_ultraserver(instance_type: str, ultraserver_type: str | None = None) -> bool:
    return bool(ultraserver_type) or instance_type.split(".", 1)[0] in ULTRASERVER_FAMILIES


def reclaim_lead(instance_type: str, ultraserver_type: str | None = None) -> timedelta:
    """How long before its end EC2 begins terminating the block's instances."""
    if is_ultraserver(instance_type, ultraserver_type):
        return ULTRASERVER_RECLAIM_LEAD
    return RECLAIM_LEAD


def usable_until(
    end_date: datetime, instance_type: str, ultraserver_type: str | None = None
) -> datetime:
    """The last moment the block's instances can run: its end less EC2's lead."""
    return utc(end_date, "end_date") - reclaim_lead(instance_type, ultraserver_type)


def hours_left(
    start_date: datetime | None,
    end_date: datetime | None,
    instance_type: str,
    now: datetime,
    ultraserver_type: str | None = None,
) -> float | None:
    """Hours a run starting now (or at the block's start, if later) can last in the block,
    to the minute; 0 once EC2 has begun stopping its instances; ``None`` without an end."""
    if end_date is None:
        return None
    return round(
        usable_seconds(start_date, end_date, instance_type, now, ultraserver_type) / 3600, 2
    )


def usable_seconds(
    start_date: datetime | None,
    end_date: datetime,
    instance_type: str,
    now: datetime,
    ultraserver_type: str | None = None,
) -> float:
    """Seconds a job starting now (or at the block's start, if later) can run in it; 0 past
    ``usable_until``."""
    begin = max(utc(now), utc(start_date, "start_date")) if start_date else utc(now)
    left = usable_until(end_date, instance_type, ultraserver_type) - begin
    return max(0.0, left.total_seconds())


def usable_window_seconds(
    start_date: datetime,
    end_date: datetime,
    instance_type: str,
    ultraserver_type: str | None = None,
) -> float:
    """Seconds of the block's whole life its instances can run: the longest job it can ever
    take, whenever that job starts."""
    window = usable_until(end_date, instance_type, ultraserver_type) - utc(start_date, "start_date")
    return max(0.0, window.total_seconds())


@dataclass(frozen=True)
class Window:
    """When a run may take place: it starts no earlier than ``start`` and ends no later than
    ``end`` (``None``: any time)."""

    start: datetime
    end: datetime | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", utc(self.start, "start"))
        if self.end is not None:
            object.__setattr__(self, "end", utc(self.end, "end"))


def run_start(
    start: datetime | None,
    usable_end: datetime | None,
    run: timedelta,
    window: Window,
) -> datetime | None:
    """The earliest moment a run of ``run`` fits in capacity usable from ``start`` to
    ``usable_end`` (``None``: no end), inside ``window``; ``None`` when it does not fit."""
    begin = max(window.start, utc(start, "start")) if start is not None else window.start
    limits = [t for t in (usable_end, window.end) if t is not None]
    if limits and begin + run > min(utc(t) for t in limits):
        return None
    return begin


def block_hours_for_run(
    run_hours: float, instance_type: str, ultraserver_type: str | None = None
) -> int | None:
    """The shortest Capacity Block EC2 sells that a run of ``run_hours`` fits in, its stop
    before the end counted (a 7-day run needs an 8-day block); ``None`` beyond 182 days."""
    lead = reclaim_lead(instance_type, ultraserver_type).total_seconds() / 3600
    return shortest_block_hours(run_hours + lead)


def shortest_block_hours(hours: float) -> int | None:
    """The shortest valid Capacity Block (or extension) duration of at least ``hours``."""
    return block_hours_for_days(round(hours, 6) / HOURS_PER_DAY)


def extension_hours_needed(
    end_date: datetime,
    instance_type: str,
    run_ends: datetime,
    ultraserver_type: str | None = None,
) -> int | None:
    """The shortest extension after which a run ending at ``run_ends`` still fits before the
    block stops: 0 when it already does, ``None`` when no extension EC2 sells is enough."""
    short = utc(run_ends, "run_ends") - usable_until(end_date, instance_type, ultraserver_type)
    if short <= timedelta(0):
        return 0
    return shortest_block_hours(short.total_seconds() / 3600)


def extension_refusal(
    state: str,
    end_date: datetime | None,
    hours: int,
    now: datetime,
    payment_pending: bool = False,
    start_date: datetime | None = None,
) -> str | None:
    """Why EC2 would refuse to extend this block now by ``hours`` (``None``: it would not).
    ``start_date``: the block's start, for "up to 182 days (26 weeks) total": the block with
    its extensions, not one extension alone."""
    if state not in EXTENDABLE_STATES:
        return f"only an active or scheduled Capacity Block can be extended (this one is {state})"
    if payment_pending:
        return "an extension of this block is still payment-pending"
    if not valid_block_hours(hours):
        return (
            f"{hours} hours is not an extension EC2 sells: 1-day steps up to "
            f"{DAILY_STEPS_UP_TO_DAYS} days, then 7-day steps up to {MAX_BLOCK_DAYS} days"
        )
    if end_date is None:
        return "the block has no end date"
    end = utc(end_date, "end_date")
    now = utc(now)
    if now > end - EXTEND_AT_LEAST_BEFORE_END:
        return "an extension must be requested at least 1 hour before the block ends"
    if now < end - EXTEND_AT_MOST_BEFORE_END:
        opens = (end - EXTEND_AT_MOST_BEFORE_END).strftime("%Y-%m-%d %H:%M UTC")
        return f"an extension can be requested at most 56 days before the block ends (from {opens})"
    if start_date is not None:
        total = end + timedelta(hours=hours) - utc(start_date, "start_date")
        if total > timedelta(days=MAX_BLOCK_DAYS):
            days = total.total_seconds() / 86400
            return (
                f"a Capacity Block lasts at most {MAX_BLOCK_DAYS} days (26 weeks) in total, "
                f"extensions included: {hours} h more would make it {days:g} days"
            )
    return None


# -- several blocks for one run ---------------------------------------------------------------

# What a split costs (EC2 User Guide, "Capacity Blocks for ML": a block's instances "are
# placed close together inside Amazon EC2 UltraClusters"; that is each block's own promise).
SPLIT_COSTS = (
    "separate Capacity Blocks: each is placed in an UltraCluster on its own, with no shared "
    "placement or UltraCluster guarantee across them",
    "blocks in different Availability Zones talk over the Region's network (more latency "
    "than inside a block, and inter-AZ data transfer charges)",
    "each block starts, stops and is extended on its own (and is paid up front on its own)",
)


@dataclass(frozen=True)
class Piece:
    """Capacity one block can give a run: ``count`` instances usable from ``start`` to
    ``usable_end``. ``key``: what may not be used twice (a held block's id; an offering's
    region, AZ and type: two offerings from one AZ may be the same capacity)."""

    key: tuple[str, ...]
    ref: str
    held: bool
    region: str
    instance_type: str
    count: int
    start: datetime | None
    usable_end: datetime | None
    fee: float = 0.0


@dataclass(frozen=True)
class SplitPlan:
    run_start: datetime
    pieces: tuple[Piece, ...]

    @property
    def count(self) -> int:
        return sum(p.count for p in self.pieces)

    @property
    def fee(self) -> float:
        return sum(p.fee for p in self.pieces)


def split(pieces: list[Piece], count: int, run: timedelta, window: Window) -> SplitPlan | None:
    """The earliest way to run ``count`` instances for ``run`` on several blocks of one
    Region and instance type, all usable over the same hours: held blocks first, then the
    largest offerings, the last one the cheapest that completes the count. ``None`` when no
    combination does."""
    starts = sorted(
        {s for p in pieces if (s := run_start(p.start, p.usable_end, run, window)) is not None}
    )
    for moment in starts:
        best: SplitPlan | None = None
        groups: dict[tuple[str, str], list[Piece]] = {}
        for piece in pieces:
            if _usable_at(piece, moment, run, window):
                groups.setdefault((piece.region, piece.instance_type), []).append(piece)
        for group in groups.values():
            chosen = _fill(group, count)
            if chosen is None:
                continue
            found = SplitPlan(moment, tuple(chosen))
            if best is None or (len(found.pieces), found.fee) < (len(best.pieces), best.fee):
                best = found
        if best is not None:
            return best
    return None


def _usable_at(piece: Piece, moment: datetime, run: timedelta, window: Window) -> bool:
    begin = run_start(piece.start, piece.usable_end, run, window)
    if begin is None or begin > moment:
        return False
    return piece.usable_end is None or moment + run <= utc(piece.usable_end)


def _fill(group: list[Piece], count: int) -> list[Piece] | None:
    order = sorted(group, key=lambda p: (not p.held, -p.count, p.fee, p.ref))
    chosen: list[Piece] = []
    used: set[tuple[str, ...]] = set()
    total = 0
    for piece in order:
        if total >= count:
            break
        if piece.key in used:
            continue
        chosen.append(piece)
        used.add(piece.key)
        total += piece.count
    if total < count:
        return None
    # The last piece: the cheapest unused one that still completes the count.
    last = chosen.pop()
    used.discard(last.key)
    short = count - (total - last.count)
    fits = [p for p in order if p.key not in used and p.count >= short]
    chosen.append(min(fits, key=lambda p: (not p.held, p.fee, p.count, p.ref)))
    return chosen


# -- extending a block once -------------------------------------------------------------------

# How long an extension just bought answers a repeat of the same request (the same block, the
# same length) instead of buying another: EC2's payment can take up to 12 hours before the
# block's end moves, and a command re-run after a lost answer must find it. A second extension
# of the same length within this window is asked for explicitly (``again``).
REPEAT_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class Bought:
    """One extension as DescribeCapacityBlockExtensionHistory shows it."""

    status: str
    hours: int
    start: datetime | None
    end: datetime | None
    purchased: datetime | None


def earlier_extension(
    history: list[Bought],
    hours: int,
    end_date: datetime,
    now: datetime,
    again: bool = False,
) -> Bought | None:
    """The extension a request to extend the block ending at ``end_date`` by ``hours`` has
    already bought, if any: one still ``payment-pending`` from that end (EC2 moves the end
    only once paid), or, unless ``again``, one paid within ``REPEAT_WINDOW`` that brought the
    block to that end."""
    end = utc(end_date, "end_date")
    for item in history:
        if item.hours != hours or item.status == "payment-failed":
            continue
        if item.status == "payment-pending" and item.start is not None:
            if utc(item.start) == end:
                return item
        elif (
            not again
            and item.end is not None
            and utc(item.end) == end
            and item.purchased is not None
            and utc(now) - utc(item.purchased) <= REPEAT_WINDOW
        ):
            return item
    return None


def pending_extension(history: list[Bought]) -> Bought | None:
    return next((b for b in history if b.status == "payment-pending"), None)
