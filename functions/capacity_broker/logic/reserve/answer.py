"""The reserve answer: the capacity chosen for the job (``Chosen``) and ``Answer``, which fills
the contract's fields as the flow goes. Every part that ends the request answers through it,
and a failure's fields come from the one table every flow answers with (``logic.failures``)."""

from __future__ import annotations

from dataclasses import dataclass

from ...adapters.ec2 import Reservation
from ...domain.failures import BrokerFailure
from ...domain.reserve import (
    ReserveStatus,
)
from ...models import Attempt, ReservationInfo, ReserveRequest, ReserveResponse
from ..attempts import Spending
from ..failures import failed

# What the handler's metrics are made of (every create's answer, every give-back's seconds).
ReserveStats = Spending


@dataclass(frozen=True)
class Chosen:
    """The capacity the job will use: our hold, or the reservation it brought."""

    reservation: Reservation
    owned: bool
    subnet_ids: list[str]
    since: float | None = None
    # An earlier invocation of this request got as far as a hold and gave it back: it may have
    # launched the job's nodes (see ``Launch.fleet``).
    earlier_work: bool = False


class Answer:
    """Builds the reserve answer: the contract's fields, filled as the flow goes."""

    def __init__(self, request: ReserveRequest, request_id: str) -> None:
        self.request = request
        self.response = ReserveResponse(
            status=ReserveStatus.ERROR,
            request_id=request_id,
            job_id=request.job_id,
            instance_types=list(request.instance_types),
            subnet_ids=list(request.subnet_ids),
            message="",
        )

    def failed(self, failure: BrokerFailure) -> ReserveResponse:
        """What ``failure`` stopped: ``error`` with its code, or a refusal's ``rejected``."""
        fields = failed(failure)
        self.response.status = ReserveStatus(fields["status"])
        self.response.error_code = fields.get("error_code")
        self.response.reason = fields.get("reason")
        self.response.message = fields["message"]
        return self.response

    def unchanged(
        self, status: ReserveStatus, message: str, reason: str | None = None
    ) -> ReserveResponse:
        self.response.status = status
        self.response.message = message
        self.response.reason = reason
        return self.response

    def provisioned_before(self, instances: list[str], attempts: list[Attempt]) -> ReserveResponse:
        """An earlier invocation of this request launched the job's nodes (its answer was
        lost): the same outcome, the nodes it launched; nothing new was held or launched."""
        self.response.status = ReserveStatus.PROVISIONED
        self.response.instances = list(instances)
        self.response.attempts = attempts
        self.response.message = (
            f"{len(instances)} nodes of request {self.response.request_id} were launched by an "
            "earlier invocation of it; nothing was launched again"
        )
        return self.response

    def chosen(self, chosen: Chosen, attempts: list[Attempt]) -> None:
        r = chosen.reservation
        self.response.status = ReserveStatus.RESERVED
        self.response.reservation = ReservationInfo(
            id=r.id,
            type="capacity-block" if r.reservation_type == "capacity-block" else "default",
            owned=chosen.owned,
            instance_type=r.instance_type,
            availability_zone=r.availability_zone,
            availability_zone_id=r.availability_zone_id,
            instance_count=r.total_count,
            start_date=r.start_date if r.reservation_type == "capacity-block" else None,
            end_date=r.end_date,
        )
        self.response.instance_types = [r.instance_type]
        self.response.subnet_ids = chosen.subnet_ids
        self.response.attempts = attempts
        kind = "holds" if chosen.owned else "uses your reservation"
        self.response.message = (
            f"{r.id} {kind} {self.request.instance_count} × {r.instance_type} in "
            f"{r.availability_zone} ({', '.join(chosen.subnet_ids)})"
        )
