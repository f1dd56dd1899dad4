"""probe (VDI): is there capacity for this instance type in one of these subnets right now?"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from pydantic import ValidationError

from ..adapters.ec2 import Ec2
from ..adapters.ssm import Flags
from ..config import settings
from ..logic import InvalidInput
from ..logic.memory import forget_containers
from ..logic.probe import Prober
from ..logic.reservations import ReservationCore
from ..models import ProbeRequest, invalid_request
from ._runtime import Invocation, entry, invalid_input, observability, on_reset
from ._spending import emit, finish, memory

logger, metrics = observability("probe")


@lru_cache(maxsize=1)
def prober() -> Prober:
    """Built once per container: caches (subnets, flags) live as long as it does."""
    config = settings()
    ec2 = Ec2(config.region)
    return Prober(
        ec2,
        Flags(config.parameter_prefix, config.region),
        ReservationCore(ec2, config.cluster_id),
        max_concurrency=config.max_concurrency,
        memory=memory(config),
    )


on_reset(prober.cache_clear)
on_reset(forget_containers)


@entry(logger, metrics, "probe")
def handler(event: Any, invocation: Invocation) -> dict[str, Any]:
    metrics.add_metric(name="ProbeRequests", unit=MetricUnit.Count, value=1)
    try:
        request = parse(event=event, model=ProbeRequest)
    except ValidationError as error:
        metrics.add_metric(name="ProbeInvalid", unit=MetricUnit.Count, value=1)
        return {**invalid_request(error, invocation.request_id), "reservation_seconds": 0.0}
    flow = prober()
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
    emit(metrics, "probe", stats)
    logger.info(
        "probe answered",
        extra={
            "outcomes": [a.outcome for a in response.attempts],
            "subnet_id": response.subnet_id,
            "reservation_seconds": response.reservation_seconds,
            "creates": stats.creates,
        },
    )
    return response.to_json_dict()
