"""Other clusters (contract v3): nothing of one broker cluster is reachable from another.

A ``capacity_reservation_id`` tagged for another broker cluster is ``rejected``, naming the
cluster (used up here, that cluster's cleaner would cancel it as consumed); the caller's
untagged ODCRs and Capacity Blocks are still theirs to bring. A launch template not tagged for
this cluster gets no version from it (the deployed IAM's rule, held by the broker itself, so
direct mode keeps to it too): ``rejected`` before anything is held.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.handlers.reserve import handler as reserve

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).parent / "scenarios" / "hpc.yaml"
SUBNETS = ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2", "subnet-0aaaaaaaaaaaaaaa3"]
TEMPLATE = "lt-0ddddddddddddddd1"  # tagged for demo-cluster, the broker's cluster here


@pytest.fixture
def hpc(broker: Any) -> Any:
    broker.load_scenario(SCENARIO)
    broker.set_pool("us-east-1", "us-east-1b", "hpc7a.96xlarge", 64)
    return broker


def ec2() -> Any:
    return boto3.client("ec2", region_name="us-east-1")


def tagging(resource_type: str, tags: dict[str, str]) -> dict[str, Any]:
    if not tags:
        return {}
    pairs = [{"Key": k, "Value": v} for k, v in tags.items()]
    return {"TagSpecifications": [{"ResourceType": resource_type, "Tags": pairs}]}


def odcr(tags: dict[str, str]) -> str:
    """A targeted ODCR of 4 × hpc7a.96xlarge in us-east-1b, as the account holds it."""
    made = ec2().create_capacity_reservation(
        InstanceType="hpc7a.96xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1b",
        InstanceCount=4,
        InstanceMatchCriteria="targeted",
        **tagging("capacity-reservation", tags),
    )["CapacityReservation"]
    return str(made["CapacityReservationId"])


def brought(reservation_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": "42",
        "request_id": "job-42-a1",
        "instance_types": ["hpc7a.96xlarge"],
        "subnet_ids": SUBNETS,
        "instance_count": 4,
        "capacity_reservation_id": reservation_id,
        "launch_template": {"id": TEMPLATE, "version": "1"},
        **fields,
    }


@pytest.mark.parametrize(
    "tags",
    [
        {"capacity-broker:cluster-id": "soca-other", "capacity-broker:purpose": "hold"},
        {"capacity-broker:cluster-id": "soca-other"},
        {"Capacity-Broker:Cluster-Id": "soca-other"},
    ],
    ids=["another clusters hold", "tagged for another cluster", "any spelling of the key"],
)
def test_another_clusters_reservation_is_rejected_naming_the_cluster(
    hpc: Any, context: Any, tags: dict[str, str]
) -> None:
    theirs = odcr(tags)
    hpc.settle()
    hpc.clear_calls()
    answer = reserve(brought(theirs), context)
    assert answer["status"] == "rejected", answer
    assert "soca-other" in answer["message"] and "soca-other" in answer["reason"]
    assert "reservation" not in answer
    assert hpc.calls("CreateLaunchTemplateVersion") == []
    assert hpc.calls("CreateFleet") == []
    state = ec2().describe_capacity_reservations(CapacityReservationIds=[theirs])
    assert state["CapacityReservations"][0]["AvailableInstanceCount"] == 4


@pytest.mark.parametrize(
    "tags",
    [{}, {"team": "cfd"}, {"capacity-broker:cluster-id": "demo-cluster"}],
    ids=["untagged", "the callers own tags", "tagged for this cluster"],
)
def test_the_callers_own_reservations_are_still_theirs_to_bring(
    hpc: Any, context: Any, tags: dict[str, str]
) -> None:
    mine = odcr(tags)
    hpc.settle()
    answer = reserve(brought(mine), context)
    assert answer["status"] == "reserved", answer
    assert answer["reservation"]["id"] == mine and answer["reservation"]["owned"] is False


def template(tags: dict[str, str]) -> str:
    made = ec2().create_launch_template(
        LaunchTemplateName=f"other-{len(tags)}-{'-'.join(tags.values()) or 'none'}",
        LaunchTemplateData={"ImageId": "ami-0ccccccccccccccc1", "InstanceType": "hpc7a.96xlarge"},
        **tagging("launch-template", tags),
    )["LaunchTemplate"]
    return str(made["LaunchTemplateId"])


def versions(template_id: str) -> list[int]:
    found = ec2().describe_launch_template_versions(LaunchTemplateId=template_id)
    return [v["VersionNumber"] for v in found["LaunchTemplateVersions"]]


@pytest.mark.parametrize("version", ["1", "$Latest", "$Default"])
@pytest.mark.parametrize(
    ("tags", "said"),
    [
        ({"capacity-broker:cluster-id": "soca-other"}, "soca-other"),
        ({}, "not tagged capacity-broker:cluster-id=demo-cluster"),
        ({"team": "cfd"}, "not tagged capacity-broker:cluster-id=demo-cluster"),
    ],
    ids=["another clusters template", "untagged", "tagged otherwise"],
)
def test_a_template_not_tagged_for_this_cluster_gets_no_version(
    hpc: Any, context: Any, tags: dict[str, str], said: str, version: str
) -> None:
    theirs = template(tags)
    hpc.clear_calls()
    answer = reserve(
        {
            "job_id": "42",
            "request_id": "job-42-lt",
            "instance_types": ["hpc7a.96xlarge"],
            "subnet_ids": SUBNETS,
            "instance_count": 2,
            "launch_template": {"id": theirs, "version": version},
            "provision": True,
        },
        context,
    )
    assert answer["status"] == "rejected", answer
    assert said in answer["message"] and theirs in answer["message"]
    assert hpc.calls("CreateCapacityReservation") == []
    assert hpc.calls("CreateLaunchTemplateVersion") == []
    assert hpc.calls("CreateFleet") == []
    assert versions(theirs) == [1]


def test_another_clusters_template_is_refused_with_a_reservation_brought_too(
    hpc: Any, context: Any
) -> None:
    theirs = template({"capacity-broker:cluster-id": "soca-other"})
    mine = odcr({})
    hpc.settle()
    answer = reserve(brought(mine, launch_template={"id": theirs, "version": "1"}), context)
    assert answer["status"] == "rejected" and "soca-other" in answer["message"], answer
    assert versions(theirs) == [1]
