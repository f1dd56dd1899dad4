"""The invalid_request answer and the request id of a raw event."""

from __future__ import annotations

import json
from typing import Any

import pytest
from capacity_broker.models import (
    ProbeRequest,
    ReleaseRequest,
    ReserveRequest,
    invalid_request,
    is_request_id,
    request_id_from,
    request_id_of,
)
from capacity_broker.models.invalid import MAX_ERRORS
from pydantic import BaseModel, ValidationError

PROBE: dict[str, Any] = {"instance_type": "g6.xlarge", "subnet_ids": ["subnet-0a00000000000001"]}


def answer(model: type[BaseModel], event: Any, request_id: str | None = "r-1") -> dict[str, Any]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(event)
    result = invalid_request(caught.value, request_id)
    json.dumps(result, ensure_ascii=False).encode("utf-8")  # serializable, valid UTF-8
    return result


def test_shape() -> None:
    result = answer(ProbeRequest, {**PROBE, "subnet_ids": ["subnet-0a00000000000001", "x"]})
    assert result == {
        "status": "invalid_request",
        "request_id": "r-1",
        "errors": [
            {
                "field": "subnet_ids.1",
                "message": "must be a subnet id (subnet- and 8 to 17 hex digits), got 'x'",
            }
        ],
        "message": "Invalid request (1 problem): subnet_ids.1: must be a subnet id "
        "(subnet- and 8 to 17 hex digits), got 'x'",
    }


@pytest.mark.parametrize(
    ("event", "field", "message"),
    [
        ({}, "instance_type", "is required"),
        ({**PROBE, "color": "red"}, "color", "is not a known field"),
        ({**PROBE, "instance_count": "5"}, "instance_count", "must be an integer"),
        ({**PROBE, "instance_count": 0}, "instance_count", "greater than or equal to 1"),
        ({**PROBE, "subnet_ids": "subnet-0a00000000000001"}, "subnet_ids", "must be a list"),
        ({**PROBE, "tenancy": "host"}, "tenancy", "'default' or 'dedicated'"),
        ({**PROBE, "tags": {"aws:x": "1"}}, "tags.aws:x", "key may not start with 'aws:'"),
        ({**PROBE, "instance_platform": "Linux"}, "instance_platform", "Linux/UNIX"),
        (
            {**PROBE, "subnet_ids": ["subnet-0a00000000000001"] * 2},
            "subnet_ids",
            "must not repeat",
        ),
        ([], "request", "must be a JSON object"),
        ("{}", "request", "must be a JSON object"),
        (None, "request", "must be a JSON object"),
    ],
)
def test_fields_and_messages(event: Any, field: str, message: str) -> None:
    errors = answer(ProbeRequest, event)["errors"]
    assert any(e["field"] == field and message in e["message"] for e in errors), errors


def test_model_level_errors_point_at_the_request() -> None:
    result = answer(ReleaseRequest, {"job_id": "1", "stack_name": "s"})
    assert result["errors"] == [
        {
            "field": "request",
            "message": "give exactly one of job_id, stack_name, reservation_id "
            "(got job_id, stack_name)",
        }
    ]
    result = answer(ReserveRequest, {**PROBE, "job_id": "1"})
    assert {"field": "instance_types", "message": "is required"} in result["errors"]


def test_huge_and_odd_input_is_not_echoed() -> None:
    huge = "subnet-" + "\x00\ud800\n" * 100_000
    event = {
        **PROBE,
        "subnet_ids": [huge],
        "k" * 10_000: 1,
        "bad\x00\u2028key\x1b[31m": 2,
        "tags": {"nul\x00": "v", "ok": "line\nbreak"},
    }
    result = answer(ProbeRequest, event)
    assert {e["field"] for e in result["errors"]} >= {
        "bad\\x00\\u2028key\\x1b[31m",
        "tags.nul\\x00",
        "tags.ok",
    }
    text = json.dumps(result)
    assert len(text) < 3000
    for error in result["errors"]:
        assert error["field"].isprintable()
        assert error["message"].isprintable()
        assert len(error["field"]) < 100


def test_lone_surrogates_are_refused_without_echo() -> None:
    for event in ({**PROBE, "k\ud800": 1}, {**PROBE, "tags": {"ok": "\udfff"}}):
        result = answer(ProbeRequest, event)
        assert "\\ud" not in json.dumps(result, ensure_ascii=False)


def test_many_errors_are_capped() -> None:
    event = {**PROBE, **{f"x{i}": i for i in range(500)}}
    result = answer(ProbeRequest, event)
    assert len(result["errors"]) == MAX_ERRORS + 1
    assert result["errors"][-1] == {"field": "request", "message": "480 more problems not shown"}
    assert result["message"].startswith("Invalid request (500 problems): ")
    assert len(result["message"]) <= 610


def test_request_id_is_kept_only_when_valid() -> None:
    assert answer(ProbeRequest, {}, request_id=None)["request_id"] is None
    assert answer(ProbeRequest, {}, request_id="ok-1")["request_id"] == "ok-1"
    assert answer(ProbeRequest, {}, request_id="bad id\n")["request_id"] is None


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"request_id": "vdi-42"}, "vdi-42"),
        ({"request_id": "job:1234.a_1-b"}, "job:1234.a_1-b"),
        ({"request_id": "a" * 128}, "a" * 128),
        ({"request_id": "a" * 129}, None),
        ({"request_id": ""}, None),
        ({"request_id": "no spaces"}, None),
        ({"request_id": "x\n"}, None),
        ({"request_id": 42}, None),
        ({"request_id": None}, None),
        ({}, None),
        ([{"request_id": "x"}], None),
        ("request_id", None),
        (None, None),
    ],
)
def test_request_id_from_raw_events(event: Any, expected: str | None) -> None:
    assert request_id_from(event) == expected
    assert request_id_of(event) == expected
    assert is_request_id(expected) is (expected is not None)
