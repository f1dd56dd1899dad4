"""The cleaner's rules (contract, "cleaner" table): the only place they are written down.

The sweep, the stack-event path and ``release`` all ask this module; none of them re-derives
a rule. Everything is a pure function of what the caller looked up plus an explicit ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum, StrEnum

from .ahead import in_commitment
from .clock import utc
from .graces import HOLD_LIMIT, IDLE_GRACE, LADDER_WINDOW, PROBE_GRACE, STACK_GRACE
from .pool import LADDER_DONE, TAG_LADDER, TAG_LADDER_STATE
from .tags import TAG_CLUSTER_ID, Purpose, is_owned

ACTIVE_STATES = frozenset({"active", "pending"})
CAPACITY_BLOCK = "capacity-block"

# EC2 ends a limited reservation "within an hour" of its EndDate (CreateCapacityReservation,
# EndDate). With the moment spread over that hour, half an hour is the expected lag; the
# capacity emulator uses the same default (expiry_lag_seconds: 1800).
ENFORCEMENT_LAG = timedelta(minutes=30)


@dataclass(frozen=True)
class Graces:
    """How long the cleaner waits before each rule applies (defaults: the contract's, from
    ``domain.graces``). ``ladder``: how old the youngest node of a ladder without its done
    record must be before the cleaner ends the ladder (``abandoned_ladders``); the deployment
    sets it to the reserve function's timeout plus ``LADDER_GRACE``."""

    probe: timedelta = PROBE_GRACE
    stack: timedelta = STACK_GRACE
    idle: timedelta = IDLE_GRACE
    hold_limit: timedelta = HOLD_LIMIT
    ladder: timedelta = LADDER_WINDOW

    def __post_init__(self) -> None:
        for field_name in ("probe", "stack", "idle", "hold_limit", "ladder"):
            value = getattr(self, field_name)
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ValueError(f"grace {field_name} must be a non-negative timedelta")


class CancelReason(StrEnum):
    """Why the cleaner cancels (contract, exact strings)."""

    PAST_END_DATE = "past_end_date"
    LEAKED_PROBE = "leaked_probe"
    CONSUMED = "consumed"
    ORPHANED = "orphaned"
    IDLE = "idle"
    STALE = "stale"


class StackVerdict(StrEnum):
    CONSUMED = "consumed"  # the stack launched its nodes: the hold has done its job
    ORPHANED = "orphaned"  # the stack failed, rolled back or is being deleted
    NONE = "none"  # still in progress (or unknown): no conclusion yet


class StackLookup(Enum):
    """Stack knowledge that is not a status."""

    MISSING = "missing"  # CloudFormation says the stack does not exist
    UNKNOWN = "unknown"  # the lookup failed (throttled, denied, timed out)


STACK_MISSING = StackLookup.MISSING
STACK_UNKNOWN = StackLookup.UNKNOWN

# A status string, or what we know when there is none. ``None`` = not looked up.
StackState = str | StackLookup | None

# Exactly the contract's: any other settled status (e.g. IMPORT_COMPLETE) keeps the hold until
# the hold limit ends it (`stale`).
CONSUMED_STATUSES = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE"})


def stack_verdict(status: str) -> StackVerdict:
    """What a CloudFormation stack status says about the holds made for that stack.

    Failure beats progress: ``ROLLBACK_IN_PROGRESS`` and ``DELETE_IN_PROGRESS`` are already
    orphaned (the stack will not use the hold), while a plain ``*_IN_PROGRESS`` is not yet
    anything. ``UPDATE_ROLLBACK_COMPLETE`` is orphaned as the contract says (``*ROLLBACK*``):
    the update that might have wanted the hold was abandoned. Statuses CloudFormation may add
    later fall to NONE, so the hold limit (not a guess) ends them.
    """
    value = status.strip().upper()
    if value in CONSUMED_STATUSES:
        return StackVerdict.CONSUMED
    if value.endswith("_FAILED") or "ROLLBACK" in value or value.startswith("DELETE_"):
        return StackVerdict.ORPHANED
    return StackVerdict.NONE


def on_stack_event(status: str) -> CancelReason | None:
    """What a stack status change event does, at once, to the holds tagged with that stack.

    ``consumed`` or ``orphaned`` cancels them regardless of age; ``None`` leaves them to the
    sweep (e.g. ``CREATE_IN_PROGRESS``).
    """
    verdict = stack_verdict(status)
    if verdict is StackVerdict.CONSUMED:
        return CancelReason.CONSUMED
    if verdict is StackVerdict.ORPHANED:
        return CancelReason.ORPHANED
    return None


@dataclass(frozen=True)
class Held:
    """One reservation as the cleaner sees it (from DescribeCapacityReservations + tags)."""

    id: str
    region: str
    purpose: Purpose
    state: str
    created: datetime
    end_date: datetime | None
    stack_name: str | None = None
    instance_count: int = 0
    used_count: int = 0
    reservation_type: str = "default"
    # A future-dated reservation's commitment (CommitmentInfo): its end, once delivered, and
    # its length in seconds.
    commitment_end: datetime | None = None
    commitment_seconds: int | None = None

    def __post_init__(self) -> None:
        # Accept "probe"/"hold" from callers that read the tag, but compare enum members.
        object.__setattr__(self, "purpose", Purpose(self.purpose))

    @property
    def unused_count(self) -> int:
        return max(0, self.instance_count - self.used_count)


@dataclass(frozen=True)
class Decision:
    cancel: bool
    reason: str

    @classmethod
    def cancel_for(cls, reason: CancelReason) -> Decision:
        return cls(True, reason.value)

    @classmethod
    def keep(cls, reason: str) -> Decision:
        return cls(False, reason)


def in_scope(
    tags: Mapping[str, str], state: str, reservation_type: str | None, cluster_id: str
) -> bool:
    """Whether the cleaner may look at a reservation at all: owned, active or pending, and
    never a Capacity Block (bought, not held; cancelling one is not possible or wanted)."""
    return (
        is_owned(tags, cluster_id)
        and state in ACTIVE_STATES
        and (reservation_type or "default") != CAPACITY_BLOCK
    )


def never_cancelled(held: Held, now: datetime) -> Decision | None:
    """Why no rule may cancel this reservation (a Capacity Block; one inside its commitment:
    ``ahead.in_commitment``), or ``None``. Read first by the sweep (``decide``) and by a stack
    event (which cancels its stack's holds without the sweep's rules)."""
    if held.reservation_type == CAPACITY_BLOCK:
        return Decision.keep("capacity block")
    if in_commitment(held.commitment_end, held.commitment_seconds is not None, held.state, now):
        until = (
            f" until {utc(held.commitment_end):%Y-%m-%d %H:%M} UTC"
            if held.commitment_end is not None
            else ""
        )
        return Decision.keep(f"inside its commitment{until}")
    return None


def decide(held: Held, stack: StackState, now: datetime, graces: Graces) -> Decision:
    """Cancel or keep one owned reservation, and why.

    Order: never a reservation inside its commitment (``ahead.in_commitment``: EC2 would charge
    for the rest of it, and the capacity was asked for weeks ahead on purpose), whatever else
    holds; then a passed EndDate (EC2 may keep the reservation active up to an hour longer);
    then probes by age; then holds by their stack, or by usage when they have none; finally the
    hold limit, which needs no stack knowledge, so a failing stack lookup can delay a hold's
    end but never make it immortal. ``stack`` is only read for a hold that names a stack.
    """
    now = utc(now)
    created = utc(held.created, "created")
    kept = never_cancelled(held, now)
    if kept is not None:
        return kept
    if held.state not in ACTIVE_STATES:
        return Decision.keep(f"state {held.state}")
    if held.end_date is not None and now >= utc(held.end_date, "end_date"):
        return Decision.cancel_for(CancelReason.PAST_END_DATE)
    # A creation time in the future (clock skew) counts as brand new, never as old.
    age = max(timedelta(0), now - created)

    if held.purpose is Purpose.PROBE:
        if age > graces.probe:
            return Decision.cancel_for(CancelReason.LEAKED_PROBE)
        return Decision.keep("young probe")

    keep = _hold_verdict(held, stack, age, graces)
    if isinstance(keep, CancelReason):
        return Decision.cancel_for(keep)
    if age > graces.hold_limit:
        return Decision.cancel_for(CancelReason.STALE)
    return Decision.keep(keep)


def _hold_verdict(
    held: Held, stack: StackState, age: timedelta, graces: Graces
) -> CancelReason | str:
    """A cancel reason for a hold, or why it is kept (before the hold limit is applied)."""
    if held.stack_name:
        if stack is None or stack is StackLookup.UNKNOWN:
            return "stack lookup failed"
        if stack is StackLookup.MISSING:
            if age > graces.stack:
                return CancelReason.ORPHANED
            return "young hold, stack not created yet"
        verdict = stack_verdict(stack)
        if verdict is StackVerdict.CONSUMED:
            return CancelReason.CONSUMED
        if verdict is StackVerdict.ORPHANED:
            return CancelReason.ORPHANED
        return f"stack {stack.strip().upper()}"
    if held.used_count > 0:
        return CancelReason.CONSUMED
    if age > graces.idle:
        return CancelReason.IDLE
    return "young hold"


def hours_saved(held: Held, now: datetime) -> float:
    """Instance-hours of reserved, unused capacity that cancelling now avoids paying for.

    Assumption: left alone, the reservation would live until its EndDate plus EC2's expected
    enforcement lag (ENFORCEMENT_LAG, half of the documented "within an hour"). Only unused
    instances count: instances running in the reservation are billed as instances either way.
    A reservation without an EndDate has no such bound and counts 0.
    """
    now = utc(now)
    if held.end_date is None:
        return 0.0
    would_end = utc(held.end_date, "end_date") + ENFORCEMENT_LAG
    remaining = max(timedelta(0), would_end - now)
    return held.unused_count * remaining.total_seconds() / 3600.0


# -- half-done ladders (reserved-first, issue 43) ----------------------------------------------


# Why the sweep terminates a node (not a cancel: the node of a reserved-first ladder left
# half-done, ``abandoned_ladders``).
ABANDONED_LADDER = "abandoned_ladder"


@dataclass(frozen=True)
class LadderNode:
    """One instance as the cleaner sees it (DescribeInstances: its tags and LaunchTime)."""

    instance_id: str
    tags: Mapping[str, str]
    launched: datetime | None


@dataclass(frozen=True)
class AbandonedLadder:
    """A ladder the cleaner ends: the job's request id and its nodes still to terminate."""

    ladder: str
    instance_ids: tuple[str, ...]
    youngest_age: timedelta


def is_ladder_node(tags: Mapping[str, str], cluster_id: str) -> bool:
    """A node the cleaner may terminate at all: tagged with this cluster's id and with a
    ladder (both exact; anything else, an untagged instance or another cluster's, is never
    the cleaner's)."""
    return (
        bool(cluster_id) and tags.get(TAG_CLUSTER_ID) == cluster_id and bool(tags.get(TAG_LADDER))
    )


def abandoned_ladders(
    nodes: Iterable[LadderNode], cluster_id: str, now: datetime, window: timedelta
) -> list[AbandonedLadder]:
    """The ladders of this cluster left half-done, to be terminated.

    A ladder (its nodes grouped by the ``ladder`` tag, this cluster's nodes only) is judged
    once its youngest node was launched longer than ``window`` ago: every invocation that
    launched one of its nodes has then ended (Lambda stops one at its timeout), so nothing
    will finish it, and a retry of the request starts a new round. Measured from the youngest
    node, not the oldest: a retry that launched the missing rungs may still be running, and
    its nodes are the young ones. Then its nodes without the done record are ended: reserve
    writes the record on every node it claims before answering ``provisioned`` (and claims
    nothing when a write is not confirmed), so a node without it is one no answer gave a job:
    a ladder that never finished, or a stray beside a finished one (a node a retry's listing
    did not show yet). A node with the record is never ended; a node whose launch time is
    unknown keeps its whole ladder (never guessed old)."""
    now = utc(now)
    ladders: dict[str, list[LadderNode]] = {}
    for node in nodes:
        if is_ladder_node(node.tags, cluster_id):
            ladders.setdefault(node.tags[TAG_LADDER], []).append(node)
    found: list[AbandonedLadder] = []
    for ladder, members in sorted(ladders.items()):
        unclaimed = [m for m in members if m.tags.get(TAG_LADDER_STATE) != LADDER_DONE]
        if not unclaimed:
            continue
        launched = [m.launched for m in members]
        if any(t is None for t in launched):
            continue
        # A launch time in the future (clock skew) counts as brand new, never as old.
        youngest = min(max(timedelta(0), now - utc(t, "launched")) for t in launched if t)
        if youngest > window:
            found.append(
                AbandonedLadder(ladder, tuple(sorted(m.instance_id for m in unclaimed)), youngest)
            )
    return found
