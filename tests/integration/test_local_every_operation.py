"""Every EC2 operation in botocore's model, sent to ``capacity-broker local`` through botocore
(as the AWS CLI sends it): each answer parses as EC2's XML, a result or an error, and none is an
HTML page or a 500. An operation the emulator does not implement answers EC2's
``UnsupportedOperation`` (a client error, "Error codes for the Amazon EC2 API"), which a client
does not retry; before issue 42, moto's server sent an HTML 500 and the AWS CLI retried it.

Each operation is called with its required members only, each the least its shape allows (a
string of its minimum length, an enum's first value...): enough to reach the implementation."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import boto3
import botocore
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.model import Shape
from capacity_broker.local import LocalBroker

from emulator import documented

pytestmark = pytest.mark.integration

DOCUMENTED_CODES = Path(__file__).parents[2] / "docs" / "ec2-error-codes.txt"
# The operations the issue found answering an HTML 500 (all in botocore's model).
FOUND = (
    "DescribeCapacityReservationFleets",
    "DescribeInstanceTopology",
    "DescribeCapacityReservationBillingRequests",
)


@pytest.fixture(scope="module")
def local() -> Iterator[LocalBroker]:
    with LocalBroker(scenario="discovery", cluster_id="discovery-cluster") as broker:
        yield broker


def minimal(shape: Shape, top: bool = True) -> Any:
    """The least value ``shape`` takes: its required members only, each at its minimum; a
    structure below the top that requires nothing gets its first member (an empty one is not
    sent at all, and its parent would miss a member it requires)."""
    kind = shape.type_name
    if kind == "structure":
        members = shape.members  # type: ignore[attr-defined]
        names = list(shape.required_members) or ([] if top else list(members)[:1])  # type: ignore[attr-defined]
        return {name: minimal(members[name], top=False) for name in names}
    if kind == "list":
        return [minimal(shape.member, top=False)]  # type: ignore[attr-defined]
    if kind == "string":
        enum = getattr(shape, "enum", None)
        return enum[0] if enum else "x" * max(1, int(shape.metadata.get("min", 1)))
    if kind in ("integer", "long"):
        return int(shape.metadata.get("min", 1))
    if kind in ("float", "double"):
        return 1.0
    if kind == "boolean":
        return False
    if kind == "timestamp":
        return datetime.datetime(2027, 1, 1, tzinfo=datetime.UTC)
    if kind == "blob":
        return b"x"
    return {}  # a map: EC2's inputs have none


def _client(endpoint: str) -> tuple[Any, list[dict[str, Any]]]:
    client = boto3.client(
        "ec2",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1}),
    )
    raw: list[dict[str, Any]] = []
    # Each answer as it came off the wire, before botocore parses it.
    client.meta.events.register(
        "before-parse.ec2.*", lambda response_dict, **_: raw.append(response_dict)
    )
    return client, raw


def test_every_ec2_operation_answers_ec2_xml_never_html_or_a_500(local: LocalBroker) -> None:
    client, raw = _client(local.endpoint)
    model = client.meta.service_model
    unsupported: list[str] = []
    wrong: list[str] = []
    for operation in model.operation_names:
        shape = model.operation_model(operation).input_shape
        params = minimal(shape) if shape else {}
        if "Filters" in params:  # a required filter: one the operation documents
            name = sorted(documented.filter_names(operation) or {"x"})[0]
            params["Filters"] = [{"Name": name, "Values": ["x"]}]
        raw.clear()
        try:
            getattr(client, botocore.xform_name(operation))(**params)
            code = None
        except ClientError as error:
            code = error.response["Error"]["Code"]
        assert len(raw) == 1, operation
        status, body = raw[0]["status_code"], raw[0]["body"]
        if status >= 500 or body.lstrip()[:1] != b"<" or b"<html" in body[:200].lower():
            wrong.append(f"{operation}: {status} {body[:80]!r}")
            continue
        # EC2's XML: a result, or Response/Errors/Error (any namespace)
        root = ElementTree.fromstring(body)  # noqa: S314 - the emulator's own answer
        if code is not None:
            assert 400 <= status < 500, (operation, status)
            assert root.findtext("{*}Errors/{*}Error/{*}Code") == code, operation
            assert root.findtext("{*}RequestID") or root.findtext("{*}RequestId"), operation
        if code == "UnsupportedOperation":
            unsupported.append(operation)
    assert wrong == []
    # A code EC2 documents for it: a common client error of "Error codes for the Amazon EC2 API".
    assert "UnsupportedOperation" in DOCUMENTED_CODES.read_text().split()
    assert set(FOUND) <= set(unsupported)


def test_an_unimplemented_operation_is_a_client_error_the_cli_does_not_retry(
    local: LocalBroker,
) -> None:
    client, _ = _client(local.endpoint)
    with pytest.raises(ClientError) as caught:
        client.describe_instance_topology()
    error = caught.value.response
    assert error["Error"]["Code"] == "UnsupportedOperation"
    assert "DescribeInstanceTopology" in error["Error"]["Message"]
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    # The emulator's call log records the answer like any other.
    calls = local.server.emulator.calls("DescribeInstanceTopology")
    assert calls and calls[-1].outcome == "UnsupportedOperation"


def test_no_documented_filter_is_silently_ignored(local: LocalBroker) -> None:
    """Every operation that lists something without being told what (the discovery scenario
    gives most of them items), asked again with each filter its documentation lists and a value
    nothing has: it answers an empty list, or refuses the filter; never the same items, as if
    the filter were not there (issue 42: DescribeLaunchTemplateVersions ignored its filters)."""
    client, _ = _client(local.endpoint)
    model = client.meta.service_model
    checked = 0
    ignored: list[str] = []
    for operation in model.operation_names:
        names = documented.filter_names(operation)
        shape = model.operation_model(operation).input_shape
        if not names or shape is None or shape.required_members:
            continue
        call = getattr(client, botocore.xform_name(operation))
        try:
            listed = [key for key, value in call().items() if isinstance(value, list) and value]
        except ClientError:
            continue  # unsupported (the sweep above), or nothing to list unasked
        for name in sorted(names) if listed else ():
            wanted = "tag:owner" if name == documented.TAG_KEY_FILTER else name
            checked += 1
            try:
                answer = call(Filters=[{"Name": wanted, "Values": ["nothing-has-this-value"]}])
            except ClientError:
                continue  # refused: not ignored
            if any(answer.get(key) for key in listed):
                ignored.append(f"{operation} {name}")
    assert ignored == [], "\n".join(ignored)
    assert checked >= 100  # the scenario gives enough operations something to list
