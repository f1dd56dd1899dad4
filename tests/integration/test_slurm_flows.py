"""The Slurm programs' flows against the in-process emulator, with Slurm played by a fake
scontrol: the failure paths a real slurmctld cannot be made to take on demand (tests/slurm
drives the real one)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from capacity_broker.slurm import giveback, launch
from capacity_broker.slurm.config import SlurmConfig
from capacity_broker.slurm.runtime import Runtime
from capacity_broker.slurm.scontrol import Job, ScontrolError

pytestmark = pytest.mark.integration

SUBNET_A = "subnet-0a0000000000006a1"
SUBNET_B = "subnet-0b0000000000006b2"
TEMPLATE = "lt-0c0000000000006c3"
AMI = "ami-0d0000000000006d4"


def scenario(c5: tuple[int, int]) -> dict[str, Any]:
    return {
        "settings": {"expiry_lag_seconds": 0, "pending_seconds": 0},
        "regions": {
            "us-east-1": {
                "vpcs": [
                    {
                        "id": "vpc-0e0000000000006e5",
                        "name": "hpc",
                        "cidr": "10.6.0.0/16",
                        "subnets": [
                            {
                                "id": SUBNET_A,
                                "name": "a",
                                "availability_zone": "us-east-1a",
                                "cidr": "10.6.1.0/24",
                            },
                            {
                                "id": SUBNET_B,
                                "name": "b",
                                "availability_zone": "us-east-1b",
                                "cidr": "10.6.2.0/24",
                            },
                        ],
                    }
                ],
                "pools": [
                    {
                        "availability_zone": "us-east-1a",
                        "instance_type": "c5.large",
                        "capacity": c5[0],
                    },
                    {
                        "availability_zone": "us-east-1b",
                        "instance_type": "c5.large",
                        "capacity": c5[1],
                    },
                ],
                "images": [{"id": AMI, "name": "compute", "platform_details": "Linux/UNIX"}],
                "launch_templates": [
                    {
                        "id": TEMPLATE,
                        "name": "compute",
                        "data": {"ImageId": AMI, "InstanceType": "c5.large"},
                    }
                ],
            }
        },
    }


CONFIG = SlurmConfig.model_validate(
    {
        "region": "us-east-1",
        "cluster_id": "flows",
        "slurm_cluster": "flows",
        "nodesets": [
            {
                "nodes": "hpc-c5-[1-4]",
                "instance_types": ["c5.large"],
                "subnet_ids": [SUBNET_A, SUBNET_B],
                "launch_template": {"id": TEMPLATE, "version": "$Latest"},
                "strict": True,
            }
        ],
    }
)


class FakeScontrol:
    """Slurm as the programs see it, recording what they tell it."""

    def __init__(self, restarts: int = 0) -> None:
        self.restarts = restarts
        self.addresses: dict[str, tuple[str, str]] = {}
        self.powered_down: list[tuple[list[str], str]] = []
        self.delayed: list[tuple[int, int]] = []
        self.fail_addresses = False
        self.state = "CONFIGURING"

    def job(self, job_id: int) -> Job:
        return Job(job_id, self.state, self.restarts, [], datetime.now() + timedelta(seconds=121))

    def jobs(self) -> list[Job]:
        return []

    def set_addresses(self, nodes: list[str], addrs: list[str], hosts: list[str]) -> None:
        if self.fail_addresses:
            raise ScontrolError("scontrol update exited 1: Invalid node name specified")
        self.addresses.update(zip(nodes, zip(addrs, hosts, strict=True), strict=True))

    def power_down(self, nodes: list[str], reason: str) -> None:
        self.powered_down.append((list(nodes), reason))
        self.state = "PENDING"  # Slurm requeues the job

    def delay_job(self, job_id: int, seconds: int) -> None:
        self.delayed.append((job_id, seconds))

    def cluster_name(self) -> str:
        return "flows"


def runtime(scontrol: FakeScontrol) -> Runtime:
    built = Runtime.build(CONFIG)
    built.scontrol = scontrol  # type: ignore[assignment]
    return built


def live() -> list[dict[str, Any]]:
    answer = boto3.client("ec2", region_name="us-east-1").describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    return [i for r in answer["Reservations"] for i in r["Instances"]]


def fleets(emu: Any) -> int:
    return len(emu.calls("CreateFleet"))


def test_no_capacity_holds_the_job_back_as_long_as_the_broker_says(emu: Any) -> None:
    emu.load_scenario(scenario((0, 1)))
    slurm = FakeScontrol(restarts=2)  # third try: the broker's backoff is 240 s
    assert launch.resume(runtime(slurm), ["hpc-c5-1", "hpc-c5-2"], [(12, ["hpc-c5-1", "hpc-c5-2"])])
    [(nodes, reason)] = slurm.powered_down
    assert nodes == ["hpc-c5-1", "hpc-c5-2"]
    assert reason.startswith("capacity-broker: no_capacity: ")
    # Slurm's own requeue delay (121 s) is shorter: the job is kept back 240 s.
    assert slurm.delayed == [(12, 240)]
    assert live() == []
    assert slurm.addresses == {}


def test_a_failed_address_update_leaves_nothing_running(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    slurm.fail_addresses = True
    assert launch.resume(runtime(slurm), ["hpc-c5-1", "hpc-c5-2"], [(13, ["hpc-c5-1", "hpc-c5-2"])])
    assert fleets(emu) == 1  # launched, then given back
    assert live() == []
    [(_, reason)] = slurm.powered_down
    assert reason.startswith("capacity-broker: error: ScontrolError")
    assert slurm.delayed == []  # no backoff for an error: Slurm's own delay applies


def test_nodes_no_node_set_has(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    assert launch.resume(runtime(slurm), ["hpc-c5-1", "gpu-1"], [(14, ["hpc-c5-1", "gpu-1"])])
    assert fleets(emu) == 0
    [(nodes, reason)] = slurm.powered_down
    assert nodes == ["hpc-c5-1", "gpu-1"]
    assert reason == "capacity-broker: unconfigured: no node set in the configuration has gpu-1"


def test_a_node_without_a_job_launches_once(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    assert launch.resume(runtime(slurm), ["hpc-c5-3"], [])
    first = dict(slurm.addresses)
    assert list(first) == ["hpc-c5-3"]
    # `scontrol update State=POWER_UP` resumed it; the same program run again finds it.
    assert launch.resume(runtime(slurm), ["hpc-c5-3"], [])
    assert fleets(emu) == 1
    assert slurm.addresses == first
    assert len(live()) == 1


def test_give_back_ends_only_this_clusters_instances_of_those_nodes(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    run = runtime(slurm)
    assert launch.resume(run, ["hpc-c5-1", "hpc-c5-2"], [(15, ["hpc-c5-1", "hpc-c5-2"])])
    ec2 = boto3.client("ec2", region_name="us-east-1")
    # Another Slurm cluster in the account has a node of the same name.
    other = ec2.run_instances(
        ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="c5.large", SubnetId=SUBNET_A
    )["Instances"][0]["InstanceId"]
    ec2.create_tags(
        Resources=[other],
        Tags=[
            {"Key": "capacity-broker:slurm-node", "Value": "hpc-c5-1"},
            {"Key": "capacity-broker:slurm-cluster", "Value": "elsewhere"},
        ],
    )
    assert giveback.give_back(run, ["hpc-c5-1"], "suspend")
    still = {i["InstanceId"]: i for i in live()}
    assert other in still
    nodes = {
        next(t["Value"] for t in i["Tags"] if t["Key"] == "capacity-broker:slurm-node")
        for i in still.values()
    }
    assert nodes == {"hpc-c5-1", "hpc-c5-2"}  # the other cluster's hpc-c5-1, and our hpc-c5-2
