"""The fan-out policy: when each attempt of a probe or reserve starts and when each hold is
given back; never what the answer is.

The answer is the **sequential oracle**'s: try the candidates in order, one at a time, giving
each hold back before the next; the first that holds wins; a quota error (with nothing else of
the request held or in flight) or a permission-type error stops, and later candidates are
``not_tried``; a create that ended without an answer about capacity is asked again (rule
below); any other answer moves on. ``Plan`` reaches that answer with concurrency:

- **Decided in order.** The answer is the first candidate whose answer is decisive (held,
  stop) with every candidate before it answered non-decisively. Candidates after a decisive
  one are never started; candidates before it always are (memory never skips one).
- **Quota.** EC2 counts the request's own unused holds (and creates it is processing) toward
  the account's limits, so a quota error while anything else of the request is held or in
  flight is not an answer: the candidate is *parked* and retried once that has drained. Only a
  quota error on an attempt that ran *solo* (nothing else of the request occupying the quota
  from its start to its answer) counts: the request alone exceeds the limit. EC2 keeps
  counting a reservation for a while after it is cancelled (its error table lists the limit
  errors among the eventually consistent ones), so a solo attempt started within
  ``quota_settle`` seconds of one of the request's give-backs proves nothing either: it is
  parked again and retried after a growing pause, and only a solo quota error once that
  window has passed is the answer. A parked
  candidate also lowers the cap on holds and creates at once to what the quota was seen to
  carry; with a hold kept (reserve) of a worse candidate blocking a better one, that hold is
  given back to make room, and its candidate is tried again later if it still matters.
- **Throttling is not an answer about capacity** (contract v3). A create that ended throttled
  (by EC2, or by the broker's own rate budget), with a server error, or with no answer at all
  (a timeout or a dropped connection, which may have made the reservation) said nothing about
  the candidate's capacity (``outcomes.leaves_capacity_open``). Such a candidate is *unanswered*:
  it is tried again, with the same ClientToken, after a pause (``retry_pause``, doubling up to
  ``RETRY_PAUSE_CAP``), for as long as the budget lasts, and until it answers it blocks every
  candidate after it: a later hold can never be the answer over it. If the deadline comes
  first, the answer is ``BLOCKED``: ``status: "error"`` with that attempt's code, and every
  hold of the request is given back, the kept one too. Its code is what EC2 said last; the
  broker's ``RateBudgetExhausted`` only when EC2 said nothing (``errors.keeps_earlier``). An
  unanswered create does not widen the fan-out (EC2's request buckets are the account's, so
  the next create would meet the same throttle); the hedge delay still does.
- **Width.** ``bound``: only candidates before it may start. It starts from the memory's hints
  (``first_bound``) and widens (``widen``) at the first non-decisive answer or when the hedge
  delay passes without an answer.
- **Frugal** (``frugal``: the account's budget for creates is short now, as the pacer sees it).
  A create started only in case the ones before it fail costs a create (and its give-back a
  cancel) of buckets every container and tool of the account shares: in a class of desktops,
  the next desktop's. So while it is short, the fan-out widens only through the candidate
  after the one that answered, and the hedge waits (its time still wakes the engine, which
  asks the pacer again); the candidates memory says were out of capacity a moment ago are not
  speculative (they must be tried now anyway) and still start together.

Concurrency bounds: ``busy`` (creates in flight + holds not yet confirmed given back) stays
below ``cap`` = min(max concurrency, the quota cap from memory, the cap learned in this
request) at every start, and creates in flight below max concurrency.

Everything here is pure bookkeeping on times passed in; ``logic.fanout`` runs it with threads
(or a test with a simulated clock).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

from .errors import ErrorClass, Outcome, keeps_earlier
from .memory import HEDGE_FLOOR, Hint
from .outcomes import Kind, attempt_outcome, kind_of

H = TypeVar("H")

# How long after a give-back a solo quota error is not believed (EC2 does not say how long it
# counts a cancelled reservation: "terminated instances count toward your instance limit for a
# while after termination"), and the pauses of the retries meanwhile (doubling).
QUOTA_SETTLE_SECONDS = 10.0
QUOTA_RETRY_PAUSE = 0.5
QUOTA_RETRY_CAP = 4.0


_MOVE_ON = frozenset({Kind.INSUFFICIENT, Kind.UNSUPPORTED, Kind.ERROR})
# An unanswered candidate's next try, after its create gave up (its own retries, with backoff,
# are the adapters'): this pause, doubling per unanswered try up to the cap, which is the
# adapters' RetryPolicy cap. Seconds.
RETRY_PAUSE = 0.5
RETRY_PAUSE_CAP = 5.0


@dataclass(frozen=True)
class Tried(Generic[H]):
    """What one create answered: a live hold, or an error with its class and code."""

    hold: H | None = None
    reservation_id: str | None = None
    error_class: ErrorClass | None = None
    error_code: str | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if (self.hold is None) == (self.error_class is None):
            raise ValueError("a try answers either a hold or an error class")

    @property
    def kind(self) -> Kind:
        return kind_of(self.error_class)

    @property
    def outcome(self) -> Outcome:
        if self.error_class is None:
            return Outcome.AVAILABLE
        return attempt_outcome(self.error_class)


def retry_pause(unanswered: int, base: float = RETRY_PAUSE, cap: float = RETRY_PAUSE_CAP) -> float:
    """The pause before the next try of a candidate that ended unanswered ``unanswered``
    times in a row (1 or more)."""
    return min(cap, base * 2.0 ** min(max(unanswered - 1, 0), 16))


def first_bound(hints: Sequence[Hint], frugal: bool = False) -> int:
    """How many candidates may start at first. Up to and including the first promising one
    (not just out of capacity): it alone if memory says it had capacity a moment ago (with the
    ones before it, which must still be tried now); the first alone if nothing is known of it;
    and, when the first ones have just been out of capacity and the next is unknown, as far as
    ``widen`` goes (``frugal``: no further than the promising one)."""
    promising = next((i for i, hint in enumerate(hints) if hint is not Hint.OUT), len(hints))
    if promising == len(hints):
        return len(hints)
    if hints[promising] is Hint.AVAILABLE or frugal:
        return promising + 1
    if promising == 0:
        return 1
    return widen(hints, promising)


def widen(hints: Sequence[Hint], bound: int) -> int:
    """The next width: through the next candidate memory says had capacity, else all."""
    for index in range(bound, len(hints)):
        if hints[index] is Hint.AVAILABLE:
            return index + 1
    return len(hints)


class Phase(StrEnum):
    WAITING = "waiting"  # to be tried (again; an unanswered one not before ``retry_at``)
    RUNNING = "running"  # its create is in flight
    PARKED = "parked"  # quota error while the request occupied the quota: retried later
    DONE = "done"  # answered


class HoldState(StrEnum):
    NONE = "none"
    LIVE = "live"
    RETURNING = "returning"  # its give-back is in flight


class DecisionKind(StrEnum):
    WON = "won"  # ``index`` holds capacity, every candidate before it was tried now
    STOPPED = "stopped"  # ``index`` answered quota (alone) or a permission-type error
    # The deadline came while ``index``, before any hold, was still unanswered (throttled, a
    # server error, no answer): the answer is an error with its code, never a later hold.
    BLOCKED = "blocked"
    NONE = "none"  # every candidate answered, none decisively
    TIMED_OUT = "timed_out"  # the deadline came first; ``index``: the best hold, if any
    UNDECIDED = "undecided"  # still running


@dataclass(frozen=True)
class Decision:
    """The fan-out's decision so far (``DecisionKind``; ``index``: the candidate it is
    about, when there is one)."""

    kind: DecisionKind
    index: int | None = None

    @property
    def final(self) -> bool:
        return self.kind is not DecisionKind.UNDECIDED


@dataclass(frozen=True)
class HoldRecord:
    """One hold given back: ``seconds`` from the create's answer to the give-back's end."""

    reservation_id: str | None
    cancelled: bool
    seconds: float


@dataclass
class Slot:
    """One candidate's bookkeeping."""

    index: int
    phase: Phase = Phase.WAITING
    kind: Kind | None = None
    outcome: Outcome = Outcome.NOT_TRIED
    error_code: str | None = None
    message: str | None = None
    reservation_id: str | None = None
    tries: int = 0
    started_at: float = 0.0
    solo: bool = False
    parked_with: int = 0
    hold: HoldState = HoldState.NONE
    held_since: float = 0.0
    holds: list[HoldRecord] = field(default_factory=list)
    # Parked after a solo quota error that a give-back may still explain: not retried before
    # this moment, and how many such retries it has had (the pause grows with them).
    not_before: float = 0.0
    settle_retries: int = 0
    error_class: ErrorClass | None = None  # of the latest answer's error, if any
    unanswered: int = 0  # tries in a row that ended unanswered
    retry_at: float = 0.0  # an unanswered candidate is not tried again before this

    @property
    def decisive(self) -> bool:
        return self.phase is Phase.DONE and self.kind in (Kind.HELD, Kind.STOP, Kind.QUOTA)

    @property
    def open(self) -> bool:
        """Unanswered, and waiting for its next try."""
        return self.phase is Phase.WAITING and self.kind is Kind.UNANSWERED


@dataclass(frozen=True)
class Step:
    """What the policy asks of the coordinator now: the candidates to start, the holds to
    give back, when to ask again without news, and whether it is done."""

    start: tuple[int, ...] = ()
    give_back: tuple[int, ...] = ()
    wake_at: float | None = None  # call ``step`` again by then even without news
    done: bool = False


@dataclass(frozen=True)
class Report:
    """One candidate in the answer (contract ``attempts``)."""

    index: int
    outcome: Outcome
    error_code: str | None
    message: str | None
    reservation_id: str | None
    cancelled: bool | None  # of its last hold; None when it has none, or it is kept
    reservation_seconds: float  # of its holds given back
    tries: int
    holds: tuple[HoldRecord, ...]
    kept: bool

    @property
    def cleanup_pending(self) -> bool:
        """A hold of this candidate EC2 did not confirm as cancelled (contract: the answer
        says ``"cleanup": "pending"``)."""
        return any(not hold.cancelled for hold in self.holds)


class Plan:
    """The fan-out's state: ``step`` says what to start and give back; ``answered`` and
    ``returned`` report what happened; ``expire`` stops new starts (the deadline)."""

    def __init__(
        self,
        hints: Sequence[Hint],
        *,
        keep: bool,
        max_concurrency: int,
        hedge: float,
        moment: float,
        quota_cap: int | None = None,
        held: Sequence[tuple[int, str | None]] = (),
        quota_settle: float = QUOTA_SETTLE_SECONDS,
        frugal: bool = False,
    ) -> None:
        if not hints:
            raise ValueError("a fan-out has at least one candidate")
        self.hints = list(hints)
        self.keep = keep
        self.max_concurrency = max(1, max_concurrency)
        self.cap = (
            self.max_concurrency
            if quota_cap is None
            else min(self.max_concurrency, max(1, quota_cap))
        )
        self.hedge = max(0.0, hedge)
        self.slots = [Slot(i) for i in range(len(hints))]
        # The account's budget for creates is short (the module's "Frugal"); the engine sets
        # it again before each step, from its pacer.
        self.frugal = frugal
        self.bound = first_bound(self.hints, frugal)
        self.widened_at = moment
        self.expired = False
        # When the request last gave a hold back (EC2 may count it toward the quota a while).
        self.quota_settle = max(0.0, quota_settle)
        self.given_back_at: float | None = None
        self.max_busy = 0
        self.starts: list[tuple[int, int, int]] = []  # (index, busy before, cap) per start
        for index, reservation_id in held:
            # An earlier invocation's hold enters as answered: only better candidates are
            # tried, and it is given back if one of them wins (or if it must make room).
            slot = self.slots[index]
            slot.phase, slot.kind, slot.outcome = Phase.DONE, Kind.HELD, Outcome.AVAILABLE
            slot.hold, slot.held_since = HoldState.LIVE, moment
            slot.reservation_id = reservation_id

    # -- facts ----------------------------------------------------------------------------
    @property
    def running(self) -> int:
        return sum(1 for s in self.slots if s.phase is Phase.RUNNING)

    @property
    def live(self) -> int:
        """Holds EC2 still counts that the request can give back (live or being given)."""
        return sum(1 for s in self.slots if s.hold is not HoldState.NONE)

    @property
    def busy(self) -> int:
        return self.running + self.live

    def cut(self) -> int | None:
        """The first decisive candidate: nothing after it can change the answer."""
        return next((s.index for s in self.slots if s.decisive), None)

    def decision(self) -> Decision:
        for slot in self.slots:
            if slot.phase is Phase.DONE:
                if slot.decisive:
                    won = slot.kind is Kind.HELD
                    return Decision(DecisionKind.WON if won else DecisionKind.STOPPED, slot.index)
                continue
            if self.expired:
                cut = self.cut()
                before = self.slots[: len(self.slots) if cut is None else cut]
                blocked = next((s.index for s in before if s.open), None)
                if blocked is not None:
                    return Decision(DecisionKind.BLOCKED, blocked)
                best = cut if cut is not None and self.slots[cut].kind is Kind.HELD else None
                return Decision(DecisionKind.TIMED_OUT, best)
            return Decision(DecisionKind.UNDECIDED)
        return Decision(DecisionKind.NONE)

    def keeping(self) -> int | None:
        """Keep mode: the candidate whose hold is kept (the best so far), unless an unanswered
        candidate before it blocked the answer."""
        cut = self.cut()
        if not self.keep or cut is None or self.slots[cut].kind is not Kind.HELD:
            return None
        if self.decision().kind is DecisionKind.BLOCKED:
            return None
        return cut

    # -- events ---------------------------------------------------------------------------
    def answered(self, index: int, tried: Tried[Any], moment: float) -> None:
        slot = self.slots[index]
        if slot.phase is not Phase.RUNNING:
            raise ValueError(f"candidate {index} answered without running")
        kind = tried.kind
        earlier = slot.error_class if slot.kind is Kind.UNANSWERED else None
        if tried.error_class is None or not keeps_earlier(earlier, tried.error_class):
            # (Otherwise the broker's rate budget ran out on a later try of an attempt EC2 had
            # throttled or failed: the attempt keeps saying what EC2 said.)
            slot.outcome, slot.error_class = tried.outcome, tried.error_class
            slot.error_code, slot.message = tried.error_code, tried.message
        slot.kind = kind
        # The id and truth of the latest answer; earlier holds stay in ``holds``.
        slot.reservation_id = tried.reservation_id if kind is Kind.HELD else None
        slot.unanswered = slot.unanswered + 1 if kind is Kind.UNANSWERED else 0
        if kind is Kind.UNANSWERED:
            # Not an answer: asked again after a pause, while the budget lasts.
            slot.phase = Phase.WAITING
            slot.retry_at = moment + retry_pause(slot.unanswered)
        elif kind is Kind.HELD:
            slot.phase, slot.hold, slot.held_since = Phase.DONE, HoldState.LIVE, moment
        elif kind is Kind.QUOTA and not slot.solo:
            # Possibly our own doing: retry when what occupied the quota has drained, and
            # never again start more at once than the quota was seen to carry.
            slot.phase = Phase.PARKED
            slot.parked_with = self.busy
            self.cap = min(self.cap, max(1, self.live))
        elif kind is Kind.QUOTA and self._still_counted(slot):
            # Alone, but a hold the request gave back moments before may still be counted:
            # retry after a pause, until the window has passed.
            slot.phase = Phase.PARKED
            slot.parked_with = 0
            slot.not_before = moment + min(
                QUOTA_RETRY_CAP, QUOTA_RETRY_PAUSE * 2 ** min(slot.settle_retries, 16)
            )
            slot.settle_retries += 1
        else:
            slot.phase = Phase.DONE
        if kind in _MOVE_ON and self.bound < len(self.slots):
            self.bound = self._wider(index)
            self.widened_at = moment

    def _wider(self, answered: int) -> int:
        """The width after a non-decisive answer: ``widen``'s; while frugal, only through the
        candidate after the one that ``answered`` (one out of capacity that memory already said
        was out widens nothing while the promising one after it still runs)."""
        if self.frugal:
            return max(self.bound, min(len(self.slots), answered + 2))
        return widen(self.hints, self.bound)

    def returned(self, index: int, cancelled: bool, moment: float) -> None:
        slot = self.slots[index]
        if slot.hold is not HoldState.RETURNING:
            raise ValueError(f"candidate {index} gave back a hold it was not giving back")
        slot.holds.append(
            HoldRecord(slot.reservation_id, cancelled, max(0.0, moment - slot.held_since))
        )
        slot.hold = HoldState.NONE
        if cancelled:
            self.given_back_at = moment

    def expire(self) -> None:
        self.expired = True

    def _still_counted(self, slot: Slot) -> bool:
        """A solo attempt that started within ``quota_settle`` seconds of one of the request's
        give-backs: EC2 may still have counted that hold."""
        return (
            self.given_back_at is not None
            and slot.started_at - self.given_back_at < self.quota_settle
        )

    # -- the policy -----------------------------------------------------------------------
    def step(self, moment: float) -> Step:
        n = len(self.slots)
        undecided = not self.decision().final
        if (
            undecided
            and not self.expired
            and self.bound < n
            and not self.frugal
            and moment >= self.widened_at + self.hedge
        ):
            self.bound = widen(self.hints, self.bound)
            self.widened_at = moment
        cut = self.cut()
        keeping = self.keeping()

        give_back: list[int] = []
        for slot in self.slots:
            if slot.hold is not HoldState.LIVE:
                continue
            if slot.index == keeping:
                continue  # the best hold so far: kept
            give_back.append(slot.index)
        for slot in self.slots:
            # Parked after the answer was cut: no retry can matter any more.
            if slot.phase is Phase.PARKED and cut is not None and slot.index > cut:
                slot.phase = Phase.DONE
                slot.outcome = Outcome.NOT_TRIED
                slot.message = (
                    f"EC2 answered {slot.error_code} while this request's own reservations "
                    "occupied the quota; not retried: an earlier candidate decided the answer"
                )

        start: list[int] = []
        if not self.expired:
            limit = min(self.bound, n if cut is None else cut)
            # Counted once and kept as candidates start (a start adds one running attempt and
            # changes no hold): each count walks every slot, and asking per candidate made a
            # step quadratic in the candidates (most of a lone reserve's CPU in the broker).
            running, live = self.running, self.live
            for slot in self.slots[:limit]:
                busy = running + live
                if running >= self.max_concurrency or busy >= self.cap:
                    break
                if slot.phase is Phase.PARKED and moment < slot.not_before:
                    # Waiting for EC2 to stop counting a give-back: the quota is kept free
                    # for it (a worse candidate started now would take it again).
                    break
                ready = (
                    slot.phase is Phase.WAITING
                    and slot.hold is HoldState.NONE
                    and moment >= slot.retry_at
                ) or (
                    slot.phase is Phase.PARKED
                    and (busy == 0 or busy < slot.parked_with)
                    and moment >= slot.not_before
                )
                if not ready:
                    continue
                for other in self.slots:
                    if other.phase is Phase.RUNNING:
                        other.solo = False  # this start may take the quota it needs
                self.starts.append((slot.index, busy, self.cap))
                # Solo: nothing else of the request occupies the quota (a hold whose give-back
                # failed is beyond our reach and does not count: docs/performance.md, Fan-out).
                slot.solo = busy == 0
                slot.phase, slot.started_at = Phase.RUNNING, moment
                running += 1
                slot.tries += 1
                start.append(slot.index)
            self._make_room(cut, start, give_back, moment)
        self.max_busy = max(self.max_busy, self.busy)

        for index in give_back:
            self.slots[index].hold = HoldState.RETURNING
        decided = self.decision().final
        keeping = self.keeping()
        done = (
            decided
            and self.running == 0
            and all(
                s.hold is HoldState.NONE or (s.hold is HoldState.LIVE and s.index == keeping)
                for s in self.slots
            )
        )
        wakes = []
        if not decided and not self.expired:
            if self.bound < n:
                # While frugal the hedge waits, but its time still wakes the engine, which
                # asks the pacer again then (and again a hedge delay later, until it may).
                hedge_at = self.widened_at + self.hedge
                again = moment + max(self.hedge, HEDGE_FLOOR)
                wakes.append(max(hedge_at, again) if self.frugal else hedge_at)
            # Unanswered candidates that may be tried again: their next try (one whose time
            # has come but that waits for room starts when a call in flight comes back).
            limit = min(self.bound, n if cut is None else cut)
            wakes.extend(s.retry_at for s in self.slots[:limit] if s.open and s.retry_at > moment)
            # Candidates parked until EC2 stops counting a give-back (quota).
            wakes.extend(
                s.not_before
                for s in self.slots
                if s.phase is Phase.PARKED and s.not_before > moment
            )
        return Step(tuple(start), tuple(give_back), min(wakes, default=None), done)

    def _make_room(
        self, cut: int | None, start: list[int], give_back: list[int], moment: float
    ) -> None:
        """Reserve keeps its best hold; if that hold is all that stops a better candidate from
        being tried (parked on quota, or over the cap), give it back and try again later."""
        if not self.keep or cut is None or self.slots[cut].hold is not HoldState.LIVE:
            return
        if self.running or any(s.hold is HoldState.RETURNING for s in self.slots) or start:
            return  # something else will drain first
        blocked = next(
            (
                s
                for s in self.slots[:cut]
                if s.phase is Phase.PARKED or (s.phase is Phase.WAITING and moment >= s.retry_at)
            ),
            None,
        )
        if blocked is None:
            return
        kept = self.slots[cut]
        kept.phase = Phase.WAITING  # its hold goes back to make room: tried again if still needed
        give_back.append(kept.index)

    # -- the answer -----------------------------------------------------------------------
    def reports(self) -> list[Report]:
        keeping = self.keeping()
        out = []
        for slot in self.slots:
            outcome, message = slot.outcome, slot.message
            if slot.phase is Phase.PARKED:
                # Only left parked when the deadline came first.
                outcome = Outcome.LIMIT_EXCEEDED
                why = (
                    "a reservation this request had just given back may still have been counted"
                    if slot.settle_retries
                    else "this request's own reservations occupied the quota"
                )
                message = (
                    f"EC2 answered {slot.error_code} while {why}; the time budget ran out "
                    "before it could be retried alone"
                )
            elif slot.phase is Phase.WAITING and slot.tries == 0 and not slot.holds:
                outcome = Outcome.NOT_TRIED
            kept = slot.hold is HoldState.LIVE and slot.index == keeping
            out.append(
                Report(
                    index=slot.index,
                    outcome=outcome,
                    error_code=slot.error_code,
                    message=message,
                    reservation_id=slot.reservation_id,
                    cancelled=(
                        slot.holds[-1].cancelled
                        if slot.holds and not kept and slot.kind is Kind.HELD
                        else None
                    ),
                    reservation_seconds=sum(h.seconds for h in slot.holds),
                    tries=slot.tries,
                    holds=tuple(slot.holds),
                    kept=kept,
                )
            )
        return out
