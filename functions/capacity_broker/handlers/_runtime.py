"""What every Lambda entry point shares: Powertools logging, metrics and tracing, the time
budget, and the promise that a caller always gets a structured answer.

Tracing: Powertools' Tracer loads the X-Ray SDK (~300 ms) when it is created, which would add
to every cold start. Lambda's active tracing already records each invocation; the broker adds
its subsegments (and the boto3 ones) only for invocations X-Ray sampled, and creates the Tracer
on the first of those, so unsampled invocations and the init phase never pay for it.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from ..config import InvalidConfiguration, Settings, settings
from ..logic import InvalidInput
from ..models import ErrorResponse, request_id_from

NAMESPACE = "CapacityBroker"
# The Lambda runtime's per-invocation trace header; "Sampled=1" when X-Ray records this one.
TRACE_HEADER = "_X_AMZN_TRACE_ID"

_tracer: Any = None


def tracer() -> Any:
    """The Powertools Tracer, created on first use (see the module docstring)."""
    global _tracer
    if _tracer is None:
        from aws_lambda_powertools import Tracer

        _tracer = Tracer(patch_modules=("botocore",))
    return _tracer


def sampled() -> bool:
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() == "true":
        return False
    return "Sampled=1" in os.environ.get(TRACE_HEADER, "")


@dataclass(frozen=True)
class Invocation:
    """What a flow needs to know about the invocation it runs in."""

    settings: Settings
    request_id: str
    deadline: float  # monotonic seconds: stop starting new work after this
    hard_deadline: float  # monotonic seconds: the function is killed shortly after
    context: Any = None  # Lambda's context object


def deadlines(context: Any, margin: float) -> tuple[float, float]:
    now = time.monotonic()
    remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
    remaining = remaining_ms() / 1000.0 if callable(remaining_ms) else 60.0
    hard = now + max(remaining - 0.5, 0.5)
    return min(now + max(remaining - margin, 0.5), hard), hard


def invalid_input(error: InvalidInput, request_id: str) -> dict[str, Any]:
    """``invalid_request`` for a request that parsed but names what does not exist."""
    return {
        "status": "invalid_request",
        "request_id": request_id,
        "errors": [{"field": field, "message": message} for field, message in error.errors],
        "message": f"The request was not accepted: {error}"[:500],
    }


class _Text:
    """What the flows see instead of a text event (see ``entry``): not an object."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<text event>"


TEXT_EVENT = _Text()


def reset_container() -> None:
    """Forget everything cached per container (tests switch worlds between cases)."""
    from ..adapters import aws, ec2, throttle

    global _cold
    settings.cache_clear()
    aws.reset_clients()
    _cold = True
    ec2.clear_caches()
    try:
        scale = settings().ec2_rate_scale
    except InvalidConfiguration:
        scale = 1.0
    throttle.pacer = throttle.Pacer(scale)
    for hook in _RESETS:
        hook()


_RESETS: list[Callable[[], None]] = []

# -- the cold path (docs/performance.md, docs/deploy.md) ---------------------------------------
# The clients an entry point's first invocation needs, in the order it calls them: probe and
# reserve read the flags (SSM) before they ask EC2; the others start with EC2.
FIRST_CLIENTS: dict[str, tuple[str, ...]] = {"probe": ("ssm", "ec2"), "reserve": ("ssm", "ec2")}
FIRST_CLIENTS_DEFAULT: tuple[str, ...] = ("ec2",)
# The services whose models a snapshot should hold: every entry point's first clients.
SNAPSHOT_SERVICES = ("ssm", "ec2")

_cold = True
_cold_lock = threading.Lock()


def warm_first_clients(name: str, region: str) -> threading.Thread | None:
    """On a container's first invocation: make its clients on a thread, so that the EC2
    client is built while the first call (the flags) waits for its answer. None afterwards."""
    global _cold
    with _cold_lock:
        if not _cold:
            return None
        _cold = False
    from ..adapters import aws

    return aws.prewarm(FIRST_CLIENTS.get(name, FIRST_CLIENTS_DEFAULT), region)


def before_snapshot() -> None:
    """Before Lambda snapshots a published version: work that is the same for every restored
    environment and touches no network (the API models), done once instead of per cold start."""
    from ..adapters import aws

    aws.preload_models(SNAPSHOT_SERVICES)


def after_restore() -> None:
    """After a restore: nothing unique may be shared by the environments restored from one
    snapshot (AWS: "Handling uniqueness with Lambda SnapStart"). The broker makes its clients,
    connections, pacer buckets and retry jitter generators on first use, after the restore;
    this re-seeds the module-level ``random`` and drops any client made before the snapshot
    anyway, so a later change that makes one at import cannot carry a stale connection."""
    from ..adapters import aws

    random.seed()
    aws.reset_clients()


def register_snapshot_hooks() -> bool:
    """Register the hooks with Lambda's Snapshot Restore for Python (part of the managed
    Python runtimes since 3.12); elsewhere there is no snapshot and nothing to register."""
    try:
        from snapshot_restore_py import (  # type: ignore[import-not-found]
            register_after_restore,
            register_before_snapshot,
        )
    except ImportError:
        return False
    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore)
    return True


register_snapshot_hooks()


def on_reset(hook: Callable[[], None]) -> Callable[[], None]:
    _RESETS.append(hook)
    return hook


def observability(service: str) -> tuple[Logger, Metrics]:
    logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", service))
    # The adapters and flows log with the standard library; give them this logger's JSON
    # format, level and keys (request and cluster id on every line).
    copy_config_to_registered_loggers(source_logger=logger, include={"capacity_broker"})
    metrics = Metrics(
        namespace=NAMESPACE, service=os.environ.get("POWERTOOLS_SERVICE_NAME", service)
    )
    return logger, metrics


# A metric of its own for a configuration error, besides ``InvalidConfiguration``: the
# cleaner's alarm watches CleanerErrors (a sweep that cannot run is what it is for).
CONFIGURATION_ERROR_METRICS = {"cleaner": "CleanerErrors"}


def configuration_error(
    logger: Logger, metrics: Metrics, name: str, request_id: str, problem: InvalidConfiguration
) -> dict[str, Any]:
    """The answer of a function deployed with settings it cannot run with: one structured
    error naming every wrong variable; nothing was asked of AWS."""
    logger.append_keys(request_id=request_id)
    logger.error("invalid configuration", extra={"problems": [p for p, _ in problem.problems]})
    metrics.add_metric(name="InvalidConfiguration", unit=MetricUnit.Count, value=1)
    if name in CONFIGURATION_ERROR_METRICS:
        metrics.add_metric(name=CONFIGURATION_ERROR_METRICS[name], unit=MetricUnit.Count, value=1)
    return ErrorResponse(
        request_id=request_id, error_code="InvalidConfiguration", message=str(problem)
    ).to_json_dict()


def entry(
    logger: Logger,
    metrics: Metrics,
    name: str,
) -> Callable[[Callable[[Any, Invocation], dict[str, Any]]], Callable[..., Any]]:
    """Wrap a flow as a Lambda handler: context on every log line, metrics flushed once,
    a structured answer even for an unexpected failure."""

    def decorate(run: Callable[[Any, Invocation], dict[str, Any]]) -> Callable[..., Any]:
        @wraps(run)
        def handler(event: Any, context: Any) -> dict[str, Any]:
            request_id = request_id_from(event) or f"{name}-{uuid.uuid4().hex}"
            try:
                config = settings()
            except InvalidConfiguration as problem:
                return configuration_error(logger, metrics, name, request_id, problem)
            logger.append_keys(cluster_id=config.cluster_id, request_id=request_id)
            soft, hard = deadlines(context, config.safety_margin)
            invocation = Invocation(config, request_id, soft, hard, context)
            if isinstance(event, str | bytes | bytearray):
                # Requests are JSON objects (contract). Powertools' parse() would decode a JSON
                # *text* and accept the object inside, answered under a generated request id
                # although the text carried its own (a retried reserve then held twice). The
                # flows' models refuse anything that is not an object: invalid_request.
                event = TEXT_EVENT
            warming = warm_first_clients(name, config.region)
            try:
                if sampled():
                    with tracer().provider.in_subsegment(f"## {name}") as subsegment:
                        subsegment.put_annotation("cluster_id", config.cluster_id)
                        subsegment.put_annotation("request_id", request_id)
                        answer = run(event, invocation)
                        subsegment.put_annotation("status", str(answer.get("status")))
                else:
                    answer = run(event, invocation)
            except Exception:
                logger.exception("unexpected failure")
                metrics.add_metric(name="UnexpectedErrors", unit=MetricUnit.Count, value=1)
                answer = {
                    "status": "error",
                    "request_id": request_id,
                    "error_code": "InternalError",
                    "message": "The broker failed unexpectedly; nothing further was started. "
                    "Reservations it created are cancelled by their EndDate and the cleaner.",
                }
            finally:
                if warming is not None:
                    warming.join()
            logger.info("answered", extra={"status": answer.get("status")})
            return answer

        return logger.inject_lambda_context(clear_state=True)(metrics.log_metrics(handler))

    return decorate
