"""``capacity-broker local`` meets IAM: the functions run as the demo's cluster with their
deployed roles, and the emulator answers what AWS would (issue 24, "Offline meets IAM")."""

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
from botocore.exceptions import ClientError
from capacity_broker.client import ENTRY_POINTS
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.local import LocalBroker, make_state_table

from emulator.remote import RemoteEmulator
from emulator.state import world

pytestmark = pytest.mark.integration

# Import the handlers before any server runs them (their loggers keep the stdout they found).
HANDLERS = [import_module(f"capacity_broker.handlers.{name}") for name in ENTRY_POINTS]

PREFIX = "capacity-broker-local"
EVENTS = Path(__file__).resolve().parents[2] / "events"
TEMPLATE = "lt-0f000000000000001"  # tagged capacity-broker:cluster-id=demo
IMAGE = "ami-0de00000000000001"


def invoke(local: LocalBroker, entry: str, event: dict[str, Any]) -> dict[str, Any]:
    raw = boto3.client(
        "lambda",
        endpoint_url=local.endpoint,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1}),
    ).invoke(FunctionName=f"{PREFIX}-{entry}", Payload=json.dumps(event).encode())
    assert "FunctionError" not in raw
    answer: dict[str, Any] = json.loads(raw["Payload"].read())
    return answer


def sample(name: str, **changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return {**event, **changes}


def client(local: LocalBroker, service: str = "ec2", **credentials: str) -> Any:
    return boto3.client(
        service, endpoint_url=local.endpoint, region_name="us-east-1", **credentials
    )


def role(local: LocalBroker, entry: str) -> dict[str, str]:
    key, secret, token = local.server.emulator.role_credentials(entry)
    return {
        "aws_access_key_id": key,
        "aws_secret_access_key": secret,
        "aws_session_token": token,
    }


@pytest.fixture
def demo() -> Iterator[LocalBroker]:
    """``capacity-broker local --scenario demo``: no --cluster-id, no --no-iam."""
    with LocalBroker(scenario="demo") as local:
        yield local


def test_it_runs_as_the_scenarios_cluster_with_the_deployed_roles(demo: LocalBroker) -> None:
    """The demo's template is tagged for cluster demo: local runs as it, each function as its
    own role, every call decided under it; a job's version is made and given back with the
    job (a Slurm session used to leave one per job behind)."""
    assert demo.cluster_id == "demo"
    iam = client(demo, "iam")
    assert {r["RoleName"] for r in iam.list_roles()["Roles"]} == {
        f"{PREFIX}-{entry}" for entry in ENTRY_POINTS
    }
    held = invoke(demo, "reserve", sample("reserve", stack_name=None, instance_count=2))
    assert held["status"] == "reserved", held
    released = invoke(demo, "release", {"request_id": "release-1234", "job_id": "1234"})
    assert released["status"] == "released", released
    version = f"{TEMPLATE}:{held['launch_template']['version']}"
    assert released["template_versions_deleted"] == [version], released
    made = invoke(demo, "reserve", sample("reserve_provision"))
    assert made["status"] == "provisioned", made
    decided = {(entry, d.request.action) for entry, d in world.iam.decisions}
    assert {
        ("reserve", "ec2:CreateLaunchTemplateVersion"),
        ("reserve", "ec2:CreateFleet"),
        ("reserve", "ec2:RunInstances"),
        ("release", "ec2:DeleteLaunchTemplateVersions"),
        ("release", "ec2:CancelCapacityReservation"),
    } <= decided
    assert all(d.allowed for _, d in world.iam.decisions)


@pytest.mark.parametrize("template_of", ["nobody", "another cluster"])
def test_reserve_with_a_template_not_tagged_for_the_cluster(template_of: str) -> None:
    """As deployed: the broker refuses first (``rejected``, nothing held, no version), and IAM
    would refuse the version anyway (``UnauthorizedOperation`` for the reserve role)."""
    with LocalBroker(scenario="demo", cluster_id="local") as local:
        template = TEMPLATE  # cluster demo's, and local runs as cluster "local" here
        if template_of == "nobody":
            template = client(local).create_launch_template(
                LaunchTemplateName="untagged",
                LaunchTemplateData={"ImageId": IMAGE, "InstanceType": "c7i.48xlarge"},
            )["LaunchTemplate"]["LaunchTemplateId"]
        local.server.emulator.clear_calls()
        answer = invoke(
            local,
            "reserve",
            sample("reserve", stack_name=None, launch_template={"id": template, "version": "1"}),
        )
        assert answer["status"] == "rejected", answer
        assert template in answer["message"]
        assert not local.server.emulator.calls("CreateCapacityReservation")
        assert not local.server.emulator.calls("CreateLaunchTemplateVersion")
        with pytest.raises(ClientError) as raised:
            client(local, **role(local, "reserve")).create_launch_template_version(
                LaunchTemplateId=template,
                SourceVersion="1",
                LaunchTemplateData={"InstanceType": "c7i.large"},
            )
        assert raised.value.response["Error"]["Code"] == "UnauthorizedOperation"
        assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_a_launch_iam_refuses_answers_its_code(demo: LocalBroker, profile_template: Any) -> None:
    """docs/deploy.md: a template with an instance profile whose role is not in
    instanceRoleArns "is refused for iam:PassRole". The broker cannot see that coming; the
    answer carries AWS's code and the hold is given back."""
    _, template = profile_template(client(demo), client(demo, "iam"), "demo")
    answer = invoke(
        demo,
        "reserve",
        sample("reserve_provision", launch_template={"id": template, "version": "$Default"}),
    )
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "UnauthorizedOperation", answer
    assert (
        "iam:PassRole on resource: arn:aws:iam::123456789012:role/compute-node"
        in (answer["message"])
    )
    (hold,) = client(demo).describe_capacity_reservations(
        CapacityReservationIds=[answer["reservation"]["id"]]
    )["CapacityReservations"]
    assert hold["State"] == "cancelled"


def test_no_iam_lets_every_call_through(profile_template: Any) -> None:
    """``--no-iam``: the functions call with the process's credentials, nothing is evaluated
    (the same launch is made)."""
    with LocalBroker(scenario="demo", iam=False) as local:
        assert world.iam is None
        _, template = profile_template(client(local), client(local, "iam"), "demo")
        answer = invoke(
            local,
            "reserve",
            sample("reserve_provision", launch_template={"id": template, "version": "$Default"}),
        )
        assert answer["status"] == "provisioned", answer


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            [],
            "cluster id: demo; regions: eu-west-1,us-east-1,us-west-2; IAM: the functions' "
            "deployed roles, evaluated",
        ),
        (
            ["--cluster-id", "hpc", "--no-iam"],
            "cluster id: hpc; regions: "
            "eu-west-1,us-east-1,us-west-2; IAM: not evaluated (--no-iam)",
        ),
    ],
)
def test_the_command_says_what_it_runs_as(tmp_path: Path, options: list[str], said: str) -> None:
    """``capacity-broker local --scenario demo`` runs as the scenario's cluster with IAM;
    ``--cluster-id`` and ``--no-iam`` change that, and its first lines say so."""
    script = Path(sys.executable).parent / "capacity-broker"
    log = tmp_path / "local.log"
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    command = [str(script), "local", "--port", "0", "--scenario", "demo", *options]
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while "# Ctrl-C stops it." not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert f"# {said}" in log.read_text().splitlines()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_fresh_world_serves_each_function_its_new_role_session() -> None:
    """The control API's reset (a fresh world) makes the roles again, with new sessions: each
    function is then served as its new session, its calls still decided under its role (not
    let through as an unknown caller's); once stopped, no function keeps a root of its own."""
    with LocalBroker(scenario="demo") as local:
        remote = RemoteEmulator(local.endpoint)
        before = {entry: role(local, entry) for entry in ENTRY_POINTS}
        remote.reset()
        remote.load_scenario("demo")
        make_state_table(local.state_table, local.region, local.endpoint)
        assert all(role(local, entry) != before[entry] for entry in ENTRY_POINTS)
        world.iam.decisions.clear()
        answer = invoke(local, "probe", sample("probe", request_id="after-reset"))
        assert answer["status"] == "available", answer
        decided = [(entry, d.request.action, d.allowed) for entry, d in world.iam.decisions]
        assert ("probe", "ec2:CreateCapacityReservation", True) in decided, decided
        assert {entry for entry, _, _ in decided} == {"probe"}, decided
    for entry in ENTRY_POINTS:
        assert CONTAINER.use(None, function=entry) is None
