"""probe (VDI): is there capacity for this instance type in one of these subnets right now?"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from ..logic import InvalidInput
from ..models import ProbeRequest
from ._runtime import Invocation, Output, invalid_input, lambda_handler, observability
from ._spending import emit, finish

logger, metrics = observability("probe")


def run(event: Any, invocation: Invocation, out: Output) -> dict[str, Any]:
    """probe's entry: the request parsed, the root's prober asked, the answer shaped."""
    metrics = out.metrics
    metrics.add_metric(name="ProbeRequests", unit=MetricUnit.Count, value=1)
    try:
        request = parse(event=event, model=ProbeRequest)
    except ValidationError as error:
        metrics.add_metric(name="ProbeInvalid", unit=MetricUnit.Count, value=1)
        from ..models.invalid import invalid_request  # built on the first bad request

        return {**invalid_request(error, invocation.request_id), "reservation_seconds": 0.0}
    flow = invocation.root.probe
    try:
        response, stats = flow.probe(
            request, invocation.request_id, invocation.deadline, invocation.hard_deadline
        )
    except InvalidInput as error:
        metrics.add_metric(name="ProbeInvalid", unit=MetricUnit.Count, value=1)
        return {**invalid_input(error, invocation.request_id), "reservation_seconds": 0.0}
    finally:
        if flow.memory is not None:
            finish(flow.memory, invocation)
    metrics.add_metric(name=f"Probe{response.status.title()}", unit=MetricUnit.Count, value=1)
    if stats.grouped:
        # Contract v3, grouped probes: answers a group gave, and the groups formed (their mean
        # size is ProbeGrouped / ProbeGroupsFormed).
        metrics.add_metric(name="ProbeGrouped", unit=MetricUnit.Count, value=1)
    if stats.led_group_of:
        metrics.add_metric(name="ProbeGroupsFormed", unit=MetricUnit.Count, value=1)
    emit(out, stats)
    out.logger.info(
        "probe answered",
        extra={
            "outcomes": [a.outcome for a in response.attempts],
            "subnet_id": response.subnet_id,
            "reservation_seconds": response.reservation_seconds,
            "creates": stats.creates,
        },
    )
    return response.to_json_dict()


handler = lambda_handler("probe", run, logger, metrics)
