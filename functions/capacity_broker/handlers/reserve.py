"""reserve (HPC): hold a job's whole node count in one place and point its template at it."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from ..adapters.dynamodb import RequestRecords
from ..adapters.ec2 import Ec2
from ..adapters.ssm import Flags
from ..config import settings
from ..logic import InvalidInput
from ..logic.remember import remembered
from ..logic.reservations import ReservationCore
from ..logic.reserve import Reserver
from ..models import ReserveRequest, invalid_request
from ._runtime import Invocation, entry, invalid_input, observability, on_reset

logger, metrics = observability("reserve")

# Metric per answer, as the dashboard and alarms name them.
STATUS_METRICS = {
    "reserved": "HoldsReserved",
    "provisioned": "HoldsProvisioned",
    "unreserved": "HoldsUnreserved",
    "no_capacity": "HoldsNoCapacity",
    "skipped": "HoldsSkipped",
    "rejected": "HoldsRejected",
    "error": "HoldsError",
    "invalid_request": "HoldsInvalid",
}


@lru_cache(maxsize=1)
def reserver() -> Reserver:
    config = settings()
    ec2 = Ec2(config.region)
    return Reserver(
        ec2,
        Flags(config.parameter_prefix, config.region),
        ReservationCore(ec2, config.cluster_id),
        max_concurrency=config.max_concurrency,
    )


@lru_cache(maxsize=1)
def records() -> RequestRecords | None:
    config = settings()
    if not config.state_table:
        return None
    return RequestRecords(config.state_table, config.region, "reserve")


on_reset(reserver.cache_clear)
on_reset(records.cache_clear)


@entry(logger, metrics, "reserve")
def handler(event: Any, invocation: Invocation) -> dict[str, Any]:
    metrics.add_metric(name="HoldRequests", unit=MetricUnit.Count, value=1)
    try:
        request = parse(event=event, model=ReserveRequest)
    except ValidationError as error:
        metrics.add_metric(name="HoldsInvalid", unit=MetricUnit.Count, value=1)
        return invalid_request(error, invocation.request_id)
    seconds = 0.0
    failures = 0

    def run() -> dict[str, Any]:
        nonlocal seconds, failures
        try:
            response, stats = reserver().reserve(
                request, invocation.request_id, invocation.deadline, invocation.hard_deadline
            )
        except InvalidInput as error:
            return invalid_input(error, invocation.request_id)
        seconds, failures = stats.reservation_seconds, stats.cancel_failures
        return response.to_json_dict()

    answer = remembered(
        records(),
        request.request_id,
        request.model_dump(mode="json"),
        run,
        invocation.deadline,
        invocation.context,
    )
    metrics.add_metric(
        name=STATUS_METRICS.get(str(answer.get("status")), "HoldsError"),
        unit=MetricUnit.Count,
        value=1,
    )
    if seconds:
        metrics.add_metric(name="ReservationSecondsHeld", unit=MetricUnit.Seconds, value=seconds)
    if failures:
        metrics.add_metric(name="CancelFailures", unit=MetricUnit.Count, value=failures)
    logger.info(
        "reserve answered",
        extra={
            "status": answer.get("status"),
            "job_id": request.job_id,
            "reservation": (answer.get("reservation") or {}).get("id"),
        },
    )
    return answer
