"""Grouped probes (contract v3, v4): what makes probes alike, when a group closes, and how long
each waits. Pure rules on durations passed in; ``logic.grouping`` runs them.

**Forming** (``closes_now``; the protocol that runs it is ``logic.grouping``). Probes *alike*
(``GroupKey``: region, instance type, the subnet list in order, platform, tenancy, instance
count and the request's own tags) may be answered together. A probe that arrives while no
other probe alike is in flight is *alone*: it probes at once, exactly as without grouping (a
lone desktop is never delayed; probes one after another never group). A probe that arrives
while one alike is in flight has seen a burst: it opens a group and *leads* it; the group
takes *members* (later arrivals alike) until none has joined for ``window`` seconds, for at
most ``max_window`` seconds from its opening (a class arriving over a few seconds keeps one
group growing, as Karpenter batches pods: an idle period and a maximum), or until its slots
are taken; then it closes and the leader answers it. Arrival order in a group is the order of
the slots its joins took; the leader holds slot 0. Every one of these times is a duration on
the leader's own clock: no host compares its clock with another's.

How a group is answered (one reservation of the summed count per subnet tried, the same
answer as each desktop alone in order) is ``domain.group_plan``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

# A group's windows are the settings' (``config``: ``GROUP_WINDOW_SECONDS`` and
# ``GROUP_MAX_WINDOW_SECONDS`` by default). At most this many instances (the contract's largest
# probe) and members (each member's answer is an item of its own, so the size bounds only the
# leader's answering, never an item).
MAX_GROUP_COUNT = 1000
MAX_MEMBERS = 200

# How often a member looks for its answer: first a little after the window, then each pause a
# half longer than the last, at most ``LOOK_MOST_SECONDS``. A look is one eventually consistent
# read of the member's own answer item (half a read unit): about six looks in the first eight
# seconds, three read units a desktop.
LOOK_FIRST_SECONDS = 0.5
LOOK_GROWTH = 1.5
LOOK_MOST_SECONDS = 2.0
# How long a member that stops waiting gives a leader that has just published (its answers
# being written) or another member that is giving the group's holds back (``GroupState``).
GRACE_SECONDS = 2.0
# What a leader that starts late keeps, before its members stop waiting, to give its holds back
# and publish their answers (a cancel may wait for a create EC2 has not shown yet).
GIVE_BACK_SECONDS = 2.0
# How much sooner than it would give up itself a leader promises its group's answers: the
# patience it writes for its members is its own less this, so that members of the same budget
# whose arrival came a moment later in their invocation (their patience a little shorter) still
# join, and the leader stops asking this much sooner (``asks_until``'s ``gives_up``).
PROMISE_SECONDS = 2.0
# The longest a probe waits for a group (contract v4: a process killed at any line leaves nothing
# holding past its group's patience, at most 30 s), whatever its own budget (a client's may be
# minutes): what a dead leader's hold can cost, until its first member gives it back.
MOST_PATIENCE_SECONDS = 28.0


class ArrivalState(StrEnum):
    """What one probe's arrival made of it (glossary: docs/glossary.md). An arrival that found
    no group and no burst is *marked* (``Seat.marked``: the next arrival alike sees a probe in
    flight) until it *leaves*; a leader's and its members' marks go when their group closes."""

    ALONE = "alone"  # no group for it: it probes at once, as without grouping
    LEADING = "leading"  # it opened a group: it answers the group when it closes
    JOINED = "joined"  # it took a slot in a group: it waits for its answer


class GroupState(StrEnum):
    """Where one group stands. OPEN and CLOSED are the kind's item's (the group it names: its
    *pointer*); PUBLISHED and ABANDONED are the group's own, written once, by whoever gets
    there first (the leader answering, or a member that stopped waiting)."""

    OPEN = "open"  # it takes members
    CLOSED = "closed"  # its leader closed it: it asks EC2 for the slots taken
    PUBLISHED = "published"  # its leader gave every hold back and answers the members
    ABANDONED = "abandoned"  # a member stopped waiting: it gives the group's holds back


# -- what a group store answers (``logic.grouping.store``) ----------------------------------


class StoreDown(Exception):
    """The store cannot be asked now (it failed a moment ago, or did not answer in time).
    ``maybe_applied``: the failed call was a write that may have landed (no answer came)."""

    maybe_applied = False


@dataclass(frozen=True)
class KindItem:
    """A kind's item as an operation found it."""

    seen: str | None = None  # the stamp of the last arrival alike still in flight
    group_id: str | None = None  # the group it names
    state: GroupState | None = None  # that group's: OPEN or CLOSED (None: never pointed)
    slots: int = 0  # slots that group has taken, its leader's included
    patience: float = 0.0  # seconds its leader waits for it at most (members need as many)
    closed_by: str | None = None  # the stamp of the arrival that closed it


@dataclass(frozen=True)
class Joined:
    """A join that took a slot (``None``: it may have, but its answer was lost and another join
    came after it: the member cannot know which slot is its own)."""

    group_id: str
    slot: int | None


@dataclass(frozen=True)
class Ending:
    """A group's own item: how it ended, and whether its holds are known given back."""

    state: GroupState | None = None  # PUBLISHED, ABANDONED, or None (still going)
    given_back: bool = False


def closes_now(
    open_for: float,
    idle_for: float,
    slots: int,
    *,
    window: float,
    max_window: float,
    max_slots: int,
) -> bool:
    """Whether a leader closes its group now: its slots are taken, or nobody has joined for the
    idle ``window``, or it has been open the ``max_window``. Durations on the leader's own
    clock (how long the group has been open, how long since its slot count last changed)."""
    return slots >= max_slots or idle_for >= window or open_for >= max(window, max_window)


def max_slots(count: int, max_members: int = MAX_MEMBERS, max_count: int = MAX_GROUP_COUNT) -> int:
    """The slots of a group of probes for ``count`` instances each (leader included)."""
    return max(1, min(max_members, max_count // max(1, count)))


def look_pause(looks: int) -> float:
    """The pause before a member's next look for its answer, after ``looks`` looks."""
    if looks < 0:
        raise ValueError(f"looks must be >= 0, got {looks}")
    return min(LOOK_MOST_SECONDS, LOOK_FIRST_SECONDS * LOOK_GROWTH ** min(looks, 64))


def answer_by(moment: float, deadline: float) -> float:
    """When a probe that may be grouped wants its group's answer: half the time it has left,
    and no later than two thirds of the longest patience (as half a budget is two thirds of
    three quarters of it). The rest is for probing alone if the group cannot answer it."""
    return moment + min(max(0.0, deadline - moment) / 2, MOST_PATIENCE_SECONDS * 2 / 3)


def gives_up_at(answer_by: float, deadline: float) -> float:
    """When a member stops waiting for its group and probes alone: half the time left after
    its answer-by (a leader that vanished leaves it that much of its budget)."""
    return answer_by + max(0.0, deadline - answer_by) / 2


def patience(moment: float, deadline: float) -> float:
    """How long a probe that arrives at ``moment`` waits for a group at most: until
    ``gives_up_at`` its answer-by (three quarters of its budget), never past
    ``MOST_PATIENCE_SECONDS``."""
    return min(MOST_PATIENCE_SECONDS, gives_up_at(answer_by(moment, deadline), deadline) - moment)


def promise(patience: float) -> float:
    """How long after its arrival a leader of ``patience`` answers its group at the latest (what
    it writes for its members: ``PROMISE_SECONDS`` less than its patience)."""
    return max(0.0, patience - PROMISE_SECONDS)


def asks_until(moment: float, answer_by: float, gives_up: float) -> float:
    """Until when a group's leader asks EC2, starting at ``moment``: its own answer-by. A
    leader that reaches that before asking anything (its look-ups outlasted it: a cold
    container on a busy machine) would answer nobody, and every member would then probe
    alone, late and each at a lone probe's cost in EC2 calls; they still wait for it until
    they give up, no sooner than the leader itself would (``gives_up``, on its own clock: a
    member joins only a group whose leader waits no longer than it does). So it may ask into
    that time, for half of what is left of it: the other half (``GIVE_BACK_SECONDS`` at
    least) is for giving its holds back and publishing. Continuous in ``moment``."""
    late = min(gives_up - GIVE_BACK_SECONDS, moment + (gives_up - moment) / 2)
    return max(answer_by, late)


@dataclass(frozen=True)
class GroupKey:
    """What probes must share to be answered together: one instance count (each member's share
    of a hold is then the same, and no member's count need be written anywhere) and the
    request's own tags (a grouped hold carries them, so a tag policy sees it as a lone one)."""

    region: str
    instance_type: str
    subnet_ids: tuple[str, ...]
    platform: str
    tenancy: str
    count: int = 1
    tags: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def tags_of(tags: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((tags or {}).items()))


def group_id(leader_request_id: str, key: GroupKey, nonce: str) -> str:
    """A group's id: a request id of its own (the reservations' request-id and group-id tags,
    the seed of their ClientTokens), derived from its leader's request, what it probes and the
    leader's arrival stamp (unique per arrival, so a retried request opens another group)."""
    canonical = json.dumps(
        [
            leader_request_id,
            key.region,
            key.instance_type,
            list(key.subnet_ids),
            key.platform,
            key.tenancy,
            key.count,
            [list(t) for t in key.tags],
            nonce,
        ],
        ensure_ascii=True,
    )
    return "group-" + hashlib.sha256(canonical.encode("ascii")).hexdigest()[:32]
