"""DescribeRegions as EC2 answers it: the regions enabled for the account (the default ones and
those it opted in to), all of them with AllRegions, only the caller's partition."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

pytestmark = pytest.mark.emulator

DEFAULT = {
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "ca-central-1",
    "sa-east-1",
    "eu-central-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eu-north-1",
    "ap-south-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-southeast-1",
    "ap-southeast-2",
}


def names(answer: dict[str, Any]) -> set[str]:
    return {r["RegionName"] for r in answer["Regions"]}


def test_only_the_enabled_regions_by_default(emu: Any) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    answer = ec2.describe_regions()
    assert names(answer) == DEFAULT
    assert {r["OptInStatus"] for r in answer["Regions"]} == {"opt-in-not-required"}
    every = ec2.describe_regions(AllRegions=True)["Regions"]
    disabled = {r["RegionName"] for r in every if r["OptInStatus"] == "not-opted-in"}
    assert {"af-south-1", "ap-east-1", "eu-south-1", "me-south-1"} <= disabled
    assert not any(r["RegionName"].startswith(("cn-", "us-gov-")) for r in every)


def test_a_scenario_opts_in_to_the_regions_it_uses(emu: Any) -> None:
    emu.load_scenario({"regions": {"af-south-1": {}}})
    ec2 = boto3.client("ec2", region_name="us-east-1")
    assert names(ec2.describe_regions()) == DEFAULT | {"af-south-1"}
    (cape_town,) = ec2.describe_regions(RegionNames=["af-south-1"])["Regions"]
    assert cape_town["OptInStatus"] == "opted-in"


def test_names_filters_and_partitions(emu: Any) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    # a disabled region can still be named
    (hong_kong,) = ec2.describe_regions(RegionNames=["ap-east-1"])["Regions"]
    assert hong_kong["OptInStatus"] == "not-opted-in"
    europe = ec2.describe_regions(Filters=[{"Name": "region-name", "Values": ["eu-*"]}])
    assert names(europe) == {r for r in DEFAULT if r.startswith("eu-")}
    opted = ec2.describe_regions(
        AllRegions=True, Filters=[{"Name": "opt-in-status", "Values": ["not-opted-in"]}]
    )
    assert names(opted).isdisjoint(DEFAULT)
    china = boto3.client("ec2", region_name="cn-north-1").describe_regions()
    assert names(china) == {"cn-north-1", "cn-northwest-1"}
