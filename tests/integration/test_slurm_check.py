"""``capacity-broker slurm check``: the Slurm configuration against (emulated) AWS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from capacity_broker.cli import app
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

SUBNET_A = "subnet-0a0000000000007a1"
SUBNET_B = "subnet-0b0000000000007b2"
TEMPLATE = "lt-0c0000000000007c3"
AMI = "ami-0d0000000000007d4"
WORLD = {
    "regions": {
        "us-east-1": {
            "vpcs": [
                {
                    "id": "vpc-0e0000000000007e5",
                    "name": "hpc",
                    "cidr": "10.7.0.0/16",
                    "subnets": [
                        {
                            "id": SUBNET_A,
                            "name": "a",
                            "availability_zone": "us-east-1a",
                            "cidr": "10.7.1.0/24",
                        },
                        {
                            "id": SUBNET_B,
                            "name": "b",
                            "availability_zone": "us-east-1b",
                            "cidr": "10.7.2.0/24",
                        },
                    ],
                }
            ],
            "images": [{"id": AMI, "name": "compute", "platform_details": "Linux/UNIX"}],
            "launch_templates": [
                {
                    "id": TEMPLATE,
                    "name": "compute",
                    "data": {"ImageId": AMI},
                    "tags": {"capacity-broker:cluster-id": "c1"},
                }
            ],
        }
    }
}


def nodeset(**change: Any) -> dict[str, Any]:
    return {
        "nodes": "hpc-c5-[1-8]",
        "instance_types": ["c5.large"],
        "subnet_ids": [SUBNET_A, SUBNET_B],
        "launch_template": {"id": TEMPLATE, "version": "$Latest"},
    } | change


def check(tmp_path: Path, *nodesets: dict[str, Any], output: str = "table", **top: Any) -> Any:
    path = tmp_path / "slurm.yaml"
    config = {"region": "us-east-1", "cluster_id": "c1", "nodesets": list(nodesets)} | top
    path.write_text(yaml.safe_dump({k: v for k, v in config.items() if v is not None}))
    return CliRunner().invoke(
        app, ["slurm", "check", "--config", str(path), "--output", output], catch_exceptions=False
    )


def unreachable(tmp_path: Path) -> dict[str, str]:
    """An ``aws:`` section whose endpoint is a port nothing listens on."""
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = x\naws_secret_access_key = y\n")
    return {"endpoint_url": f"http://127.0.0.1:{port}", "credentials_file": str(credentials)}


def test_a_good_configuration(emu: Any, tmp_path: Path) -> None:
    emu.load_scenario(WORLD)
    result = check(tmp_path, nodeset(), output="json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    [found] = report["nodesets"]
    assert found["node_count"] == 8
    assert found["subnets"] == {SUBNET_A: "us-east-1a", SUBNET_B: "us-east-1b"}
    assert found["launch_template"] == {
        "id": TEMPLATE,
        "version": "$Latest",
        "is": 1,
        "image": AMI,
        "platform": "Linux/UNIX",
    }
    assert found["offered"] == {"c5.large": ["us-east-1a", "us-east-1b"]}
    assert found["request"]["provision"] is True
    assert found["problems"] == []
    table = check(tmp_path, nodeset())
    assert table.exit_code == 0
    assert "hpc-c5-[1-8]" in table.stdout
    assert '"provision": true' in table.stdout


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"subnet_ids": [SUBNET_A, "subnet-0f0000000000000ff"]},
            "subnet subnet-0f0000000000000ff does not exist in us-east-1",
        ),
        (
            {"launch_template": {"id": "lt-0f0000000000000ff"}},
            "launch template lt-0f0000000000000ff version $Default",
        ),
        (
            {"launch_template": {"id": TEMPLATE, "version": 9}},
            f"launch template {TEMPLATE} version 9",
        ),
        (
            {"instance_types": ["p5.48xlarge"], "subnet_ids": [SUBNET_A]},
            "p5.48xlarge is offered in none of the subnets' AZs (us-east-1a)",
        ),
    ],
)
def test_a_bad_subnet_template_or_type_fails_the_check(
    emu: Any, tmp_path: Path, change: dict[str, Any], problem: str
) -> None:
    emu.load_scenario(
        WORLD
        | {
            "regions": {
                "us-east-1": WORLD["regions"]["us-east-1"]
                | {
                    "unsupported": [
                        {"availability_zone": "us-east-1a", "instance_type": "p5.48xlarge"}
                    ]
                }
            }
        }
    )
    result = check(tmp_path, nodeset(**change), output="json")
    assert result.exit_code == 3, result.output
    assert any(problem in p for p in json.loads(result.stdout)["nodesets"][0]["problems"])


def test_an_instance_type_ec2_does_not_have_fails_the_check_with_the_nearest_name(
    emu: Any, tmp_path: Path
) -> None:
    """The rule probe and reserve refuse a type by (contract v3): a typo in the YAML would fail
    every job of the node set, so the check says so, naming the field and the nearest name."""
    emu.load_scenario(WORLD)
    result = check(tmp_path, nodeset(instance_types=["c5.larg"]), output="json")
    assert result.exit_code == 3, result.output
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem.startswith("nodesets.0.instance_types.0: ")
    assert "'c5.larg'" in problem and "'c5.large'" in problem


def test_a_file_that_is_wrong_is_a_usage_error(tmp_path: Path) -> None:
    result = check(tmp_path, nodeset(nodes="hpc-[1-"))
    assert result.exit_code == 2
    assert "nodesets.0.nodes" in result.stderr


def test_a_region_typo_is_refused_at_once_with_the_nearest_name(tmp_path: Path) -> None:
    # No emulator, no endpoint: refused before any call (it used to take 56 s of retries), by
    # the file's own validation (slurm/config.py, the client's region rule): a usage error,
    # as every other mistake in the file is, and the same refusal the programs meet.
    result = check(tmp_path, nodeset(), region="us-esat-1")
    assert result.exit_code == 2, result.output
    assert "us-esat-1" in result.stderr
    assert "us-east-1" in result.stderr


def test_deployed_mode_missing_functions_and_an_untagged_template_fail_the_check(
    emu: Any, tmp_path: Path
) -> None:
    untagged = json.loads(json.dumps(WORLD))
    untagged["regions"]["us-east-1"]["launch_templates"][0]["tags"] = {}
    emu.load_scenario(untagged)
    result = check(tmp_path, nodeset(), output="json", cluster_id=None, function_prefix="cb-typo")
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert any(
        p.startswith("cb-typo-reserve: function cb-typo-reserve does not exist")
        for p in report["problems"]
    ), report["problems"]
    assert any(p.startswith("cb-typo-release:") for p in report["problems"])
    [found] = report["nodesets"]
    assert any(
        f"launch template {TEMPLATE} is not tagged capacity-broker:cluster-id" in p
        for p in found["problems"]
    ), found["problems"]
    table = check(tmp_path, nodeset(), cluster_id=None, function_prefix="cb-typo")
    assert table.exit_code == 3
    assert max(len(line) for line in table.stdout.splitlines()) <= 80


def test_an_endpoint_that_does_not_answer_is_reported_after_one_try(tmp_path: Path) -> None:
    aws = unreachable(tmp_path)
    result = check(tmp_path, nodeset(), output="json", aws=aws)
    assert result.exit_code == 3, result.output
    [found] = json.loads(result.stdout)["nodesets"]
    assert any("could not look up the subnets" in p for p in found["problems"])


def test_an_endpoint_that_does_not_answer_is_not_called_missing(tmp_path: Path) -> None:
    """Issue 42's leftover: with EC2 unreachable the summary said "$Latest is version
    MISSING", as if the template had no version; it says the version was not read."""
    aws = unreachable(tmp_path)
    result = check(tmp_path, nodeset(), aws=aws)
    assert result.exit_code == 3, result.output
    assert "MISSING" not in result.stdout, result.stdout
    assert "is version not read" in " ".join(result.stdout.split()), result.stdout


def test_a_template_that_does_not_exist_is_missing(emu: Any, tmp_path: Path) -> None:
    emu.load_scenario(WORLD)
    absent = "lt-0c00000000000ffff"
    result = check(tmp_path, nodeset(launch_template={"id": absent, "version": "$Latest"}))
    assert result.exit_code == 3, result.output
    assert "is version MISSING" in " ".join(result.stdout.split()), result.stdout


def test_the_checks_clients_try_once_and_connect_briefly() -> None:
    from botocore.config import Config
    from capacity_broker.slurm.check import QuickSession

    made: list[Any] = []

    class Session:
        def client(self, service: str, **kwargs: Any) -> None:
            made.append(kwargs["config"])

    QuickSession(Session()).client("ec2", config=Config(read_timeout=900, user_agent_extra="x"))
    [config] = made
    assert config.retries["total_max_attempts"] == 1
    assert config.connect_timeout <= 5
    assert config.user_agent_extra == "x"


def test_latest_is_the_number_ec2_gives_and_the_version_built_on_is_said(
    emu: Any, tmp_path: Path
) -> None:
    """Issue 42: with versions a broker made on top, the check said "$Latest is version 1"
    where EC2 says 4 (1 is the newest version no broker made, the one it builds on)."""
    import boto3
    from capacity_broker.domain.templates import description

    emu.load_scenario(WORLD)
    ec2 = boto3.client("ec2", region_name="us-east-1")
    for job in ("7", "8", "9"):
        ec2.create_launch_template_version(
            LaunchTemplateId=TEMPLATE,
            SourceVersion="1",
            VersionDescription=description(
                "c1", TEMPLATE, "cr-0123456789abcdef0", f"req-{job}", job, None
            ),
            LaunchTemplateData={"InstanceType": "c5.large"},
        )
    result = check(tmp_path, nodeset(), output="json")
    assert result.exit_code == 0, result.output
    [found] = json.loads(result.stdout)["nodesets"]
    assert (found["launch_template"]["is"], found["launch_template"]["builds_on"]) == (4, 1)
    table = " ".join(check(tmp_path, nodeset()).stdout.split())
    assert "$Latest is version 4" in table
    assert "the broker builds on version 1" in table


# -- deployed mode: what the reserve function may launch with (issue 40, item 5) ----------------

PREFIX = "cb-check"
PARAMETER = "/golden-ami/hpc"
PARAMETER_ARN = f"arn:aws:ssm:us-east-1:123456789012:parameter{PARAMETER}"
NODE_ROLE = "compute-node"
NODE_ROLE_ARN = f"arn:aws:iam::123456789012:role/{NODE_ROLE}"
RESERVE_ROLE = f"arn:aws:iam::123456789012:role/{PREFIX}-reserve"


@pytest.fixture
def deployed(tmp_path: Path) -> Any:
    """The functions of cluster c1 served locally as their deployed roles (roles.json: a
    deploy with no imageParameters and no instanceRoleArns), the check's world in the
    emulator, and an instance profile for compute nodes."""
    import boto3
    from capacity_broker.local import LocalBroker

    with LocalBroker(scenario=WORLD | {"cluster_id": "c1"}, prefix=PREFIX) as local:
        iam = boto3.client("iam", endpoint_url=local.endpoint, region_name="us-east-1")
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ec2.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        iam.create_role(RoleName=NODE_ROLE, AssumeRolePolicyDocument=json.dumps(trust))
        iam.create_instance_profile(InstanceProfileName=NODE_ROLE)
        iam.add_role_to_instance_profile(InstanceProfileName=NODE_ROLE, RoleName=NODE_ROLE)
        yield local


def template(local: Any, name: str, data: dict[str, Any]) -> str:
    import boto3

    ec2 = boto3.client("ec2", endpoint_url=local.endpoint, region_name="us-east-1")
    made = ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData=data,
        TagSpecifications=[
            {
                "ResourceType": "launch-template",
                "Tags": [{"Key": "capacity-broker:cluster-id", "Value": "c1"}],
            }
        ],
    )
    return str(made["LaunchTemplate"]["LaunchTemplateId"])


def check_deployed(
    tmp_path: Path, local: Any, template_id: str, credentials: tuple[str, ...] = ("x", "y")
) -> tuple[Any, dict[str, Any]]:
    """``slurm check`` in deployed mode against the local functions, signed with
    ``credentials`` (the operator's, unless a role session's)."""
    lines = [f"aws_access_key_id = {credentials[0]}", f"aws_secret_access_key = {credentials[1]}"]
    if len(credentials) > 2:
        lines.append(f"aws_session_token = {credentials[2]}")
    path = tmp_path / "credentials"
    path.write_text("[default]\n" + "\n".join(lines) + "\n")
    aws = {"endpoint_url": local.endpoint, "credentials_file": str(path)}
    change = {"launch_template": {"id": template_id, "version": "$Latest"}}
    result = check(
        tmp_path, nodeset(**change), output="json", cluster_id=None, function_prefix=PREFIX, aws=aws
    )
    # The local functions run in this process and log their lines to the same stdout.
    return result, json.loads(result.stdout[result.stdout.index('{\n  "config"') :])


def allow_as_deployed_with(local: Any, parameter: bool, role: bool) -> None:
    """The reserve role as a deploy with ``-c imageParameters=/golden-ami/hpc`` and ``-c
    instanceRoleArns=<the compute node role>`` grants it: the statements
    infra/permissions.py writes for those settings (ResolveImageParameters,
    PassInstanceRolesToEc2)."""
    import boto3

    statements = []
    if parameter:
        statements.append(
            {"Effect": "Allow", "Action": "ssm:GetParameters", "Resource": [PARAMETER_ARN]}
        )
    if role:
        statements.append(
            {
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": [NODE_ROLE_ARN],
                "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
            }
        )
    boto3.client("iam", endpoint_url=local.endpoint, region_name="us-east-1").put_role_policy(
        RoleName=f"{PREFIX}-reserve",
        PolicyName="settings",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": statements}),
    )


def test_an_image_parameter_the_deploy_does_not_list_fails_the_check(
    deployed: Any, tmp_path: Path
) -> None:
    """A ``resolve:ssm:`` image whose parameter is not in the deploy's imageParameters: AWS
    refuses every launch (ssm:GetParameters), so the check exits 3 naming the parameter and
    the setting."""
    template_id = template(deployed, "golden", {"ImageId": f"resolve:ssm:{PARAMETER}:3"})
    result, report = check_deployed(tmp_path, deployed, template_id)
    assert result.exit_code == 3, result.output
    [found] = report["nodesets"]
    [problem] = [p for p in found["problems"] if "ssm:GetParameters" in p]
    assert f"image parameter {PARAMETER} ({PARAMETER_ARN})" in problem
    assert "imageParameters" in problem and "implicitDeny" in problem
    assert found["launch_template"]["iam"] == {f"ssm:GetParameters {PARAMETER_ARN}": "implicitDeny"}
    assert report["problems"] == [] and report["warnings"] == []


def test_an_instance_profile_whose_role_the_deploy_does_not_list_fails_the_check(
    deployed: Any, tmp_path: Path
) -> None:
    template_id = template(
        deployed, "with-profile", {"ImageId": AMI, "IamInstanceProfile": {"Name": NODE_ROLE}}
    )
    result, report = check_deployed(tmp_path, deployed, template_id)
    assert result.exit_code == 3, result.output
    [found] = report["nodesets"]
    [problem] = [p for p in found["problems"] if "iam:PassRole" in p]
    assert (
        f"instance profile {NODE_ROLE}: {PREFIX}-reserve may not pass its role {NODE_ROLE_ARN}"
        in problem
    )
    assert "instanceRoleArns" in problem
    assert report["problems"] == [] and report["warnings"] == []


def test_a_template_the_deploy_allows_passes_the_check(deployed: Any, tmp_path: Path) -> None:
    """Both listed (the deploy's statements for both settings on the reserve role): the check
    passes, and says what IAM decided. Each grant alone still fails: the check asks about
    each."""
    import boto3

    profile = boto3.client("iam", endpoint_url=deployed.endpoint, region_name="us-east-1")
    profile_arn = profile.get_instance_profile(InstanceProfileName=NODE_ROLE)["InstanceProfile"][
        "Arn"
    ]
    template_id = template(
        deployed,
        "golden-with-profile",
        {"ImageId": f"resolve:ssm:{PARAMETER}", "IamInstanceProfile": {"Arn": profile_arn}},
    )
    allow_as_deployed_with(deployed, parameter=True, role=False)
    result, _ = check_deployed(tmp_path, deployed, template_id)
    assert result.exit_code == 3, result.output
    allow_as_deployed_with(deployed, parameter=False, role=True)
    result, _ = check_deployed(tmp_path, deployed, template_id)
    assert result.exit_code == 3, result.output
    allow_as_deployed_with(deployed, parameter=True, role=True)
    result, report = check_deployed(tmp_path, deployed, template_id)
    assert result.exit_code == 0, result.output
    [found] = report["nodesets"]
    assert found["problems"] == [] and report["warnings"] == []
    assert found["launch_template"]["iam"] == {
        f"ssm:GetParameters {PARAMETER_ARN}": "allowed",
        f"iam:PassRole {NODE_ROLE_ARN}": "allowed",
    }
    assert found["launch_template"]["instance_profile"] == profile_arn


@pytest.mark.filterwarnings("ignore:Exception\\(AnyServiceError\\):UserWarning")
def test_a_host_that_may_not_simulate_is_warned_not_passed(
    deployed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Slurm host signs as a principal without iam:SimulatePrincipalPolicy (here the
    reserve function's own role session, which has none): the check cannot know, says so with
    the permission to add, and claims nothing about the template."""
    template_id = template(deployed, "golden", {"ImageId": f"resolve:ssm:{PARAMETER}"})
    credentials = deployed.server.emulator.role_credentials("reserve")
    # As slurmctld runs the check: no credentials in the environment (they would come first).
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    result, report = check_deployed(tmp_path, deployed, template_id, credentials)
    assert result.exit_code == 0, result.output
    [found] = report["nodesets"]
    assert found["problems"] == []
    assert "iam" not in found["launch_template"]
    [warning] = [w for w in report["warnings"] if "SimulatePrincipalPolicy" in w]
    assert f"Grant it iam:SimulatePrincipalPolicy on {RESERVE_ROLE}" in warning
    assert "imageParameters" in warning


def test_an_instance_profile_that_does_not_exist_fails_the_check(
    deployed: Any, tmp_path: Path
) -> None:
    template_id = template(
        deployed, "no-profile", {"ImageId": AMI, "IamInstanceProfile": {"Name": "gone"}}
    )
    result, report = check_deployed(tmp_path, deployed, template_id)
    assert result.exit_code == 3, result.output
    [found] = report["nodesets"]
    assert f"instance profile gone of launch template {template_id} does not exist" in " ".join(
        found["problems"]
    )
