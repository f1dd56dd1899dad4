"""The cleaner's flow without AWS: which trigger an event is, what a run answers, and the
facts it derives from a reservation (the rules themselves are tests/unit/domain)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from capacity_broker.adapters.cloudformation import Stack
from capacity_broker.adapters.ec2 import Reservation
from capacity_broker.domain.cleaner import STACK_MISSING
from capacity_broker.domain.tags import Purpose
from capacity_broker.handlers.cleaner import (
    ScheduledEvent,
    StackStatusChangeEvent,
    parse_trigger,
)
from capacity_broker.logic.cleaner import CleanerRun, Record, _held, _newer
from capacity_broker.models import ItemError, SweepRequest
from pydantic import ValidationError

EVENTS = Path(__file__).resolve().parents[3] / "events"
NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
ARN = "arn:aws:cloudformation:us-east-1:111122223333:stack/soca-demo-job-1234/6a7e8feb-b491"


def sample(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return data


# -- triggers -------------------------------------------------------------------------------


def test_the_schedule_is_a_scheduled_event() -> None:
    trigger = parse_trigger(sample("cleaner_schedule.json"))
    assert isinstance(trigger, ScheduledEvent)
    scheduler = sample("cleaner_schedule.json") | {"source": "aws.scheduler", "detail": "{}"}
    assert isinstance(parse_trigger(scheduler), ScheduledEvent)
    # The Lambda Developer Guide's sample scheduled event has no "version".
    guide = {k: v for k, v in sample("cleaner_schedule.json").items() if k != "version"}
    assert isinstance(parse_trigger(guide), ScheduledEvent)


@pytest.mark.parametrize(
    ("stack_id", "name"),
    [
        (ARN, "soca-demo-job-1234"),
        ("arn:aws-us-gov:cloudformation:us-gov-west-1:111122223333:stack/a-b-9/x-1", "a-b-9"),
        ("arn:aws-cn:cloudformation:cn-north-1:111122223333:stack/J/0", "J"),
    ],
)
def test_a_stack_event_names_its_stack(stack_id: str, name: str) -> None:
    event = sample("cleaner_stack_create_complete.json")
    event["detail"]["stack-id"] = stack_id
    trigger = parse_trigger(event)
    assert isinstance(trigger, StackStatusChangeEvent)
    assert trigger.detail.stack_name == name
    assert trigger.detail.status_details.status == "CREATE_COMPLETE"
    assert trigger.region == "us-east-1"
    assert trigger.time.tzinfo is not None


def test_a_direct_sweep_is_a_sweep_request() -> None:
    trigger = parse_trigger({"action": "sweep", "dry_run": False, "regions": ["eu-west-1"]})
    assert isinstance(trigger, SweepRequest)
    assert trigger.dry_run is False
    default = parse_trigger({"action": "sweep"})
    assert isinstance(default, SweepRequest)
    assert default.dry_run is True  # an operator who forgets dry_run only looks


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"detail-type": "Object Created"}, "detail-type"),
        ({"source": "aws.s3"}, "source"),
        ({"region": "us east 1"}, "region"),
    ],
)
def test_events_we_do_not_handle_are_refused_by_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_trigger(sample("cleaner_stack_create_complete.json") | change)
    assert field in {str(e["loc"][0]) for e in caught.value.errors()}


@pytest.mark.parametrize(
    "stack_id",
    [
        "teststack",
        "arn:aws:cloudformation:us-east-1:111122223333:stackset/s/1",
        "arn:aws:cloudformation:us-east-1:111122223333:stack/1bad/1",
        "arn:aws:s3:::bucket",
    ],
)
def test_a_stack_id_must_be_a_stack_arn(stack_id: str) -> None:
    event = sample("cleaner_stack_create_complete.json")
    event["detail"]["stack-id"] = stack_id
    with pytest.raises(ValidationError) as caught:
        parse_trigger(event)
    assert [e["loc"] for e in caught.value.errors()] == [("detail", "stack-id")]


# -- what a run answers ---------------------------------------------------------------------


def record(action: str, age: float = 10.0, reason: str = "idle", **extra: Any) -> Record:
    return Record(
        id=f"cr-{abs(hash((action, age, reason))):017x}"[:20],
        region="us-east-1",
        action=action,  # type: ignore[arg-type]
        reason=reason,
        age_seconds=age,
        **extra,
    )


def test_a_run_without_failures_is_ok_and_counts_what_it_did() -> None:
    run = CleanerRun("sweep", False, ["us-east-1"])
    run.records = [
        record("cancel", 700, hours_saved=1.5),
        record("cancel", 95, "leaked_probe", hours_saved=0.25),
        record("keep", 40, "young hold"),
    ]
    answer = run.response("r-1").to_json_dict()
    assert answer["status"] == "ok"
    assert answer["examined"] == 3
    assert answer["hours_saved"] == 1.75
    assert [i["reason"] for i in answer["cancelled"]] == ["idle", "leaked_probe"]
    assert answer["kept"] == [
        {"id": run.records[2].id, "region": "us-east-1", "reason": "young hold"}
    ]
    assert "cancelled 2, kept 1" in answer["message"]
    # Only what is still held counts towards the alarm on the oldest reservation.
    assert run.oldest_held_seconds == 40


def test_a_dry_run_still_holds_everything() -> None:
    run = CleanerRun("sweep", True, ["us-east-1"])
    run.records = [record("cancel", 700), record("keep", 40)]
    assert run.oldest_held_seconds == 700
    assert run.response("r").message.startswith("Dry run: ")
    assert "would cancel 1" in run.response("r").message


def test_failures_make_a_run_partial_and_every_region_failing_an_error() -> None:
    run = CleanerRun("sweep", False, ["us-east-1", "us-west-2"])
    run.records = [record("failed", 300, error_code="UnauthorizedOperation", message="denied")]
    answer = run.response("r").to_json_dict()
    assert answer["status"] == "partial"
    (error,) = answer["errors"]
    assert error["error_code"] == "UnauthorizedOperation"
    assert "idle" in error["message"]
    assert run.oldest_held_seconds == 300

    run.records = []
    run.region_errors = [
        ItemError(region=r, error_code="AuthFailure", message="x") for r in run.regions
    ]
    assert run.status == "error"


# -- facts ----------------------------------------------------------------------------------


def reservation(**changes: Any) -> Reservation:
    base: dict[str, Any] = {
        "id": "cr-0123456789abcdef0",
        "region": "us-east-1",
        "instance_type": "c7i.large",
        "availability_zone": "us-east-1a",
        "availability_zone_id": "use1-az6",
        "platform": "Linux/UNIX",
        "tenancy": "default",
        "total_count": 4,
        "available_count": 1,
        "state": "active",
        "reservation_type": "default",
        "match_criteria": "targeted",
        "end_date_type": "limited",
        "created": NOW - timedelta(minutes=3),
        "start_date": NOW - timedelta(minutes=3),
        "end_date": NOW + timedelta(minutes=2),
        "tags": {
            "capacity-broker:cluster-id": "c",
            "capacity-broker:purpose": "hold",
            "capacity-broker:stack-name": "soca-demo-job-1",
        },
    }
    return Reservation(**(base | changes))


def test_a_reservation_as_the_rules_see_it() -> None:
    held = _held(reservation(), NOW)
    assert held.purpose is Purpose.HOLD
    assert held.stack_name == "soca-demo-job-1"
    assert (held.instance_count, held.used_count) == (4, 3)


def test_nothing_runs_in_a_pending_reservation() -> None:
    assert _held(reservation(state="pending", available_count=0), NOW).used_count == 0


def test_without_a_creation_date_a_reservation_counts_as_new() -> None:
    assert _held(reservation(created=None, start_date=None), NOW).created == NOW


def test_only_a_stack_created_after_the_event_overrides_it() -> None:
    other = "arn:aws:cloudformation:us-east-1:111122223333:stack/soca-demo-job-1234/other"
    newer = Stack(other, "soca-demo-job-1234", "CREATE_IN_PROGRESS", NOW + timedelta(seconds=1))
    older = Stack(other, "soca-demo-job-1234", "CREATE_IN_PROGRESS", NOW - timedelta(seconds=1))
    same = Stack(ARN, "soca-demo-job-1234", "CREATE_IN_PROGRESS", NOW + timedelta(hours=1))
    assert _newer(newer, ARN, NOW) is newer
    assert _newer(older, ARN, NOW) is None
    assert _newer(same, ARN, NOW) is None
    assert _newer(STACK_MISSING, ARN, NOW) is None
