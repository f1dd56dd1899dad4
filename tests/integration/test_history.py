"""``capacity-broker history`` and ``CapacityBroker.history()`` (contract v2): the capacity memory
the broker's probes and reserves leave, from the state table or, without one, the client's own."""

from __future__ import annotations

import json
from datetime import timedelta
from importlib import import_module
from typing import Any

import boto3
import pytest
from capacity_broker import CapacityBroker
from capacity_broker.cli import EXIT_OK, EXIT_USAGE, app
from capacity_broker.client import ENTRY_POINTS, InvalidArguments
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

HANDLERS = [import_module(f"capacity_broker.handlers.{name}") for name in ENTRY_POINTS]
SUBNET_A = "subnet-0d1a0000000000e1a"
SUBNET_B = "subnet-0d1b0000000000e1b"
TABLE = "broker-state-history"
CONTRACT_FIELDS = {
    "region",
    "availability_zone_id",
    "instance_type",
    "attempts",
    "available",
    "insufficient",
    "success_rate",
    "last_available",
    "last_insufficient",
    "reservation_seconds",
}


@pytest.fixture
def world(broker: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("BROKER_STATE_TABLE", raising=False)
    broker.load_scenario("discovery")
    return broker


def _table() -> None:
    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def _probes(client: CapacityBroker) -> None:
    # B has no g6.xlarge capacity in the discovery scenario, A has.
    found = client.probe("g6.xlarge", [SUBNET_B, SUBNET_A])
    assert (found.status, found.subnet_id) == ("available", SUBNET_A)
    assert found.reservation_seconds > 0
    assert client.probe("g6.xlarge", [SUBNET_A]).status == "available"


def _by_zone(rows: list[Any]) -> dict[str, Any]:
    return {row.availability_zone_id: row for row in rows if row.instance_type == "g6.xlarge"}


def test_without_a_table_the_client_remembers_its_own_probes(world: Any) -> None:
    client = CapacityBroker(regions=["us-east-1"], cluster_id="hist")
    assert client.history() == []
    _probes(client)
    rows = _by_zone(client.history())
    subnets = {
        s["SubnetId"]: s["AvailabilityZoneId"]
        for s in boto3.client("ec2", region_name="us-east-1").describe_subnets()["Subnets"]
    }
    a, b = rows[subnets[SUBNET_A]], rows[subnets[SUBNET_B]]
    assert (a.attempts, a.available, a.insufficient, a.success_rate) == (2, 2, 0, 1.0)
    assert (b.attempts, b.available, b.insufficient, b.success_rate) == (1, 0, 1, 0.0)
    assert a.last_available is not None and a.last_insufficient is None
    assert b.last_insufficient is not None and b.last_available is None
    # Only A held anything, and what it held was given back: those seconds are A's.
    assert a.reservation_seconds > 0 and b.reservation_seconds == 0
    assert client.history(instance_types=["c5.large"]) == []
    assert client.history(regions=["us-west-2"]) == []
    assert len(client.history(since=timedelta(hours=1))) == 2


def test_with_the_state_table_every_client_sees_the_memory(world: Any) -> None:
    _table()
    writer = CapacityBroker(regions=["us-east-1"], cluster_id="hist", state_table=TABLE)
    _probes(writer)
    # Another process (a fresh client) reads what the first one's probes wrote.
    reader = CapacityBroker(regions=["us-east-1"], cluster_id="hist", state_table=TABLE)
    rows = reader.history(instance_types=["g6.xlarge"], regions=["us-east-1"])
    assert sorted(r.attempts for r in rows) == [1, 2]
    assert sum(r.available for r in rows) == 2
    # The give-backs' seconds (learnt after each answer) reach the table too.
    assert sum(r.reservation_seconds for r in rows) > 0
    assert reader.history() == rows  # by Scan, the same


def test_deployed_history_needs_the_state_table(world: Any) -> None:
    with pytest.raises(InvalidArguments, match="state_table"):
        CapacityBroker.deployed("capacity-broker-x").history()


def test_cli_history_in_every_format(world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _table()
    monkeypatch.setenv("BROKER_CLUSTER_ID", "hist")
    _probes(CapacityBroker(regions=["us-east-1"], state_table=TABLE))
    runner = CliRunner()

    def cli(*args: str) -> Any:
        return runner.invoke(app, ["--no-progress", *args], env={"COLUMNS": "80"})

    data = cli("history", "--state-table", TABLE, "-o", "json")
    assert data.exit_code == EXIT_OK, data.stderr
    rows = json.loads(data.stdout)
    assert len(rows) == 2 and all(set(row) >= CONTRACT_FIELDS for row in rows)
    table = cli("history", "--state-table", TABLE, "-t", "g6.xlarge", "--since", "1h")
    assert table.exit_code == EXIT_OK, table.stderr
    assert "g6.xlarge" in table.stdout and "100%" in table.stdout
    empty = cli("history", "--state-table", TABLE, "-t", "c5.large", "-o", "json")
    assert (empty.exit_code, json.loads(empty.stdout)) == (EXIT_OK, [])
    bad = cli("history", "--since", "yesterday")
    assert bad.exit_code == EXIT_USAGE and "--since" in bad.stderr


def test_probe_metrics_per_instance_type_and_per_az(
    world: Any, context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a probe spent, as CloudWatch metrics (EMF): per instance type and per AZ id, never
    both (bounded dimensions), and nothing of a type EC2 said nothing about capacity for."""
    from capacity_broker.handlers.probe import handler

    capsys.readouterr()
    answer = handler(
        {
            "request_id": "metrics-1",
            "instance_type": "g6.xlarge",
            "subnet_ids": [SUBNET_B, SUBNET_A],
        },
        context,
    )
    assert answer["status"] == "available"
    documents = [
        {k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in blob.items()}
        for blob in (
            json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line
        )
    ]
    dimensions = [tuple(d["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]) for d in documents]
    (by_type,) = [d for d in documents if "InstanceType" in d]
    assert by_type["InstanceType"] == "g6.xlarge" and "AvailabilityZoneId" not in by_type
    assert (by_type["Attempts"], by_type["AttemptsInsufficient"]) == (2, 1)
    assert by_type["AttemptsAvailable"] == 1
    assert by_type["ReservationSeconds"] == pytest.approx(answer["reservation_seconds"], abs=1e-3)
    zones = [d for d in documents if "AvailabilityZoneId" in d]
    assert len(zones) == 2 and all("InstanceType" not in d for d in zones)
    assert sum(d["Attempts"] for d in zones) == 2
    (function,) = [d for d in documents if "ReservationSecondsHeld" in d]
    # (The function's own Metrics may still carry values of in-process runs whose metrics
    # were disabled, earlier in this process: this probe's is the last.)
    held = function["ReservationSecondsHeld"]
    held = held[-1] if isinstance(held, list) else held
    assert held == pytest.approx(answer["reservation_seconds"], abs=1e-3)
    assert all(
        "InstanceType" in dims or "AvailabilityZoneId" in dims or dims == ("service",)
        for dims in dimensions
    )

    # An unknown type: EC2 answers an error (here Unsupported) on every create, and no metric
    # carries its name (it would mint a metric per typo).
    capsys.readouterr()
    handler(
        {"request_id": "metrics-2", "instance_type": "zz9.mega", "subnet_ids": [SUBNET_A]},
        context,
    )
    out = capsys.readouterr().out
    emitted = "".join(line for line in out.splitlines() if '"_aws"' in line)
    assert "zz9.mega" not in emitted
