"""Attacks on the reserved-first ladder's records (issue 43) that once broke: each through the
handlers on the emulator's clock.

A ladder's nodes are found again by the ladder tag (the job's request id). Request ids are
the caller's: two clusters in one account and region may well use the same one (a Slurm job
id, a scheduler's counter). Nothing of one cluster is reachable from another: a retry of this
cluster's request never takes another cluster's ladder nodes as its own.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from capacity_broker.handlers.reserve import handler as reserve

from tests.integration.test_reserve_pool import (
    SUBNETS,
    TEMPLATE,
    job,
    pool,  # noqa: F401  (fixture)
)
from tests.integration.test_reserve_pool_abandoned import (
    LADDER,
    STATE,
    frozen,  # noqa: F401  (fixture)
    ladder_nodes,
    running,
    sweep,
    tags_of,
)

pytestmark = pytest.mark.integration

RUNG = "capacity-broker:rung"


def foreign_nodes(account: Any, count: int, tags: dict[str, str]) -> list[str]:
    """``count`` running instances another cluster's broker launched, tagged ``tags``."""
    client = boto3.client(
        "ec2",
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 10, "mode": "standard"}),
    )
    launched = client.run_instances(
        LaunchTemplate={"LaunchTemplateId": TEMPLATE},
        InstanceType="hpc7a.96xlarge",
        SubnetId=SUBNETS[2],
        MinCount=count,
        MaxCount=count,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )
    account.advance(1)
    account.settle()  # launched long ago: DescribeInstances shows them
    return [i["InstanceId"] for i in launched["Instances"]]


@pytest.mark.parametrize("rung", ["hold", "on-demand"])
def test_another_clusters_ladder_with_the_same_request_id_is_not_taken(
    frozen: Any,  # noqa: F811
    container: Any,
    context: Any,
    rung: str,
) -> None:
    """Another cluster's ladder under the same request id, its shortfall rung launched (2
    nodes, the shortfall of this job: 5, the pool covers 3): this cluster's reserve launches
    its own, and never answers, tags or ends the other cluster's nodes."""
    theirs = foreign_nodes(
        frozen,
        2,
        {
            "capacity-broker:cluster-id": "other-cluster",
            LADDER: "shared-7",
            RUNG: rung,
            "capacity-broker:request-id": f"shared-7:{rung}",
        },
    )
    answer = reserve(
        job(request_id="shared-7", instance_count=5, allow_on_demand=rung == "on-demand"),
        context,
    )
    assert answer["status"] == "provisioned", (answer.get("error_code"), answer.get("message"))
    assert not set(answer["instances"]) & set(theirs), answer["instances"]
    assert len(answer["instances"]) == 5
    # The other cluster's nodes: still running, and not given this cluster's done record.
    assert running(theirs) == sorted(theirs)
    every = ladder_nodes("shared-7")
    assert all(STATE not in tags_of(every[i]) for i in theirs)
    assert {tags_of(every[i]).get(STATE) for i in answer["instances"]} == {"done"}


def test_a_request_id_reused_by_another_job_never_takes_the_first_jobs_nodes(
    frozen: Any,  # noqa: F811
    container: Any,
    context: Any,
) -> None:
    """A second job under a request id a running job's ladder used (a scheduler that reuses
    its ids): never answered with the first job's nodes."""
    first = reserve(job(request_id="reused-1", instance_count=3), context)
    assert first["status"] == "provisioned", first
    container.build(clock=frozen.now, cleaner_clock=frozen.now)  # a new container: no memory
    second = reserve(job(request_id="reused-1", job_id="9999", instance_count=3), context)
    assert not set(second.get("instances") or []) & set(first["instances"]), second
    assert running(first["instances"]) == sorted(first["instances"])


def test_look_alike_tag_values_are_never_the_sweeps(
    frozen: Any,  # noqa: F811
    container: Any,
    context: Any,
) -> None:
    """Old nodes without a done record whose cluster id only looks like this cluster's as a
    pattern would (EC2 filter wildcards, a prefix): never listed as this cluster's, never
    ended."""
    foreign = [
        *foreign_nodes(frozen, 1, {"capacity-broker:cluster-id": "demo-*", LADDER: "a"}),
        *foreign_nodes(frozen, 1, {"capacity-broker:cluster-id": "demo-cluste?", LADDER: "b"}),
        *foreign_nodes(frozen, 1, {"capacity-broker:cluster-id": "*", LADDER: "c"}),
        *foreign_nodes(frozen, 1, {"capacity-broker:cluster-id": "demo", LADDER: "d"}),
        *foreign_nodes(frozen, 1, {"capacity-broker:cluster-id": "demo-cluster-2", LADDER: "e"}),
    ]
    frozen.advance(10 * 3600)
    swept = sweep(context)
    assert "ladder_nodes_terminated" not in swept, swept
    assert running(foreign) == sorted(foreign)
    assert not frozen.calls("TerminateInstances")


@pytest.mark.parametrize("code", ["RequestLimitExceeded", "InternalError"])
def test_a_hold_refused_for_another_reason_than_capacity_launches_no_on_demand(
    frozen: Any,  # noqa: F811
    container: Any,
    context: Any,
    code: str,
) -> None:
    """allow_on_demand is for "no hold can be made for want of capacity": a throttled (or
    failing) EC2 is not "no capacity", and launches nothing On-Demand."""
    frozen.fail("CreateCapacityReservation", code, times=999)
    answer = reserve(
        job(request_id=f"od-{code}", instance_count=5, allow_on_demand=True, strict=True), context
    )
    assert answer["status"] == "error", answer
    assert answer["error_code"] == code, answer
    described = ladder_nodes(f"od-{code}")
    assert running(described) == [], described
    assert all(tags_of(d).get(RUNG) != "on-demand" for d in described.values())
    assert answer["instances"] == []
