"""Answer models dump to exactly the contract's JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from capacity_broker.domain.errors import Outcome
from capacity_broker.domain.probe import ProbeStatus
from capacity_broker.models import (
    Attempt,
    CapacityResponse,
    CapacityRow,
    CapacitySummary,
    CleanerItem,
    CleanerResponse,
    DurationRange,
    ErrorResponse,
    ItemError,
    LaunchTemplateInfo,
    ProbeResponse,
    ReleaseResponse,
    ReservationInfo,
    ReserveResponse,
    SkippedReservation,
)
from pydantic import ValidationError


def test_probe_answer_is_the_contract_example() -> None:
    answer = ProbeResponse(
        status="available",
        request_id="vdi-42",
        instance_type="g6.xlarge",
        subnet_id="subnet-0b",
        availability_zone="us-east-1b",
        availability_zone_id="use1-az2",
        attempts=[
            Attempt(
                subnet_id="subnet-0a",
                availability_zone="us-east-1a",
                outcome="insufficient_capacity",
                error_code="InsufficientInstanceCapacity",
            ),
            Attempt(
                subnet_id="subnet-0b",
                availability_zone="us-east-1b",
                outcome="available",
                reservation_id="cr-1",
                cancelled=True,
            ),
        ],
        message="…",
    )
    assert answer.to_json_dict() == {
        "status": "available",
        "request_id": "vdi-42",
        "instance_type": "g6.xlarge",
        "subnet_id": "subnet-0b",
        "availability_zone": "us-east-1b",
        "availability_zone_id": "use1-az2",
        "attempts": [
            {
                "subnet_id": "subnet-0a",
                "availability_zone": "us-east-1a",
                "outcome": "insufficient_capacity",
                "error_code": "InsufficientInstanceCapacity",
            },
            {
                "subnet_id": "subnet-0b",
                "availability_zone": "us-east-1b",
                "outcome": "available",
                "reservation_id": "cr-1",
                "cancelled": True,
            },
        ],
        # Contract v2: every probe answer says what its reservations were held, summed.
        "reservation_seconds": 0.0,
        "message": "…",
    }
    assert answer.to_json_dict() == answer.model_dump(mode="json", exclude_none=True)


def test_domain_enums_are_accepted_and_dumped_as_text() -> None:
    answer = ProbeResponse(
        status=ProbeStatus.UNAVAILABLE,
        request_id="r",
        attempts=[Attempt(subnet_id="s", outcome=Outcome.UNSUPPORTED)],
        message="m",
    )
    dumped = answer.to_json_dict()
    assert dumped["status"] == "unavailable"
    assert dumped["attempts"] == [{"subnet_id": "s", "outcome": "unsupported"}]
    assert json.loads(json.dumps(dumped)) == dumped
    plain = Attempt(subnet_id="s", outcome="not_tried")
    assert plain.outcome == Outcome.NOT_TRIED
    assert plain.outcome == "not_tried"
    with pytest.raises(ValidationError):
        Attempt(subnet_id="s", outcome="lost")


def test_probe_cleanup_pending_can_be_set_later() -> None:
    answer = ProbeResponse(status="available", request_id="r", message="m")
    answer.cleanup = "pending"
    assert answer.to_json_dict()["cleanup"] == "pending"


def test_reserve_answer_is_the_contract_example() -> None:
    answer = ReserveResponse(
        status="reserved",
        request_id="job-1234-a1",
        job_id="1234",
        reservation=ReservationInfo(
            id="cr-1",
            type="default",
            owned=True,
            instance_type="c7i.48xlarge",
            availability_zone="us-east-1b",
            availability_zone_id="use1-az2",
            instance_count=8,
            end_date=datetime(2026, 11, 21, 10, 5, 0, tzinfo=UTC),
        ),
        instance_types=["c7i.48xlarge"],
        subnet_ids=["subnet-0b"],
        launch_template=LaunchTemplateInfo(id="lt-1", version=8),
        message="…",
    )
    assert answer.to_json_dict() == {
        "status": "reserved",
        "request_id": "job-1234-a1",
        "job_id": "1234",
        "reservation": {
            "id": "cr-1",
            "type": "default",
            "owned": True,
            "instance_type": "c7i.48xlarge",
            "availability_zone": "us-east-1b",
            "availability_zone_id": "use1-az2",
            "instance_count": 8,
            "end_date": "2026-11-21T10:05:00Z",
        },
        "instance_types": ["c7i.48xlarge"],
        "subnet_ids": ["subnet-0b"],
        "launch_template": {"id": "lt-1", "version": 8},
        "instances": [],
        "attempts": [],
        # Contract v2: in every reserve answer too.
        "reservation_seconds": 0.0,
        "message": "…",
    }


def test_dates_are_utc_with_z_and_whole_seconds() -> None:
    paris = timezone(timedelta(hours=1))
    info = ReservationInfo(
        id="cr-1",
        type="capacity-block",
        owned=False,
        instance_type="p5.48xlarge",
        instance_count=2,
        start_date=datetime(2026, 11, 21, 11, 30, 0, 999_999, tzinfo=paris),
    )
    assert info.to_json_dict()["start_date"] == "2026-11-21T10:30:00Z"
    naive = info.model_copy(update={"start_date": datetime(2026, 11, 21)})
    with pytest.raises(ValueError, match="timezone-aware"):
        naive.to_json_dict()


def test_no_capacity_and_rejected_answers() -> None:
    waiting = ReserveResponse(
        status="no_capacity", request_id="r", job_id="1", retry_after_seconds=120, message="m"
    )
    assert waiting.to_json_dict()["retry_after_seconds"] == 120
    rejected = ReserveResponse(
        status="rejected", request_id="r", reason="cr-1 is cancelled, not active", message="m"
    )
    assert rejected.to_json_dict()["reason"] == "cr-1 is cancelled, not active"


def test_release_answer() -> None:
    answer = ReleaseResponse(
        status="released",
        request_id="r",
        cancelled=["cr-1"],
        skipped=[SkippedReservation(id="cr-2", reason="not owned by this broker")],
        message="m",
    )
    assert answer.to_json_dict() == {
        "status": "released",
        "request_id": "r",
        "cancelled": ["cr-1"],
        "skipped": [{"id": "cr-2", "reason": "not owned by this broker"}],
        "errors": [],
        "message": "m",
    }
    empty = ReleaseResponse(status="released", request_id="r", message="nothing to release")
    assert empty.to_json_dict()["cancelled"] == []
    assert empty.to_json_dict()["skipped"] == []


def test_cleaner_answer_is_the_contract_example() -> None:
    answer = CleanerResponse(
        status="ok",
        request_id="sweep-1",
        dry_run=False,
        regions=["us-east-1"],
        examined=12,
        cancelled=[CleanerItem(id="cr-1", region="us-east-1", reason="leaked_probe")],
        kept=[CleanerItem(id="cr-2", region="us-east-1", reason="stack CREATE_IN_PROGRESS")],
        message="…",
    )
    assert answer.to_json_dict() == {
        "status": "ok",
        "request_id": "sweep-1",
        "dry_run": False,
        "regions": ["us-east-1"],
        "examined": 12,
        "cancelled": [{"id": "cr-1", "region": "us-east-1", "reason": "leaked_probe"}],
        "kept": [{"id": "cr-2", "region": "us-east-1", "reason": "stack CREATE_IN_PROGRESS"}],
        "errors": [],
        "message": "…",
    }
    partial = answer.model_copy(
        update={
            "status": "partial",
            "errors": [ItemError(id="cr-3", region="us-east-1", error_code="X", message="m")],
        }
    )
    assert partial.to_json_dict()["errors"] == [
        {"id": "cr-3", "region": "us-east-1", "error_code": "X", "message": "m"}
    ]


def test_capacity_answer() -> None:
    row = CapacityRow(
        reservation_id="cr-1",
        reservation_type="capacity-block",
        capacity_block_id="cb-1",
        instance_type="p5.48xlarge",
        region="us-east-1",
        availability_zone="us-east-1b",
        availability_zone_id="use1-az2",
        total_capacity=2,
        available_capacity=2,
        used_capacity=0,
        state="scheduled",
        start_date=datetime(2026, 11, 22, 11, 30, tzinfo=UTC),
        end_date=datetime(2026, 11, 29, 11, 30, tzinfo=UTC),
        end_date_type="limited",
        duration_hours=168.0,
        instance_match_criteria="targeted",
        platform="Linux/UNIX",
        tenancy="default",
        owner_id="111122223333",
        tags={"team": "ml"},
    )
    answer = CapacityResponse(
        status="ok",
        request_id="cap-1",
        regions=["us-east-1"],
        summary=CapacitySummary(
            reservations=1,
            by_type={"capacity-block": 1},
            total_capacity=2,
            available_capacity=2,
            free_percent=100.0,
            block_duration_hours=DurationRange(min_hours=168.0, max_hours=168.0),
        ),
        reservations=[row],
        message="m",
    )
    dumped = answer.to_json_dict()
    assert dumped["reservations"][0]["start_date"] == "2026-11-22T11:30:00Z"
    assert dumped["reservations"][0]["owned_by_broker"] is False
    assert set(dumped["reservations"][0]) == {
        "reservation_id",
        "reservation_type",
        "capacity_block_id",
        "instance_type",
        "region",
        "availability_zone",
        "availability_zone_id",
        "total_capacity",
        "available_capacity",
        "used_capacity",
        "state",
        "start_date",
        "end_date",
        "end_date_type",
        "duration_hours",
        "instance_match_criteria",
        "platform",
        "tenancy",
        "owner_id",
        "owned_by_broker",
        "tags",
        # contract v3 ("Block life", "Future-dated ODCRs"): null when unknown
        "interconnect_status",
        "hours_left",
        "commitment_end_date",
    }
    assert dumped["summary"]["block_duration_hours"] == {"min_hours": 168.0, "max_hours": 168.0}


def test_error_answer_keeps_request_id_key() -> None:
    answer = ErrorResponse(request_id="r", error_code="InvalidConfiguration", message="m")
    assert answer.to_json_dict() == {
        "status": "error",
        "request_id": "r",
        "error_code": "InvalidConfiguration",
        "message": "m",
    }


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (ProbeResponse, {"status": "maybe", "request_id": "r", "message": "m"}),
        (ReserveResponse, {"status": "available", "request_id": "r", "message": "m"}),
        (CleanerResponse, {"status": "ok", "request_id": "r", "message": "m"}),  # no dry_run
        (ProbeResponse, {"status": "error", "request_id": "r", "message": "m", "extra": 1}),
    ],
)
def test_answers_refuse_what_the_contract_does_not_have(model: type, fields: dict) -> None:
    with pytest.raises(ValidationError):
        model(**fields)
