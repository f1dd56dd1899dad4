"""Scenario files seed the world: every kind of thing, from YAML and from JSON."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from emu_helpers import NOW, error_of

from emulator import scenario as scenarios

pytestmark = pytest.mark.emulator

YAML = "test_full.yaml"
JSON = Path(__file__).parent / "scenarios" / "full.json"


def reserve(ec2, instance_type: str, zone: str, count: int) -> dict:
    """A Linux/UNIX On-Demand Capacity Reservation, as the tests below ask for one."""
    return ec2.create_capacity_reservation(
        InstanceType=instance_type,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zone,
        InstanceCount=count,
    )


@pytest.fixture(params=["yaml", "json"])
def full(request, emu):
    emu.freeze(NOW)
    return emu.load_scenario(YAML if request.param == "yaml" else JSON)


def test_json_and_yaml_describe_the_same_world():
    assert scenarios.read(JSON) == scenarios.read(YAML)
    assert scenarios.read(YAML) == scenarios.read("test_full")  # the .yaml suffix is optional


def test_vpcs_and_subnets_get_fixed_ids_names_and_zones(full, ec2):
    assert full.vpcs == {"main": "vpc-0f00000000000001"}
    assert full.subnets == {
        "main-a": "subnet-0f00000000000001",
        "main-b": "subnet-0f00000000000002",
    }
    vpc = ec2.describe_vpcs(VpcIds=["vpc-0f00000000000001"])["Vpcs"][0]
    assert vpc["CidrBlock"] == "10.1.0.0/16"
    assert {"Key": "Name", "Value": "main"} in vpc["Tags"]
    subnets = {
        s["SubnetId"]: s
        for s in ec2.describe_subnets(
            Filters=[{"Name": "vpc-id", "Values": ["vpc-0f00000000000001"]}]
        )["Subnets"]
    }
    assert set(subnets) == set(full.subnets.values())
    a, b = subnets["subnet-0f00000000000001"], subnets["subnet-0f00000000000002"]
    assert (a["AvailabilityZone"], a["AvailabilityZoneId"]) == ("us-east-1a", "use1-az6")
    # the second subnet was declared by AZ id
    assert (b["AvailabilityZone"], b["AvailabilityZoneId"]) == ("us-east-1b", "use1-az1")
    assert {"Key": "Name", "Value": "main-b"} in b["Tags"]


def test_settings_are_applied(full, emu):
    from emulator.state import world

    assert world.settings.expiry_lag_seconds == 120
    assert world.settings.pending_seconds == 30
    assert world.settings.default_capacity == 5


def test_pools_limit_what_can_be_reserved(full, emu, ec2):
    # us-east-1a g6.xlarge: capacity 6, of which the seeded 4-instance reservation holds 4
    assert emu.pool("us-east-1", "us-east-1a", "g6.xlarge") == {
        "capacity": 6,
        "used": 4,
        "available": 2,
    }
    # a pool declared without a capacity and one nobody declared get default_capacity
    assert emu.pool("us-east-1", "us-east-1b", "g6.xlarge")["capacity"] == 5
    assert emu.pool("us-east-1", "us-east-1c", "m5.large")["capacity"] == 5
    with pytest.raises(ClientError) as exc:
        reserve(ec2, "g6.xlarge", "us-east-1a", 3)
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)


@pytest.mark.parametrize(
    ("instance_type", "zone", "count", "expected"),
    [
        ("g6.xlarge", "us-east-1d", 1, ("Unsupported", 400)),
        ("c5.large", "us-east-1b", 4, ("InstanceLimitExceeded", 400)),
        # P class: 384 vCPUs = two p5.48xlarge; Capacity Blocks do not count against it. Over
        # the vCPU limit: InstanceLimitExceeded (EC2's error table).
        ("p5.48xlarge", "us-east-1a", 3, ("InstanceLimitExceeded", 400)),
    ],
    ids=["type-unsupported-in-zone", "instance-quota", "p-class-vcpu-quota"],
)
def test_a_reservation_the_scenario_does_not_allow_is_refused(
    full, ec2, instance_type, zone, count, expected
):
    """The scenario's unsupported types and quotas refuse a reservation with EC2's error."""
    with pytest.raises(ClientError) as exc:
        reserve(ec2, instance_type, zone, count)
    assert error_of(exc) == expected


def test_images_keep_their_platform_details(full, ec2):
    assert full.images == {"rhel9": "ami-0f00000000000001"}
    [image] = ec2.describe_images(ImageIds=["ami-0f00000000000001"])["Images"]
    assert image["Name"] == "rhel9"
    assert image["PlatformDetails"] == "Red Hat BYOL Linux"
    # EC2 shows the billing pair together (AMI billing information fields)
    assert image["UsageOperation"] == "RunInstances:00g0"


def test_launch_templates_get_fixed_ids(full, ec2):
    assert full.launch_templates == {"gpu-nodes": "lt-0f00000000000001"}
    [version] = ec2.describe_launch_template_versions(LaunchTemplateId="lt-0f00000000000001")[
        "LaunchTemplateVersions"
    ]
    assert version["LaunchTemplateName"] == "gpu-nodes"
    assert version["LaunchTemplateData"] == {
        "ImageId": "ami-0f00000000000001",
        "InstanceType": "g6.xlarge",
    }


def test_existing_odcrs(full, ec2):
    assert full.reservations["ml-open"] == "cr-0f00000000000001"
    # Selected from the answer: "reservation-type" is not among the operation's filters.
    found = {
        r["CapacityReservationId"]: r
        for r in ec2.describe_capacity_reservations()["CapacityReservations"]
        if r["ReservationType"] == "default"
    }
    assert set(found) == {full.reservations["ml-open"], full.reservations["ml-limited"]}
    open_ = found["cr-0f00000000000001"]
    assert open_["State"] == "active"
    assert open_["InstanceMatchCriteria"] == "open"
    assert (open_["TotalInstanceCount"], open_["AvailableInstanceCount"]) == (4, 3)
    assert open_["EndDateType"] == "unlimited"
    assert "EndDate" not in open_
    assert open_["Tags"] == [{"Key": "team", "Value": "ml"}]
    assert open_["AvailabilityZoneId"] == "use1-az6"
    limited = found[full.reservations["ml-limited"]]
    assert limited["InstanceMatchCriteria"] == "targeted"
    assert limited["EndDateType"] == "limited"
    assert limited["EndDate"] == NOW + timedelta(hours=2)
    assert limited["CreateDate"] == NOW - timedelta(hours=3)
    assert (limited["TotalInstanceCount"], limited["AvailableInstanceCount"]) == (2, 2)


def test_capacity_blocks_active_and_scheduled(full, ec2, emu):
    blocks = {
        r["CapacityReservationId"]: r
        for r in ec2.describe_capacity_reservations()["CapacityReservations"]
        if r["ReservationType"] == "capacity-block"
    }
    assert set(blocks) == {full.reservations["block-active"], full.reservations["block-scheduled"]}
    active = blocks["cr-0f000000000000b1"]
    assert active["State"] == "active"
    assert active["StartDate"] == NOW - timedelta(days=1)
    assert active["EndDate"] == NOW - timedelta(days=1) + timedelta(hours=168)
    assert active["CapacityBlockId"].startswith("cb-")
    assert active["InstanceMatchCriteria"] == "targeted"
    # the scenario's tags, plus the size and type EC2 tags every Capacity Block with
    assert {t["Key"]: t["Value"] for t in active["Tags"]} == {
        "team": "research",
        "aws:ec2capacityreservation:incrementalRequestedQuantity": str(
            active["TotalInstanceCount"]
        ),
        "aws:ec2capacityreservation:capacityReservationType": "capacity-block",
    }
    scheduled = blocks[full.reservations["block-scheduled"]]
    assert scheduled["State"] == "scheduled"
    assert scheduled["StartDate"] == datetime(2026, 11, 25, 11, 30, tzinfo=UTC)
    assert scheduled["EndDate"] == datetime(2026, 11, 26, 11, 30, tzinfo=UTC)
    # blocks bring their own capacity: nothing was taken from the On-Demand pool
    assert emu.pool("us-east-1", "us-east-1b", "p5.48xlarge")["used"] == 0


def test_capacity_block_offerings(full, ec2):
    offers = ec2.describe_capacity_block_offerings(
        InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=24
    )["CapacityBlockOfferings"]
    starts = [o["StartDate"] for o in offers]
    # bookable from +1d to +10d, one block a day at 11:30 UTC
    assert starts[0] == datetime(2026, 11, 22, 11, 30, tzinfo=UTC)
    assert starts[-1] == datetime(2026, 11, 30, 11, 30, tzinfo=UTC)
    assert len(offers) == 9
    assert {o["AvailabilityZone"] for o in offers} == {"us-east-1b"}
    assert offers[0]["UpfrontFee"] == "1510.08"  # 31.46 x 2 instances x 24 h
    assert offers[0]["CurrencyCode"] == "USD"
    # at most 4 instances in this supply
    with_five = ec2.describe_capacity_block_offerings(
        InstanceType="p5.48xlarge", InstanceCount=5, CapacityDurationHours=24
    )
    assert with_five["CapacityBlockOfferings"] == []


def test_regions_are_separate(full, emu, client):
    assert emu.pool("us-west-2", "us-west-2a", "g6.xlarge")["capacity"] == 1
    west = client("ec2", "us-west-2")
    assert west.describe_capacity_reservations()["CapacityReservations"] == []
    reserve(west, "g6.xlarge", "us-west-2a", 1)
    with pytest.raises(ClientError) as exc:
        reserve(west, "g6.xlarge", "us-west-2a", 1)
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)


def test_scenario_from_a_dict_and_a_seeded_capacity_block_reservation(emu, ec2):
    emu.freeze(NOW)
    ids = emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "pools": [
                        {
                            "availability_zone": "us-east-1a",
                            "instance_type": "p5.48xlarge",
                            "capacity": 1,
                        }
                    ],
                    "reservations": [
                        {
                            "name": "cb",
                            "instance_type": "p5.48xlarge",
                            "availability_zone": "us-east-1a",
                            "count": 2,
                            "reservation_type": "capacity-block",
                            "end_date": "+1d",
                            "created": "-1h",
                        }
                    ],
                }
            }
        }
    )
    r = ec2.describe_capacity_reservations(CapacityReservationIds=[ids.reservations["cb"]])[
        "CapacityReservations"
    ][0]
    assert r["ReservationType"] == "capacity-block"
    assert r["CapacityBlockId"].startswith("cb-")
    # a Capacity Block does not draw from the On-Demand pool
    assert emu.pool("us-east-1", "us-east-1a", "p5.48xlarge")["used"] == 0


def test_unknown_setting_is_refused(emu):
    with pytest.raises(ValueError, match="unknown scenario setting"):
        emu.load_scenario({"settings": {"no_such_knob": 1}})


def test_a_scenario_must_be_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="a scenario is a mapping"):
        scenarios.read(path)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("+2h", NOW + timedelta(hours=2)),
        ("-30m", NOW - timedelta(minutes=30)),
        ("+1d", NOW + timedelta(days=1)),
        ("+1w", NOW + timedelta(weeks=1)),
        ("+90s", NOW + timedelta(seconds=90)),
        ("+1.5h", NOW + timedelta(minutes=90)),
        ("2026-12-01T00:00:00Z", datetime(2026, 12, 1, tzinfo=UTC)),
        ("2026-12-01T00:00:00", datetime(2026, 12, 1, tzinfo=UTC)),
        (datetime(2026, 12, 1), datetime(2026, 12, 1, tzinfo=UTC)),
    ],
)
def test_times_absolute_or_relative_to_the_clock(value, expected):
    assert scenarios.when(value, NOW) == expected
