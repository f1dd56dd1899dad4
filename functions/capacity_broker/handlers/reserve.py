"""reserve (HPC): hold a job's whole node count in one place and point its template at it."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from ..logic import InvalidInput
from ..logic.attempts import Spending
from ..logic.remember import remembered
from ..models import ReserveRequest
from ._runtime import Invocation, Output, invalid_input, lambda_handler, observability
from ._spending import emit, finish

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


def run(event: Any, invocation: Invocation, out: Output) -> dict[str, Any]:
    """reserve's entry: the request parsed, the root's reserver asked once per request id
    (its request records, with the state table), the answer shaped."""
    metrics = out.metrics
    metrics.add_metric(name="HoldRequests", unit=MetricUnit.Count, value=1)
    try:
        request = parse(event=event, model=ReserveRequest)
    except ValidationError as error:
        metrics.add_metric(name="HoldsInvalid", unit=MetricUnit.Count, value=1)
        from ..models.invalid import invalid_request  # built on the first bad request

        return {**invalid_request(error, invocation.request_id), "reservation_seconds": 0.0}
    spent: list[Spending] = []
    flow = invocation.root.reserve

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
            invocation.root.records,
            request.request_id,
            request.model_dump(mode="json"),
            run,
            invocation.deadline,
            invocation.context,
            replay=lambda recorded: flow.replay.replayed(recorded, invocation.deadline),
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
        emit(out, spent[0])
    out.logger.info(
        "reserve answered",
        extra={
            "status": answer.get("status"),
            "job_id": request.job_id,
            "reservation": (answer.get("reservation") or {}).get("id"),
            "reservation_seconds": answer.get("reservation_seconds"),
        },
    )
    return answer


handler = lambda_handler("reserve", run, logger, metrics)
