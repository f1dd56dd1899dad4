"""The bring-your-own path: a reservation the job names (ODCR or Capacity Block) is looked up,
validated against the job (``domain.reserve.validate_existing``) and used as it is. Nothing
here holds or cancels: the broker never touches a reservation it does not own."""

from __future__ import annotations

from ...domain.backoff import retry_after_seconds
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
from .answer import Answer, Chosen
from .base import ReserverBase


class BringYourOwn(ReserverBase):
    """Use the reservation the job brought, once it is known to fit."""

    # -- bring your own reservation -----------------------------------------------------
    def _bring_your_own(
        self,
        request: ReserveRequest,
        place: placement.Placement,
        answer: Answer,
        deadline: float,
    ) -> Chosen | ReserveResponse:
        rid = str(request.capacity_reservation_id)
        # One made a moment ago may be unknown to EC2's next calls, or still show pending:
        # looked at again first.
        found = self.core.find(rid, deadline, settled=True)
        if found is None:
            return answer.unchanged(
                ReserveStatus.REJECTED, f"{rid} does not exist", reason=f"{rid} does not exist"
            )
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
            return answer.unchanged(ReserveStatus.REJECTED, check.reason, reason=check.reason)
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
