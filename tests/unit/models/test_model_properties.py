"""Whatever arrives, validation either accepts it or answers invalid_request; it never crashes."""

from __future__ import annotations

import json
from typing import Any

from capacity_broker.models import (
    CapacityRequest,
    ProbeRequest,
    ReleaseRequest,
    ReserveRequest,
    SweepRequest,
    invalid_request,
    request_id_from,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

MODELS: list[type[BaseModel]] = [
    ProbeRequest,
    ReserveRequest,
    ReleaseRequest,
    SweepRequest,
    CapacityRequest,
]
FIELDS = sorted(
    {name for model in MODELS for name in model.model_fields}
    | {"subnet_ids.0", "launch_template", "unknown"}
)

odd_text = st.one_of(
    st.text(max_size=40),
    # every category, lone surrogates and control characters included
    st.text(alphabet=st.characters(exclude_categories=()), max_size=20),
    st.sampled_from(["\x00", "\ud800", "subnet-0a00000000000001", "ami-0123456789abcdef0"]),
    st.builds(lambda n: "x" * n, st.integers(min_value=100, max_value=5000)),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | odd_text,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(odd_text | st.sampled_from(FIELDS), children, max_size=5)
    ),
    max_leaves=20,
)
events = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(FIELDS) | odd_text, json_values, max_size=8),
)


def check(model: type[BaseModel], event: Any) -> None:
    try:
        model.model_validate(event)
    except ValidationError as error:
        result = invalid_request(error, request_id_from(event))
        text = json.dumps(result, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")  # no lone surrogates left in the answer
        assert result["status"] == "invalid_request"
        assert result["errors"]
        assert all(set(e) == {"field", "message"} for e in result["errors"])
        assert len(text) < 20_000


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.sampled_from(MODELS), events)
def test_arbitrary_json_never_crashes(model: type[BaseModel], event: Any) -> None:
    check(model, event)


VALID: dict[type[BaseModel], dict[str, Any]] = {
    ProbeRequest: {"instance_type": "g6.xlarge", "subnet_ids": ["subnet-0a00000000000001"]},
    ReserveRequest: {
        "job_id": "1",
        "instance_types": ["c7i.large"],
        "subnet_ids": ["subnet-0a00000000000001"],
        "instance_count": 2,
    },
    ReleaseRequest: {"job_id": "1"},
    SweepRequest: {"action": "sweep"},
    CapacityRequest: {},
}


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.sampled_from(MODELS), st.data())
def test_one_bad_field_in_a_valid_request_never_crashes(
    model: type[BaseModel], data: st.DataObject
) -> None:
    event = dict(VALID[model])
    field = data.draw(st.sampled_from(sorted(model.model_fields)))
    event[field] = data.draw(json_values)
    check(model, event)


@given(st.sampled_from(MODELS))
def test_the_valid_examples_are_valid(model: type[BaseModel]) -> None:
    model.model_validate(VALID[model])
    model.model_validate_json(json.dumps(VALID[model]))


@given(json_values)
def test_request_id_from_is_total(event: Any) -> None:
    found = request_id_from({"request_id": event})
    assert found is None or found == event
