"""probe: is there capacity for this instance type in one of these subnets, right now?

The answer is the first subnet in the caller's order that has capacity now, as trying them one
at a time would find; every reservation made on the way is cancelled before the answer. *When*
each subnet is tried is the fan-out's choice (``logic.attempts``, ``domain.fanout``): the first
alone when it had capacity a moment ago or nothing is known, every subnet at once when the
first ones have just been out of capacity, and never more holds at once than the quota carried.
A quota error caused by the probe's own reservations is tried again once they are given back;
``limit_exceeded`` only when the probe alone exceeds the limit. Throttling, 5xx and lost answers
are retried with jittered backoff under the invocation's time budget, always with the same
ClientToken, and are never taken for "no capacity": a subnet left unanswered when the budget
runs out makes the answer ``error`` with its code, never a later subnet (contract v3).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..adapters.ec2 import Ec2
from ..adapters.ssm import Flags, FlagValues
from ..domain.errors import Outcome
from ..domain.failures import BrokerFailure
from ..domain.fanout import DecisionKind
from ..domain.group import (
    ArrivalState,
    GroupKey,
    answer_by,
    asks_until,
    patience,
    promise,
)
from ..domain.group_plan import (
    Verdict,
)
from ..domain.tags import Purpose
from ..models import Attempt, ProbeRequest, ProbeResponse
from ..models.probe import ProbeGroup
from . import InvalidInput, placement
from .attempts import Attempts, Place, Ran, Spending
from .background import Background
from .failures import failed, step
from .grouping import Coalescer, Grouped, Seat, Target
from .memory import CapacityMemory, Recall
from .reservations import HoldSpec, ReservationCore

# What the handler's metrics are made of (every create's answer, every give-back's seconds).
ProbeStats = Spending


def probe_key(region: str, request: ProbeRequest) -> GroupKey:
    """What a probe must share with others to be answered with them (``domain.group``)."""
    return GroupKey(
        region,
        request.instance_type,
        tuple(request.subnet_ids),
        request.platform or f"image:{request.image_id}",
        request.tenancy,
        request.instance_count,
        GroupKey.tags_of(request.tags),
    )


class Remembering:
    """One probe's read of the capacity memory, started once: at once for a probe that will
    ask EC2, never for a group's member (it asks EC2 nothing, so it has no use for it: in a
    class of 200, 190 reads of the state table saved while the class arrives)."""

    def __init__(
        self,
        memory: CapacityMemory | None,
        region: str,
        instance_type: str,
        deadline: float,
    ) -> None:
        self.memory = memory
        self.region = region
        self.instance_type = instance_type
        self.deadline = deadline
        self._lock = threading.Lock()
        self._started = False
        self._recall: Recall | None = None

    def start(self) -> None:
        """Start the read (once; without a memory, nothing)."""
        with self._lock:
            if not self._started and self.memory is not None:
                self._recall = self.memory.recall(self.region, [self.instance_type], self.deadline)
            self._started = True

    def recall(self) -> Recall | None:
        """The read under way, started now if it was not."""
        self.start()
        return self._recall


class Placing:
    """One probe's look-up of its places (``placement.resolve``), started once on a thread of
    its own beside the flags' read: at once for a probe that will ask EC2, never for a group's
    member (its leader looks the places up for the group). A cold container then reads its
    flags and looks its places up in one round trip, not two in a row. Only reads are made, so
    nothing is created before the flags say to probe (contract: ``skipped``, no reservation).

    What the look-ups found (or how they failed) is the probe's only when it goes on to ask
    EC2 (``result``); a probe the flags stop drops it (``drop``). Either way the answer waits
    for them to end (their calls end by the probe's deadline): nothing keeps running after it.
    """

    def __init__(self, ec2: Ec2, request: ProbeRequest, deadline: float) -> None:
        self.ec2 = ec2
        self.request = request
        self.deadline = deadline
        self._lock = threading.Lock()
        self._looking: Background[placement.Placement] | None = None
        self._dropped = False

    def start(self) -> None:
        """Start the look-ups on their thread (once; never after ``drop``). A thread that
        cannot start raises, and leaves the look-ups to be made where they are used
        (``result``), as if never started: the probe does not wait for a thread that never
        ran."""
        with self._lock:
            if self._looking is None and not self._dropped:
                self._looking = Background(self._resolve, name="probe-placing")

    def _resolve(self) -> placement.Placement:
        return placement.resolve(self.ec2, self.request, self.request.subnet_ids, self.deadline)

    def result(self) -> placement.Placement:
        """The places, raising what the look-ups raised; looked up now, on this thread, when
        they were never started (a member that ends up probing alone)."""
        with self._lock:
            looking = self._looking
        if looking is None:
            return self._resolve()
        return looking.result()

    def drop(self) -> None:
        """The probe will not use the look-ups: none starts from now on, and one under way
        is waited for, its result or error let go."""
        with self._lock:
            self._dropped = True
            looking = self._looking
        if looking is not None:
            looking.wait()  # whatever it says is not the probe's answer


@dataclass(frozen=True)
class Arriving:
    """A probe's arrival on its way (its seat), when it arrived, when its group must answer it
    (half its budget) and how long it waits for a group at most."""

    seat: Future[Seat]
    at: float
    by: float
    patience: float


@dataclass(frozen=True)
class Asking:
    """One probe under way: its request, its read of the memory, its look-ups, its
    deadlines, the fields every answer carries, and what it spends."""

    request: ProbeRequest
    request_id: str
    remembering: Remembering
    placing: Placing
    deadline: float
    hard_deadline: float
    base: dict[str, str]
    stats: ProbeStats


class Prober:
    def __init__(
        self,
        ec2: Ec2,
        flags: Flags,
        core: ReservationCore,
        max_concurrency: int = 16,
        monotonic: Callable[[], float] = time.monotonic,
        memory: CapacityMemory | None = None,
        grouping: Coalescer | None = None,
    ) -> None:
        self.ec2 = ec2
        self.grouping = grouping
        self.flags = flags
        self.core = core
        self.max_concurrency = max_concurrency
        self.monotonic = monotonic
        self.memory = memory

    def probe(
        self,
        request: ProbeRequest,
        request_id: str,
        deadline: float,
        hard_deadline: float,
    ) -> tuple[ProbeResponse, ProbeStats]:
        stats = ProbeStats(instance_count=request.instance_count)
        base = {"request_id": request_id, "instance_type": request.instance_type}
        # The look-ups (instance types, subnets, image, VPCs) and the memory's read start
        # beside the flags' read, not after it: on a cold container that is one round trip
        # fewer before the first create. They only read, and what they find is dropped when
        # the flags stop the probe. The decision takes whatever the memory has by then. With
        # grouping both start once the probe knows it is not a group's member (its arrival,
        # one round trip to the table, beside the flags' read too).
        remembering = Remembering(self.memory, self.ec2.region, request.instance_type, deadline)
        placing = Placing(self.ec2, request, deadline)
        asked = Asking(
            request, request_id, remembering, placing, deadline, hard_deadline, base, stats
        )
        if self.grouping is None:
            placing.start()
            remembering.start()
            return self._flagged(asked)
        # Probes alike meet before anything is looked up: a member asks EC2 nothing (its
        # leader looks the places up once for the group, while the window is open). The
        # arrival (a call to the state table) overlaps the flags' read, so a lone probe does
        # not wait for it. The group answers within half of each member's budget; the rest is
        # for probing alone if it cannot.
        key = probe_key(self.ec2.region, request)
        now = self.monotonic()
        # How long this probe would wait for a group at most (a duration: a member joins only
        # a group whose leader promised no later, whatever the hosts' clocks say).
        waits = patience(now, deadline)
        seat = self.grouping.arrive_soon(
            key,
            request_id,
            waits,
            then=lambda seat: self._prepare_unless_member(seat, asked),
        )
        arriving = Arriving(seat, now, answer_by(now, deadline), waits)
        try:
            return self._flagged(asked, arriving)
        finally:
            if seat.exception() is None:  # (an arrival that raised has no seat to leave)
                self.grouping.leave(seat.result())

    def _prepare_unless_member(self, seat: Seat, asked: Asking) -> None:
        """Once this probe knows it will ask EC2 (it is not a group's member), its look-ups
        and its memory read start at once, beside the flags' read; the look-ups' thread makes
        the EC2 client as it starts (``Root.first_clients``: a cold container does not make
        it for a member, which never asks EC2). A member that ends up probing alone looks
        its places up and starts its read then."""
        if seat.state is not ArrivalState.JOINED:
            asked.placing.start()
            asked.remembering.start()

    def _give_up_leading(self, arriving: Arriving | None) -> None:
        """A probe that stops before it answers its group (its flags could not be read, or
        say that no probe is made): a group it leads takes no more members, and those it has
        probe alone at once instead of waiting for it."""
        if arriving is None or self.grouping is None or arriving.seat.exception() is not None:
            return
        self.grouping.give_up(arriving.seat.result())

    def _unflagged(self, asked: Asking) -> ProbeResponse | None:
        """The answer when the flags stop the probe (they cannot be read, or say that no
        probe is made); None: it goes on."""
        base = asked.base
        try:
            with step("Could not read the feature flags", unanswered="ParameterStoreUnavailable"):
                flags: FlagValues = self.flags.read(asked.deadline)
        except BrokerFailure as failure:
            return ProbeResponse(**failed(failure), **base)
        if not flags.enable:
            return ProbeResponse(
                status="skipped",
                subnet_id=asked.request.subnet_ids[0],
                message="EnableCapacityReservation is false: no probe was made; "
                "launch in the first subnet.",
                **base,
            )
        return None

    def _flagged(
        self, asked: Asking, arriving: Arriving | None = None
    ) -> tuple[ProbeResponse, ProbeStats]:
        """After the flags' read: skipped, alone, or (``arriving``: this probe's seat on its
        way, and when its group must answer it) with the group it met."""
        request, deadline, base, stats = asked.request, asked.deadline, asked.base, asked.stats
        try:
            stopped = self._unflagged(asked)
        except BaseException:
            self._stop(asked, arriving)
            raise
        if stopped is not None:
            self._stop(asked, arriving)
            return stopped, stats
        if arriving is None:
            return self._alone(asked)
        assert self.grouping is not None
        seat, by = arriving.seat.result(), arriving.by
        grouped: Grouped | None = None
        known: placement.Placement | None = None  # a leader's look-up, not made twice
        if seat.state is ArrivalState.JOINED:
            give_up = arriving.at + arriving.patience
            grouped = self.grouping.wait(seat, give_up, deadline, request.subnet_ids)
        elif seat.state is ArrivalState.LEADING:
            try:
                place = self._place(asked)
            except BaseException:
                self.grouping.give_up(seat)  # its members probe alone, at once
                raise
            if not isinstance(place, placement.Placement):
                self.grouping.give_up(seat)
                return ProbeResponse(**place, **base), stats
            target = Target(
                place.subnets, request.instance_type, place.platform, place.tenancy, request.tags
            )
            # It answers its members by what it promised them (a little before its own
            # give-up), late or not.
            promised = arriving.at + promise(arriving.patience)
            asks = asks_until(self.monotonic(), by, promised)
            grouped = self.grouping.lead(seat, target, min(deadline, asks), asked.hard_deadline)
            known = place
        if grouped is not None and grouped.answer.verdict is not Verdict.ALONE:
            stats.grouped = True
            if seat.state is ArrivalState.LEADING:
                stats.led_group_of = grouped.size
            return _grouped_answer(base, request, grouped), stats
        return self._alone(asked, known)

    def _stop(self, asked: Asking, arriving: Arriving | None) -> None:
        """The flags stopped the probe: a group it leads is given up (its members go on at
        once), then its look-ups are let go (waited for, their result unused)."""
        self._give_up_leading(arriving)
        asked.placing.drop()

    def _place(self, asked: Asking) -> placement.Placement | dict[str, Any]:
        """The request's places (its look-ups' result), or the failed answer's fields when
        EC2 could not be asked (``InvalidInput`` is raised: the handler's
        ``invalid_request``)."""
        try:
            with step("Could not look up the instance types, subnets, image or VPC"):
                return asked.placing.result()
        except InvalidInput:
            raise
        except BrokerFailure as failure:
            return failed(failure)

    def _alone(
        self, asked: Asking, known: placement.Placement | None = None
    ) -> tuple[ProbeResponse, ProbeStats]:
        """The probe on its own: its places looked up (unless ``known``: a leader's), then the
        fan-out over its subnets."""
        request, deadline, base, stats = asked.request, asked.deadline, asked.base, asked.stats
        place = known or self._place(asked)
        if not isinstance(place, placement.Placement):
            return ProbeResponse(**place, **base), stats

        def spec_of(where: Place) -> HoldSpec:
            return HoldSpec(
                purpose=Purpose.PROBE,
                request_id=asked.request_id,
                instance_type=where.instance_type,
                subnet=where.subnet,
                count=request.instance_count,
                platform=place.platform,
                tenancy=place.tenancy,
                extra_tags=request.tags,
            )

        attempts = Attempts(
            self.core,
            keep=False,
            max_concurrency=self.max_concurrency,
            monotonic=self.monotonic,
            memory=self.memory,
        )
        ran = attempts.run(
            [Place(request.instance_type, subnet) for subnet in place.subnets],
            spec_of,
            asked.remembering.recall(),
            deadline,
            asked.hard_deadline,
            stats,
        )
        return _answer(base, request, ran, stats), stats


def _answer(
    base: dict[str, str], request: ProbeRequest, ran: Ran, stats: ProbeStats
) -> ProbeResponse:
    """The answer follows the decision (the sequential oracle's), not a count of outcomes."""
    attempts = ran.attempts
    decision = ran.decision
    seconds = round(stats.reservation_seconds, 3)
    winner = ran.winner
    if winner is not None:
        won = attempts[winner]
        message = (
            f"{request.instance_type} has capacity for {request.instance_count} in "
            f"{won.subnet_id} ({won.availability_zone})"
        )
        if decision.kind is DecisionKind.TIMED_OUT:
            message += (
                "; the time budget ran out before every subnet before it could be tried: "
                "an earlier one may have capacity too (see attempts)"
            )
        response = ProbeResponse(
            status="available",
            subnet_id=won.subnet_id,
            availability_zone=won.availability_zone,
            availability_zone_id=won.availability_zone_id,
            attempts=attempts,
            reservation_seconds=seconds,
            message=message,
            **base,
        )
    elif ran.only_no_capacity:
        response = ProbeResponse(
            status="unavailable",
            attempts=attempts,
            reservation_seconds=seconds,
            message=f"No capacity for {request.instance_count} × {request.instance_type} in "
            f"any of the {len(attempts)} subnets",
            **base,
        )
    else:
        failure = ran.failure()
        if decision.kind is DecisionKind.TIMED_OUT or failure is None:
            code = "TimeBudgetExceeded"
            message = "The time budget ran out before every subnet was tried"
        elif decision.kind is DecisionKind.STOPPED:
            code = failure.error_code or "RequestTimeout"
            message = (
                f"Stopped in {failure.subnet_id}: {code} ({failure.outcome}); other subnets "
                "cannot help with that."
            )
        elif decision.kind is DecisionKind.BLOCKED:
            code = failure.error_code or "RequestTimeout"
            message = (
                f"EC2 did not say whether {failure.subnet_id} has capacity ({code}, "
                f"{failure.outcome}) before the time budget ran out; a later subnet is never "
                "answered over an earlier one. Ask again."
            )
        else:
            code = failure.error_code or "RequestTimeout"
            message = (
                f"No subnet had capacity that EC2 confirmed; {failure.subnet_id} answered "
                f"{code} ({failure.outcome})"
            )
        response = ProbeResponse(
            status="error",
            error_code=code,
            attempts=attempts,
            reservation_seconds=seconds,
            message=message,
            **base,
        )
    if ran.result.cleanup_pending:
        response.cleanup = "pending"
        response.message += (
            "; a probe reservation could not be cancelled: its EndDate and the cleaner will "
            "remove it"
        )
    return response


def _grouped_answer(base: dict[str, str], request: ProbeRequest, grouped: Grouped) -> ProbeResponse:
    """A member's answer from its group (``domain.group_plan``): the same statuses as a lone
    probe's, its attempts as its part of the group saw them, and ``group``."""
    answer, subnets = grouped.answer, grouped.subnets
    seen = {s.subnet: s for s in answer.seen}
    attempts = []
    for index, subnet in enumerate(subnets):
        at = seen.get(index)
        won = at is not None and at.outcome is Outcome.AVAILABLE
        attempts.append(
            Attempt(
                subnet_id=subnet.subnet_id,
                availability_zone=subnet.availability_zone,
                availability_zone_id=subnet.availability_zone_id,
                outcome=at.outcome if at is not None else Outcome.NOT_TRIED,
                error_code=at.error_code if at is not None and not won else None,
                reservation_id=at.reservation_id if won and at is not None else None,
                cancelled=answer.cancelled if won else None,
            )
        )
    group = ProbeGroup(id=grouped.group_id, size=grouped.size, reservation_id=answer.reservation_id)
    seconds = round(answer.reservation_seconds, 6)
    common = {"attempts": attempts, "reservation_seconds": seconds, "group": group, **base}
    together = f" (answered with {grouped.size} probes alike, group {grouped.group_id})"
    if answer.verdict is Verdict.WON and answer.subnet is not None:
        won_at = subnets[answer.subnet]
        response = ProbeResponse(
            status="available",
            subnet_id=won_at.subnet_id,
            availability_zone=won_at.availability_zone,
            availability_zone_id=won_at.availability_zone_id,
            message=f"{request.instance_type} has capacity for {request.instance_count} in "
            f"{won_at.subnet_id} ({won_at.availability_zone})" + together,
            **common,
        )
    elif answer.verdict is Verdict.NONE:
        response = ProbeResponse(
            status="unavailable",
            message=f"No capacity for {request.instance_count} × {request.instance_type} in "
            f"any of the {len(subnets)} subnets" + together,
            **common,
        )
    else:
        code = answer.error_code or "RequestTimeout"
        if answer.verdict is Verdict.BLOCKED:
            text = (
                f"EC2 did not say whether the next subnet has capacity ({code}) before the "
                "time budget ran out; a later subnet is never answered over an earlier one. "
                "Ask again."
            )
        else:
            text = f"Stopped: {code}; other subnets cannot help with that."
        response = ProbeResponse(
            status="error",
            error_code=code,
            message=text + together,
            **common,
        )
    if answer.cancelled is False:
        response.cleanup = "pending"
        response.message += (
            "; the group's reservation could not be cancelled: its EndDate and the cleaner "
            "will remove it"
        )
    return response
