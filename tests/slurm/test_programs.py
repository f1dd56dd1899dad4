"""The Slurm programs driven by a real slurmctld against the emulator (contract, "Slurm
integration (v2)"): sbatch a job, slurmctld runs ResumeProgram, and Slurm, EC2 and the
broker's holds are read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from capacity_broker.slurm.plan import Binding
from slurm_helpers import REGION, Cluster, wait_for

pytestmark = pytest.mark.slurm

SUBNET_A = "subnet-0a0000000000005a1"
SUBNET_B = "subnet-0b0000000000005b2"
TEMPLATE = "lt-0c0000000000005c3"
AMI = "ami-0d0000000000005d4"
C5_NODES = "NodeName=hpc-c5-[1-4] CPUs=2 RealMemory=1000 State=CLOUD"
M5_NODES = "NodeName=hpc-m5-[1-2] CPUs=2 RealMemory=1000 State=CLOUD"
CLOUD = "PartitionName=cloud Nodes=ALL Default=YES MaxTime=INFINITE State=UP"


def scenario(
    c5: tuple[int, int] = (0, 8), m5: tuple[int, int] = (8, 8), cluster: str = "slurm-test"
) -> dict[str, Any]:
    """Two subnets (AZ a, AZ b); capacity per AZ for c5.large and m5.large.

    The VPC is in the loopback range: slurmctld may send a node RPCs at its NodeAddr (to end
    a job), and a test's nodes must be addresses of this machine, where nothing answers.
    """
    return {
        "settings": {"expiry_lag_seconds": 0, "pending_seconds": 0},
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "id": "vpc-0e0000000000005e5",
                        "name": "hpc",
                        "cidr": "127.77.0.0/16",
                        "subnets": [
                            {
                                "id": SUBNET_A,
                                "name": "hpc-a",
                                "availability_zone": "us-east-1a",
                                "cidr": "127.77.1.0/24",
                            },
                            {
                                "id": SUBNET_B,
                                "name": "hpc-b",
                                "availability_zone": "us-east-1b",
                                "cidr": "127.77.2.0/24",
                            },
                        ],
                    }
                ],
                "pools": [
                    {
                        "availability_zone": f"us-east-1{az}",
                        "instance_type": kind,
                        "capacity": count,
                    }
                    for kind, counts in (("c5.large", c5), ("m5.large", m5))
                    for az, count in zip("ab", counts, strict=True)
                ],
                "images": [{"id": AMI, "name": "compute", "platform_details": "Linux/UNIX"}],
                "launch_templates": [
                    {
                        "id": TEMPLATE,
                        "name": "compute",
                        "data": {"ImageId": AMI, "InstanceType": "c5.large"},
                        # tagged for the broker's cluster, as docs/deploy.md asks
                        "tags": {"capacity-broker:cluster-id": cluster},
                    }
                ],
            }
        },
    }


def nodeset(nodes: str, instance_type: str, **extra: Any) -> dict[str, Any]:
    return {
        "nodes": nodes,
        "instance_types": [instance_type],
        "subnet_ids": [SUBNET_A, SUBNET_B],
        "launch_template": {"id": TEMPLATE, "version": "$Latest"},
        **extra,
    }


DIRECT = {
    "cluster_id": "slurm-test",
    "nodesets": [nodeset("hpc-c5-[1-4]", "c5.large", strict=True)],
}


def tag(instance: dict[str, Any], key: str) -> str | None:
    return next((t["Value"] for t in instance.get("Tags", []) if t["Key"] == key), None)


def launched(cluster: Cluster, job_id: int, nodes: list[str]) -> dict[str, dict[str, Any]]:
    """Wait for the job's nodes to be bound; node → its instance."""
    cluster.wait_log(rf"job {job_id}: bound ")
    by_node = {tag(i, "capacity-broker:slurm-node"): i for i in cluster.aws.live_instances()}
    assert sorted(n for n in by_node if n) == sorted(nodes)
    return {n: by_node[n] for n in nodes}


def powered_down(cluster: Cluster, nodes: list[str], status: str) -> None:
    """Wait until every node carries the broker's reason naming ``status``."""

    def given_back() -> bool:
        return all(
            cluster.node(n)["Reason"].startswith(f"capacity-broker: {status}") for n in nodes
        )

    wait_for(f"{nodes} powered down ({status})", given_back, 90, explain=cluster.explain)


def test_a_two_node_job_launches_in_the_first_subnet_with_capacity(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    aws = emulator_endpoint(scenario(c5=(0, 8)))
    cluster = make_cluster(aws, DIRECT, [C5_NODES], [CLOUD])
    job = cluster.sbatch("-N2")
    nodes = launched(cluster, job, ["hpc-c5-1", "hpc-c5-2"])
    for name, instance in nodes.items():
        assert instance["SubnetId"] == SUBNET_B  # subnet A's AZ has no c5.large left
        assert tag(instance, "Name") == name
        assert tag(instance, "capacity-broker:slurm-cluster") == cluster.name
        assert tag(instance, "capacity-broker:job-id") == str(job)
        slurm = cluster.node(name)
        assert slurm["NodeAddr"] == instance["PrivateIpAddress"]
        assert slurm["NodeHostName"] == instance["PrivateDnsName"]
    assert cluster.job(job)["JobState"] == "CONFIGURING"
    # The hold made the launch certain and was given back once the nodes ran.
    assert aws.active_holds() == []


def test_the_same_resume_run_twice_launches_once(
    emulator_endpoint: Any, make_cluster: Any, tmp_path: Path
) -> None:
    aws = emulator_endpoint(scenario(c5=(0, 8)))
    cluster = make_cluster(aws, DIRECT, [C5_NODES], [CLOUD])
    job = cluster.sbatch("-N2")
    first = launched(cluster, job, ["hpc-c5-1", "hpc-c5-2"])
    # slurmctld restarted mid-resume, or an operator: the very same resume file again.
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(
        json.dumps(
            {"jobs": [{"job_id": job, "nodes": "hpc-c5-[1-2]"}], "all_nodes": "hpc-c5-[1-2]"}
        )
    )
    assert cluster.run_program("resume", "hpc-c5-[1-2]", resume_file) == 0
    assert len(aws.calls("CreateFleet")) == 1
    again = {tag(i, "capacity-broker:slurm-node"): i for i in aws.live_instances()}
    assert {n: i["InstanceId"] for n, i in again.items()} == {
        n: i["InstanceId"] for n, i in first.items()
    }
    for name, instance in first.items():
        assert cluster.node(name)["NodeAddr"] == instance["PrivateIpAddress"]
    # Run by hand without the file (it is gone once slurmctld is done): the jobs configuring
    # on those nodes are asked of slurmctld, and the answer is the same.
    assert cluster.run_program("resume", "hpc-c5-[1-2]") == 0
    assert len(aws.calls("CreateFleet")) == 1
    assert len(aws.live_instances()) == 2


def test_no_capacity_anywhere_powers_the_nodes_down_and_the_job_waits(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    aws = emulator_endpoint(scenario(c5=(0, 1)))
    cluster = make_cluster(aws, DIRECT, [C5_NODES], [CLOUD])
    job = cluster.sbatch("-N2")

    powered_down(cluster, ["hpc-c5-1", "hpc-c5-2"], "no_capacity")
    state = cluster.job(job)
    assert state["JobState"] == "PENDING"
    assert state["Restarts"] == "1"  # requeued by Slurm, to be tried again
    assert aws.live_instances() == []
    assert aws.active_holds() == []
    assert aws.calls("CreateFleet") == []
    # Slurm then runs SuspendProgram on them, which finds nothing left to end.
    cluster.wait_log(r"suspend hpc-c5-\[1-2\]: no instance to terminate")


def test_power_down_terminates_the_instances(emulator_endpoint: Any, make_cluster: Any) -> None:
    aws = emulator_endpoint(scenario(c5=(8, 8)))
    cluster = make_cluster(aws, DIRECT, [C5_NODES], [CLOUD])
    job = cluster.sbatch("-N2")
    nodes = launched(cluster, job, ["hpc-c5-1", "hpc-c5-2"])
    # No slurmd ever starts here, so the nodes stay "powering up" and only a forced power-down
    # ends them (a booted node is suspended after SuspendTime idle, the same program).
    cluster.run("scancel", str(job))
    cluster.run("scontrol", "update", "NodeName=hpc-c5-[1-2]", "State=POWER_DOWN_FORCE")
    cluster.wait_log(r"suspend hpc-c5-\[1-2\]: terminated ")
    ec2 = aws.client("ec2")
    ids = [i["InstanceId"] for i in nodes.values()]
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances(InstanceIds=ids)["Reservations"]
        for i in r["Instances"]
    }
    assert set(states.values()) <= {"shutting-down", "terminated"}, states
    assert aws.live_instances() == []


def test_slurm_keeps_each_nodes_instance_through_a_restart_and_the_power_down(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    world = scenario(c5=(8, 8))
    # EC2's tag-filtered listings stay behind for the whole test: the suspend program can
    # find the instances only through what Slurm keeps of each binding.
    world["settings"] |= {"lag_listing_calls": 1000, "lag_seconds": 3600}
    aws = emulator_endpoint(world)
    # As docs/slurm.md recommends: the address goes back to the name at power-off.
    cluster = make_cluster(aws, DIRECT, [C5_NODES], [CLOUD], ["cloud_reg_addrs"])
    job = cluster.sbatch("-N2")
    cluster.wait_log(rf"job {job}: bound ")
    nodes = ["hpc-c5-1", "hpc-c5-2"]
    bound = {n: Binding.read(cluster.node(n).get("Comment")) for n in nodes}
    ids = sorted(b.instance_id for b in bound.values() if b is not None)
    assert len(ids) == 2, bound
    assert set(states(aws, ids).values()) <= {"pending", "running"}
    for name in nodes:
        assert cluster.node(name)["NodeAddr"].startswith("127.77.")

    cluster.restart_slurmctld()
    assert {n: Binding.read(cluster.node(n).get("Comment")) for n in nodes} == bound
    cluster.run("scancel", str(job))
    cluster.run("scontrol", "update", "NodeName=hpc-c5-[1-2]", "State=POWER_DOWN_FORCE")
    cluster.wait_log(r"suspend hpc-c5-\[1-2\]: terminated ")
    assert set(states(aws, ids).values()) <= {"shutting-down", "terminated"}

    def powered_off() -> bool:
        return all("POWERED_DOWN" in cluster.node(n)["State"] for n in nodes)

    wait_for("the nodes powered off", powered_off, 60, explain=cluster.explain)
    for name in nodes:
        # cloud_reg_addrs gave the address back to the name; the binding stays (the next
        # one overwrites it, and an old one costs the next suspend nothing).
        assert cluster.node(name)["NodeAddr"] == name
        assert Binding.read(cluster.node(name).get("Comment")) == bound[name]


def test_an_operators_comment_is_kept_beside_the_binding(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    """Contract v3: the binding the programs keep in a node's Comment preserves what an
    operator wrote there (real slurmctld: the Comment comes back whole, spaces included, and
    the suspend program still finds the instance by it)."""
    aws = emulator_endpoint(scenario(c5=(8, 8)))
    cluster = make_cluster(aws, DIRECT, [C5_NODES], [CLOUD])
    cluster.run("scontrol", "update", "NodeName=hpc-c5-1", "Comment=rack 12, DIMM swapped")
    job = cluster.sbatch("-N1", "-w", "hpc-c5-1")
    (instance,) = launched(cluster, job, ["hpc-c5-1"]).values()
    shown = cluster.run("scontrol", "show", "node", "hpc-c5-1")
    (comment,) = [
        line[len("   Comment=") :] for line in shown.splitlines() if line.startswith("   Comment=")
    ]
    binding, note = comment.split(" ", 1)
    assert note == "rack 12, DIMM swapped"
    found = Binding.read(binding)
    assert found is not None and found.instance_id == instance["InstanceId"]
    cluster.run("scancel", str(job))
    cluster.run("scontrol", "update", "NodeName=hpc-c5-1", "State=POWER_DOWN_FORCE")
    cluster.wait_log(r"suspend hpc-c5-1: terminated ")
    assert aws.live_instances() == []


def test_a_node_powered_down_while_it_launches_leaves_no_instance(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    from emulator.remote import RemoteEmulator

    aws = emulator_endpoint(scenario(c5=(8, 8)))
    # Addresses until the nodes are bound: Slurm sends the kill of the requeued job to nodes
    # not bound yet, and a name that does not resolve stalls slurmctld 10 s per node.
    nodes = C5_NODES.replace("State=CLOUD", "NodeAddr=127.77.9.[1-4] State=CLOUD")
    cluster = make_cluster(aws, DIRECT, [nodes], [CLOUD])
    # The resume program's tagging of its instances takes a while: long enough for an
    # operator to power the nodes down between the launch and the binding.
    RemoteEmulator(aws.url).latency(0, {"CreateTags": 5})
    job = cluster.sbatch("-N2")
    cluster.wait_log(rf"job {job}: Launched ")
    cluster.run("scontrol", "update", "NodeName=hpc-c5-[1-2]", "State=POWER_DOWN_FORCE")
    # slurmctld runs the suspend program at once, while the resume program is still tagging:
    # it finds neither a binding nor a tag (the log says which, when the machine is slow).
    cluster.wait_log(r"capacity-broker-slurm-suspend hpc-c5-\[1-2\] done")
    cluster.wait_log(rf"job {job}: Slurm powered down hpc-c5-\[1-2\] while it launched")
    cluster.wait_log(r"capacity-broker-slurm-resume hpc-c5-\[1-2\] done")
    assert aws.live_instances() == []


def states(aws: Any, ids: list[str]) -> dict[str, str]:
    """The instances' states, asked by id (not a listing)."""
    answer = aws.client("ec2").describe_instances(InstanceIds=ids)
    return {
        i["InstanceId"]: i["State"]["Name"] for r in answer["Reservations"] for i in r["Instances"]
    }


def test_a_job_across_two_node_sets_is_all_or_nothing(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    aws = emulator_endpoint(scenario(c5=(8, 8), m5=(0, 0)))
    config = {
        "cluster_id": "slurm-test",
        "nodesets": [
            nodeset("hpc-c5-[1-4]", "c5.large", name="c5", strict=True),
            nodeset("hpc-m5-[1-2]", "m5.large", name="m5", strict=True),
        ],
    }
    cluster = make_cluster(aws, config, [C5_NODES, M5_NODES], [CLOUD])
    job = cluster.sbatch("-N3", "--nodelist=hpc-c5-[1-2],hpc-m5-1")

    powered_down(cluster, ["hpc-c5-1", "hpc-c5-2", "hpc-m5-1"], "no_capacity")
    # The c5 half was launched (its node set had capacity) and terminated again.
    assert len(aws.calls("CreateFleet")) == 1
    assert aws.live_instances() == []
    assert aws.active_holds() == []
    assert cluster.job(job)["JobState"] == "PENDING"
    assert f"job {job}: terminated i-" in cluster.log_text()
    cluster.wait_log(r"suspend hpc-c5-\[1-2\],hpc-m5-1: no instance to terminate")


def test_deployed_mode_through_capacity_broker_local(local_broker: Any, make_cluster: Any) -> None:
    aws = local_broker(scenario(c5=(0, 8), cluster="slurm-deployed"), "slurm-deployed")
    config = {
        "function_prefix": "capacity-broker-local",
        "nodesets": [nodeset("hpc-c5-[1-4]", "c5.large")],
    }
    cluster = make_cluster(aws, config, [C5_NODES], [CLOUD])
    job = cluster.sbatch("-N2")
    nodes = launched(cluster, job, ["hpc-c5-1", "hpc-c5-2"])
    assert "(deployed mode)" in cluster.log_text()
    for name, instance in nodes.items():
        assert instance["SubnetId"] == SUBNET_B
        assert cluster.node(name)["NodeAddr"] == instance["PrivateIpAddress"]
    # The functions run inside `capacity-broker local`, under its cluster id.
    fleets = aws.calls("CreateFleet")
    assert len(fleets) == 1
    assert aws.active_holds() == []
