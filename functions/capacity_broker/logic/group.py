"""Grouped probes (contract v3), run within one process: the engine of ``domain.group``.

Why one process, without the state table: the probes that can meet here are the concurrent
calls of one root (the direct client from threads, the CLI's and Slurm programs' parallel
probes). A Lambda container serves one invocation at a time, so in it a probe always arrives
alone and grouping costs it one lock and nothing else (no round trip, no wait). Meeting across
containers needs the state table (``group#…`` items); that is not built yet (see
docs/performance.md, "Grouped probes").

``Coalescer.arrive`` is the whole decision (``domain.group.Lobby``) under one lock. A probe
that arrives while another alike is in flight has seen a burst: it leads a group, waits for
the window (on the root's monotonic clock) while later probes alike join, then answers every
member with one reservation of the summed count per subnet tried (``GroupPlan``), gives every
hold back, and publishes each member's answer. The leader stops asking at the earliest
member's ``answer_by`` (half that member's budget); a member waits for its answer until its
deadline, and probes alone if the leader failed (or never published by then). A leader left
alone by its window probes alone too: a group of one is a lone probe.

The group's reservations are the broker's like any other: owned and tagged on create (purpose
``probe``, the request-id tag the part's id ``<group id>:<first>-<last>``), targeted, limited,
and the ClientToken derived from that id and the subnet (so an SDK retry or a retry of an
unanswered create finds the same reservation, and two parts never share one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..adapters.aws import AwsError
from ..adapters.ec2 import Subnet
from ..domain.group import (
    Arrival,
    Ask,
    Forming,
    GroupKey,
    GroupPlan,
    Lobby,
    MemberAnswer,
    Role,
    Said,
    held,
)
from ..domain.tags import Purpose
from .reservations import Held, HoldSpec, NotOwnedError, ReservationCore

log = logging.getLogger(__name__)

# A real wait is cut in slices this long (seconds) so that a clock other than the machine's
# (the emulator's in tests) is read again; the verdicts follow that clock, never this.
_SLICE = 0.02


@dataclass
class Outcome:
    """A group's published answers (None: the leader gave up; its members probe alone)."""

    group_id: str
    size: int
    answers: list[MemberAnswer] | None
    subnets: list[Subnet] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """What a group asks for: ``instance_type`` x the group's count in ``subnets`` (in order),
    of this platform and tenancy."""

    subnets: list[Subnet]
    instance_type: str
    platform: str
    tenancy: str


@dataclass(frozen=True)
class Grouped:
    """One member's answer from its group."""

    outcome: Outcome
    answer: MemberAnswer


@dataclass
class _Group:
    forming: Forming
    answer_by: list[float] = field(default_factory=list)
    outcome: Outcome | None = None
    unread: int = 0  # members still to take their answer (or give up)


class Coalescer:
    """Where one root's probes alike meet and are answered together (see the module)."""

    def __init__(
        self,
        core: ReservationCore,
        *,
        window: float,
        max_count: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.core = core
        self.monotonic = monotonic
        self._lobby = Lobby(window=window, max_count=max_count)
        self._changed = threading.Condition()
        self._in_flight: dict[GroupKey, int] = {}
        self._groups: dict[str, _Group] = {}

    # -- arriving and leaving --------------------------------------------------------------
    def arrive(self, key: GroupKey, count: int, request_id: str, answer_by: float) -> Arrival:
        """This probe's role. Every ``arrive`` is followed by one ``leave``. ``answer_by``: when
        a group must have answered this probe (the leader stops asking then)."""
        with self._changed:
            moment = self.monotonic()
            burst = self._in_flight.get(key, 0) > 0
            self._in_flight[key] = self._in_flight.get(key, 0) + 1
            arrival = self._lobby.arrive(key, count, request_id, moment, burst=burst)
            if arrival.group is not None:
                group = self._groups.setdefault(arrival.group.group_id, _Group(arrival.group))
                group.answer_by.append(answer_by)
                if arrival.role is Role.MEMBER:
                    group.unread += 1
                self._changed.notify_all()
            return arrival

    def leave(self, key: GroupKey) -> None:
        with self._changed:
            self._in_flight[key] -= 1
            if not self._in_flight[key]:
                del self._in_flight[key]

    def waiting(self, key: GroupKey) -> int:
        """How many probes alike are in a group that is still taking members."""
        with self._changed:
            forming = self._lobby.forming.get(key)
            return len(forming.counts) if forming is not None else 0

    # -- the leader ------------------------------------------------------------------------
    def lead(
        self,
        arrival: Arrival,
        target: Target,
        deadline: float,
        hard_deadline: float,
    ) -> Grouped | None:
        """Wait out the window, answer the group, publish. None: the leader probes alone
        (nobody joined, or the group could not be answered)."""
        forming = arrival.group
        assert forming is not None
        assert arrival.role is Role.LEADER
        group = self._groups[forming.group_id]
        with self._changed:
            while self.monotonic() < forming.closes_at and forming.total < self._lobby.max_count:
                self._changed.wait(min(_SLICE, max(0.0, forming.closes_at - self.monotonic())))
            counts = self._lobby.close(forming)
            answer_by = min(group.answer_by)
        if len(counts) == 1:
            self._publish(group, Outcome(forming.group_id, 1, None))
            return None
        outcome = Outcome(forming.group_id, len(counts), None, list(target.subnets))
        try:
            outcome.answers = self._answer(
                forming.group_id,
                counts,
                target,
                min(deadline, answer_by),
                hard_deadline,
                outcome,
            )
        except Exception:  # the members must not wait for a leader that failed
            log.exception("a probe group failed; its members probe alone")
            outcome.answers = None
        self._publish(group, outcome)
        if outcome.answers is None:
            return None
        return Grouped(outcome, outcome.answers[0])

    def _answer(
        self,
        group_id: str,
        counts: tuple[int, ...],
        target: Target,
        deadline: float,
        hard_deadline: float,
        outcome: Outcome,
    ) -> list[MemberAnswer]:
        plan = GroupPlan(counts, len(target.subnets), self.monotonic())
        holds: dict[str, Held] = {}
        try:
            self._ask(plan, group_id, target, deadline, holds)
        except BaseException:
            # The members probe alone: nothing of the group may stay held behind them.
            for made in holds.values():
                self._give_back(made, hard_deadline)
            raise
        for back in plan.to_give_back():
            confirmed = self._give_back(holds.pop(back.reservation_id), hard_deadline)
            plan.returned(back.reservation_id, confirmed, self.monotonic())
        return plan.answers()

    def _ask(
        self,
        plan: GroupPlan,
        group_id: str,
        target: Target,
        deadline: float,
        holds: dict[str, Held],
    ) -> None:
        """Ask EC2 what the plan asks, one create at a time, until every member is decided or
        the deadline comes."""
        while not plan.decided:
            moment = self.monotonic()
            if moment >= deadline:
                break
            ask = plan.next_ask(moment)
            if ask is None:
                wake = plan.wake_at
                if plan.decided or wake is None:
                    break
                self.core.sleep(max(0.0, min(wake, deadline) - moment))
                continue
            said = self._create(group_id, ask, target, deadline, holds)
            plan.answered(ask, said, self.monotonic())
        if not plan.decided:
            plan.expire()

    def _give_back(self, hold: Held, hard_deadline: float) -> bool:
        """True only when EC2 confirmed the cancel."""
        try:
            self.core.release(hold.reservation, hard_deadline)
        except (AwsError, NotOwnedError):
            return False
        return True

    def _create(
        self,
        group_id: str,
        ask: Ask,
        target: Target,
        deadline: float,
        holds: dict[str, Held],
    ) -> Said:
        spec = HoldSpec(
            purpose=Purpose.PROBE,
            # The part's own request id: its tag and the seed of its ClientToken.
            request_id=f"{group_id}:{ask.members[0]}-{ask.members[-1]}",
            instance_type=target.instance_type,
            subnet=target.subnets[ask.subnet],
            count=ask.count,
            platform=target.platform,
            tenancy=target.tenancy,
        )
        try:
            hold = self.core.hold(spec, deadline)
        except AwsError as error:
            return Said(error_class=error.error_class, error_code=error.code or "RequestTimeout")
        holds[hold.reservation.id] = hold
        return held(hold.reservation.id)

    def _publish(self, group: _Group, outcome: Outcome) -> None:
        with self._changed:
            group.outcome = outcome
            self._forget(group)
            self._changed.notify_all()

    # -- a member --------------------------------------------------------------------------
    def wait(self, arrival: Arrival, give_up: float) -> Grouped | None:
        """This member's answer, or None (probe alone): the leader failed, or gave none by
        ``give_up`` (the root's monotonic clock; the member's deadline: in one process the
        leader always publishes, by its members' ``answer_by`` and its give-backs)."""
        assert arrival.group is not None
        assert arrival.role is Role.MEMBER
        group_id = arrival.group.group_id
        with self._changed:
            group = self._groups[group_id]
            while group.outcome is None and self.monotonic() < give_up:
                self._changed.wait(_SLICE)
            outcome = group.outcome
            group.unread -= 1
            self._forget(group)
        if outcome is None or outcome.answers is None:
            return None
        return Grouped(outcome, outcome.answers[arrival.position])

    def _forget(self, group: _Group) -> None:
        """Under the lock: a group answered and read by every member is dropped."""
        if group.outcome is not None and group.unread <= 0:
            self._groups.pop(group.forming.group_id, None)
