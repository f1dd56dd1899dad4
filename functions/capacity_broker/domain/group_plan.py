"""Grouped probes (contract v3): how a group is answered, the same answer as ``oracle``.

**Answering** (``GroupPlan``, the same answer as ``oracle``). The sequential oracle: each
desktop alone, in arrival order, takes the first subnet in the list with capacity left for its
count, and its launch takes that capacity (a class fills a subnet before spilling to the
next). The group reaches it with one reservation of the summed count per subnet tried: a
*part* (a run of members in arrival order, at first all of them) asks one subnet for its summed
count. Held: every member of the part answers that subnet, and the hold is kept until the whole
group is decided (so the next part meets the capacity the earlier ones will use, as the oracle's
launches would). Insufficient capacity: the part splits in halves, the first half asking again
before the second; a single member out of capacity goes on to the next subnet, with the other
members that did, in arrival order. That is a greedy pass per subnet, which is what the oracle
does desktop by desktop (``oracle``; the property test compares them). A part whose summed
count is as large as one the subnet just had no room for is not asked: the group's own holds
only took more of that subnet since, so the answer would be the same (this keeps a class that
spills to singles at O(log n) creates per subnet instead of n).

The rest follows the fan-out's rules (``domain.fanout``):

- ``unsupported`` (the type here, whatever the count) and other errors that say nothing about
  this group move the whole part on to the next subnet; a permission-type error stops every
  member not yet answered (``error`` with its code).
- **Throttling is not an answer about capacity.** A create left unanswered (throttled, a 5xx, no
  answer) is asked again, with the same ClientToken, after ``retry_pause``; it blocks its part:
  nothing of the part moves on over it. At the deadline its members answer ``error`` with its
  code (``BLOCKED``). Members never reached by then probe alone (``ALONE``): the group's
  deadline is the earliest member's answer-by, half that member's budget, so each still has
  time of its own (its own deadline answers ``TimeBudgetExceeded`` if that runs out too). A
  leader that only starts asking after that (``asks_until``) still answers the members that
  wait for it.
- **Quota.** Unused reservations count toward the account's limits, so a part of several
  members splits on a quota error (its summed count may be what exceeds the limit). A single
  member's quota error while the group holds anything is not an answer: that member probes
  alone once the group has given its holds back (``ALONE``); with nothing held, the member
  alone exceeds the limit (``STOPPED``, ``limit_exceeded``).

Every hold is given back before any member answers (``"cancelled": true`` only when EC2
confirmed); each member's ``reservation_seconds`` is its share (its count over the hold's) of
the hold that answered it. A part out of capacity held nothing, so a member's share is all the
group spent on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from .errors import ErrorClass, Outcome, keeps_earlier
from .fanout import Tried, retry_pause
from .outcomes import Kind, attempt_outcome


class Verdict(StrEnum):
    WON = "won"  # ``subnet``: the first subnet with capacity for this member
    NONE = "none"  # every subnet: no capacity (or unsupported)
    STOPPED = "stopped"  # a permission-type error, or the member alone over the quota
    BLOCKED = "blocked"  # its part's create stayed unanswered until the deadline
    ALONE = "alone"  # the group cannot answer it: it probes alone (quota, see module)
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Ask:
    """One create of the group: ``members`` (positions, consecutive in arrival order) ask
    ``subnet`` for ``count`` instances. ``token`` tells one ask from another of the group
    (the ClientToken's nonce); a retry of the same ask has the same."""

    subnet: int
    members: tuple[int, ...]
    count: int

    @property
    def token(self) -> str:
        return f"{self.subnet}:{self.members[0]}-{self.members[-1]}"


# What one create answered: the fan-out's ``Tried`` (a live hold, here its reservation id, or
# an error class and code), so that both read EC2's answers by one table (``kind_of``).
Said = Tried[str]


def held(reservation_id: str) -> Said:
    return Tried(hold=reservation_id, reservation_id=reservation_id)


@dataclass
class Seen:
    """One member's attempt at one subnet: what its part was answered."""

    subnet: int
    outcome: Outcome
    error_code: str | None = None
    reservation_id: str | None = None  # the part's hold (available)


@dataclass
class Member:
    position: int
    count: int
    subnet: int = 0  # the next subnet it asks
    verdict: Verdict = Verdict.UNDECIDED
    seen: list[Seen] = field(default_factory=list)
    error_code: str | None = None


@dataclass
class GroupHold:
    reservation_id: str
    subnet: int
    members: tuple[int, ...]
    count: int
    since: float
    seconds: float | None = None  # set when given back
    cancelled: bool | None = None


class GroupPlan:
    """One group's answer, one create at a time: ``next_ask`` (None and ``wake_at``: wait;
    None and ``done``: every member decided), ``answered``, then ``to_give_back`` and
    ``returned`` for every hold, and ``answers`` when every hold is back."""

    def __init__(self, counts: Sequence[int], subnets: int, moment: float) -> None:
        if not counts or subnets < 1:
            raise ValueError("a group has members and subnets")
        self.subnets = subnets
        self.members = [Member(i, c) for i, c in enumerate(counts)]
        # Parts waiting to ask, in order: the current subnet's first (a stack, top = next).
        self.pending: list[tuple[int, ...]] = [tuple(range(len(counts)))]
        self.subnet = 0
        self.holds: list[GroupHold] = []
        self.expired = False
        self.retry_at = moment
        self.unanswered = 0
        self.unanswered_class: ErrorClass | None = None
        self.unanswered_code: str | None = None
        # Per subnet: the smallest count it had no room for (insufficient capacity).
        self.no_room: dict[int, int] = {}
        # The subnets whose first "no room" was followed by one member asking alone.
        self.tried_one: set[int] = set()
        self.no_room_code = "InsufficientInstanceCapacity"

    # -- what to do next -------------------------------------------------------------------
    @property
    def live_holds(self) -> int:
        return sum(1 for h in self.holds if h.seconds is None)

    @property
    def decided(self) -> bool:
        return all(m.verdict is not Verdict.UNDECIDED for m in self.members)

    def next_ask(self, moment: float) -> Ask | None:
        if self.expired or self.decided:
            return None
        self._advance()
        if not self.pending or moment < self.retry_at:
            return None
        while self.pending:
            part = self.pending[-1]
            count = sum(self.members[i].count for i in part)
            floor = self.no_room.get(self.subnet)
            if floor is None or count < floor:
                return Ask(self.subnet, part, count)
            # A part as large as one this subnet had no room for a moment ago has none now
            # either: the group's holds only took more of it.
            self._answered(
                Ask(self.subnet, part, count),
                Said(error_class=ErrorClass.CAPACITY, error_code=self.no_room_code),
                moment,
                inferred=True,
            )
            self._advance()
            if self.decided:
                return None
        return None

    @property
    def wake_at(self) -> float | None:
        if self.expired or self.decided or not self.pending:
            return None
        return self.retry_at

    def _advance(self) -> None:
        """When every part of this subnet is answered, the members that must go on form the
        next subnet's one part."""
        while not self.pending and not self.decided:
            going = tuple(m.position for m in self.members if m.verdict is Verdict.UNDECIDED)
            self.subnet += 1
            if self.subnet >= self.subnets:
                for i in going:
                    self.members[i].verdict = Verdict.NONE
                return
            for i in going:
                self.members[i].subnet = self.subnet
            self.pending.append(going)

    # -- events ----------------------------------------------------------------------------
    def answered(self, ask: Ask, said: Said, moment: float) -> None:
        self._answered(ask, said, moment)
        self._advance()

    def _answered(self, ask: Ask, said: Said, moment: float, inferred: bool = False) -> None:
        if not self.pending or self.pending[-1] != ask.members or ask.subnet != self.subnet:
            raise ValueError("an answer to an ask that is not the current one")
        kind = said.kind
        part = ask.members
        if kind is Kind.UNANSWERED:
            self.unanswered += 1
            if said.error_class is None or not keeps_earlier(
                self.unanswered_class, said.error_class
            ):
                self.unanswered_class, self.unanswered_code = said.error_class, said.error_code
            self.retry_at = moment + retry_pause(self.unanswered)
            return
        if not inferred:
            self.unanswered, self.unanswered_class, self.unanswered_code = 0, None, None
            self.retry_at = moment
        if kind is Kind.INSUFFICIENT:
            self.no_room[ask.subnet] = min(self.no_room.get(ask.subnet, ask.count), ask.count)
            self.no_room_code = said.error_code or self.no_room_code
        self.pending.pop()
        outcome = (
            Outcome.AVAILABLE if said.error_class is None else attempt_outcome(said.error_class)
        )
        if kind is Kind.HELD:
            assert said.reservation_id is not None
            self.holds.append(
                GroupHold(said.reservation_id, ask.subnet, part, ask.count, since=moment)
            )
            for i in part:
                member = self.members[i]
                member.seen.append(Seen(ask.subnet, outcome, None, said.reservation_id))
                member.verdict = Verdict.WON
            return
        splittable = kind in (Kind.INSUFFICIENT, Kind.QUOTA) and len(part) > 1
        if splittable and kind is Kind.INSUFFICIENT and ask.subnet not in self.tried_one:
            # The subnet's first "no room": its first member asks alone next. A subnet with
            # no room at all (the usual case for a scarce type) is then known in two creates,
            # not one per halving (seven for a class of 81), and the rest of the part is
            # inferred (``no_room``); a subnet with some room costs one create more than
            # halving. Once per subnet: halving after that (never one member at a time).
            self.tried_one.add(ask.subnet)
            self.pending.append(part[1:])
            self.pending.append(part[:1])
            return
        if splittable:
            half = (len(part) + 1) // 2
            # The first half asks first: it is earlier in arrival order.
            self.pending.append(part[half:])
            self.pending.append(part[:half])
            return
        for i in part:
            member = self.members[i]
            member.seen.append(Seen(ask.subnet, outcome, said.error_code))
            if kind is Kind.STOP:
                member.verdict, member.error_code = Verdict.STOPPED, said.error_code
            elif kind is Kind.QUOTA:
                if self.live_holds:
                    member.verdict = Verdict.ALONE
                else:
                    member.verdict, member.error_code = Verdict.STOPPED, said.error_code
            # INSUFFICIENT, UNSUPPORTED, ERROR: on to the next subnet (``_advance``).
        if kind is Kind.STOP:
            for member in self.members:
                if member.verdict is Verdict.UNDECIDED:
                    member.verdict, member.error_code = Verdict.STOPPED, said.error_code
            self.pending.clear()

    def expire(self) -> None:
        """The deadline: the part being asked is blocked (if unanswered); the rest probe alone."""
        if self.decided:
            self.expired = True
            return
        self.expired = True
        blocked = self.pending[-1] if self.pending and self.unanswered else ()
        for i in blocked:
            member = self.members[i]
            member.verdict, member.error_code = Verdict.BLOCKED, self.unanswered_code
            member.seen.append(
                Seen(
                    self.subnet,
                    attempt_outcome(self.unanswered_class or ErrorClass.TRANSIENT),
                    self.unanswered_code,
                )
            )
        for member in self.members:
            if member.verdict is Verdict.UNDECIDED:
                member.verdict = Verdict.ALONE
        self.pending.clear()

    def to_give_back(self) -> list[GroupHold]:
        """Every hold, once the group is decided (none before: the next part must meet the
        capacity the earlier ones will use)."""
        if not self.decided:
            return []
        return [h for h in self.holds if h.seconds is None]

    def returned(self, reservation_id: str, cancelled: bool, moment: float) -> None:
        hold = next(h for h in self.holds if h.reservation_id == reservation_id)
        hold.seconds, hold.cancelled = max(0.0, moment - hold.since), cancelled

    # -- the answers -----------------------------------------------------------------------
    def answers(self) -> list[MemberAnswer]:
        out = []
        for member in self.members:
            hold = next((h for h in self.holds if member.position in h.members), None)
            share = 0.0
            if hold is not None and hold.seconds is not None:
                share = hold.seconds * member.count / hold.count
            out.append(
                MemberAnswer(
                    verdict=member.verdict,
                    subnet=member.subnet if member.verdict is Verdict.WON else None,
                    seen=tuple(member.seen),
                    error_code=member.error_code,
                    reservation_id=hold.reservation_id if hold else None,
                    cancelled=hold.cancelled if hold else None,
                    reservation_seconds=share,
                )
            )
        return out


@dataclass(frozen=True)
class MemberAnswer:
    verdict: Verdict
    subnet: int | None
    seen: tuple[Seen, ...]
    error_code: str | None
    reservation_id: str | None  # the hold that answered it
    cancelled: bool | None
    reservation_seconds: float  # its share of that hold's


def oracle(counts: Sequence[int], capacity: Sequence[int]) -> list[int | None]:
    """Each desktop alone, in arrival order: the first subnet with capacity left for its count,
    which its launch then takes (None: no subnet had room)."""
    left = list(capacity)
    out: list[int | None] = []
    for count in counts:
        where = next((s for s, free in enumerate(left) if free >= count), None)
        if where is not None:
            left[where] -= count
        out.append(where)
    return out
