"""The bring-your-own path: a reservation the job names (ODCR or Capacity Block) is looked up,
validated against the job (``domain.reserve.validate_existing``) and used as it is. Nothing
here holds or cancels: the broker never touches a reservation it does not own."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ...domain.backoff import retry_after_seconds
from ...domain.failures import Refused
from ...domain.reserve import (
    ExistingReservation,
    Rejected,
    ReserveStatus,
    StillPending,
    TooLate,
    WaitForStart,
    Wanted,
    validate_existing,
)
from ...domain.tags import other_cluster
from ...models import ReserveRequest, ReserveResponse
from .. import placement
from ..reservations import ReservationCore
from .answer import Answer, Chosen


class BringYourOwn:
    """Use the reservation the job brought, once it is known to fit."""

    def __init__(self, core: ReservationCore, clock: Callable[[], datetime]) -> None:
        self.core = core
        self.clock = clock

    def choose(
        self,
        request: ReserveRequest,
        place: placement.Placement,
        answer: Answer,
        deadline: float,
    ) -> Chosen | ReserveResponse:
        """The reservation the job named, when it fits now; the ``no_capacity`` answer when
        it will later (not started, still pending, too late for the job). ``Refused`` when it
        does not exist or never fits."""
        rid = str(request.capacity_reservation_id)
        # One made a moment ago may be unknown to EC2's next calls, or still show pending:
        # looked at again first.
        found = self.core.find(rid, deadline, settled=True)
        if found is None:
            raise Refused(f"{rid} does not exist")
        existing = ExistingReservation(
            id=found.id,
            state=found.state,
            reservation_type=found.reservation_type,
            instance_type=found.instance_type,
            availability_zone_id=found.availability_zone_id,
            platform=found.platform,
            tenancy=found.tenancy,
            available_count=found.available_count,
            start_date=found.start_date,
            owner=found.owner_id,
            owned_by_broker=self.core.owns(found),
            size=found.size,
            end_date=found.end_date,
            other_cluster=other_cluster(found.tags, self.core.cluster_id),
        )
        wanted = Wanted(
            instance_types=request.instance_types,
            availability_zone_ids=[s.availability_zone_id for s in place.subnets],
            platform=place.platform,
            tenancy=place.tenancy,
            instance_count=request.instance_count,
            runtime_seconds=request.runtime_seconds,
        )
        check = validate_existing(existing, wanted, self.clock())
        if isinstance(check, Rejected):
            raise Refused(check.reason)
        if isinstance(check, TooLate | StillPending):
            response = answer.unchanged(
                ReserveStatus.NO_CAPACITY, check.reason, reason=check.reason
            )
            response.retry_after_seconds = retry_after_seconds(request.attempt)
            return response
        if isinstance(check, WaitForStart):
            response = answer.unchanged(
                ReserveStatus.NO_CAPACITY, check.reason, reason=check.reason
            )
            response.retry_after_seconds = check.retry_after_seconds
            return response
        subnets = [
            s.subnet_id
            for s in place.subnets
            if s.availability_zone_id == found.availability_zone_id
        ]
        return Chosen(found, False, subnets)
