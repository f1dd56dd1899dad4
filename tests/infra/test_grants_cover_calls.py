"""The IAM each function gets covers every AWS call its code makes (no drift between the
CDK grants and the adapters): each entry point runs its sample events against the emulator,
and every action in the emulator's call log must be allowed to that function's role."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from capacity_broker.client import InProcessContext
from infra_helpers import FUNCTIONS, Synth

pytestmark = [pytest.mark.infra, pytest.mark.slow]

EVENTS = Path(__file__).resolve().parents[2] / "events"
# The services the broker calls; moto's names are IAM's action prefixes.
SERVICES = ("ec2", "ssm", "cloudformation", "dynamodb")


def called_actions(name: str, emu: Any, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    from capacity_broker.handlers._runtime import reset_container

    monkeypatch.setenv("BROKER_CLUSTER_ID", "demo")
    monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    reset_container()
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
