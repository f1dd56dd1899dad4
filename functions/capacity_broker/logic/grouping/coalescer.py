"""Grouped probes (contract v3, v4): what a group asks EC2, and what its members do.

The ``Coalescer`` is the prober's one door: ``arrive_soon`` (a seat, on a thread of its own, so
the probe reads its flags meanwhile), then ``lead`` (a leader), ``wait`` (a member) or nothing
(alone), then ``leave``. The meeting itself is ``meeting.Meeting``; the answer is
``domain.group_plan.GroupPlan`` (one reservation of the summed count per subnet tried, the same
answer as each desktop alone in order).

The group's reservations are the broker's like any other: owned and tagged on create (purpose
``probe``, the request-id tag the part's id ``<group id>:<first>-<last>``, the group-id tag
the group's id, and the requests' own tags), targeted, limited, and the ClientToken derived
from the part's id and the subnet. Because the group-id tag goes out with the create, a member
that stops waiting for its leader (killed, out of time) finds whatever the group still holds
by that exact tag and gives it back before it probes alone (``give_back``): a leader's death leaks
nothing past its members' patience, and no member meets its own group's hold.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from ...adapters.aws import AwsError
from ...adapters.ec2 import Reservation, Subnet
from ...domain import tags as tagging
from ...domain.group import (
    ArrivalState,
    GroupKey,
)
from ...domain.group_plan import (
    Ask,
    GroupPlan,
    MemberAnswer,
    Said,
    held,
)
from ...domain.tags import Purpose
from ..reservations import HOLDING_STATES, Held, HoldSpec, NotOwnedError, ReservationCore
from . import answers
from .meeting import Meeting, Seat

log = logging.getLogger(__name__)

# Arrivals and leaves on their way at once in one process (a client's threads).
ARRIVALS = 64


@dataclass(frozen=True)
class Target:
    """What a group asks for: ``instance_type`` x the group's count in ``subnets`` (in order),
    of this platform and tenancy, with the requests' own tags."""

    subnets: list[Subnet]
    instance_type: str
    platform: str
    tenancy: str
    tags: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Grouped:
    """One member's answer from its group, and the subnets it indexes."""

    group_id: str
    size: int
    answer: MemberAnswer
    subnets: list[Subnet]


class Coalescer:
    """Answers groups of probes alike that meet in ``meeting`` (see the module)."""

    def __init__(
        self,
        core: ReservationCore,
        meeting: Meeting,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.core = core
        self.meeting = meeting
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def _threads(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                # Made as arrivals need them, up to as many as a process's probes can be at
                # once: an arrival never queues behind another.
                self._pool = ThreadPoolExecutor(max_workers=ARRIVALS, thread_name_prefix="meet")
            return self._pool

    def arrive_soon(
        self,
        key: GroupKey,
        request_id: str,
        patience: float,
        then: Callable[[Seat], None] | None = None,
    ) -> Future[Seat]:
        """This probe's seat, made on a thread of the coalescer's own; then ``then(seat)``
        there (a preparation: its failure is logged, never the probe's)."""

        def arrived() -> Seat:
            seat = self.meeting.arrive(key, request_id, patience)
            if then is not None:
                try:
                    then(seat)
                except Exception:
                    log.warning("a probe's preparation after its arrival failed", exc_info=True)
            return seat

        return self._threads().submit(arrived)

    def leave(self, seat: Seat) -> None:
        """The seat's mark goes (a lone probe's: one call bounded by the table's second, and
        none at all while the table is down). Not on a thread left behind: a Lambda container
        is frozen once it answers, and a call still under way then would land in whatever
        invocation thaws it."""
        self.meeting.leave(seat)

    def give_up(self, seat: Seat) -> None:
        """A leader that will not answer its group: its members probe alone at once."""
        if seat.state is ArrivalState.LEADING:
            self.meeting.give_up(seat)

    # -- a member -------------------------------------------------------------------------------
    def wait(
        self, seat: Seat, give_up_at: float, deadline: float, subnet_ids: list[str]
    ) -> Grouped | None:
        """A member's answer, or None: it probes alone (after giving back what its group still
        holds, when its leader may be gone with it)."""
        assert seat.group_id is not None
        waited = self.meeting.wait(seat, give_up_at, deadline)
        if waited.text is not None:
            found = answers.decode(waited.text, subnet_ids)
            if found.answer is not None:
                return Grouped(seat.group_id, found.size, found.answer, found.subnets)
        if waited.give_back:
            self.give_back(seat, deadline)
        return None

    def give_back(self, seat: Seat, deadline: float) -> None:
        """Give back every hold of the seat's group still holding (found by its exact group-id
        tag), then say so. What cannot be given back now is the cleaner's (it is tagged)."""
        assert seat.group_id is not None
        try:
            found = self.core.ec2.reservations(
                filters={
                    f"tag:{tagging.TAG_CLUSTER_ID}": [self.core.cluster_id],
                    f"tag:{tagging.TAG_GROUP_ID}": [seat.group_id],
                    f"tag:{tagging.TAG_PURPOSE}": [str(Purpose.PROBE)],
                },
                deadline=deadline,
            )
        except AwsError:
            log.warning("a probe group's holds could not be listed", exc_info=True)
            return
        every = True
        for reservation in found:
            if reservation.state in HOLDING_STATES:
                every = self._cancel(reservation, deadline) and every
        if every:
            self.meeting.given_back(seat)

    # -- the leader -----------------------------------------------------------------------------
    def lead(
        self,
        seat: Seat,
        target: Target,
        asks_until: float,
        hard_deadline: float,
    ) -> Grouped | None:
        """Wait out the window, answer the group, publish. None: the leader probes alone
        (nobody joined, or the group could not be answered)."""
        assert seat.state is ArrivalState.LEADING
        assert seat.group_id is not None
        # The window never takes more than half of what is left to ask in.
        moment = self.monotonic()
        size = self.meeting.close(seat, moment + max(0.0, asks_until - moment) / 2)
        if size is None or size < 2:
            if size is None:
                self.meeting.give_up(seat)
            return None
        try:
            found = self._answer(
                seat.group_id, size, seat.key.count, target, asks_until, hard_deadline
            )
        except Exception:  # the members must not wait for a leader that failed
            log.exception("a probe group failed; its members probe alone")
            self.meeting.give_up(seat, size)
            return None
        texts = {slot: answers.encode(found[slot], size, target.subnets) for slot in range(1, size)}
        self.meeting.publish(seat, texts)
        return Grouped(seat.group_id, size, found[0], target.subnets)

    def _answer(
        self,
        group_id: str,
        size: int,
        count: int,
        target: Target,
        deadline: float,
        hard_deadline: float,
    ) -> list[MemberAnswer]:
        plan = GroupPlan((count,) * size, len(target.subnets), self.monotonic())
        holds: dict[str, Held] = {}
        try:
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
        except BaseException:
            # The members probe alone: nothing of the group may stay held behind them.
            for made in holds.values():
                self._cancel(made.reservation, hard_deadline)
            raise
        for back in plan.to_give_back():
            confirmed = self._cancel(holds.pop(back.reservation_id).reservation, hard_deadline)
            plan.returned(back.reservation_id, confirmed, self.monotonic())
        return plan.answers()

    def _cancel(self, reservation: Reservation, deadline: float) -> bool:
        """True only when EC2 confirmed the cancel."""
        try:
            self.core.release(reservation, deadline)
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
            extra_tags=target.tags,
            group_id=group_id,
        )
        try:
            hold = self.core.hold(spec, deadline)
        except AwsError as error:
            return Said(error_class=error.error_class, error_code=error.code or "RequestTimeout")
        holds[hold.reservation.id] = hold
        return held(hold.reservation.id)
