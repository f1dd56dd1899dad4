"""release (HPC): give a job's holds back, by job id, stack name or reservation id."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from ..models import ReleaseRequest
from ._runtime import Invocation, Output, lambda_handler, observability

logger, metrics = observability("release")


def run(event: Any, invocation: Invocation, out: Output) -> dict[str, Any]:
    """release's entry: the request parsed, the root's releaser asked, the answer shaped."""
    metrics = out.metrics
    metrics.add_metric(name="ReleaseRequests", unit=MetricUnit.Count, value=1)
    try:
        request = parse(event=event, model=ReleaseRequest)
    except ValidationError as error:
        from ..models.invalid import invalid_request  # built on the first bad request

        return invalid_request(error, invocation.request_id)
    # Releasing is idempotent by nature (what is gone stays gone), so no request record.
    response = invocation.root.release.release(
        request, invocation.request_id, invocation.deadline, invocation.hard_deadline
    )
    if response.cancelled:
        metrics.add_metric(
            name="HoldsReleased", unit=MetricUnit.Count, value=len(response.cancelled)
        )
    if response.errors:
        metrics.add_metric(name="CancelFailures", unit=MetricUnit.Count, value=len(response.errors))
    out.logger.info(
        "release answered",
        extra={"status": response.status, "cancelled": response.cancelled},
    )
    return response.to_json_dict()


handler = lambda_handler("release", run, logger, metrics)
