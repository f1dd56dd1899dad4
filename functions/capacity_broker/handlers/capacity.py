"""capacity: what reserved capacity exists (ODCRs and Capacity Blocks), in BROKER_REGIONS or
the regions asked for. Read-only."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from ..logic import InvalidInput
from ..models import CapacityRequest
from ._runtime import Invocation, Output, invalid_input, lambda_handler, observability

logger, metrics = observability("capacity")


def run(event: Any, invocation: Invocation, out: Output) -> dict[str, Any]:
    """capacity's entry: the request parsed, the root's lister asked, the answer shaped."""
    metrics = out.metrics
    metrics.add_metric(name="CapacityRequests", unit=MetricUnit.Count, value=1)
    try:
        request = parse(event=event if event is not None else {}, model=CapacityRequest)
    except ValidationError as error:
        metrics.add_metric(name="CapacityInvalid", unit=MetricUnit.Count, value=1)
        from ..models.invalid import invalid_request  # built on the first bad request

        return invalid_request(error, invocation.request_id)
    try:
        response = invocation.root.capacity.answer(
            request, invocation.request_id, invocation.deadline
        )
    except InvalidInput as error:
        metrics.add_metric(name="CapacityInvalid", unit=MetricUnit.Count, value=1)
        return invalid_input(error, invocation.request_id)
    metrics.add_metric(
        name="CapacityReservationsListed", unit=MetricUnit.Count, value=len(response.reservations)
    )
    if response.errors:
        metrics.add_metric(
            name="CapacityRegionErrors", unit=MetricUnit.Count, value=len(response.errors)
        )
    out.logger.info(
        "capacity listed",
        extra={
            "reservation_type": request.reservation_type,
            "regions": response.regions,
            "reservations": len(response.reservations),
            "failed_regions": [e.region for e in response.errors],
        },
    )
    return response.to_json_dict()


handler = lambda_handler("capacity", run, logger, metrics)
