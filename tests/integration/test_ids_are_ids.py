"""Ids are ids (contract v3): ``job_id``, ``stack_name``, ``request_id`` and ``reservation_id``
match exactly; ``*``, ``?`` and ``\\`` are literal characters, never patterns.

Each id field goes, with wildcard characters, through every entry point that takes it, and
nothing of another job, stack or request is touched. Only ``job_id`` accepts such characters
(any printable text, as schedulers name jobs); the other three are refused by their patterns
(``invalid_request``, before any AWS call), which these tests hold to as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.handlers.cleaner import handler as cleaner
from capacity_broker.handlers.probe import handler as probe
from capacity_broker.handlers.release import handler as release
from capacity_broker.handlers.reserve import handler as reserve

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).parent / "scenarios" / "hpc.yaml"
SUBNET = "subnet-0aaaaaaaaaaaaaaa1"
# Jobs whose ids a wildcard would reach: plain ones and ones made of the special characters.
JOBS = ["1", "12", "2", "1*", "1?", "*", "?", "\\", "a\\b", "a\\*", "[1]"]
# Selectors that are no job's id, each a pattern that would catch some of JOBS.
WILD = ["1\\?", "??", "1**", "\\\\", "a\\\\b", "a*", "\\1", "*\\", "1\\", "[12]", "**"]
WILD_TEXT = ["*", "?", "1?", "a\\*", "\\*", "*\\?", "\\\\*"]


@pytest.fixture
def jobs(broker: Any, context: Any) -> dict[str, str]:
    """One live hold per job of JOBS (job id -> reservation id), settled in EC2's listings."""
    broker.load_scenario(SCENARIO)
    broker.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 64)
    held = {}
    for number, job_id in enumerate(JOBS):
        answer = reserve(hold(job_id, request_id=f"req-{number}"), context)
        assert answer["status"] == "reserved", answer
        held[job_id] = answer["reservation"]["id"]
    broker.settle()
    broker.clear_calls()
    return held


def hold(job_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "instance_types": ["c7i.48xlarge"],
        "subnet_ids": [SUBNET],
        "instance_count": 1,
        **fields,
    }


def states(ids: dict[str, str]) -> dict[str, str]:
    answer = boto3.client("ec2", region_name="us-east-1").describe_capacity_reservations(
        CapacityReservationIds=list(ids.values())
    )
    by_id = {r["CapacityReservationId"]: r["State"] for r in answer["CapacityReservations"]}
    return {job: by_id[rid] for job, rid in ids.items()}


def stack_created(stack_id: str, when: str) -> dict[str, Any]:
    """EventBridge's CloudFormation Stack Status Change event, CREATE_COMPLETE."""
    return {
        "version": "0",
        "id": "8c0a1f4e-3b4d-4c8e-9a0b-1c2d3e4f5a61",
        "detail-type": "CloudFormation Stack Status Change",
        "source": "aws.cloudformation",
        "account": "123456789012",
        "time": when,
        "region": "us-east-1",
        "resources": [stack_id],
        "detail": {"stack-id": stack_id, "status-details": {"status": "CREATE_COMPLETE"}},
    }


def cancelled(broker: Any) -> list[str]:
    return [c.params["CapacityReservationId"] for c in broker.calls("CancelCapacityReservation")]


@pytest.mark.parametrize("selector", WILD)
def test_release_by_a_pattern_of_other_jobs_ids_releases_nothing(
    jobs: dict[str, str], broker: Any, context: Any, selector: str
) -> None:
    answer = release({"job_id": selector}, context)
    assert answer["status"] == "released", answer
    assert answer["cancelled"] == [] and answer["skipped"] == []
    assert cancelled(broker) == []
    assert set(states(jobs).values()) == {"active"}


@pytest.mark.parametrize("job_id", JOBS)
def test_release_by_job_id_releases_that_job_only(
    jobs: dict[str, str], broker: Any, context: Any, job_id: str
) -> None:
    answer = release({"job_id": job_id}, context)
    assert answer["status"] == "released", answer
    assert answer["cancelled"] == [jobs[job_id]]
    assert cancelled(broker) == [jobs[job_id]]
    left = states(jobs)
    assert {job for job, state in left.items() if state != "active"} == {job_id}


def test_the_broker_compares_what_ec2_answers_itself(
    jobs: dict[str, str], broker: Any, context: Any
) -> None:
    """A service that ignored the escapes (the emulator's ``filter_escapes=False``) answers
    other jobs' holds to ``1*``: the broker still releases job ``1*`` alone."""
    broker.configure(filter_escapes=False)
    listed = boto3.client("ec2", region_name="us-east-1").describe_capacity_reservations(
        Filters=[{"Name": "tag:capacity-broker:job-id", "Values": ["1\\*"]}]
    )["CapacityReservations"]
    assert len(listed) > 1  # the stand-in really does answer more than was asked
    answer = release({"job_id": "1*"}, context)
    assert answer["cancelled"] == [jobs["1*"]]
    left = states(jobs)
    assert {job for job, state in left.items() if state != "active"} == {"1*"}


@pytest.mark.parametrize("stack_name", ["soca-demo-job-*", "soca-demo-job-?", "a\\b", "*"])
def test_a_wildcard_stack_name_is_refused_everywhere(
    jobs: dict[str, str], broker: Any, context: Any, stack_name: str
) -> None:
    """CloudFormation stack names are letters, digits and hyphens: reserve, release and the
    cleaner's stack-status event refuse anything else before any AWS call."""
    made = reserve(hold("9", stack_name=stack_name), context)
    assert made["status"] == "invalid_request", made
    assert release({"stack_name": stack_name}, context)["status"] == "invalid_request"
    arn = f"arn:aws:cloudformation:us-east-1:123456789012:stack/{stack_name}/6a7e8feb-b491"
    assert cleaner(stack_created(arn, "2026-11-21T10:03:12Z"), context)["status"] == (
        "invalid_request"
    )
    assert broker.calls("CreateCapacityReservation") == []
    assert broker.calls("DescribeCapacityReservations") == []
    assert cancelled(broker) == []


def test_a_stack_event_acts_on_that_stack_name_only(broker: Any, context: Any) -> None:
    """Stack names that are prefixes of one another: the event of one reaches its holds."""
    broker.load_scenario(SCENARIO)
    broker.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 64)
    held = {}
    for number, stack in enumerate(["soca-demo-job-1", "soca-demo-job-12", "soca-demo-job-1-2"]):
        answer = reserve(hold(str(number), request_id=f"s-{number}", stack_name=stack), context)
        held[stack] = answer["reservation"]["id"]
    broker.settle()
    stack_id = boto3.client("cloudformation", region_name="us-east-1").create_stack(
        StackName="soca-demo-job-1",
        TemplateBody='{"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}',
    )["StackId"]
    answer = cleaner(stack_created(stack_id, broker.now().strftime("%Y-%m-%dT%H:%M:%SZ")), context)
    assert [c["id"] for c in answer["cancelled"]] == [held["soca-demo-job-1"]], answer
    left = states(held)
    assert left["soca-demo-job-12"] == left["soca-demo-job-1-2"] == "active"


@pytest.mark.parametrize("request_id", WILD_TEXT)
def test_a_wildcard_request_id_is_refused_everywhere(
    jobs: dict[str, str], broker: Any, context: Any, request_id: str
) -> None:
    """Request ids are ``[A-Za-z0-9._:-]``: probe, reserve and release refuse the rest before
    any AWS call (an earlier hold is found by its request id)."""
    asked = {"instance_type": "c7i.48xlarge", "subnet_ids": [SUBNET], "request_id": request_id}
    assert probe(asked, context)["status"] == "invalid_request"
    assert reserve(hold("1", request_id=request_id), context)["status"] == "invalid_request"
    assert release({"job_id": "1", "request_id": request_id}, context)["status"] == (
        "invalid_request"
    )
    assert broker.calls() == []
    assert set(states(jobs).values()) == {"active"}


@pytest.mark.parametrize("reservation_id", ["cr-*", "cr-?", "cr-0\\*", "*"])
def test_a_wildcard_reservation_id_is_refused_everywhere(
    jobs: dict[str, str], broker: Any, context: Any, reservation_id: str
) -> None:
    assert release({"reservation_id": reservation_id}, context)["status"] == "invalid_request"
    brought = reserve(hold("1", capacity_reservation_id=reservation_id), context)
    assert brought["status"] == "invalid_request"
    assert broker.calls() == []
    assert set(states(jobs).values()) == {"active"}


@pytest.mark.parametrize("job_id", WILD_TEXT)
def test_a_job_id_with_wildcards_holds_and_releases_only_its_own(
    broker: Any, context: Any, job_id: str
) -> None:
    """reserve takes any printable job id; the hold is tagged with it as it is, and its
    release reaches it and nothing else (a job whose id the pattern would match included)."""
    broker.load_scenario(SCENARIO)
    broker.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 64)
    mine = reserve(hold(job_id, request_id="mine"), context)
    theirs = reserve(hold("1", request_id="theirs"), context)
    assert mine["status"] == theirs["status"] == "reserved"
    broker.settle()
    answer = release({"job_id": job_id}, context)
    assert answer["cancelled"] == [mine["reservation"]["id"]]
    left = states({"mine": mine["reservation"]["id"], "theirs": theirs["reservation"]["id"]})
    assert left == {"mine": "cancelled", "theirs": "active"}


def test_instance_lookups_match_tags_exactly(broker: Any) -> None:
    """The Slurm programs' instance lookups (node names, request-id prefixes) go through the
    same filters: a value is literal, a ``Prefix`` is a prefix of literal text."""
    from capacity_broker.adapters.ec2 import Prefix
    from capacity_broker.domain.tags import TAG_REQUEST_ID
    from capacity_broker.root import Adapters

    broker.load_scenario(SCENARIO)
    broker.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 64)
    ec2 = boto3.client("ec2", region_name="us-east-1")
    names = {}
    for node, request in [
        ("hpc-1", "slurm.c.node.1"),
        ("hpc-12", "slurm.cx.node.12"),
        ("hpc-*", "slurm.c*.node.2"),
        ("hpc-?", "slurm.c?.node.3"),
    ]:
        (made,) = ec2.run_instances(
            ImageId="ami-0ccccccccccccccc1",
            InstanceType="c7i.48xlarge",
            MinCount=1,
            MaxCount=1,
            SubnetId=SUBNET,
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [
                        {"Key": "capacity-broker:slurm-node", "Value": node},
                        {"Key": TAG_REQUEST_ID, "Value": request},
                        {"Key": "capacity-broker:cluster-id", "Value": "c"},
                    ],
                }
            ],
        )["Instances"]
        names[made["InstanceId"]] = node
    broker.settle()
    adapters = Adapters()  # a root's adapters, with their own pacer
    adapter = adapters.ec2("us-east-1")

    def found(tags: dict[str, Any]) -> set[str]:
        return {names[i.instance_id] for i in adapter.tagged_instances(tags)}

    assert found({"capacity-broker:slurm-node": ["hpc-*"]}) == {"hpc-*"}
    assert found({"capacity-broker:slurm-node": ["hpc-?", "hpc-1"]}) == {"hpc-?", "hpc-1"}
    assert found({TAG_REQUEST_ID: [Prefix("slurm.c*.")]}) == {"hpc-*"}
    assert found({TAG_REQUEST_ID: [Prefix("slurm.c.")]}) == {"hpc-1"}
    assert len(adapters.launches("us-east-1").request_instances("c", "slurm.c?.node.3")) == 1
