"""release (HPC): give a job's holds back, by job id, stack name or reservation id."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from ..adapters.ec2 import Ec2
from ..config import settings
from ..logic.release import Releaser
from ..logic.reservations import ReservationCore
from ..models import ReleaseRequest, invalid_request
from ._runtime import Invocation, entry, observability, on_reset

logger, metrics = observability("release")


@lru_cache(maxsize=1)
def releaser() -> Releaser:
    config = settings()
    ec2 = Ec2(config.region)
    return Releaser(ec2, ReservationCore(ec2, config.cluster_id), config.max_concurrency)


on_reset(releaser.cache_clear)


@entry(logger, metrics, "release")
def handler(event: Any, invocation: Invocation) -> dict[str, Any]:
    metrics.add_metric(name="ReleaseRequests", unit=MetricUnit.Count, value=1)
    try:
        request = parse(event=event, model=ReleaseRequest)
    except ValidationError as error:
        return invalid_request(error, invocation.request_id)
    # Releasing is idempotent by nature (what is gone stays gone), so no request record.
    response = releaser().release(
        request, invocation.request_id, invocation.deadline, invocation.hard_deadline
    )
    if response.cancelled:
        metrics.add_metric(
            name="HoldsReleased", unit=MetricUnit.Count, value=len(response.cancelled)
        )
    if response.errors:
        metrics.add_metric(name="CancelFailures", unit=MetricUnit.Count, value=len(response.errors))
    logger.info(
        "release answered",
        extra={"status": response.status, "cancelled": response.cancelled},
    )
    return response.to_json_dict()
