"""The emulator's discovery actions (emulator/responses/discovery.py, emulator/models/spot.py),
through boto3 as the broker calls them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest

pytestmark = pytest.mark.emulator

WORLD: dict[str, Any] = {
    "regions": {
        "us-east-1": {
            "pools": [
                {
                    "availability_zone": "us-east-1a",
                    "instance_type": "p6-b300.48xlarge",
                    "capacity": 2,
                },
            ],
            "unsupported": [
                {"availability_zone": "us-east-1c", "instance_type": "p5.48xlarge"},
                {"availability_zone": "us-east-1e", "instance_type": "p5.48xlarge"},
            ],
            "spot_prices": [
                {
                    "instance_type": "g6.xlarge",
                    "availability_zone": "us-east-1a",
                    "price": "0.3012",
                    "at": "-2h",
                    "history": [{"at": "-1d", "price": "0.3521"}, {"at": "-3d", "price": "0.41"}],
                },
                {
                    "instance_type": "g6.xlarge",
                    "availability_zone": "us-east-1b",
                    "price": "0.2875",
                    "at": "-30m",
                },
                {
                    "instance_type": "g6.xlarge",
                    "availability_zone": "us-east-1b",
                    "price": "0.9",
                    "at": "-30m",
                    "product_description": "Windows",
                },
                {
                    "instance_type": "m7i.large",
                    "availability_zone": "us-east-1a",
                    "price": "0.0412",
                    "at": "-4h",
                },
            ],
        }
    }
}


@pytest.fixture
def ec2(emu: Any) -> Any:
    emu.load_scenario(WORLD)
    return boto3.client("ec2", region_name="us-east-1")


def test_current_price_is_the_last_change_before_the_start(emu: Any, ec2: Any) -> None:
    now = emu.now()
    answer = ec2.describe_spot_price_history(
        InstanceTypes=["g6.xlarge"],
        ProductDescriptions=["Linux/UNIX"],
        StartTime=now,
        EndTime=now,
    )["SpotPriceHistory"]
    assert sorted((p["AvailabilityZone"], p["SpotPrice"]) for p in answer) == [
        ("us-east-1a", "0.3012"),
        ("us-east-1b", "0.2875"),
    ]


def test_a_window_returns_its_changes_and_the_price_in_effect_at_its_start(
    emu: Any, ec2: Any
) -> None:
    now = emu.now()
    answer = ec2.describe_spot_price_history(
        InstanceTypes=["g6.xlarge"],
        AvailabilityZone="us-east-1a",
        StartTime=now - timedelta(hours=36),
        EndTime=now,
    )["SpotPriceHistory"]
    # newest first: the -2h change, the -1d change, and -3d (in effect 36 h ago)
    assert [p["SpotPrice"] for p in answer] == ["0.3012", "0.3521", "0.41"]
    everything = ec2.describe_spot_price_history(InstanceTypes=["g6.xlarge"])
    assert len(everything["SpotPriceHistory"]) == 5  # both products, whole history


def test_spot_filters_and_products(ec2: Any) -> None:
    windows = ec2.describe_spot_price_history(ProductDescriptions=["Windows"])
    assert [p["SpotPrice"] for p in windows["SpotPriceHistory"]] == ["0.9"]
    cheap = ec2.describe_spot_price_history(
        Filters=[{"Name": "instance-type", "Values": ["m7i.*"]}]
    )
    assert [p["InstanceType"] for p in cheap["SpotPriceHistory"]] == ["m7i.large"]
    with pytest.raises(ec2.exceptions.ClientError, match="InvalidParameterValue"):
        ec2.describe_spot_price_history(Filters=[{"Name": "colour", "Values": ["red"]}])


def test_spot_history_pages(ec2: Any) -> None:
    first = ec2.describe_spot_price_history(MaxResults=2)
    assert len(first["SpotPriceHistory"]) == 2
    assert first["NextToken"]
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        PaginationConfig={"PageSize": 2}
    )
    assert sum(len(page["SpotPriceHistory"]) for page in pages) == 6


def test_unscripted_types_have_no_spot_price(ec2: Any) -> None:
    # moto would answer 0.00001 for every offering; the emulator only knows its scenario
    assert ec2.describe_spot_price_history(InstanceTypes=["c7i.large"])["SpotPriceHistory"] == []


def test_offerings_honour_unsupported_zones_and_pools(ec2: Any) -> None:
    offers = ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": ["p5.48xlarge", "p6-b300.48xlarge"]}],
    )["InstanceTypeOfferings"]
    zones = {(o["InstanceType"], o["Location"]) for o in offers}
    assert ("p5.48xlarge", "us-east-1a") in zones
    assert ("p5.48xlarge", "us-east-1c") not in zones
    assert ("p5.48xlarge", "us-east-1e") not in zones
    assert ("p6-b300.48xlarge", "us-east-1a") in zones  # a declared pool is offered


def test_offerings_by_zone_id_and_region_with_wildcards(ec2: Any) -> None:
    by_id = ec2.describe_instance_type_offerings(
        LocationType="availability-zone-id",
        Filters=[{"Name": "instance-type", "Values": ["p5.*"]}],
    )["InstanceTypeOfferings"]
    assert by_id
    assert all(o["Location"].startswith("use1-az") for o in by_id)
    assert {o["InstanceType"] for o in by_id} <= {"p5.48xlarge", "p5.4xlarge"}
    region = ec2.describe_instance_type_offerings(
        Filters=[{"Name": "instance-type", "Values": ["m7i.large"]}]
    )["InstanceTypeOfferings"]
    assert region == [
        {"InstanceType": "m7i.large", "LocationType": "region", "Location": "us-east-1"}
    ]


def test_offerings_page(ec2: Any) -> None:
    first = ec2.describe_instance_type_offerings(LocationType="availability-zone", MaxResults=5)
    assert len(first["InstanceTypeOfferings"]) == 5
    assert first["NextToken"]


def test_instance_types_page_by_one_hundred(ec2: Any) -> None:
    first = ec2.describe_instance_types(Filters=[{"Name": "instance-type", "Values": ["m*"]}])
    assert len(first["InstanceTypes"]) == 100
    assert first["NextToken"]
    named = ec2.describe_instance_types(InstanceTypes=["p6-b200.48xlarge", "g6.xlarge"])
    assert {t["InstanceType"] for t in named["InstanceTypes"]} == {
        "p6-b200.48xlarge",
        "g6.xlarge",
    }
    assert "NextToken" not in named
