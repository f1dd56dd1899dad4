"""A node set configured ``capacity: reserved-first`` on a real slurmctld (issue 43): a job's
nodes come from the cluster's reserved pool first, and only what it does not cover is held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from test_programs import C5_NODES, CLOUD, REGION, SUBNET_B, launched, nodeset, scenario

pytestmark = pytest.mark.slurm

POOL_ODCR = "cr-0a0000000000000p1"


def with_pool(world: dict[str, Any], count: int) -> dict[str, Any]:
    """A standing ODCR of c5.large in AZ b the operator tagged into the pool."""
    world["regions"][REGION]["reservations"] = [
        {
            "id": POOL_ODCR,
            "instance_type": "c5.large",
            "availability_zone": "us-east-1b",
            "count": count,
            "match": "targeted",
            "tags": {"hpc-pool": "slurm"},
        }
    ]
    return world


def test_a_reserved_first_node_set_takes_the_pool_first_and_holds_only_the_rest(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    # AZ b has 3 c5.large: 2 of them the pool's ODCR, 1 left for a hold.
    aws = emulator_endpoint(with_pool(scenario(c5=(0, 3)), 2))
    config = {
        "cluster_id": "slurm-test",
        "nodesets": [
            nodeset(
                "hpc-c5-[1-4]",
                "c5.large",
                strict=True,
                capacity="reserved-first",
                pool={"tag": "hpc-pool=slurm"},
            )
        ],
    }
    cluster = make_cluster(aws, config, [C5_NODES], [CLOUD])
    # `slurm check` shows what each of the node set's jobs will ask.
    checked = subprocess.run(
        [sys.executable, "-m", "capacity_broker.cli", "slurm", "check", "-o", "json"],
        env={
            **os.environ,
            "CAPACITY_BROKER_SLURM_CONFIG": str(cluster.root / "capacity-broker.yaml"),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    (shown,) = json.loads(checked.stdout)["nodesets"]
    assert shown["request"]["capacity"] == "reserved-first", checked.stdout
    assert shown["request"]["pool"]["tag"] == "hpc-pool=slurm"
    job = cluster.sbatch("-N3")
    nodes = launched(cluster, job, ["hpc-c5-1", "hpc-c5-2", "hpc-c5-3"])
    assert {i["SubnetId"] for i in nodes.values()} == {SUBNET_B}
    served = sorted(str(i.get("CapacityReservationId")) for i in nodes.values())
    holds = aws.calls("CreateCapacityReservation")
    # One hold, of the one node the pool does not cover; given back once the nodes ran.
    assert [h["params"]["InstanceCount"] for h in holds] == [1], holds
    assert served.count(POOL_ODCR) == 2
    (other,) = [s for s in served if s != POOL_ODCR]
    assert other.startswith("cr-")
    assert aws.active_holds() == []
    (pool,) = aws.client("ec2").describe_capacity_reservations(CapacityReservationIds=[POOL_ODCR])[
        "CapacityReservations"
    ]
    assert (pool["State"], pool["AvailableInstanceCount"]) == ("active", 0)


def test_a_node_set_that_allows_on_demand_launches_the_shortfall_on_demand(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    """``allow_on_demand: true`` on the node set: when EC2 has no capacity to hold the one node
    the pool does not cover, that node is launched On-Demand (untargeted) beside the pool's."""
    from emulator.remote import RemoteEmulator

    aws = emulator_endpoint(with_pool(scenario(c5=(0, 3)), 2))
    RemoteEmulator(aws.url).fail(
        "CreateCapacityReservation", "InsufficientInstanceCapacity", times=999
    )
    config = {
        "cluster_id": "slurm-test",
        "nodesets": [
            nodeset(
                "hpc-c5-[1-4]",
                "c5.large",
                strict=True,
                capacity="reserved-first",
                pool={"tag": "hpc-pool=slurm"},
                allow_on_demand=True,
            )
        ],
    }
    cluster = make_cluster(aws, config, [C5_NODES], [CLOUD])
    job = cluster.sbatch("-N3")
    nodes = launched(cluster, job, ["hpc-c5-1", "hpc-c5-2", "hpc-c5-3"])
    assert {i["SubnetId"] for i in nodes.values()} == {SUBNET_B}
    served = sorted(str(i.get("CapacityReservationId")) for i in nodes.values())
    assert served == sorted([POOL_ODCR, POOL_ODCR, "None"]), served
    # A hold was asked for and refused; nothing holds capacity.
    assert aws.calls("CreateCapacityReservation")
    assert aws.active_holds() == []
    rungs = sorted(
        next(t["Value"] for t in i["Tags"] if t["Key"] == "capacity-broker:rung")
        for i in nodes.values()
    )
    assert rungs == [POOL_ODCR, POOL_ODCR, "on-demand"]
