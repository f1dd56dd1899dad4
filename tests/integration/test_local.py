"""``capacity-broker local``: the emulator and the five functions behind a Lambda Invoke
endpoint, reached with a scheduler's own boto3 Lambda client and ``CapacityBroker.deployed``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from capacity_broker import CapacityBroker, ReservationType
from capacity_broker.client import ENTRY_POINTS, InvalidArguments
from capacity_broker.local import LocalBroker

pytestmark = pytest.mark.integration

# Import the handlers before any CliRunner runs: a Powertools logger keeps the stdout it was
# created with, and a CliRunner's is closed after each invocation.
HANDLERS = [import_module(f"capacity_broker.handlers.{name}") for name in ENTRY_POINTS]

PREFIX = "capacity-broker-local"
SUBNET_A = "subnet-0d1a0000000000e1a"
SUBNET_B = "subnet-0d1b0000000000e1b"
PROBE = {"instance_type": "g6.xlarge", "subnet_ids": [SUBNET_B, SUBNET_A], "request_id": "vdi-7"}


def lambda_client(endpoint: str) -> Any:
    return boto3.client(
        "lambda",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1}),
    )


def invoke(endpoint: str, name: str, payload: Any, **options: Any) -> tuple[dict[str, Any], Any]:
    response = lambda_client(endpoint).invoke(
        FunctionName=name, Payload=json.dumps(payload).encode(), **options
    )
    body = response["Payload"].read()
    return response, json.loads(body) if body else None


# -- the real command, in its own process ---------------------------------------------------


def _command() -> list[str]:
    script = Path(sys.executable).parent / "capacity-broker"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from capacity_broker.cli import main; main()"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """``capacity-broker local --port 0`` in a subprocess; yields its endpoint."""
    log = tmp_path / "local.log"
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    with log.open("w") as sink:
        process = subprocess.Popen(
            [
                *_command(),
                "local",
                "--port",
                "0",
                "--scenario",
                "discovery",
                "--cluster-id",
                "discovery-cluster",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 60
        endpoint = None
        while endpoint is None:
            for line in log.read_text().splitlines():
                if line.startswith("export AWS_ENDPOINT_URL="):
                    endpoint = line.split("=", 1)[1].strip()
            if endpoint is None:
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_local_serves_functions_and_emulator_end_to_end(
    served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert served.startswith("http://127.0.0.1:")
    response, answer = invoke(served, f"{PREFIX}-probe", PROBE)
    assert response["StatusCode"] == 200
    assert "FunctionError" not in response
    assert response["ExecutedVersion"] == "$LATEST"
    assert answer["status"] == "available"
    assert answer["request_id"] == "vdi-7"
    assert answer["subnet_id"] == SUBNET_A
    # the same endpoint is the emulator: the probe's reservation is there, cancelled (asked by
    # id: a listing made a moment after may not show a new reservation's tags yet)
    ec2 = boto3.client("ec2", endpoint_url=served, region_name="us-east-1")
    [attempt] = [a for a in answer["attempts"] if a["outcome"] == "available"]
    assert attempt["cancelled"] is True
    (probe_reservation,) = ec2.describe_capacity_reservations(
        CapacityReservationIds=[attempt["reservation_id"]]
    )["CapacityReservations"]
    assert {"Key": "capacity-broker:request-id", "Value": "vdi-7"} in probe_reservation["Tags"]
    assert probe_reservation["State"] == "cancelled"
    # a scheduler's own client, configured only by the environment
    monkeypatch.setenv("AWS_ENDPOINT_URL", served)
    scheduler = boto3.client("lambda", region_name="us-east-1")
    raw = scheduler.invoke(FunctionName=f"{PREFIX}-capacity", Payload=b"{}")
    listed = json.loads(raw["Payload"].read())
    assert listed["status"] == "ok"
    assert listed["summary"]["reservations"] == 10
    broker = CapacityBroker.deployed(function_prefix=PREFIX)
    blocks = broker.capacity(reservation_type=ReservationType.CAPACITY_BLOCKS)
    assert len(blocks) == 5
    assert blocks.summary is not None
    assert blocks.summary.ultra_cluster_placement is True
    assert broker.probe("g6.xlarge", [SUBNET_A]).status == "available"
    # and the command line, in its own process, with only the environment to go by
    env = {k: v for k, v in os.environ.items() if k not in ("BROKER_REGIONS", "AWS_REGION")}
    cli = subprocess.run(
        [*_command(), "--function-prefix", PREFIX, "capacity", "--all", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env | {"AWS_ENDPOINT_URL": served, "AWS_DEFAULT_REGION": "us-east-1"},
    )
    assert cli.returncode == 0, cli.stderr
    assert {r["region"] for r in json.loads(cli.stdout)} == {"us-east-1", "us-west-2", "eu-west-1"}


# -- the route, in this process ------------------------------------------------------------


@pytest.fixture
def local() -> Iterator[LocalBroker]:
    with LocalBroker(scenario="discovery", cluster_id="discovery-cluster") as broker:
        yield broker


def test_environment_points_back_at_the_server_and_is_restored() -> None:
    before = os.environ.get("AWS_ENDPOINT_URL")
    with LocalBroker(regions=["us-east-1", "eu-west-1"]) as broker:
        assert os.environ["AWS_ENDPOINT_URL"] == broker.endpoint
        assert os.environ["BROKER_CLUSTER_ID"] == "local"
        assert os.environ["BROKER_REGIONS"] == "us-east-1,eu-west-1"
        assert broker.function_names == [
            f"{PREFIX}-{e}" for e in ("probe", "reserve", "release", "cleaner", "capacity")
        ]
    assert os.environ.get("AWS_ENDPOINT_URL") == before


def test_scenario_regions_become_the_broker_regions(local: LocalBroker) -> None:
    assert local.regions == ["eu-west-1", "us-east-1", "us-west-2"]
    _, answer = invoke(local.endpoint, f"{PREFIX}-capacity", {"reservation_type": "all"})
    assert answer["regions"] == ["eu-west-1", "us-east-1", "us-west-2"]
    assert answer["summary"]["by_type"] == {"capacity-block": 5, "odcr": 10}


def test_unknown_functions_are_resource_not_found(local: LocalBroker) -> None:
    client = lambda_client(local.endpoint)
    for name in ("nope", f"{PREFIX}-deploy", "capacity-broker-prod-probe"):
        with pytest.raises(client.exceptions.ResourceNotFoundException) as raised:
            client.invoke(FunctionName=name, Payload=b"{}")
        assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.invoke(FunctionName=f"{PREFIX}-probe", Qualifier="7", Payload=b"{}")


def test_function_names_arns_and_qualifiers(local: LocalBroker) -> None:
    arn = f"arn:aws:lambda:us-east-1:123456789012:function:{PREFIX}-capacity"
    for name in (arn, f"{arn}:$LATEST", f"{PREFIX}-capacity:$LATEST"):
        response, answer = invoke(local.endpoint, name, {"regions": ["eu-west-1"]})
        assert response["StatusCode"] == 200
        assert answer["summary"]["reservations"] == 2


def test_invocation_types(local: LocalBroker) -> None:
    client = lambda_client(local.endpoint)
    dry = client.invoke(FunctionName=f"{PREFIX}-probe", InvocationType="DryRun", Payload=b"{}")
    assert dry["StatusCode"] == 204
    event = client.invoke(
        FunctionName=f"{PREFIX}-probe",
        InvocationType="Event",
        Payload=json.dumps(PROBE | {"request_id": "async-1"}).encode(),
    )
    assert event["StatusCode"] == 202
    assert event["Payload"].read() == b""
    assert (f"{PREFIX}-probe", "Event") in local.route.invocations


def test_invalid_payloads(local: LocalBroker) -> None:
    client = lambda_client(local.endpoint)
    with pytest.raises(client.exceptions.InvalidRequestContentException):
        client.invoke(FunctionName=f"{PREFIX}-probe", Payload=b"{not json")
    response, answer = invoke(local.endpoint, f"{PREFIX}-probe", {"instance_type": "g6.xlarge"})
    assert "FunctionError" not in response  # an invalid request is an answer, not a crash
    assert answer["status"] == "invalid_request"


def test_a_function_that_raises_is_a_function_error(
    local: LocalBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    import capacity_broker.handlers.capacity as module

    def broken(event: Any, context: Any) -> Any:
        raise RuntimeError("the capacity function fell over")

    monkeypatch.setattr(module, "handler", broken)
    response, answer = invoke(local.endpoint, f"{PREFIX}-capacity", {})
    assert response["StatusCode"] == 200
    assert response["FunctionError"] == "Unhandled"
    assert answer["errorType"] == "RuntimeError"
    assert answer["errorMessage"] == "the capacity function fell over"


def test_the_deployed_client_against_the_local_broker(
    local: LocalBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", local.endpoint)
    broker = CapacityBroker.deployed(function_prefix=PREFIX)
    odcrs = broker.capacity(gpu_only=True, available_only=True, min_capacity=10)
    assert sorted(r.instance_type for r in odcrs) == ["g6.xlarge", "g6.xlarge", "inf2.xlarge"]
    mine = broker.capacity(reservation_type="all", regions=["us-east-1"])
    assert [r.instance_type for r in mine if r.owned_by_broker] == ["c7i.48xlarge"]
    probe = broker.probe("g6.xlarge", [SUBNET_B, SUBNET_A], request_id="vdi-8")
    assert (probe.status, probe.subnet_id) == ("available", SUBNET_A)
    with pytest.raises(InvalidArguments):
        broker.probe("g6.xlarge", ["subnet-nope"])
    cleaned = broker.clean(dry_run=True)
    assert cleaned.dry_run is True


def test_the_cli_with_a_function_prefix(
    local: LocalBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capacity_broker.cli import app
    from typer.testing import CliRunner

    monkeypatch.setenv("AWS_ENDPOINT_URL", local.endpoint)
    result = CliRunner().invoke(
        app, ["--function-prefix", PREFIX, "capacity", "--all", "-o", "json"]
    )
    assert result.exit_code == 0, result.stderr
    assert len(json.loads(result.stdout)) == 15
    probe = CliRunner().invoke(
        app, ["--function-prefix", PREFIX, "probe", "-t", "g6.xlarge", "-s", SUBNET_B]
    )
    assert probe.exit_code == 4  # no capacity: answered "no"
