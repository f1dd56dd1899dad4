"""Discovery: DescribeSpotPriceHistory, DescribeInstanceTypeOfferings, DescribeInstanceTypes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from emu_helpers import NOW, error_of

pytestmark = pytest.mark.emulator


@pytest.fixture
def market(emu, world):
    emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "spot_prices": [
                        {
                            "instance_type": "g6.xlarge",
                            "availability_zone": "us-east-1a",
                            "price": "0.3012",
                            "at": "-2h",
                            "history": [
                                {"at": "-1d", "price": "0.35"},
                                {"at": "-3d", "price": "0.40"},
                            ],
                        },
                        {
                            "instance_type": "g6.xlarge",
                            "availability_zone": "us-east-1b",
                            "price": "0.2900",
                            "at": "-30m",
                        },
                        {
                            "instance_type": "c5.large",
                            "availability_zone": "us-east-1a",
                            "price": "0.0350",
                            "product_description": "Windows",
                        },
                    ]
                }
            }
        }
    )


def history(ec2, **kwargs) -> list[tuple]:
    found = ec2.describe_spot_price_history(**kwargs)["SpotPriceHistory"]
    return [
        (p["InstanceType"], p["AvailabilityZone"], p["SpotPrice"], NOW - p["Timestamp"])
        for p in found
    ]


# -- DescribeSpotPriceHistory --------------------------------------------------------------
def test_spot_history_newest_first(market, ec2):
    assert history(ec2, InstanceTypes=["g6.xlarge"]) == [
        ("g6.xlarge", "us-east-1b", "0.2900", timedelta(minutes=30)),
        ("g6.xlarge", "us-east-1a", "0.3012", timedelta(hours=2)),
        ("g6.xlarge", "us-east-1a", "0.35", timedelta(days=1)),
        ("g6.xlarge", "us-east-1a", "0.40", timedelta(days=3)),
    ]
    [point] = ec2.describe_spot_price_history(InstanceTypes=["c5.large"])["SpotPriceHistory"]
    assert point["ProductDescription"] == "Windows"


def test_spot_history_window_includes_the_price_in_effect_at_its_start(market, ec2):
    found = history(ec2, InstanceTypes=["g6.xlarge"], StartTime=NOW - timedelta(hours=1))
    # the 1a price set 2 h ago is still the price at the window's start
    assert found == [
        ("g6.xlarge", "us-east-1b", "0.2900", timedelta(minutes=30)),
        ("g6.xlarge", "us-east-1a", "0.3012", timedelta(hours=2)),
    ]
    found = history(
        ec2,
        InstanceTypes=["g6.xlarge"],
        AvailabilityZone="us-east-1a",
        StartTime=NOW - timedelta(days=2),
        EndTime=NOW - timedelta(hours=3),
    )
    assert [p[2] for p in found] == ["0.35", "0.40"]


def test_spot_history_filters_and_products(market, ec2):
    assert {
        p[1] for p in history(ec2, Filters=[{"Name": "availability-zone", "Values": ["*b"]}])
    } == {"us-east-1b"}
    assert [p[0] for p in history(ec2, ProductDescriptions=["Windows"])] == ["c5.large"]
    assert history(ec2, Filters=[{"Name": "instance-type", "Values": ["p5.*"]}]) == []
    with pytest.raises(ClientError) as exc:
        ec2.describe_spot_price_history(Filters=[{"Name": "colour", "Values": ["x"]}])
    assert error_of(exc) == ("InvalidParameterValue", 400)
    with pytest.raises(ClientError) as exc:
        ec2.describe_spot_price_history(StartTime=NOW, EndTime=NOW - timedelta(hours=1))
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_spot_history_pages(market, ec2):
    paginator = ec2.get_paginator("describe_spot_price_history")
    pages = list(paginator.paginate(PaginationConfig={"PageSize": 2}))
    assert [len(p["SpotPriceHistory"]) for p in pages] == [2, 2, 1]
    assert [x for p in pages for x in p["SpotPriceHistory"]] == (
        ec2.describe_spot_price_history()["SpotPriceHistory"]
    )


def test_spot_history_by_zone_id(market, ec2):
    """botocore's model: SpotPrice has an AvailabilityZoneId, and availability-zone-id is a
    filter (the emulator left the field out and refused the filter)."""
    found = ec2.describe_spot_price_history(
        Filters=[{"Name": "availability-zone-id", "Values": ["use1-az1"]}]
    )["SpotPriceHistory"]
    assert {(p["AvailabilityZone"], p["AvailabilityZoneId"]) for p in found} == {
        ("us-east-1b", "use1-az1")
    }
    everything = ec2.describe_spot_price_history()["SpotPriceHistory"]
    zone_ids = {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1"}
    assert all(p["AvailabilityZoneId"] == zone_ids[p["AvailabilityZone"]] for p in everything)


# -- DescribeInstanceTypeOfferings ---------------------------------------------------------
def offered(ec2, location_type: str = "availability-zone", **filters: list[str]) -> set:
    paginator = ec2.get_paginator("describe_instance_type_offerings")
    spec = [{"Name": k.replace("_", "-"), "Values": v} for k, v in filters.items()]
    pages = paginator.paginate(LocationType=location_type, Filters=spec)
    return {(o["InstanceType"], o["Location"]) for p in pages for o in p["InstanceTypeOfferings"]}


def test_offerings_follow_the_scenario(world, ec2):
    p5 = offered(ec2, instance_type=["p5.48xlarge"])
    assert ("p5.48xlarge", "us-east-1c") not in p5  # the scenario says it is not offered
    # every pool the scenario declares is offered
    assert {("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")} <= offered(
        ec2, instance_type=["c5.large"]
    )
    assert ("g6.xlarge", "us-east-1a") in offered(ec2, instance_type=["g6.*"])


def test_offerings_read_the_reservations_under_the_worlds_lock(emu, world, ec2):
    """A listing runs beside creates and cancels in a served emulator: it must read the world's
    reservations holding the world's lock (without it, one listing answered an HTTP 500,
    "dictionary changed size during iteration")."""
    from emulator.state import world as state

    capacity = emu.capacity("us-east-1")
    held: list[bool] = []

    class Watched(dict):  # type: ignore[type-arg]
        def values(self):  # type: ignore[no-untyped-def]
            held.append(state.lock._is_owned())  # (RLock: owned by this thread)
            return super().values()

    capacity.reservations = Watched(capacity.reservations)
    assert ("c5.large", "us-east-1a") in offered(ec2, instance_type=["c5.large"])
    assert held and all(held)


def test_offering_location_types_and_filters(world, ec2):
    by_id = offered(ec2, "availability-zone-id", instance_type=["c5.large"])
    assert ("c5.large", "use1-az6") in by_id
    assert offered(ec2, "region", instance_type=["c5.large"]) == {("c5.large", "us-east-1")}
    assert offered(ec2, instance_type=["c5.large"], location=["us-east-1b"]) == {
        ("c5.large", "us-east-1b")
    }
    zones = {z for _, z in offered(ec2, instance_type=["c5.large"], location=["us-east-1?"])}
    assert {"us-east-1a", "us-east-1b"} <= zones
    assert all(len(z) == len("us-east-1a") for z in zones)
    # an Outpost is a location type EC2 knows (botocore's enum); the emulator has none
    outposts = ec2.describe_instance_type_offerings(LocationType="outpost")
    assert outposts["InstanceTypeOfferings"] == []
    with pytest.raises(ClientError) as exc:
        ec2.describe_instance_type_offerings(LocationType="planet")
    assert error_of(exc) == ("InvalidParameterValue", 400)
    with pytest.raises(ClientError) as exc:
        ec2.describe_instance_type_offerings(Filters=[{"Name": "colour", "Values": ["x"]}])
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_offerings_page(world, ec2):
    first = ec2.describe_instance_type_offerings(LocationType="availability-zone", MaxResults=5)
    assert len(first["InstanceTypeOfferings"]) == 5
    assert first["NextToken"]


# -- DescribeInstanceTypes -----------------------------------------------------------------
def test_instance_types(world, ec2):
    [g6] = ec2.describe_instance_types(InstanceTypes=["g6.xlarge"])["InstanceTypes"]
    assert g6["VCpuInfo"]["DefaultVCpus"] == 4
    page = ec2.describe_instance_types()
    assert len(page["InstanceTypes"]) == 100  # EC2 serves at most 100 a page
    assert page["NextToken"]
    with pytest.raises(ClientError) as exc:
        ec2.describe_instance_types(MaxResults=101)
    assert error_of(exc) == ("InvalidParameterValue", 400)


# -- CreateLaunchTemplateVersion: ClientToken ----------------------------------------------
def test_launch_template_version_client_token(world, ec2):
    kwargs = {
        "LaunchTemplateName": "hpc-nodes",
        "SourceVersion": "1",
        "LaunchTemplateData": {"InstanceType": "c5.xlarge"},
        "ClientToken": "job-1-attempt-0",
    }
    first = ec2.create_launch_template_version(**kwargs)["LaunchTemplateVersion"]
    again = ec2.create_launch_template_version(**kwargs)["LaunchTemplateVersion"]
    assert first["VersionNumber"] == again["VersionNumber"] == 2
    assert again["LaunchTemplateData"] == first["LaunchTemplateData"]
    with pytest.raises(ClientError) as exc:
        ec2.create_launch_template_version(
            **{**kwargs, "LaunchTemplateData": {"InstanceType": "m5.large"}}
        )
    assert error_of(exc) == ("IdempotentParameterMismatch", 400)
    versions = ec2.describe_launch_template_versions(LaunchTemplateName="hpc-nodes")
    assert len(versions["LaunchTemplateVersions"]) == 2
