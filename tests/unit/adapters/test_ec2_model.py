"""The broker's own sessions load EC2's API model trimmed to the operations it calls
(``adapters/ec2/operations.py``, ``adapters/botocore_data``): every EC2 operation its code names
is in it, its clients have those operations and no other, and everything else (other services,
paginators, endpoint rules, a caller's session) is botocore's own."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import boto3
import botocore.session
import capacity_broker
import pytest
from botocore import xform_name
from botocore.loaders import Loader
from capacity_broker.adapters.aws import BOTOCORE_DATA, Clients
from capacity_broker.adapters.ec2.operations import OPERATIONS

SOURCE = Path(capacity_broker.__file__).resolve().parent
REGION = "us-east-1"


def botocore_operations(service: str = "ec2") -> set[str]:
    """The operations of botocore's own model of ``service`` (its data directory alone)."""
    loader = Loader(include_default_search_paths=False)
    loader.search_paths.append(Loader.BUILTIN_DATA_PATH)
    return set(loader.load_service_model(service, "service-2")["operations"])


def named_operations() -> dict[str, set[str]]:
    """Every EC2 operation the broker's code names, with the modules that name it: a string
    that is an operation's name (the adapters' ``self._call("CreateCapacityReservation", ...)``,
    the pacer's buckets) or its method's name (``get_paginator("describe_subnets")``), and an
    attribute that is a method's (``ec2.describe_regions``). Read from the syntax tree, so
    comments and prose do not count and no spelling of a call is missed."""
    operations = botocore_operations()
    methods = {xform_name(op): op for op in operations}
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                name = node.value
            elif isinstance(node, ast.Attribute):
                name = node.attr
            else:
                continue
            operation = name if name in operations else methods.get(name)
            if operation is not None:
                found[operation].add(path.relative_to(SOURCE).as_posix())
    return found


def test_every_ec2_operation_the_code_names_is_in_the_model() -> None:
    found = named_operations()
    # The reading itself: calls of each kind are found where they are made.
    assert "adapters/ec2/reservations.py" in found["CreateCapacityReservation"]
    assert "adapters/regions.py" in found["DescribeRegions"]  # ec2.describe_regions
    missing = {op: sorted(where) for op, where in found.items() if op not in OPERATIONS}
    assert missing == {}, "add them to adapters/ec2/operations.py, then `make ec2-model`"
    # ... and the list names nothing the code does not (an operation no longer called goes).
    assert sorted(OPERATIONS - found.keys()) == []


def test_the_brokers_own_session_has_only_the_trimmed_operations() -> None:
    ec2 = Clients().client("ec2", REGION)
    assert set(ec2.meta.service_model.operation_names) == OPERATIONS
    for operation in OPERATIONS:
        assert callable(getattr(ec2, xform_name(operation)))
    assert not hasattr(ec2, "describe_vpn_gateways")


def test_a_callers_session_and_botocores_own_keep_the_full_model() -> None:
    everything = botocore_operations()
    assert len(everything) > 5 * len(OPERATIONS)
    Clients().client("ec2", REGION)  # (made first: nothing it does reaches the others)
    given = Clients(boto3.session.Session()).client("ec2", REGION)
    plain = botocore.session.get_session().create_client("ec2", region_name=REGION)
    for client in (given, plain):
        assert set(client.meta.service_model.operation_names) == everything
    # and the other services of the broker's own session are botocore's whole models
    ssm = Clients().client("ssm", REGION)
    assert set(ssm.meta.service_model.operation_names) == botocore_operations("ssm")


def test_a_data_path_of_the_environment_is_still_searched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    loader = Clients().session.get_component("data_loader")
    assert loader.search_paths[:2] == [str(BOTOCORE_DATA), str(tmp_path)]
    assert loader.search_paths[-1] == Loader.BUILTIN_DATA_PATH


@pytest.mark.parametrize("kind", ["paginators-1", "endpoint-rule-set-1", "waiters-2"])
def test_everything_but_the_api_model_is_read_from_botocore(kind: str) -> None:
    clients = Clients()
    ec2 = clients.client("ec2", REGION)
    version = ec2.meta.service_model.api_version
    loader = clients.session.get_component("data_loader")
    _, model_path = loader.load_data_with_path(f"ec2/{version}/service-2")
    assert Path(model_path).is_relative_to(BOTOCORE_DATA)
    _, path = loader.load_data_with_path(f"ec2/{version}/{kind}")
    assert loader.is_builtin_path(path), path


def test_the_paginators_of_the_trimmed_operations_work() -> None:
    ec2 = Clients().client("ec2", REGION)
    loader = Loader(include_default_search_paths=False)
    loader.search_paths.append(Loader.BUILTIN_DATA_PATH)
    paginated = set(loader.load_service_model("ec2", "paginators-1")["pagination"])
    kept = sorted(paginated & OPERATIONS)
    assert "DescribeCapacityReservations" in kept
    for operation in kept:
        assert ec2.can_paginate(xform_name(operation))
        assert ec2.get_paginator(xform_name(operation)) is not None
