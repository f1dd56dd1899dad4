"""release deletes the launch template versions made for a job once nothing can launch from
them (contract step 4): the job released with no stack. Never the default version, never a
version the broker did not make, never another job's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.handlers.release import handler as release
from capacity_broker.handlers.reserve import handler as reserve

# The broker's waits on the emulator's clock (conftest: ``waits_on_emulated_time``).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("waits_on_emulated_time")]

SCENARIO = Path(__file__).parent / "scenarios" / "hpc.yaml"
SUBNETS = ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2", "subnet-0aaaaaaaaaaaaaaa3"]
TEMPLATE = "lt-0ddddddddddddddd1"


@pytest.fixture
def hpc(broker: Any) -> Any:
    broker.load_scenario(SCENARIO)
    # room for several 8-node c7i jobs in us-east-1a
    broker.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 64)
    return broker


def job(job_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "request_id": f"req-{job_id}",
        "instance_types": ["c7i.48xlarge"],
        "subnet_ids": SUBNETS[:1],
        "instance_count": 8,
        "launch_template": {"id": TEMPLATE, "version": "$Latest"},
        **fields,
    }


def ec2() -> Any:
    return boto3.client("ec2", region_name="us-east-1")


def live_versions() -> list[int]:
    found = ec2().describe_launch_template_versions(LaunchTemplateId=TEMPLATE)
    return sorted(v["VersionNumber"] for v in found["LaunchTemplateVersions"])


def test_release_deletes_the_jobs_versions_and_nothing_else(hpc: Any, context: Any) -> None:
    a = reserve(job("a"), context)
    b = reserve(job("b"), context)
    assert a["status"] == b["status"] == "reserved", (a, b)
    mine, theirs = a["launch_template"]["version"], b["launch_template"]["version"]
    users = ec2().create_launch_template_version(
        LaunchTemplateId=TEMPLATE,
        SourceVersion="1",
        # a user's version that looks like the broker's, description included
        VersionDescription=f"copy of {mine}",
        LaunchTemplateData={"KeyName": "mine"},
    )["LaunchTemplateVersion"]["VersionNumber"]
    answer = release({"job_id": "a"}, context)
    assert answer["status"] == "released", answer
    assert answer["cancelled"] == [a["reservation"]["id"]]
    assert answer["template_versions_deleted"] == [f"{TEMPLATE}:{mine}"]
    assert live_versions() == sorted([1, theirs, users])
    (call,) = hpc.calls("DeleteLaunchTemplateVersions")
    assert call.params["Versions"] == [str(mine)]
    again = release({"job_id": "a"}, context)
    assert again["status"] == "released" and "template_versions_deleted" not in again


def test_release_by_reservation_deletes_the_versions_that_target_it(hpc: Any, context: Any) -> None:
    a = reserve(job("a"), context)
    answer = release({"reservation_id": a["reservation"]["id"]}, context)
    assert answer["template_versions_deleted"] == [f"{TEMPLATE}:{a['launch_template']['version']}"]
    assert live_versions() == [1]


def test_a_stack_jobs_version_stays_until_its_stack_is_deleted(hpc: Any, context: Any) -> None:
    a = reserve(job("a", stack_name="soca-demo-job-a"), context)
    answer = release({"job_id": "a"}, context)
    assert answer["cancelled"] == [a["reservation"]["id"]]
    assert "template_versions_deleted" not in answer
    assert a["launch_template"]["version"] in live_versions()
    by_stack = release({"stack_name": "soca-demo-job-a"}, context)
    assert "template_versions_deleted" not in by_stack
    assert a["launch_template"]["version"] in live_versions()


def test_the_default_version_is_never_deleted(hpc: Any, context: Any) -> None:
    a = reserve(job("a"), context)
    version = a["launch_template"]["version"]
    ec2().modify_launch_template(LaunchTemplateId=TEMPLATE, DefaultVersion=str(version))
    answer = release({"job_id": "a"}, context)
    assert answer["status"] == "released"
    assert "template_versions_deleted" not in answer
    assert hpc.calls("DeleteLaunchTemplateVersions") == []
    assert version in live_versions()


def test_a_shared_template_never_reaches_the_version_limit(hpc: Any, context: Any) -> None:
    """Every job adds a version; released jobs give theirs back, so a template with EC2's
    version quota (a knob makes it 4 here: the user's and three jobs' at a time) serves any
    number of jobs one after another."""
    hpc.configure(launch_template_version_limit=4)
    for n in range(8):
        answer = reserve(job(f"j{n}", provision=True), context)
        assert answer["status"] == "provisioned", answer
        assert release({"job_id": f"j{n}"}, context)["status"] == "released"
    assert live_versions() == [1]
