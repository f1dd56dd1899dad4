"""RunInstances, TerminateInstances and CreateFleet (instant) take and give capacity."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from emu_helpers import NOW, SUBNET_A, SUBNET_B, SUBNET_C, error_of

pytestmark = pytest.mark.emulator

AMI = "ami-0aaaaaaaaaaaaaaa1"


def target(reservation_id: str) -> dict:
    return {"CapacityReservationTarget": {"CapacityReservationId": reservation_id}}


def running(ec2, ids: list[str]) -> dict[str, dict]:
    found = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    return {i["InstanceId"]: i for r in found for i in r["Instances"]}


def targeted(api, instance_type: str, zone: str, count: int) -> str:
    """The id of a new targeted Capacity Reservation (only launches naming it use it)."""
    made = api.reserve(instance_type, zone, count, InstanceMatchCriteria="targeted")
    return str(made["CapacityReservationId"])


@pytest.fixture
def block(emu):
    """An active 2-instance p5.48xlarge Capacity Block in us-east-1b."""
    b = emu.capacity().new_block(
        instance_type="p5.48xlarge",
        availability_zone="us-east-1b",
        count=2,
        start=NOW - timedelta(hours=1),
        end=NOW + timedelta(days=1),
    )
    emu.capacity().add_existing(b, {})
    return b.id


# -- RunInstances --------------------------------------------------------------------------
def test_run_instances_takes_from_the_pool_and_terminate_gives_back(api, ec2):
    ids = api.run(SUBNET_A, "c5.large", 3)
    assert len(ids) == 3
    instances = running(ec2, ids)
    assert {i["Placement"]["AvailabilityZone"] for i in instances.values()} == {"us-east-1a"}
    assert {i["State"]["Name"] for i in instances.values()} == {"running"}
    assert api.pool("us-east-1a", "c5.large") == {"capacity": 4, "used": 3, "available": 1}
    ec2.terminate_instances(InstanceIds=ids[:2])
    assert api.free("us-east-1a", "c5.large") == 3
    ec2.terminate_instances(InstanceIds=ids[:2])  # terminating again gives nothing back twice
    assert api.free("us-east-1a", "c5.large") == 3
    ec2.terminate_instances(InstanceIds=ids[2:])
    assert api.free("us-east-1a", "c5.large") == 4


def test_run_instances_past_the_pool(api, ec2):
    api.run(SUBNET_A, "c5.large", 3)
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_A, "c5.large", 2)
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)
    assert api.free("us-east-1a", "c5.large") == 1
    assert len(ec2.describe_instances()["Reservations"]) == 1


def test_run_instances_placement_az_without_subnet(api, ec2):
    response = ec2.run_instances(
        ImageId=AMI,
        InstanceType="c5.large",
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": "us-east-1b"},
    )
    assert response["Instances"][0]["Placement"]["AvailabilityZone"] == "us-east-1b"
    assert api.pool("us-east-1b", "c5.large")["used"] == 1


@pytest.mark.parametrize(
    ("low", "high", "launched"),
    [(1, 10, 4), (4, 6, 4), (2, 3, 3)],
)
def test_min_and_max_count_partial_fill(api, low, high, launched):
    ids = api.run(SUBNET_A, "c5.large", MinCount=low, MaxCount=high)
    assert len(ids) == launched
    assert api.free("us-east-1a", "c5.large") == 4 - launched


def test_min_count_that_cannot_be_met_launches_nothing(api, ec2):
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_A, "c5.large", MinCount=5, MaxCount=8)
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)
    assert ec2.describe_instances()["Reservations"] == []
    assert api.free("us-east-1a", "c5.large") == 4


def test_run_instances_unsupported_and_quota(api):
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_C, "p5.48xlarge", 1)
    assert error_of(exc) == ("Unsupported", 400)
    api.run(SUBNET_A, "m5.large", 10)
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_A, "m5.large", 1)
    assert error_of(exc) == ("InstanceLimitExceeded", 400)


def test_quota_counts_instances_and_reservations_together(api):
    api.run(SUBNET_A, "m5.large", 6)
    api.reserve("m5.large", "us-east-1a", 4, InstanceMatchCriteria="targeted")
    with pytest.raises(ClientError) as exc:
        api.reserve("m5.large", "us-east-1a", 1)
    assert error_of(exc) == ("InstanceLimitExceeded", 400)


def test_an_open_reservation_is_used_first(api, ec2):
    rid = api.reserve("c5.large", "us-east-1a", 2)["CapacityReservationId"]
    assert api.free("us-east-1a", "c5.large") == 2
    ids = api.run(SUBNET_A, "c5.large", 3)  # 2 in the reservation, 1 from the pool
    r = api.get(rid)
    assert (r["TotalInstanceCount"], r["AvailableInstanceCount"]) == (2, 0)
    assert r["CapacityAllocations"] == [{"AllocationType": "used", "Count": 2}]
    assert api.pool("us-east-1a", "c5.large") == {"capacity": 4, "used": 3, "available": 1}
    ec2.terminate_instances(InstanceIds=ids)
    assert api.get(rid)["AvailableInstanceCount"] == 2
    assert api.free("us-east-1a", "c5.large") == 2


NONE = {"CapacityReservationSpecification": {"CapacityReservationPreference": "none"}}


@pytest.mark.parametrize(
    ("criteria", "zone", "launch", "count", "free_after"),
    [
        # us-east-1a's pool of 4: the targeted reservation holds 2, the launch takes the rest
        ("targeted", "us-east-1a", {}, 2, 0),
        ("open", "us-east-1b", {}, 1, 3),
        ("open", "us-east-1a", NONE, 1, 1),
    ],
    ids=["targeted-and-untargeted-launch", "open-in-another-zone", "open-and-preference-none"],
)
def test_a_launch_leaves_a_reservation_it_does_not_match_alone(
    api, criteria, zone, launch, count, free_after
):
    """A launch in us-east-1a takes nothing from a reservation it does not match."""
    rid = api.reserve("c5.large", zone, 2, InstanceMatchCriteria=criteria)["CapacityReservationId"]
    api.run(SUBNET_A, "c5.large", count, **launch)
    assert api.get(rid)["AvailableInstanceCount"] == 2
    assert api.free("us-east-1a", "c5.large") == free_after


def test_a_launch_targeting_a_reservation_and_reservation_capacity_exceeded(api, ec2):
    rid = targeted(api, "c5.large", "us-east-1a", 2)
    spec = target(rid)
    [first] = api.run(SUBNET_A, "c5.large", 1, CapacityReservationSpecification=spec)
    assert api.get(rid)["AvailableInstanceCount"] == 1
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_A, "c5.large", 2, CapacityReservationSpecification=spec)
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    # the pool still has room, but a targeted launch never spills over
    assert api.free("us-east-1a", "c5.large") == 2
    api.run(SUBNET_A, "c5.large", 1, CapacityReservationSpecification=spec)
    r = api.get(rid)
    assert (r["TotalInstanceCount"], r["AvailableInstanceCount"]) == (2, 0)
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_A, "c5.large", 1, CapacityReservationSpecification=spec)
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    ec2.terminate_instances(InstanceIds=[first])
    assert api.get(rid)["AvailableInstanceCount"] == 1  # the slot goes back to the reservation
    assert api.free("us-east-1a", "c5.large") == 2


def test_a_targeted_launch_partially_fills_up_to_max_count(api):
    rid = targeted(api, "c5.large", "us-east-1a", 2)
    ids = api.run(
        SUBNET_A, "c5.large", MinCount=1, MaxCount=5, CapacityReservationSpecification=target(rid)
    )
    assert len(ids) == 2
    assert api.get(rid)["AvailableInstanceCount"] == 0


def test_a_targeted_launch_must_match_the_reservation(api):
    """Type, platform, AZ and tenancy must match; EC2 answers a launch that does not as it
    answers one too many (hashicorp/terraform-provider-aws#32458: "ReservationCapacityExceeded:
    The requested reservation does not have sufficient compatible and available capacity").
    The emulator used to answer InvalidParameterCombination and to ignore the platform."""
    rid = api.reserve("c5.large", "us-east-1a", 2)["CapacityReservationId"]
    with pytest.raises(ClientError) as exc:  # another AZ
        api.run(SUBNET_B, "c5.large", 1, CapacityReservationSpecification=target(rid))
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    with pytest.raises(ClientError) as exc:  # another type
        api.run(SUBNET_A, "m5.large", 1, CapacityReservationSpecification=target(rid))
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    with pytest.raises(ClientError) as exc:
        api.run(
            SUBNET_A,
            "c5.large",
            1,
            CapacityReservationSpecification=target("cr-0123456789abcdef0"),
        )
    assert error_of(exc) == ("InvalidCapacityReservationId.NotFound", 400)


def test_a_targeted_launch_must_match_the_platform_and_tenancy(api):
    rid = api.reserve("c5.large", "us-east-1a", 2)["CapacityReservationId"]
    with pytest.raises(ClientError) as exc:  # another platform: a RHEL image
        api.run(
            SUBNET_A,
            "c5.large",
            1,
            ImageId="ami-0bbbbbbbbbbbbbbb2",
            CapacityReservationSpecification=target(rid),
        )
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    with pytest.raises(ClientError) as exc:  # another tenancy
        api.run(
            SUBNET_A,
            "c5.large",
            1,
            Placement={"Tenancy": "dedicated"},
            CapacityReservationSpecification=target(rid),
        )
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    assert api.get(rid)["AvailableInstanceCount"] == 2
    rhel = api.reserve("c5.large", "us-east-1a", 1, InstancePlatform="Red Hat Enterprise Linux")
    api.run(
        SUBNET_A,
        "c5.large",
        1,
        ImageId="ami-0bbbbbbbbbbbbbbb2",
        CapacityReservationSpecification=target(rhel["CapacityReservationId"]),
    )
    assert api.get(rhel["CapacityReservationId"])["AvailableInstanceCount"] == 0


def test_a_cancelled_reservation_refuses_targeted_launches(api, ec2):
    rid = api.reserve("c5.large", "us-east-1a", 2)["CapacityReservationId"]
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_A, "c5.large", 1, CapacityReservationSpecification=target(rid))
    assert error_of(exc) == ("IncorrectState", 400)


@pytest.mark.parametrize("preference", ["open", "none"])
def test_a_target_takes_no_other_preference_than_capacity_reservations_only(api, preference):
    rid = targeted(api, "c5.large", "us-east-1a", 2)
    spec = {"CapacityReservationPreference": preference, **target(rid)}
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_A, "c5.large", 1, CapacityReservationSpecification=spec)
    assert error_of(exc) == ("InvalidParameterCombination", 400)
    assert api.get(rid)["AvailableInstanceCount"] == 2
    only = {"CapacityReservationPreference": "capacity-reservations-only", **target(rid)}
    api.run(SUBNET_A, "c5.large", 1, CapacityReservationSpecification=only)
    assert api.get(rid)["AvailableInstanceCount"] == 1


def test_capacity_reservations_only_preference(api):
    spec = {"CapacityReservationPreference": "capacity-reservations-only"}
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_A, "c5.large", 1, CapacityReservationSpecification=spec)
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    rid = api.reserve("c5.large", "us-east-1a", 1)["CapacityReservationId"]
    api.run(SUBNET_A, "c5.large", 1, CapacityReservationSpecification=spec)
    assert api.get(rid)["AvailableInstanceCount"] == 0


def test_a_launch_template_can_target_a_reservation(api, ec2):
    rid = targeted(api, "c5.large", "us-east-1a", 2)
    template = ec2.create_launch_template(
        LaunchTemplateName="held",
        LaunchTemplateData={
            "ImageId": AMI,
            "InstanceType": "c5.large",
            "CapacityReservationSpecification": target(rid),
        },
    )["LaunchTemplate"]
    ids = ec2.run_instances(
        MinCount=2,
        MaxCount=2,
        SubnetId=SUBNET_A,
        LaunchTemplate={"LaunchTemplateId": template["LaunchTemplateId"], "Version": "$Latest"},
    )["Instances"]
    assert len(ids) == 2
    assert api.get(rid)["AvailableInstanceCount"] == 0
    assert api.free("us-east-1a", "c5.large") == 2
    with pytest.raises(ClientError) as exc:
        ec2.run_instances(
            MinCount=1,
            MaxCount=1,
            SubnetId=SUBNET_A,
            LaunchTemplate={"LaunchTemplateName": "held"},
        )
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)


def test_platform_of_the_image_must_match_an_open_reservation(api):
    rid = api.reserve("c5.large", "us-east-1a", 2)["CapacityReservationId"]  # Linux/UNIX
    api.run(SUBNET_A, "c5.large", 1, ImageId="ami-0bbbbbbbbbbbbbbb2")  # RHEL: not matched
    assert api.get(rid)["AvailableInstanceCount"] == 2
    rhel = api.reserve("c5.large", "us-east-1a", 1, InstancePlatform="Red Hat Enterprise Linux")
    api.run(SUBNET_A, "c5.large", 1, ImageId="ami-0bbbbbbbbbbbbbbb2")
    assert api.get(rhel["CapacityReservationId"])["AvailableInstanceCount"] == 0


# -- Capacity Blocks -----------------------------------------------------------------------
def test_launch_into_an_active_capacity_block(api, ec2, block):
    ids = api.run_in_block(block, 2)
    assert len(ids) == 2
    r = api.get(block)
    assert (r["TotalInstanceCount"], r["AvailableInstanceCount"]) == (2, 0)
    with pytest.raises(ClientError) as exc:
        api.run_in_block(block, 1)
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    ec2.terminate_instances(InstanceIds=ids[:1])
    # "it takes several minutes to clean up your instance before you can launch another
    # instance to replace it" (Launch instances using Capacity Blocks): the slot is not free
    # at once (the emulator used to free it at once).
    assert api.get(block)["AvailableInstanceCount"] == 0
    with pytest.raises(ClientError) as exc:
        api.run_in_block(block, 1)
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    api.emu.advance(180)  # block_cleanup_seconds
    assert api.get(block)["AvailableInstanceCount"] == 1
    assert api.pool("us-east-1b", "p5.48xlarge")["used"] == 0
    api.run_in_block(block, 1)


def test_the_block_cleanup_is_a_knob(api, ec2, block):
    api.emu.configure(block_cleanup_seconds=0)
    ids = api.run_in_block(block, 2)
    ec2.terminate_instances(InstanceIds=ids)
    assert api.get(block)["AvailableInstanceCount"] == 2


def test_a_capacity_block_needs_market_type_capacity_block(api, block):
    with pytest.raises(ClientError) as exc:
        api.run(SUBNET_B, "p5.48xlarge", 1, CapacityReservationSpecification=target(block))
    assert error_of(exc) == ("InvalidParameterCombination", 400)
    with pytest.raises(ClientError) as exc:  # capacity-block without a block to go to
        api.run(SUBNET_B, "p5.48xlarge", 1, InstanceMarketOptions={"MarketType": "capacity-block"})
    assert error_of(exc) == ("InvalidParameterCombination", 400)
    rid = api.reserve("c5.large", "us-east-1b", 1)["CapacityReservationId"]
    with pytest.raises(ClientError) as exc:  # an ODCR is not a Capacity Block
        api.run(
            SUBNET_B,
            "c5.large",
            1,
            InstanceMarketOptions={"MarketType": "capacity-block"},
            CapacityReservationSpecification=target(rid),
        )
    assert error_of(exc) == ("InvalidParameterCombination", 400)


def test_a_scheduled_capacity_block_refuses_launches(api, emu):
    start = NOW + timedelta(hours=3)
    b = emu.capacity().new_block(
        instance_type="p5.48xlarge",
        availability_zone="us-east-1b",
        count=2,
        start=start,
        end=start + timedelta(days=1),
    )
    emu.capacity().add_existing(b, {})
    with pytest.raises(ClientError) as exc:
        api.run_in_block(b.id)
    # AWS: a launch into a block that has not started gets an Insufficient Capacity error
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)
    # EC2 shows nothing available before the block starts ("View Capacity Blocks")
    assert api.get(b.id)["AvailableInstanceCount"] == 0


# -- CreateFleet (instant) -----------------------------------------------------------------
def fleet(
    ec2,
    overrides: list[dict],
    total: int,
    template: str = "hpc-nodes",
    version: str = "$Latest",
    **on_demand,
) -> dict:
    request: dict = {
        "Type": "instant",
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": template,
                    "Version": version,
                },
                "Overrides": overrides,
            }
        ],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": total,
            "DefaultTargetCapacityType": "on-demand",
        },
    }
    if on_demand:
        request["OnDemandOptions"] = on_demand
    return ec2.create_fleet(**request)


def launched(response: dict) -> list[str]:
    return [i for entry in response["Instances"] for i in entry["InstanceIds"]]


def test_fleet_launches_from_the_pool(api, ec2, world):
    response = fleet(ec2, [{"SubnetId": SUBNET_A}], 3)
    assert response["FleetId"].startswith("fleet-")
    assert response["Errors"] == []
    [entry] = response["Instances"]
    assert len(entry["InstanceIds"]) == 3
    assert entry["InstanceType"] == "c5.large"
    assert entry["Lifecycle"] == "on-demand"
    spec = entry["LaunchTemplateAndOverrides"]
    assert (
        spec["LaunchTemplateSpecification"]["LaunchTemplateId"]
        == (world.launch_templates["hpc-nodes"])
    )
    assert spec["Overrides"]["SubnetId"] == SUBNET_A
    assert spec["Overrides"]["AvailabilityZone"] == "us-east-1a"
    assert api.free("us-east-1a", "c5.large") == 1
    instances = running(ec2, entry["InstanceIds"])
    assert {i["SubnetId"] for i in instances.values()} == {SUBNET_A}
    ec2.terminate_instances(InstanceIds=entry["InstanceIds"])
    assert api.free("us-east-1a", "c5.large") == 4


def test_describe_fleets_shows_an_instant_fleet_s_instances(api, ec2, world):
    # FleetData.Instances: "Information about the instances that were launched by the fleet.
    # Valid only when Type is set to instant".
    response = fleet(ec2, [{"SubnetId": SUBNET_A}], 2)
    [described] = ec2.describe_fleets(FleetIds=[response["FleetId"]])["Fleets"]
    assert described["Type"] == "instant"
    # As CreateFleet answered: one item per launch, with what launched it (moto listed one
    # per instance, without LaunchTemplateAndOverrides).
    assert described["Instances"] == response["Instances"]
    assert launched(described) and launched(described) == launched(response)
    assert described["Errors"] == response["Errors"]
    empty = fleet(ec2, [{"SubnetId": SUBNET_A, "InstanceType": "g6.xlarge"}], 2)
    [none] = ec2.describe_fleets(FleetIds=[empty["FleetId"]])["Fleets"]
    assert none.get("Instances", []) == []
    assert [e["ErrorCode"] for e in none["Errors"]] == [e["ErrorCode"] for e in empty["Errors"]]


def test_fleet_reports_insufficient_capacity_when_the_pool_is_empty(api, ec2):
    response = fleet(ec2, [{"SubnetId": SUBNET_A, "InstanceType": "g6.xlarge"}], 2)
    assert response["Instances"] == []
    [error] = response["Errors"]
    assert error["ErrorCode"] == "InsufficientInstanceCapacity"
    assert error["Lifecycle"] == "on-demand"
    assert error["LaunchTemplateAndOverrides"]["Overrides"]["InstanceType"] == "g6.xlarge"


def test_fleet_fills_what_it_can_across_overrides(api, ec2):
    response = fleet(
        ec2,
        [{"SubnetId": SUBNET_A, "Priority": 0}, {"SubnetId": SUBNET_B, "Priority": 1}],
        6,
        AllocationStrategy="prioritized",
    )
    by_subnet = {
        e["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"]: len(e["InstanceIds"])
        for e in response["Instances"]
    }
    assert by_subnet == {SUBNET_A: 4, SUBNET_B: 2}
    # the first override could not take all 6: EC2 says so for the part it could not fill
    assert [e["ErrorCode"] for e in response["Errors"]] == ["InsufficientInstanceCapacity"]
    assert api.free("us-east-1a", "c5.large") == 0
    assert api.free("us-east-1b", "c5.large") == 6


def test_fleet_partial_fill_without_a_minimum(api, ec2):
    response = fleet(ec2, [{"SubnetId": SUBNET_A}], 6)
    assert len(launched(response)) == 4
    assert [e["ErrorCode"] for e in response["Errors"]] == ["InsufficientInstanceCapacity"]


def test_fleet_min_target_capacity_single_az_all_or_nothing(api, ec2):
    response = fleet(
        ec2,
        [{"SubnetId": SUBNET_A}, {"SubnetId": SUBNET_B}],
        6,
        SingleAvailabilityZone=True,
        MinTargetCapacity=6,
    )
    # us-east-1a holds only 4: the whole fleet goes to us-east-1b
    assert len(launched(response)) == 6
    assert {
        e["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"] for e in response["Instances"]
    } == {SUBNET_B}
    assert api.free("us-east-1a", "c5.large") == 4
    assert api.free("us-east-1b", "c5.large") == 2


def test_fleet_min_target_capacity_not_met_launches_nothing(api, ec2, emu):
    emu.set_pool("us-east-1", "us-east-1b", "c5.large", 3)
    response = fleet(
        ec2,
        [{"SubnetId": SUBNET_A}, {"SubnetId": SUBNET_B}],
        5,
        SingleAvailabilityZone=True,
        MinTargetCapacity=5,
    )
    assert response["Instances"] == []
    assert response["Errors"]
    assert {e["ErrorCode"] for e in response["Errors"]} == {"InsufficientInstanceCapacity"}
    assert ec2.describe_instances()["Reservations"] == []
    assert api.free("us-east-1a", "c5.large") == 4
    assert api.free("us-east-1b", "c5.large") == 3


def test_fleet_single_instance_type(api, ec2):
    response = fleet(
        ec2,
        [
            {"SubnetId": SUBNET_A, "InstanceType": "c5.large"},
            {"SubnetId": SUBNET_A, "InstanceType": "m5.large"},
        ],
        6,
        SingleInstanceType=True,
        MinTargetCapacity=6,
    )
    assert [e["InstanceType"] for e in response["Instances"]] == ["m5.large"]
    assert len(launched(response)) == 6
    assert api.free("us-east-1a", "c5.large") == 4


def test_fleet_two_overrides_on_one_pool_do_not_double_count(api, ec2):
    # two subnets in one AZ share the AZ's pool of 4
    sibling = ec2.create_subnet(
        VpcId="vpc-0c0ffee000000001", CidrBlock="10.0.9.0/24", AvailabilityZone="us-east-1a"
    )["Subnet"]["SubnetId"]
    response = fleet(ec2, [{"SubnetId": SUBNET_A}, {"SubnetId": sibling}], 6)
    assert len(launched(response)) == 4
    assert api.free("us-east-1a", "c5.large") == 0


def test_fleet_min_target_capacity_rules(api, ec2):
    with pytest.raises(ClientError) as exc:
        fleet(ec2, [{"SubnetId": SUBNET_A}], 2, MinTargetCapacity=2)
    assert error_of(exc) == ("InvalidParameterCombination", 400)
    with pytest.raises(ClientError) as exc:
        fleet(ec2, [{"SubnetId": SUBNET_A}], 2, MinTargetCapacity=3, SingleAvailabilityZone=True)
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_fleet_from_a_template_targeting_a_reservation(api, ec2):
    rid = targeted(api, "c5.large", "us-east-1b", 3)
    targeting_template(ec2, "held", rid)
    response = held_fleet(ec2, 4)
    assert response["Instances"] == []  # only 3 in the reservation: nothing
    assert api.get(rid)["AvailableInstanceCount"] == 3
    response = held_fleet(ec2, 3)
    assert len(launched(response)) == 3
    r = api.get(rid)
    assert (r["TotalInstanceCount"], r["AvailableInstanceCount"]) == (3, 0)
    assert api.free("us-east-1b", "c5.large") == 5  # the pool gave only the reservation's 3
    response = fleet(ec2, [{"SubnetId": SUBNET_B}], 1, template="held")
    assert [e["ErrorCode"] for e in response["Errors"]] == ["ReservationCapacityExceeded"]
    assert launched(response) == []


def block_template(ec2, block_id: str) -> None:
    """The launch template "gpu-block": p5.48xlarge, market type capacity-block, into the block."""
    ec2.create_launch_template(
        LaunchTemplateName="gpu-block",
        LaunchTemplateData={
            "ImageId": AMI,
            "InstanceType": "p5.48xlarge",
            "InstanceMarketOptions": {"MarketType": "capacity-block"},
            "CapacityReservationSpecification": target(block_id),
        },
    )


def test_fleet_into_a_capacity_block(api, ec2, block):
    block_template(ec2, block)
    response = fleet(
        ec2,
        [{"SubnetId": SUBNET_B}],
        2,
        template="gpu-block",
        SingleAvailabilityZone=True,
        MinTargetCapacity=2,
    )
    ids = launched(response)
    assert len(ids) == 2
    assert api.get(block)["AvailableInstanceCount"] == 0
    ec2.terminate_instances(InstanceIds=ids)
    api.emu.advance(180)  # EC2 cleans the instances up (block_cleanup_seconds)
    assert api.get(block)["AvailableInstanceCount"] == 2


@pytest.mark.parametrize(
    ("capacity", "options"),
    [
        ({"OnDemandTargetCapacity": 2}, {}),
        ({"SpotTargetCapacity": 0}, {}),
        ({}, {"CapacityReservationOptions": {"UsageStrategy": "use-capacity-reservations-first"}}),
    ],
)
def test_a_capacity_block_fleet_refuses_on_demand_settings(api, ec2, block, capacity, options):
    block_template(ec2, block)
    with pytest.raises(ClientError) as exc:
        ec2.create_fleet(
            Type="instant",
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateName": "gpu-block",
                        "Version": "$Latest",
                    },
                    "Overrides": [{"SubnetId": SUBNET_B}],
                }
            ],
            TargetCapacitySpecification={
                "TotalTargetCapacity": 2,
                "DefaultTargetCapacityType": "capacity-block",
                **capacity,
            },
            OnDemandOptions={"SingleAvailabilityZone": True, "MinTargetCapacity": 2, **options},
        )
    assert error_of(exc) == ("InvalidParameterCombination", 400)
    assert api.get(block)["AvailableInstanceCount"] == 2


def test_fleet_tags_instances_and_can_be_described(api, ec2):
    response = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "hpc-nodes", "Version": "1"},
                "Overrides": [{"SubnetId": SUBNET_A}],
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "on-demand",
        },
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "job", "Value": "42"}]}],
    )
    [instance_id] = launched(response)
    [instance] = running(ec2, [instance_id]).values()
    assert {"Key": "job", "Value": "42"} in instance["Tags"]
    fleets = ec2.describe_fleets(FleetIds=[response["FleetId"]])["Fleets"]
    assert [f["Type"] for f in fleets] == ["instant"]


def test_spot_instant_fleets_are_not_emulated(api, ec2):
    with pytest.raises(ClientError) as exc:
        ec2.create_fleet(
            Type="instant",
            LaunchTemplateConfigs=[
                {"LaunchTemplateSpecification": {"LaunchTemplateName": "hpc-nodes", "Version": "1"}}
            ],
            TargetCapacitySpecification={
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": "spot",
            },
        )
    assert error_of(exc) == ("Unsupported", 400)


# -- Capacity Reservations and the fleet's usage strategy -------------------------------------
def targeting_template(ec2, name: str, reservation_id: str, **data) -> None:
    ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={
            "ImageId": AMI,
            "InstanceType": "c5.large",
            "CapacityReservationSpecification": {
                "CapacityReservationPreference": "capacity-reservations-only",
                **target(reservation_id),
            },
            **data,
        },
    )


FIRST = {"UsageStrategy": "use-capacity-reservations-first"}


def held_fleet(ec2, count: int, **options) -> dict:
    """All or nothing: ``count`` instances from the template "held", one zone and one type."""
    return fleet(
        ec2,
        [{"SubnetId": SUBNET_B}],
        count,
        template="held",
        SingleAvailabilityZone=True,
        SingleInstanceType=True,
        MinTargetCapacity=count,
        **options,
    )


@pytest.mark.parametrize(
    ("knobs", "options", "expected_launched", "expected_errors"),
    [
        ({}, {"CapacityReservationOptions": FIRST}, 0, ["InvalidParameterCombination"]),
        ({}, {}, 3, []),
        (
            {"fleet_skips_reservation_targets": False},
            {"CapacityReservationOptions": FIRST},
            3,
            [],
        ),
    ],
    ids=["reservations-first-skips-it", "without-the-strategy", "rule-off-by-the-knob"],
)
def test_a_template_that_targets_a_reservation_under_the_reservations_first_strategy(
    api, ec2, emu, knobs, options, expected_launched, expected_errors
):
    """A fleet under reservations-first skips a template targeting a reservation; else uses it."""
    # EC2 User Guide ("Use Capacity Reservations ... in EC2 Fleet"): with the strategy, the
    # template's reservation setting is "Open" or "Target by group"; Karpenter measured that
    # CreateFleet does not use templates targeting a reservation under it.
    emu.configure(**knobs)
    rid = targeted(api, "c5.large", "us-east-1b", 3)
    targeting_template(ec2, "held", rid)
    response = held_fleet(ec2, 3, **options)
    assert len(launched(response)) == expected_launched
    assert [e["ErrorCode"] for e in response["Errors"]] == expected_errors
    for error in response["Errors"]:
        assert error["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"] == SUBNET_B
    assert api.get(rid)["AvailableInstanceCount"] == 3 - expected_launched
    described = ec2.describe_instances()["Reservations"]
    assert sum(len(r["Instances"]) for r in described) == expected_launched


def test_reservations_first_with_an_open_template_uses_open_reservations_first(api, ec2):
    rid = api.reserve("c5.large", "us-east-1a", 2)["CapacityReservationId"]  # open
    response = fleet(ec2, [{"SubnetId": SUBNET_A}], 3, CapacityReservationOptions=FIRST)
    assert len(launched(response)) == 3
    assert api.get(rid)["AvailableInstanceCount"] == 0
    assert api.pool("us-east-1a", "c5.large")["used"] == 3  # 2 held + 1 from the pool


def test_a_spot_market_type_cannot_use_an_on_demand_reservation(api, ec2):
    rid = targeted(api, "c5.large", "us-east-1b", 2)
    targeting_template(ec2, "spot-held", rid, InstanceMarketOptions={"MarketType": "spot"})
    with pytest.raises(ClientError) as exc:
        ec2.run_instances(
            MinCount=1,
            MaxCount=1,
            SubnetId=SUBNET_B,
            LaunchTemplate={"LaunchTemplateName": "spot-held", "Version": "1"},
        )
    assert error_of(exc) == ("InvalidParameterCombination", 400)
    assert api.get(rid)["AvailableInstanceCount"] == 2


def test_a_fleet_client_token_launches_once_and_refuses_other_parameters(api, ec2):
    """EC2 "Ensuring idempotency": CreateFleet takes a client token; the same token with other
    parameters is IdempotentParameterMismatch."""

    def create(total: int) -> dict:
        return ec2.create_fleet(
            ClientToken="job-42-fleet",
            Type="instant",
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateName": "hpc-nodes",
                        "Version": "1",
                    },
                    "Overrides": [{"SubnetId": SUBNET_A}],
                }
            ],
            TargetCapacitySpecification={
                "TotalTargetCapacity": total,
                "DefaultTargetCapacityType": "on-demand",
            },
        )

    first = create(2)
    again = create(2)
    assert again["FleetId"] == first["FleetId"]
    assert launched(again) == launched(first)
    assert api.pool("us-east-1a", "c5.large")["used"] == 2
    with pytest.raises(ClientError) as exc:
        create(3)
    assert error_of(exc) == ("IdempotentParameterMismatch", 400)
    assert api.pool("us-east-1a", "c5.large")["used"] == 2


# -- LaunchTime ----------------------------------------------------------------------------
def test_launch_time_is_the_emulators_clock(api, ec2, emu):
    """DescribeInstances' LaunchTime, "The time that the instance was launched": the clock the
    rest of the emulator runs on (a test that moves it sees launches at its time, not the
    machine's), for RunInstances and an instant fleet alike."""
    emu.advance(7 * 24 * 3600)
    (run,) = api.run(SUBNET_A, "c5.large", 1)
    emu.advance(60)
    launched = fleet(
        ec2,
        [{"InstanceType": "c5.large", "SubnetId": SUBNET_A}],
        1,
        SingleInstanceType=True,
        MinTargetCapacity=1,
    )
    (made,) = [i for item in launched["Instances"] for i in item["InstanceIds"]]
    times = {i: d["LaunchTime"] for i, d in running(ec2, [run, made]).items()}
    assert times == {run: NOW + timedelta(days=7), made: NOW + timedelta(days=7, seconds=60)}
