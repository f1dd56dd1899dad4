"""The race of (instance type × subnet) pairs: an earlier hold of the same request enters as the
one to beat, every pair is tried as the fan-out (``logic.attempts``) decides, the best hold is
kept and every other is given back; with no winner, the answer says why (no capacity, or the
question left open)."""

from __future__ import annotations

from collections.abc import Callable

from ...adapters.ec2 import Ec2
from ...domain import placement as pairing
from ...domain.backoff import retry_after_seconds
from ...domain.failures import BrokerFailure
from ...domain.fanout import DecisionKind
from ...domain.reserve import (
    ReserveStatus,
    possible_pairs,
    verdict,
)
from ...domain.tags import (
    TAG_CLUSTER_ID,
    TAG_PURPOSE,
    TAG_REQUEST_ID,
    TAG_SUBNET_ID,
    Purpose,
)
from ...domain.tokens import CHANGED_REQUEST, identity_digest
from ...models import ReserveRequest, ReserveResponse
from .. import InvalidInput, placement
from ..attempts import Attempts, Place, Ran
from ..memory import CapacityMemory, Recall
from ..reservations import HOLDING_STATES, Held, HoldSpec, ReservationCore, changed_request
from .answer import Answer, ReserveStats
from .giveback import GiveBack


def request_digest(request: ReserveRequest) -> str:
    """The request's identity as its holds carry it: the body the handler (and the state
    table) sees, through the one rule (``domain.tokens.identity_digest``)."""
    return identity_digest(request.model_dump(mode="json"))


class Undecided(BrokerFailure):
    """The race ended with no winner and without knowing that no place has capacity: stopped
    (quota, permissions), a place left unanswered, or the time budget. The question stays
    open."""

    def __init__(self, code: str | None, message: str) -> None:
        super().__init__(message)
        self.code = code

    @property
    def error_code(self) -> str:
        # No code: no answer at all, as an AWS call's (``AwsError.error_code``).
        return self.code or "RequestTimeout"


class Race:
    """Which pair holds the job: the race and what it ends in."""

    def __init__(
        self,
        ec2: Ec2,
        core: ReservationCore,
        give_back: GiveBack,
        max_concurrency: int,
        monotonic: Callable[[], float],
        memory: CapacityMemory | None,
    ) -> None:
        self.ec2 = ec2
        self.core = core
        self.give_back = give_back
        self.max_concurrency = max_concurrency
        self.monotonic = monotonic
        self.memory = memory

    def earlier_hold(
        self, request_id: str, request: ReserveRequest, deadline: float, hard_deadline: float
    ) -> tuple[int, Held] | None:
        """The live hold an earlier invocation of this request made (found by its tags), with
        its place's preference: a retry takes it over instead of holding twice. If that
        invocation died mid-race and left several, the best-preferred one is kept and the
        others are given back now.

        The listing can miss a hold made a moment ago (EC2 is eventually consistent); that
        costs no second hold: the race's attempt at that place meets its ClientToken, and
        ``ReservationCore.hold`` waits for EC2 to show the earlier hold and takes it over."""
        if request.request_id is None:
            return None  # a request id generated for this invocation has no earlier work
        preference = {
            (p.instance_type, p.subnet_id): p.index
            for p in pairing.pairs(request.instance_types, request.subnet_ids)
        }
        # Every state: a hold given back still says which request its id was used for.
        earlier = [
            reservation
            for reservation in self.ec2.reservations(
                filters={
                    f"tag:{TAG_CLUSTER_ID}": [self.core.cluster_id],
                    f"tag:{TAG_REQUEST_ID}": [request_id],
                    f"tag:{TAG_PURPOSE}": [Purpose.HOLD.value],
                },
                deadline=deadline,
            )
            if self.core.owns(reservation)
        ]
        digest = request_digest(request)
        if any(changed_request(r, digest) for r in earlier):
            # The same rule as the state table's (logic.remember): one request per id.
            raise InvalidInput([("request_id", CHANGED_REQUEST)])
        found = [
            (preference[key], reservation)
            for reservation in earlier
            for key in [(reservation.instance_type, reservation.tags.get(TAG_SUBNET_ID, ""))]
            if reservation.state in HOLDING_STATES
            and key in preference
            and reservation.total_count == request.instance_count
        ]
        if not found:
            return None
        found.sort(key=lambda item: item[0])
        for _, extra in found[1:]:
            self.give_back.cancel(extra, hard_deadline)
        index, best = found[0]
        return index, Held(best, self.monotonic(), reused=True)

    def run(
        self,
        request: ReserveRequest,
        request_id: str,
        place: placement.Placement,
        recall: Recall | None,
        deadline: float,
        hard_deadline: float,
        stats: ReserveStats,
        earlier: tuple[int, Held] | None = None,
    ) -> Ran:
        """Every pair tried as the fan-out decides; the best that holds is kept."""
        places = [
            Place(p.instance_type, place.subnet(p.subnet_id))
            for p in pairing.pairs(request.instance_types, request.subnet_ids)
        ]
        digest = request_digest(request)

        def spec_of(where: Place) -> HoldSpec:
            return HoldSpec(
                purpose=Purpose.HOLD,
                request_id=request_id,
                instance_type=where.instance_type,
                subnet=where.subnet,
                count=request.instance_count,
                platform=place.platform,
                tenancy=place.tenancy,
                job_id=request.job_id,
                stack_name=request.stack_name,
                placement_group_arn=request.placement_group_arn,
                extra_tags=request.tags,
                request_digest=digest,
            )

        attempts = Attempts(
            self.core,
            keep=True,
            max_concurrency=self.max_concurrency,
            monotonic=self.monotonic,
            memory=self.memory,
        )
        return attempts.run(
            places,
            spec_of,
            recall,
            deadline,
            hard_deadline,
            stats,
            earlier,
        )

    @staticmethod
    def no_winner(
        request: ReserveRequest, answer: Answer, ran: Ran, strict: bool
    ) -> ReserveResponse:
        """The answer when no pair holds the job: ``no_capacity`` (or ``unreserved``) when
        every place said so, else the question left open (``Undecided``)."""
        attempts = ran.attempts
        if not ran.only_no_capacity:
            # Stopped (quota for the request alone, permissions), a place left unanswered
            # (throttled, 5xx, no answer) when the budget ran out, a place that failed for
            # another reason than capacity, or the time budget: the question stays open.
            failure = ran.failure()
            timed_out = ran.decision.kind is DecisionKind.TIMED_OUT or failure is None
            code: str | None
            if timed_out or failure is None:
                code, message = (
                    "TimeBudgetExceeded",
                    "The time budget ran out before every place was tried",
                )
            elif ran.decision.kind is DecisionKind.BLOCKED:
                code, message = (
                    failure.error_code,
                    f"EC2 did not say whether {failure.instance_type} / {failure.subnet_id} has "
                    f"capacity ({failure.error_code}, {failure.outcome}) before the time budget "
                    "ran out; a later place is never taken over a better one. Ask again.",
                )
            else:
                code, message = (
                    failure.error_code,
                    f"Stopped by {failure.error_code} ({failure.outcome}) in "
                    f"{failure.instance_type} / {failure.subnet_id}",
                )
            response = answer.failed(Undecided(code, message))
            response.attempts = attempts
            return response
        pair_count = possible_pairs(a.outcome for a in attempts)
        status = verdict(False, strict, pair_count)
        if status is ReserveStatus.NO_CAPACITY:
            response = answer.unchanged(
                status,
                f"No single place can hold {request.instance_count} × "
                f"{'/'.join(request.instance_types)} now; the job stays queued"
                + (" (strict)" if strict and pair_count > 1 else ""),
            )
            response.retry_after_seconds = retry_after_seconds(request.attempt)
        else:
            response = answer.unchanged(
                status,
                "No single place can hold the whole job; proceeding with the original "
                "placement, without a guarantee",
            )
        response.attempts = attempts
        return response
