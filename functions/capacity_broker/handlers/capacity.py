"""capacity: what reserved capacity exists (ODCRs and Capacity Blocks), in BROKER_REGIONS or
the regions asked for. Read-only."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from ..config import settings
from ..logic.capacity import CapacityLister
from ..models import CapacityRequest, invalid_request
from ._runtime import Invocation, entry, observability, on_reset

logger, metrics = observability("capacity")


@lru_cache(maxsize=1)
def lister() -> CapacityLister:
    """Built once per container: adapters and instance-type facts live as long as it does."""
    config = settings()
    return CapacityLister(
        cluster_id=config.cluster_id,
        default_regions=config.regions,
        max_workers=config.max_concurrency,
    )


on_reset(lister.cache_clear)


@entry(logger, metrics, "capacity")
def handler(event: Any, invocation: Invocation) -> dict[str, Any]:
    metrics.add_metric(name="CapacityRequests", unit=MetricUnit.Count, value=1)
    try:
        request = parse(event=event if event is not None else {}, model=CapacityRequest)
    except ValidationError as error:
        metrics.add_metric(name="CapacityInvalid", unit=MetricUnit.Count, value=1)
        return invalid_request(error, invocation.request_id)
    response = lister().answer(request, invocation.request_id, invocation.deadline)
    metrics.add_metric(
        name="CapacityReservationsListed", unit=MetricUnit.Count, value=len(response.reservations)
    )
    if response.errors:
        metrics.add_metric(
            name="CapacityRegionErrors", unit=MetricUnit.Count, value=len(response.errors)
        )
    logger.info(
        "capacity listed",
        extra={
            "reservation_type": request.reservation_type,
            "regions": response.regions,
            "reservations": len(response.reservations),
            "failed_regions": [e.region for e in response.errors],
        },
    )
    return response.to_json_dict()
