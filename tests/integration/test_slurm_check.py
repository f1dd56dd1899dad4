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


def check(tmp_path: Path, *nodesets: dict[str, Any], output: str = "table") -> Any:
    path = tmp_path / "slurm.yaml"
    path.write_text(
        yaml.safe_dump({"region": "us-east-1", "cluster_id": "c1", "nodesets": list(nodesets)})
    )
    return CliRunner().invoke(
        app, ["slurm", "check", "--config", str(path), "--output", output], catch_exceptions=False
    )


def test_a_good_configuration(emu: Any, tmp_path: Path) -> None:
    emu.load_scenario(WORLD)
    result = check(tmp_path, nodeset(), output="json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    [found] = report["nodesets"]
    assert found["node_count"] == 8
    assert found["subnets"] == {SUBNET_A: "us-east-1a", SUBNET_B: "us-east-1b"}
    assert found["launch_template"] == {"id": TEMPLATE, "version": "$Latest", "is": 1}
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


def test_a_file_that_is_wrong_is_a_usage_error(tmp_path: Path) -> None:
    result = check(tmp_path, nodeset(nodes="hpc-[1-"))
    assert result.exit_code == 2
    assert "nodesets.0.nodes" in result.stderr
