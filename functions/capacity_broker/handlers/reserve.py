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
from ..logic.attempts import Spending
from ..logic.memory import forget_containers
from ..logic.remember import remembered
from ..logic.reservations import ReservationCore
from ..logic.reserve import Reserver
from ..models import ReserveRequest, invalid_request
from ._runtime import Invocation, entry, invalid_input, observability, on_reset
from ._spending import emit, finish, memory

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
        memory=memory(config),
    )


@lru_cache(maxsize=1)
def records() -> RequestRecords | None:
    config = settings()
    if not config.state_table:
        return None
    return RequestRecords(config.state_table, config.region, "reserve")


on_reset(reserver.cache_clear)
on_reset(records.cache_clear)
on_reset(forget_containers)


@entry(logger, metrics, "reserve")
def handler(event: Any, invocation: Invocation) -> dict[str, Any]:
    metrics.add_metric(name="HoldRequests", unit=MetricUnit.Count, value=1)
    try:
        request = parse(event=event, model=ReserveRequest)
    except ValidationError as error:
        metrics.add_metric(name="HoldsInvalid", unit=MetricUnit.Count, value=1)
        return {**invalid_request(error, invocation.request_id), "reservation_seconds": 0.0}
    spent: list[Spending] = []
    flow = reserver()

    def run() -> dict[str, Any]:
        try:
            response, stats = flow.reserve(
                request, invocation.request_id, invocation.deadline, invocation.hard_deadline
            )
        except InvalidInput as error:
            return {**invalid_input(error, invocation.request_id), "reservation_seconds": 0.0}
        spent.append(stats)
        return response.to_json_dict()

    try:
        answer = remembered(
            records(),
            request.request_id,
            request.model_dump(mode="json"),
            run,
            invocation.deadline,
            invocation.context,
            replay=lambda recorded: flow.replayed(recorded, invocation.deadline),
        )
    finally:
        if flow.memory is not None:
            finish(flow.memory, invocation)
    metrics.add_metric(
        name=STATUS_METRICS.get(str(answer.get("status")), "HoldsError"),
        unit=MetricUnit.Count,
        value=1,
    )
    if spent:  # a replayed answer spent nothing now
        emit(metrics, "reserve", spent[0])
    logger.info(
        "reserve answered",
        extra={
            "status": answer.get("status"),
            "job_id": request.job_id,
            "reservation": (answer.get("reservation") or {}).get("id"),
            "reservation_seconds": answer.get("reservation_seconds"),
        },
    )
    return answer
