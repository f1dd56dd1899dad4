"""cleaner (ODCRCleaner): one handler, three triggers.

- the EventBridge schedule (``detail-type: Scheduled Event``, every 5 minutes): sweep every
  region in BROKER_REGIONS for real;
- EventBridge ``CloudFormation Stack Status Change``: act at once on that stack's holds, in the
  event's region;
- a direct call ``{"action": "sweep", "dry_run": ..., "regions": [...]}`` (SweepRequest);
- an EC2 interruption warning (detail-type matched by prefix, ``domain.pool``): which job and
  rung the node served, logged and counted; nothing is cancelled.

Anything else is ``invalid_request`` before any AWS call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..domain.pool import is_interruption_warning
from ..logic.cleaner import REASON_METRICS, CleanerRun
from ..models import SweepRequest
from ..models.common import REGION_PATTERN, STACK_NAME_PATTERN
from ._runtime import Invocation, Output, lambda_handler, observability

logger, metrics = observability("cleaner")

SCHEDULED = "Scheduled Event"

# arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<uuid>
STACK_ARN = re.compile(
    r"^arn:aws[a-z-]*:cloudformation:(?P<region>[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}):[0-9]{12}"
    r":stack/(?P<name>" + STACK_NAME_PATTERN.strip("^$") + r")/[A-Za-z0-9-]{1,64}$"
)


# -- the triggers -------------------------------------------------------------------------


class _Trigger(BaseModel):
    """Only which EventBridge event this is; the full model is chosen from it."""

    model_config = ConfigDict(extra="ignore")

    detail_type: Literal["Scheduled Event", "CloudFormation Stack Status Change"] = Field(
        alias="detail-type"
    )


class ScheduledEvent(EventBridgeModel):
    """An EventBridge rule's schedule (source ``aws.events``; EventBridge Scheduler's
    ``aws.scheduler`` is accepted too: the same sweep, whichever service fires it)."""

    # EventBridge always sends "0"; the Lambda guide's sample scheduled event leaves it out.
    version: str = "0"
    detail_type: Literal["Scheduled Event"] = Field(alias="detail-type")
    source: Literal["aws.events", "aws.scheduler"]


class StackStatusDetails(BaseModel):
    status: str = Field(pattern=r"^[A-Z_]{1,64}$")
    status_reason: str | None = Field(default=None, alias="status-reason")


class StackStatusChange(BaseModel):
    """``detail`` of a Stack Status Change (CloudFormation User Guide, "Stack Status Change
    event detail"): ``stack-id`` is the stack's ARN."""

    stack_id: str = Field(alias="stack-id", max_length=512)
    status_details: StackStatusDetails = Field(alias="status-details")
    client_request_token: str | None = Field(default=None, alias="client-request-token")

    @field_validator("stack_id")
    @classmethod
    def _stack_arn(cls, value: str) -> str:
        if STACK_ARN.match(value) is None:
            raise ValueError(
                "must be a CloudFormation stack ARN "
                "(arn:aws:cloudformation:<region>:<account>:stack/<name>/<id>)"
            )
        return value

    @property
    def stack_name(self) -> str:
        match = STACK_ARN.match(self.stack_id)
        if match is None:  # validated above
            raise ValueError(self.stack_id)
        return match["name"]


class StackStatusChangeEvent(EventBridgeModel):
    detail_type: Literal["CloudFormation Stack Status Change"] = Field(alias="detail-type")
    source: Literal["aws.cloudformation"]
    region: str = Field(pattern=REGION_PATTERN, max_length=32)
    detail: StackStatusChange

    @field_validator("time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        """EventBridge sends UTC ("...Z"). The time is compared with a stack's CreationTime
        (late events), so a naive one, or one outside years 1-9999 once in UTC, is refused
        here rather than failing there."""
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("must be a UTC time such as 2026-11-21T10:03:12Z")
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise ValueError("is outside the years 1-9999 in UTC") from None


class InterruptionDetail(BaseModel):
    """``detail`` of an interruption warning (EC2 User Guide, "Monitor interruptible Capacity
    Reservations with EventBridge": ``instance-id``, ``instance-action``,
    ``instance-termination-time``)."""

    model_config = ConfigDict(extra="ignore")

    instance_id: str = Field(alias="instance-id", pattern=r"^i-[0-9a-f]{8,17}$")
    instance_action: str | None = Field(default=None, alias="instance-action", max_length=64)
    termination_time: str | None = Field(
        default=None, alias="instance-termination-time", max_length=64
    )


class InterruptionWarningEvent(EventBridgeModel):
    detail_type: str = Field(alias="detail-type", max_length=256)
    source: Literal["aws.ec2"]
    region: str = Field(pattern=REGION_PATTERN, max_length=32)
    detail: InterruptionDetail

    @field_validator("detail_type")
    @classmethod
    def _a_warning(cls, value: str) -> str:
        if not is_interruption_warning(value):
            raise ValueError("is not an interruption warning")
        return value


Trigger = SweepRequest | ScheduledEvent | StackStatusChangeEvent | InterruptionWarningEvent


def parse_trigger(event: Any) -> Trigger:
    """The trigger this event is, or ``pydantic.ValidationError``."""
    if (
        isinstance(event, Mapping)
        and isinstance(event.get("detail-type"), str)
        and is_interruption_warning(event["detail-type"])
    ):
        return InterruptionWarningEvent.model_validate(event)
    if isinstance(event, Mapping) and ("detail-type" in event or "source" in event):
        kind = _Trigger.model_validate(event).detail_type
        model: type[ScheduledEvent | StackStatusChangeEvent] = (
            ScheduledEvent if kind == SCHEDULED else StackStatusChangeEvent
        )
        return model.model_validate(event)
    return parse(event=event, model=SweepRequest)


# -- the handler --------------------------------------------------------------------------


def run(event: Any, invocation: Invocation, out: Output) -> dict[str, Any]:
    """The cleaner's entry: the trigger parsed, the root's cleaner run (its clock: the wall
    clock, or in tests the emulator's), the run's answer, log lines and metrics."""
    metrics, logger = out.metrics, out.logger
    try:
        trigger = parse_trigger(event)
    except ValidationError as error:
        metrics.add_metric(name="CleanerInvalid", unit=MetricUnit.Count, value=1)
        from ..models.invalid import invalid_request  # built on the first bad request

        return invalid_request(error, invocation.request_id)
    flow = invocation.root.cleaner
    regions = list(invocation.settings.regions)
    if isinstance(trigger, StackStatusChangeEvent):
        stack_name = trigger.detail.stack_name
        status = trigger.detail.status_details.status
        logger.info(
            "stack status change",
            extra={"stack_name": stack_name, "stack_status": status, "region": trigger.region},
        )
        if trigger.region not in regions:
            # Acted on anyway: the event names where the holds are; IAM has the last word.
            logger.warning("stack event from a region outside BROKER_REGIONS")
        done = flow.stack_event(
            trigger.region,
            trigger.detail.stack_id,
            stack_name,
            status,
            trigger.time,
            invocation.deadline,
            invocation.hard_deadline,
        )
    elif isinstance(trigger, InterruptionWarningEvent):
        logger.info(
            "interruption warning",
            extra={
                "detail_type": trigger.detail_type,
                "instance_id": trigger.detail.instance_id,
                "instance_action": trigger.detail.instance_action,
                "region": trigger.region,
            },
        )
        done = flow.interruption(
            trigger.region,
            trigger.detail.instance_id,
            trigger.detail.termination_time,
            invocation.deadline,
        )
    elif isinstance(trigger, SweepRequest):
        done = flow.sweep(
            trigger.regions or regions,
            trigger.dry_run,
            invocation.deadline,
            invocation.hard_deadline,
        )
    else:
        done = flow.sweep(regions, False, invocation.deadline, invocation.hard_deadline)

    _observe(done, out)
    return done.response(invocation.request_id).to_json_dict()


def _observe(run: CleanerRun, out: Output) -> None:
    """A log line per decision and the cleaner's metrics (EMF, flushed by the handler)."""
    metrics, logger = out.metrics, out.logger
    for record in run.records:
        logger.info(
            "decision",
            extra={
                "id": record.id,
                "region": record.region,
                "reason": record.reason,
                "action": record.action,
                "dry_run": run.dry_run,
                "age_seconds": round(record.age_seconds, 1),
                **({"error_code": record.error_code} if record.error_code else {}),
            },
        )
    for error in run.region_errors:
        logger.warning(
            "region not swept",
            extra={"region": error.region, "error_code": error.error_code, "error": error.message},
        )
    if run.lookup_failures:
        logger.warning(
            "stack lookups failed: those holds are kept until the hold limit",
            extra={"lookup_failures": run.lookup_failures},
        )

    count = MetricUnit.Count
    metrics.add_metric(name="ReservationsExamined", unit=count, value=run.examined)
    metrics.add_metric(
        name="CleanerErrors",
        unit=count,
        value=run.error_count + run.lookup_failures + len(run.versions.errors),
    )
    if run.versions.deleted and not run.dry_run:
        metrics.add_metric(
            name="TemplateVersionsDeleted", unit=count, value=len(run.versions.deleted)
        )
    for error in run.versions.errors:
        logger.warning(
            "launch template version not deleted",
            extra={"id": error.id, "error_code": error.error_code, "error": error.message},
        )
    if not run.dry_run:
        cancelled = run.of("cancel")
        metrics.add_metric(name="ReservationsCancelled", unit=count, value=len(cancelled))
        for reason, name in REASON_METRICS.items():
            value = sum(1 for r in cancelled if r.reason == reason)
            metrics.add_metric(name=name, unit=count, value=value)
        metrics.add_metric(name="ReservationHoursSaved", unit=count, value=run.hours_saved)
    if run.trigger == "interruption":
        for node in run.interrupted:
            logger.warning(
                "node interrupted",
                extra={
                    "instance_id": node.instance_id,
                    "job_id": node.job_id,
                    "rung": node.rung,
                    "capacity_reservation_id": node.capacity_reservation_id,
                    "termination_time": node.termination_time,
                },
            )
        metrics.add_metric(name="NodesInterrupted", unit=count, value=len(run.interrupted))
        return
    for ended in run.ladder_nodes:
        logger.warning(
            "abandoned ladder node",
            extra={
                "instance_id": ended.instance_id,
                "region": ended.region,
                "ladder": ended.ladder,
                "rung": ended.rung,
                "reason": ended.reason,
                "action": "terminate",
                "dry_run": run.dry_run,
                "age_seconds": ended.age_seconds,
            },
        )
    for error in run.ladder_errors:
        logger.warning(
            "abandoned ladder not ended",
            extra={"id": error.id, "region": error.region, "error_code": error.error_code},
        )
    if not run.dry_run:
        # Half-done reserved-first ladders the sweep ended (issue 43): 0 on a healthy day.
        metrics.add_metric(
            name="AbandonedLadderNodesTerminated", unit=count, value=len(run.ladder_nodes)
        )
    if run.pool_unused:
        # The reserved pool's idle capacity (issue 43): what the account pays for and no job
        # uses, now and in instance-hours over the sweep's period.
        metrics.add_metric(
            name="PoolUnusedInstances", unit=count, value=sum(run.pool_unused.values())
        )
        metrics.add_metric(
            name="PoolUnusedInstanceHours", unit=count, value=run.pool_unused_instance_hours
        )
    if run.trigger == "sweep":
        # Only a sweep sees every owned reservation; a stack event sees one stack's holds.
        metrics.add_metric(
            name="OldestOwnedReservationAgeSeconds",
            unit=MetricUnit.Seconds,
            value=run.oldest_held_seconds,
        )


handler = lambda_handler("cleaner", run, logger, metrics)
