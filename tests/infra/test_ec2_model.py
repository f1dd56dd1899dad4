"""The functions' EC2 API model (``adapters/botocore_data``) is the installed botocore's, trimmed
to the broker's operations by ``make ec2-model`` (``infra/ec2_model.py``): the file is a fresh
trim, and the trim keeps whatever a client of those operations reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.model import ServiceModel, Shape
from capacity_broker.adapters.aws import BOTOCORE_DATA
from capacity_broker.adapters.ec2.operations import OPERATIONS

from infra.ec2_model import DOCUMENTATION, botocore_model, fresh, main, trimmed


def test_the_functions_ec2_model_is_a_fresh_trim() -> None:
    """`make ec2-model` wrote the file from the installed botocore and the operations' list; a
    new pin or a new operation not followed by it fails here."""
    path, text = fresh()
    assert path.is_file(), "no EC2 model for the functions: run `make ec2-model`"
    assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run `make ec2-model`"
    assert [p for p in BOTOCORE_DATA.rglob("*") if p.is_file()] == [path]
    assert main(["--check"]) == 0


def test_the_trim_is_botocores_own_without_documentation() -> None:
    _, full = botocore_model()
    path, text = fresh()
    model = json.loads(text)
    assert model == trimmed(full, OPERATIONS)
    assert set(model["operations"]) == OPERATIONS
    assert model["metadata"] == full["metadata"]
    assert not any(f'"{key}"' in text for key in DOCUMENTATION)
    for name, operation in model["operations"].items():
        assert operation == _undocumented(full["operations"][name])
    for name, shape in model["shapes"].items():
        assert shape == _undocumented(full["shapes"][name])
    assert path.stat().st_size < 0.1 * len(json.dumps(full))


def test_every_shape_the_operations_reach_resolves() -> None:
    """botocore resolves shapes by name when a client serializes a request or parses an
    answer: a shape missing from the trim would fail there, at run time."""
    service = ServiceModel(json.loads(fresh()[1]), service_name="ec2")
    seen: set[str] = set()

    def walk(shape: Shape | None) -> None:
        if shape is None or shape.name in seen:
            return
        seen.add(shape.name)
        for member in getattr(shape, "members", {}).values():
            walk(member)
        for part in ("member", "key", "value"):
            walk(getattr(shape, part, None))

    for name in service.operation_names:
        operation = service.operation_model(name)
        walk(operation.input_shape)
        walk(operation.output_shape)
        for error in operation.error_shapes:
            walk(error)
    assert seen == set(service.shape_names)


def test_an_operation_botocore_does_not_have_is_refused() -> None:
    _, full = botocore_model()
    with pytest.raises(ValueError, match="DescribeCapacityBrokers"):
        trimmed(full, [*OPERATIONS, "DescribeCapacityBrokers"])


def _undocumented(value: Any) -> Any:
    """``value`` without documentation at any depth (EC2's members are never called so)."""
    if isinstance(value, dict):
        return {k: _undocumented(v) for k, v in value.items() if k not in DOCUMENTATION}
    if isinstance(value, list):
        return [_undocumented(v) for v in value]
    return value
