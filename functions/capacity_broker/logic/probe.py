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

import time
from collections.abc import Callable

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2
from ..adapters.ssm import Flags, FlagValues
from ..domain.fanout import DecisionKind
from ..domain.flags import FlagError
from ..domain.tags import Purpose
from ..models import ProbeRequest, ProbeResponse
from . import placement
from .attempts import Attempts, Place, Ran, Spending
from .memory import CapacityMemory
from .reservations import HoldSpec, ReservationCore

# What the handler's metrics are made of (every create's answer, every give-back's seconds).
ProbeStats = Spending


class Prober:
    def __init__(
        self,
        ec2: Ec2,
        flags: Flags,
        core: ReservationCore,
        max_concurrency: int = 16,
        monotonic: Callable[[], float] = time.monotonic,
        memory: CapacityMemory | None = None,
    ) -> None:
        self.ec2 = ec2
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
        # The memory's read overlaps the flag and subnet look-ups; the decision takes whatever
        # has arrived by then.
        recall = (
            self.memory.recall(self.ec2.region, [request.instance_type], deadline)
            if self.memory is not None
            else None
        )
        try:
            flags: FlagValues = self.flags.read(deadline)
        except FlagError as error:
            return ProbeResponse(
                status="error", error_code="InvalidConfiguration", message=str(error), **base
            ), stats
        except AwsError as error:
            return ProbeResponse(
                status="error",
                error_code=error.code or "ParameterStoreUnavailable",
                message=f"Could not read the feature flags: {error.message}",
                **base,
            ), stats
        if not flags.enable:
            return ProbeResponse(
                status="skipped",
                subnet_id=request.subnet_ids[0],
                message="EnableCapacityReservation is false: no probe was made; "
                "launch in the first subnet.",
                **base,
            ), stats

        try:
            place = placement.resolve(self.ec2, request, request.subnet_ids, deadline)
        except AwsError as error:
            return _failed(
                base, error, "Could not look up the instance types, subnets, image or VPC"
            ), stats

        def spec_of(where: Place) -> HoldSpec:
            return HoldSpec(
                purpose=Purpose.PROBE,
                request_id=request_id,
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
            recall,
            deadline,
            hard_deadline,
            stats,
        )
        return _answer(base, request, ran, stats), stats


def _failed(base: dict[str, str], error: AwsError, what: str) -> ProbeResponse:
    return ProbeResponse(
        status="error",
        error_code=error.code or "RequestTimeout",
        message=f"{what}: {error.message}"[:500],
        **base,
    )


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
