"""reserve's launch template version and EC2 Fleet against the realistic emulator (issue 12):
the fleet form EC2 honours, ``$Latest`` resolved once per request id, a fleet whose answer was
lost, the market type, and versions deleted once nothing can launch from them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.adapters.aws import RetryPolicy
from capacity_broker.handlers.reserve import handler as reserve

from emulator import Emulator

from .test_reserve import (  # the hpc scenario's names, its job and the state table
    BLOCK_NOW,
    SCENARIO,
    SUBNETS,
    TEMPLATE,
    ec2,
    job,
    state_table,  # noqa: F401  (fixture, asked for by name)
)

# The broker's waits on the emulator's clock (conftest: ``waits_on_emulated_time``).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("waits_on_emulated_time")]

EVENTS = Path(__file__).resolve().parents[2] / "events"
# Milliseconds of backoff instead of seconds (as the fault matrix): a lost answer is retried
# the same way, sooner.
FAST = RetryPolicy(base=0.002, cap=0.01, max_attempts=4)


@pytest.fixture
def hpc(broker: Any) -> Any:
    broker.load_scenario(SCENARIO)
    return broker


def versions(template: str = TEMPLATE) -> dict[int, dict[str, Any]]:
    found = ec2().describe_launch_template_versions(LaunchTemplateId=template)
    return {v["VersionNumber"]: v for v in found["LaunchTemplateVersions"]}


def settled() -> Any:
    """EC2 as an observer sees it once it has caught up: what was made a moment ago is
    settled first (eventual consistency), so these checks see the truth, not the lag."""
    Emulator().settle()
    return ec2()


def state(reservation_id: str) -> str:
    (found,) = settled().describe_capacity_reservations(CapacityReservationIds=[reservation_id])[
        "CapacityReservations"
    ]
    return str(found["State"])


def running(request_id: str) -> set[str]:
    found = settled().describe_instances(
        Filters=[
            {"Name": "tag:capacity-broker:request-id", "Values": [request_id]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    )["Reservations"]
    return {i["InstanceId"] for r in found for i in r["Instances"]}


@pytest.fixture
def fast(hpc: Any, container: Any) -> Any:
    """reserve on a root with the fast retry policy (everything else is the real handler's)."""
    container.build(retry=FAST)
    return hpc


# -- 1. the fleet form -------------------------------------------------------------------------


def test_the_fleet_targets_the_hold_without_a_usage_strategy(hpc: Any, context: Any) -> None:
    """Contract step 5: single AZ, single type, MinTargetCapacity = instance_count, and no
    use-capacity-reservations-first, under which EC2 Fleet does not use a template that
    targets a reservation (the realistic emulator launched nothing with it)."""
    answer = reserve(
        job(request_id="job-form", launch_template={"id": TEMPLATE}, provision=True), context
    )
    assert answer["status"] == "provisioned", answer
    (call,) = hpc.calls("CreateFleet")
    options = call.params["OnDemandOptions"]
    assert options == {
        "SingleInstanceType": True,
        "SingleAvailabilityZone": True,
        "MinTargetCapacity": 8,
    }
    (config,) = call.params["LaunchTemplateConfigs"]
    assert config["LaunchTemplateSpecification"] == {
        "LaunchTemplateId": TEMPLATE,
        "Version": str(answer["launch_template"]["version"]),
    }
    assert config["Overrides"] == [{"InstanceType": "hpc7a.96xlarge", "SubnetId": SUBNETS[2]}]
    assert call.params["TargetCapacitySpecification"]["TotalTargetCapacity"] == 8
    assert running("job-form") == set(answer["instances"])
    assert state(answer["reservation"]["id"]) == "cancelled"


# -- 2. $Latest resolved once per request id ---------------------------------------------------


@pytest.fixture
def demo(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BROKER_CLUSTER_ID", "demo")
    container.rebuild()
    broker.load_scenario("demo")
    return broker


def test_the_sample_event_sent_twice_answers_the_same_version(demo: Any, context: Any) -> None:
    """events/reserve.json ($Latest, a request id, no state table) twice, as a scheduler
    retries after a lost answer: the retry took the first version as its source and met its
    ClientToken with other parameters (error, and the hold cancelled)."""
    event = json.loads((EVENTS / "reserve.json").read_text())
    template = event["launch_template"]["id"]
    first = reserve(event, context)
    assert first["status"] == "reserved", first
    demo.advance(90)
    second = reserve(event, context)
    assert second["status"] == "reserved", second
    assert second["launch_template"] == first["launch_template"]
    assert second["reservation"]["id"] == first["reservation"]["id"]
    assert state(first["reservation"]["id"]) == "active"
    assert sorted(versions(template)) == [1, first["launch_template"]["version"]]


def test_a_retry_after_latest_moved_answers_the_first_version(hpc: Any, context: Any) -> None:
    """The user adds a version between the two invocations: the retry still answers (and
    launches from) the version the first made, which EC2's ClientToken pins."""
    event = job(request_id="job-moved", launch_template={"id": TEMPLATE, "version": "$Latest"})
    first = reserve(event, context)
    assert first["status"] == "reserved", first
    ec2().create_launch_template_version(
        LaunchTemplateId=TEMPLATE, SourceVersion="1", LaunchTemplateData={"KeyName": "new"}
    )
    second = reserve(event, context)
    assert second["status"] == "reserved", second
    assert second["launch_template"] == first["launch_template"]
    assert state(first["reservation"]["id"]) == "active"
    assert len(versions()) == 3  # the job's own, the user's, and no second one for the job


def test_latest_never_builds_on_another_jobs_version(hpc: Any, context: Any) -> None:
    """$Latest is the newest version no broker made: a version made for another job (its
    reservation, its placement group) is not this job's configuration."""
    hpc.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 16)
    arn = "arn:aws:ec2:us-east-1:123456789012:placement-group/other-job"
    other = reserve(
        job(
            job_id="other",
            request_id="job-other",
            instance_types=["c7i.48xlarge"],
            launch_template={"id": TEMPLATE, "version": "$Latest"},
            placement_group_arn=arn,
        ),
        context,
    )
    assert other["status"] == "reserved", other
    mine = reserve(
        job(request_id="job-mine", launch_template={"id": TEMPLATE, "version": "$Latest"}),
        context,
    )
    assert mine["status"] == "reserved", mine
    data = versions()[mine["launch_template"]["version"]]["LaunchTemplateData"]
    assert "Placement" not in data  # not inherited from the other job's version


# -- 3. a fleet whose answer was lost ----------------------------------------------------------


@pytest.fixture
def nothing_shown_after_the_fleet(hpc: Any) -> Iterator[Any]:
    """EC2's DescribeInstances is eventually consistent: right after the fleet it may show
    nothing. Made with the fault hub: from the first CreateFleet on, DescribeInstances fails
    (what the broker then sees is no instance at all). Calling the fixture's value ends it."""
    from emulator.state import world

    original = world.hub.before

    def before(service: str, action: str, *args: Any) -> Any:
        if action == "CreateFleet" and not world.hub.calls_of("CreateFleet"):
            world.hub.inject("DescribeInstances", "InternalError", times=1000)
        return original(service, action, *args)

    def stop() -> None:
        world.hub.before = original  # type: ignore[method-assign]
        world.hub.clear_faults()

    world.hub.before = before  # type: ignore[method-assign]
    yield stop
    stop()


@pytest.mark.parametrize("table", [False, True], ids=["no-state-table", "state-table"])
def test_a_fleet_whose_answer_was_lost_is_asked_for_again_with_its_token(
    fast: Any, context: Any, nothing_shown_after_the_fleet: Any, request: Any, table: bool
) -> None:
    if table:
        request.getfixturevalue("state_table")
    fast.fail("CreateFleet", mode="timeout", times=1000)
    event = job(
        request_id="job-lost",
        launch_template={"id": TEMPLATE, "version": "$Latest"},
        provision=True,
    )
    first = reserve(event, context)
    # EC2 launched the fleet; no answer said so, and nothing shown proves nothing.
    assert first["status"] == "error", first
    assert first["cleanup"] == "pending"
    nothing_shown_after_the_fleet()  # EC2 answers again, and shows what it launched
    hold = first["reservation"]["id"]
    assert state(hold) == "active"  # kept for the retry
    launched = running("job-lost")
    assert len(launched) == 8
    tokens = {c.params["ClientToken"] for c in fast.calls("CreateFleet")}
    assert len(tokens) == 1

    second = reserve(event, context)
    assert second["status"] == "provisioned", second
    assert set(second["instances"]) == launched == running("job-lost")  # no second fleet
    assert second["launch_template"] == first["launch_template"]
    assert {c.params["ClientToken"] for c in fast.calls("CreateFleet")} == tokens
    assert state(hold) == "cancelled"


def test_a_retry_right_after_a_provisioned_answer_launches_nothing_more(
    hpc: Any, context: Any
) -> None:
    """The answer was lost and the scheduler asks again at once, without a state table: the
    first hold was given back after the launch, so the retry holds anew, and a listing made a
    moment after the launch does not show the nodes yet. The retry looks again before it
    launches (it met a hold an earlier invocation had given back), finds the nodes, and
    answers them: one fleet."""
    event = job(
        request_id="job-twice",
        launch_template={"id": TEMPLATE, "version": "$Latest"},
        provision=True,
    )
    first = reserve(event, context)
    assert first["status"] == "provisioned", first
    second = reserve(event, context)
    assert second["status"] == "provisioned", second
    assert len(hpc.calls("CreateFleet")) == 1
    assert set(second["instances"]) == set(first["instances"]) == running("job-twice")


# -- 4. the market type ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "market",
    [{"MarketType": "spot", "SpotOptions": {"MaxPrice": "9.99"}}, {"MarketType": "capacity-block"}],
    ids=["spot", "capacity-block"],
)
def test_an_odcr_version_has_no_market_type_whatever_the_source_said(
    hpc: Any, context: Any, market: dict[str, Any]
) -> None:
    source = ec2().create_launch_template_version(
        LaunchTemplateId=TEMPLATE,
        SourceVersion="1",
        LaunchTemplateData={"InstanceMarketOptions": market, "KeyName": "hpc"},
    )["LaunchTemplateVersion"]["VersionNumber"]
    answer = reserve(
        job(
            request_id="job-market",
            launch_template={"id": TEMPLATE, "version": str(source)},
            provision=True,
        ),
        context,
    )
    assert answer["status"] == "provisioned", answer
    data = versions()[answer["launch_template"]["version"]]["LaunchTemplateData"]
    assert "InstanceMarketOptions" not in data
    assert data["KeyName"] == "hpc" and data["ImageId"] == "ami-0ccccccccccccccc1"
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": answer["reservation"]["id"]
    }


def test_a_block_version_is_capacity_block_whatever_the_source_said(hpc: Any, context: Any) -> None:
    source = ec2().create_launch_template_version(
        LaunchTemplateId=TEMPLATE,
        SourceVersion="1",
        LaunchTemplateData={"InstanceMarketOptions": {"MarketType": "spot"}},
    )["LaunchTemplateVersion"]["VersionNumber"]
    answer = reserve(
        job(
            instance_types=["p5.48xlarge"],
            instance_count=4,
            capacity_reservation_id=BLOCK_NOW,
            launch_template={"id": TEMPLATE, "version": str(source)},
            provision=True,
        ),
        context,
    )
    assert answer["status"] == "provisioned", answer
    data = versions()[answer["launch_template"]["version"]]["LaunchTemplateData"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}


# -- the platform the launches bill as (issue 21) ---------------------------------------------

RHEL_IMAGE = "ami-0ccccccccccccccc2"
RHEL_TEMPLATE = "lt-0ddddddddddddddd2"
RHEL = "Red Hat Enterprise Linux"


def rhel_world(emu: Any, image: str = RHEL_IMAGE) -> None:
    """A RHEL image (billed as RHEL) and a cluster template that launches it."""
    emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "images": [{"id": RHEL_IMAGE, "name": "rhel9", "platform_details": RHEL}],
                    "launch_templates": [
                        {
                            "id": RHEL_TEMPLATE,
                            "name": "rhel-nodes",
                            "data": {"ImageId": image, "InstanceType": "hpc7a.96xlarge"},
                            "tags": {"capacity-broker:cluster-id": "demo-cluster"},
                        }
                    ],
                }
            }
        }
    )


def held_platforms(emu: Any) -> set[str]:
    return {c.params["InstancePlatform"] for c in emu.calls("CreateCapacityReservation")}


def test_a_rhel_template_holds_rhel_and_launches(hpc: Any, context: Any) -> None:
    """EC2 uses a reservation only for launches whose platform matches it. Without
    ``image_id`` or ``instance_platform`` the hold used to be Linux/UNIX whatever the
    template launched, and EC2 refused the RHEL launch into it."""
    rhel_world(hpc)
    answer = reserve(
        job(launch_template={"id": RHEL_TEMPLATE, "version": "1"}, provision=True), context
    )
    assert answer["status"] == "provisioned", answer
    assert held_platforms(hpc) == {RHEL}
    assert len(answer["instances"]) == 8


def test_a_template_image_named_by_an_ssm_parameter_is_resolved_first(
    hpc: Any, context: Any
) -> None:
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name="/golden-ami/rhel9", Value=RHEL_IMAGE, Type="String", DataType="aws:ec2:image"
    )
    rhel_world(hpc, image="resolve:ssm:/golden-ami/rhel9")
    answer = reserve(
        job(launch_template={"id": RHEL_TEMPLATE, "version": "1"}, provision=True), context
    )
    assert answer["status"] == "provisioned", answer
    assert held_platforms(hpc) == {RHEL}


def test_a_template_image_parameter_that_does_not_exist_is_invalid(hpc: Any, context: Any) -> None:
    rhel_world(hpc, image="resolve:ssm:/golden-ami/missing")
    answer = reserve(job(launch_template={"id": RHEL_TEMPLATE, "version": "1"}), context)
    assert answer["status"] == "invalid_request", answer
    assert answer["errors"][0]["field"] == "launch_template"
    assert hpc.calls("CreateCapacityReservation") == []


def test_an_explicit_platform_still_wins_over_the_template(hpc: Any, context: Any) -> None:
    rhel_world(hpc)
    answer = reserve(
        job(
            launch_template={"id": RHEL_TEMPLATE, "version": "1"},
            instance_platform="Linux/UNIX",
        ),
        context,
    )
    assert answer["status"] == "reserved", answer
    assert held_platforms(hpc) == {"Linux/UNIX"}


def test_a_brought_rhel_reservation_fits_a_rhel_template(hpc: Any, context: Any) -> None:
    rhel_world(hpc)
    hpc.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "reservations": [
                        {
                            "id": "cr-0eeeeeeeeeeeeeee3",
                            "instance_type": "hpc7a.96xlarge",
                            "availability_zone": "us-east-1b",
                            "count": 8,
                            "match": "targeted",
                            "platform": RHEL,
                        }
                    ]
                }
            }
        }
    )
    answer = reserve(
        job(
            capacity_reservation_id="cr-0eeeeeeeeeeeeeee3",
            launch_template={"id": RHEL_TEMPLATE, "version": "1"},
            provision=True,
        ),
        context,
    )
    assert answer["status"] == "provisioned", answer


# -- a launch's transient errors, and all or nothing (issue 21) ------------------------------


def provision(**fields: Any) -> dict[str, Any]:
    return job(launch_template={"id": TEMPLATE, "version": "1"}, provision=True, **fields)


def fleet_tokens(emu: Any) -> list[str]:
    return [c.params["ClientToken"] for c in emu.calls("CreateFleet")]


@pytest.mark.parametrize(
    "code", ["InvalidLaunchTemplateId.VersionNotFound", "RequestLimitExceeded", "InternalError"]
)
def test_a_fleet_that_answers_a_transient_error_is_asked_again(
    hpc: Any, context: Any, code: str
) -> None:
    """CreateFleet answers 200 with Errors[]; a version made a moment ago that EC2 does not
    show yet, or throttling, is no answer about the launch: it is asked again, under a new
    ClientToken (EC2 answers a token with its first answer), while the hold is kept. The
    broker used to cancel the hold and fail the job."""
    hpc.fail("CreateFleet", code, mode="errors", times=1)
    answer = reserve(provision(request_id=f"job-transient-{code}"), context)
    assert answer["status"] == "provisioned", answer
    assert len(answer["instances"]) == 8
    tokens = fleet_tokens(hpc)
    assert len(tokens) == 2 and len(set(tokens)) == 2
    assert state(answer["reservation"]["id"]) == "cancelled"  # after the launch


def test_a_fleet_that_keeps_failing_transiently_ends_in_error_and_gives_the_hold_back(
    hpc: Any, context: Any, emulated_time: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the emulator's clock: how many fleets fit in the budget is the broker's pauses
    between them, not how long a loaded machine takes over the look-ups before."""
    hpc.fail("CreateFleet", "RequestLimitExceeded", mode="errors", times=1000)
    emulated_time.install(monkeypatch)
    context.remaining_ms = 8_000  # a budget of about 5 s
    answer = reserve(provision(request_id="job-throttled"), context)
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "RequestLimitExceeded"
    assert len(fleet_tokens(hpc)) >= 2
    assert len(set(fleet_tokens(hpc))) == len(fleet_tokens(hpc))
    assert state(answer["reservation"]["id"]) == "cancelled"
    assert "cleanup" not in answer and running("job-throttled") == set()


def test_a_fleet_error_about_the_launch_itself_is_final(hpc: Any, context: Any) -> None:
    hpc.fail("CreateFleet", "InvalidParameterValue", mode="errors", times=1000)
    answer = reserve(provision(request_id="job-invalid"), context)
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "InvalidParameterValue"
    assert len(fleet_tokens(hpc)) == 1
    assert state(answer["reservation"]["id"]) == "cancelled"


def test_a_launch_that_came_back_short_is_terminated_before_the_error(
    hpc: Any, context: Any
) -> None:
    """All or nothing: a launch that answered with part of the nodes (EC2 not honouring the
    minimum) used to be answered ``error`` and left running, billing."""
    hpc.fail("CreateFleet", "InsufficientInstanceCapacity", mode="partial", times=1)
    answer = reserve(provision(request_id="job-short"), context)
    assert answer["status"] == "error", answer
    assert "the 7 nodes it did launch are terminated" in answer["message"], answer
    assert answer["instances"] == [] and "cleanup" not in answer
    assert running("job-short") == set()
    assert state(answer["reservation"]["id"]) == "cancelled"


def test_a_block_is_launched_into_all_or_nothing_with_run_instances(hpc: Any, context: Any) -> None:
    """EC2 documents a Capacity Block fleet as one that "fulfills as much capacity as it can";
    RunInstances MinCount = MaxCount launches all or nothing (as AWS ParallelCluster launches
    into a targeted reservation)."""
    answer = reserve(
        job(
            request_id="job-block",
            instance_types=["p5.48xlarge"],
            instance_count=4,
            capacity_reservation_id=BLOCK_NOW,
            launch_template={"id": TEMPLATE, "version": "1"},
            provision=True,
        ),
        context,
    )
    assert answer["status"] == "provisioned", answer
    assert hpc.calls("CreateFleet") == []
    (call,) = hpc.calls("RunInstances")
    assert (call.params["MinCount"], call.params["MaxCount"]) == (4, 4)
    assert call.params["LaunchTemplate"] == {
        "LaunchTemplateId": TEMPLATE,
        "Version": str(answer["launch_template"]["version"]),
    }
    assert set(answer["instances"]) == running("job-block")
