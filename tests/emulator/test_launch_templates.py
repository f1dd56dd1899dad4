"""CreateLaunchTemplateVersion honours SourceVersion (moto ignores it; the emulator does not)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from emu_helpers import SUBNET_A, error_of

pytestmark = pytest.mark.emulator

AMI = "ami-0aaaaaaaaaaaaaaa1"
BASE = {
    "ImageId": AMI,
    "InstanceType": "c5.large",
    "KeyName": "hpc",
    "CapacityReservationSpecification": {"CapacityReservationPreference": "open"},
    "TagSpecifications": [
        {"ResourceType": "instance", "Tags": [{"Key": "cluster", "Value": "hpc"}]}
    ],
}


@pytest.fixture
def template(ec2, world) -> str:
    return ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData=BASE)[
        "LaunchTemplate"
    ]["LaunchTemplateId"]


def version_data(ec2, template_id: str, version: str) -> dict:
    [found] = ec2.describe_launch_template_versions(
        LaunchTemplateId=template_id, Versions=[version]
    )["LaunchTemplateVersions"]
    return found["LaunchTemplateData"]


def test_source_version_is_inherited_and_overridden(ec2, template):
    created = ec2.create_launch_template_version(
        LaunchTemplateId=template,
        SourceVersion="1",
        VersionDescription="job 42",
        LaunchTemplateData={"InstanceType": "c5.xlarge"},
    )["LaunchTemplateVersion"]
    assert created["VersionNumber"] == 2
    assert created["VersionDescription"] == "job 42"
    assert created["DefaultVersion"] is False
    expected = {**BASE, "InstanceType": "c5.xlarge"}
    assert created["LaunchTemplateData"] == expected
    assert version_data(ec2, template, "2") == expected
    assert version_data(ec2, template, "1") == BASE  # the source is untouched


def test_a_given_parameter_replaces_the_source_one_whole(ec2, template):
    spec = {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"},
    }
    ec2.create_launch_template_version(
        LaunchTemplateId=template,
        SourceVersion="1",
        LaunchTemplateData={
            "CapacityReservationSpecification": spec,
            "InstanceMarketOptions": {"MarketType": "capacity-block"},
        },
    )
    data = version_data(ec2, template, "2")
    assert data["CapacityReservationSpecification"] == spec
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["ImageId"] == AMI
    assert data["TagSpecifications"] == BASE["TagSpecifications"]


def test_source_version_by_template_name_and_from_a_later_version(ec2, template):
    ec2.create_launch_template_version(
        LaunchTemplateName="nodes", SourceVersion="1", LaunchTemplateData={"KeyName": "two"}
    )
    ec2.create_launch_template_version(
        LaunchTemplateName="nodes",
        SourceVersion="2",
        LaunchTemplateData={"InstanceType": "m5.large"},
    )
    assert version_data(ec2, template, "3") == {
        **BASE,
        "KeyName": "two",
        "InstanceType": "m5.large",
    }
    assert version_data(ec2, template, "$Latest") == version_data(ec2, template, "3")


def test_without_source_version_nothing_is_inherited(ec2, template):
    ec2.create_launch_template_version(
        LaunchTemplateId=template, LaunchTemplateData={"InstanceType": "m5.large"}
    )
    assert version_data(ec2, template, "2") == {"InstanceType": "m5.large"}


def test_an_unknown_source_version(ec2, template):
    for bad in ("9", "0", "-1", "latest-ish"):
        with pytest.raises(ClientError) as exc:
            ec2.create_launch_template_version(
                LaunchTemplateId=template,
                SourceVersion=bad,
                LaunchTemplateData={"InstanceType": "m5.large"},
            )
        assert error_of(exc) == ("InvalidLaunchTemplateId.VersionNotFound", 400)
    versions = ec2.describe_launch_template_versions(LaunchTemplateId=template)
    assert [v["VersionNumber"] for v in versions["LaunchTemplateVersions"]] == [1]


def test_a_version_built_for_a_reservation_launches_into_it(api, ec2, template):
    """The broker's step 4: a new version that can only land in the hold."""
    rid = api.reserve("c5.large", "us-east-1a", 2, InstanceMatchCriteria="targeted")[
        "CapacityReservationId"
    ]
    version = ec2.create_launch_template_version(
        LaunchTemplateId=template,
        SourceVersion="1",
        LaunchTemplateData={
            "CapacityReservationSpecification": {
                "CapacityReservationPreference": "capacity-reservations-only",
                "CapacityReservationTarget": {"CapacityReservationId": rid},
            }
        },
    )["LaunchTemplateVersion"]["VersionNumber"]
    instances = ec2.run_instances(
        MinCount=2,
        MaxCount=2,
        SubnetId=SUBNET_A,
        LaunchTemplate={"LaunchTemplateId": template, "Version": str(version)},
    )["Instances"]
    assert {i["InstanceType"] for i in instances} == {"c5.large"}
    assert {"Key": "cluster", "Value": "hpc"} in instances[0]["Tags"]  # inherited tags
    assert api.get(rid)["AvailableInstanceCount"] == 0
    assert api.free("us-east-1a", "c5.large") == 2
    # version 1 still launches into the pool
    ec2.run_instances(
        MinCount=1, MaxCount=1, SubnetId=SUBNET_A, LaunchTemplate={"LaunchTemplateId": template}
    )
    assert api.free("us-east-1a", "c5.large") == 1


def test_launching_an_unknown_template_version(api, ec2, template):
    for bad in ("7", "0", "x"):
        with pytest.raises(ClientError) as exc:
            ec2.run_instances(
                MinCount=1,
                MaxCount=1,
                SubnetId=SUBNET_A,
                LaunchTemplate={"LaunchTemplateId": template, "Version": bad},
            )
        assert error_of(exc) == ("InvalidLaunchTemplateId.VersionNotFound", 400)
    assert api.free("us-east-1a", "c5.large") == 4
