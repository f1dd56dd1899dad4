"""The IAM each function gets covers every AWS call its code makes (no drift between the
CDK grants and the adapters): each entry point runs its sample events against the emulator,
and every action in the emulator's call log must be allowed to that function's role."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from capacity_broker.client import InProcessContext
from infra_helpers import FUNCTIONS, Synth

pytestmark = [pytest.mark.infra, pytest.mark.slow]

EVENTS = Path(__file__).resolve().parents[2] / "events"
# The services the broker calls; moto's names are IAM's action prefixes.
SERVICES = ("ec2", "ssm", "cloudformation", "dynamodb", "pricing", "resource-groups")


@pytest.fixture(autouse=True)
def fresh_container() -> Iterator[None]:
    """A fresh Lambda container for each test: its root is built from the test's environment
    on the first invocation, and gone afterwards."""
    from capacity_broker.handlers._runtime import CONTAINER

    CONTAINER.use(None)
    yield
    CONTAINER.use(None)


def called_actions(name: str, emu: Any, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    monkeypatch.setenv("BROKER_CLUSTER_ID", "demo")
    monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    emu.load_scenario("demo")
    import boto3

    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName="broker-state",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    emu.clear_calls()
    handler = importlib.import_module(f"capacity_broker.handlers.{name}").handler
    for path in sorted(EVENTS.glob(f"{name}*.json")):
        handler(json.loads(path.read_text()), InProcessContext(f"grants-{name}"))
    actions = set()
    for service in SERVICES:
        actions |= {f"{service}:{c.action}" for c in emu.calls(service=service)}
    return actions


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_call_is_granted(
    name: str, broker: Synth, emu: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert os.environ.get("AWS_ENDPOINT_URL") is None
    calls = called_actions(name, emu, monkeypatch)
    assert calls, f"{name}'s sample events made no AWS call"
    missing = sorted(action for action in calls if not broker.allowed(name, action))
    assert missing == [], f"{name} calls {missing} but its role does not allow them"


# -- and nothing is granted that is never used ------------------------------------------------

# Used by the Lambda service or the AWS SDK's tracing with the function's role, not by its code.
RUNTIME = {
    "logs:CreateLogStream": "Lambda writes the function's own log group",
    "logs:PutLogEvents": "Lambda writes the function's own log group",
    "xray:PutTraceSegments": "active tracing",
    "xray:PutTelemetryRecords": "active tracing",
    "sqs:SendMessage": "the cleaner's failure destination (CDK's SqsDestination grant)",
    "sqs:GetQueueAttributes": "the cleaner's failure destination (CDK's SqsDestination grant)",
    "sqs:GetQueueUrl": "the cleaner's failure destination (CDK's SqsDestination grant)",
}
# Authorized by AWS inside a call the function does make (that call must be among its calls).
AUTHORIZED_INSIDE: dict[str, tuple[frozenset[str], str]] = {
    "ec2:CreateTags": (
        frozenset({"ec2:CreateCapacityReservation", "ec2:CreateFleet"}),
        "tags on create (EC2 User Guide, grant permission to tag resources during creation)",
    ),
    "ec2:RunInstances": (
        frozenset({"ec2:CreateFleet"}),
        "an EC2 Fleet's launches (Service Authorization Reference, CreateFleet)",
    ),
    "ssm:GetParameters": (
        frozenset({"ec2:CreateFleet", "ec2:CreateLaunchTemplateVersion"}),
        "a template image given as resolve:ssm:... (EC2 User Guide, launch templates)",
    ),
    "dynamodb:GetItem": (
        frozenset({"dynamodb:PutItem"}),
        "Powertools Idempotency reads a record it could not write (its IAM permissions list)",
    ),
}
DEMO_TEMPLATE = "lt-0f000000000000001"
DEMO_IMAGE = "ami-0de00000000000001"


def _sample(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return data


def _invoke(name: str, event: dict[str, Any]) -> dict[str, Any]:
    handler = importlib.import_module(f"capacity_broker.handlers.{name}").handler
    answer: dict[str, Any] = handler(event, InProcessContext(f"grants-{name}"))
    return answer


def _probe_paths(emu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A retry that meets an earlier invocation's ClientToken looks for that reservation.
    emu.fail("CreateCapacityReservation", "IdempotentParameterMismatch", times=1)
    _invoke("probe", {**_sample("probe"), "request_id": "grants-probe-retry"})
    emu.clear_faults()
    # A group (adapters.dynamodb_group), made deterministic: a probe alike stays in flight
    # (its leave is lost), so the next one leads a group, which one desktop alike joins the
    # moment it opens; the leader answers both and publishes the member's answer.
    from capacity_broker.adapters.dynamodb_group import TableStore

    real_open = TableStore.open

    def open_and_join(table: TableStore, kind: str, *args: Any) -> Any:
        lost = real_open(table, kind, *args)
        if lost is None:  # opened (else: the group that won)
            table.join(kind, "e" * 32, 1e6, 200)
        return lost

    monkeypatch.setattr(TableStore, "leave", lambda *_: None)
    monkeypatch.setattr(TableStore, "open", open_and_join)
    for n in range(2):
        _invoke("probe", {**_sample("probe"), "request_id": f"grants-probe-group-{n}"})
    # A member: it joins a group still taking members and reads its answer (here: "probe
    # alone", as the leader writes when the group cannot answer), found by its slot.
    _member_of_an_open_group()
    _invoke("probe", {**_sample("probe"), "request_id": "grants-probe-member"})


def _member_of_an_open_group() -> None:
    """The probe kind's item names an open group of one whose next member (slot 1) is told to
    probe alone (what a leader writes for a group it cannot answer)."""
    import boto3
    from capacity_broker.adapters.dynamodb_group_items import answer_item

    table = boto3.client("dynamodb", region_name="us-east-1")
    (kind,) = [
        i["id"]["S"]
        for i in table.scan(TableName="broker-state")["Items"]
        if "seen" in i or "gid" in i
    ]
    group = "group-" + "0" * 32
    # (Written with UpdateItem, as the function writes: the calls made here are recorded with
    # the function's, and a PutItem here would pass off a grant the function never uses.)
    table.update_item(
        TableName="broker-state",
        Key={"id": {"S": kind}},
        UpdateExpression="SET gid = :g, st = :open, n = :one, p = :zero",
        ExpressionAttributeValues={
            ":g": {"S": group},
            ":open": {"S": "open"},
            ":one": {"N": "1"},
            ":zero": {"N": "0"},
        },
    )
    table.update_item(
        TableName="broker-state",
        Key={"id": {"S": answer_item(group, 1)}},
        UpdateExpression="SET answer = :alone",
        ExpressionAttributeValues={":alone": {"S": "alone"}},
    )


def _reserve_paths(emu: Any, *_: Any) -> None:
    event = {k: v for k, v in _sample("reserve").items() if k != "stack_name"}
    # The platform from an image, and a numbered template version.
    _invoke(
        "reserve",
        {
            **event,
            "request_id": "grants-reserve-image",
            "image_id": DEMO_IMAGE,
            "launch_template": {"id": DEMO_TEMPLATE, "version": "1"},
        },
    )
    # A launch that came back short is terminated (all or nothing).
    emu.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 64)
    emu.fail("CreateFleet", "InsufficientInstanceCapacity", mode="partial", times=1)
    short = {
        **event,
        "request_id": "grants-reserve-short",
        "instance_types": ["c7i.48xlarge"],
        "subnet_ids": event["subnet_ids"][:1],
        "instance_count": 2,
        "provision": True,
    }
    assert _invoke("reserve", short)["status"] == "error"
    emu.clear_faults()
    # An error answer is not remembered: its request record is deleted.
    emu.fail("CreateCapacityReservation", "UnauthorizedOperation", times=99)
    _invoke("reserve", {**event, "request_id": "grants-reserve-refused"})
    emu.clear_faults()


def _release_paths(emu: Any, *_: Any) -> None:
    # Something to release: the job's hold and, with no stack to launch from it, the template
    # version pointed at it, which release deletes (the setup's calls are not release's).
    _invoke("reserve", {k: v for k, v in _sample("reserve").items() if k != "stack_name"})
    emu.clear_calls()
    for path in sorted(EVENTS.glob("release*.json")):
        _invoke("release", json.loads(path.read_text()))


def _cleaner_paths(emu: Any, *_: Any) -> None:
    # A job's hold and template version (the setup's calls are not the cleaner's).
    _invoke("reserve", _sample("reserve"))
    # A node of a reserved-first ladder whose reserve died an hour ago, before its done record
    # (the cleaner terminates it).
    import boto3

    emu.advance(-3600)
    boto3.client("ec2", region_name="us-east-1").run_instances(
        LaunchTemplate={"LaunchTemplateId": DEMO_TEMPLATE},
        InstanceType="c7i.48xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "capacity-broker:cluster-id", "Value": "demo"},
                    {"Key": "capacity-broker:ladder", "Value": "grants-ladder"},
                ],
            }
        ],
    )
    emu.advance(3600)
    emu.settle()
    emu.clear_calls()
    owned = {"capacity-broker:cluster-id": "demo", "capacity-broker:subnet-id": "subnet-x"}
    emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "reservations": [
                        {  # a probe nobody cancelled
                            "instance_type": "g6.xlarge",
                            "availability_zone": "us-east-1b",
                            "count": 1,
                            "created": "-10m",
                            "end_date": "+1h",
                            "match": "targeted",
                            "tags": {**owned, "capacity-broker:purpose": "probe"},
                        },
                        {  # a hold for a job stack (whose status is asked)
                            "instance_type": "g6.xlarge",
                            "availability_zone": "us-east-1c",
                            "count": 1,
                            "created": "-1m",
                            "end_date": "+1h",
                            "match": "targeted",
                            "tags": {
                                **owned,
                                "capacity-broker:purpose": "hold",
                                "capacity-broker:stack-name": "soca-demo-job-9",
                            },
                        },
                    ]
                }
            }
        }
    )
    _invoke("cleaner", {"action": "sweep", "dry_run": False, "request_id": "grants-sweep"})
    # Its stack deleted, a job's template version goes with it.
    _invoke("cleaner", _sample("cleaner_stack_delete_complete"))


EXERCISES = {
    "probe": _probe_paths,
    "reserve": _reserve_paths,
    "release": _release_paths,
    "cleaner": _cleaner_paths,
    "capacity": lambda *_: None,
}


def _granted(synth: Synth, name: str) -> set[str]:
    return {
        action
        for statement in synth.statements_of(name)
        if statement["Effect"] == "Allow"
        for action in (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
    }


@pytest.mark.parametrize("name", FUNCTIONS)
def test_nothing_is_granted_that_is_never_used(
    name: str, broker: Synth, emu: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every action a role allows is called by the function (its sample events, plus the
    paths those do not reach), authorized by AWS inside a call it makes, or used by Lambda
    itself. A grant past that is privilege nobody needs (the reserve role could create the
    EC2 Fleet service-linked role; every role could read the state table and use discovery
    calls only the client makes)."""
    calls = called_actions(name, emu, monkeypatch)
    EXERCISES[name](emu, monkeypatch)
    for service in SERVICES:
        calls |= {f"{service}:{c.action}" for c in emu.calls(service=service)}
    unused = []
    for action in sorted(_granted(broker, name)):
        if action in calls or action in RUNTIME:
            continue
        parents, _ = AUTHORIZED_INSIDE.get(action, (frozenset(), ""))
        if parents & calls:
            continue
        unused.append(action)
    assert unused == [], f"{name}'s role allows {unused}, which it never uses"
