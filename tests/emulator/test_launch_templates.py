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


# -- ClientToken (EC2 "Ensuring idempotency": CreateLaunchTemplateVersion takes one) ----------
def test_a_client_token_makes_one_version_and_refuses_other_parameters(ec2, template):
    def create(**data):
        return ec2.create_launch_template_version(
            LaunchTemplateId=template,
            SourceVersion="1",
            ClientToken="job-42-hold-1",
            LaunchTemplateData=data or {"InstanceType": "c5.xlarge"},
        )["LaunchTemplateVersion"]["VersionNumber"]

    assert create() == create() == 2
    with pytest.raises(ClientError) as exc:
        create(InstanceType="m5.large")
    assert error_of(exc) == ("IdempotentParameterMismatch", 400)
    versions = ec2.describe_launch_template_versions(LaunchTemplateId=template)
    assert [v["VersionNumber"] for v in versions["LaunchTemplateVersions"]] == [1, 2]


# -- DeleteLaunchTemplateVersions -------------------------------------------------------------
def add_versions(ec2, template: str, count: int) -> list[int]:
    return [
        ec2.create_launch_template_version(
            LaunchTemplateId=template,
            SourceVersion="1",
            VersionDescription=f"v{n}",
            LaunchTemplateData={"KeyName": f"k{n}"},
        )["LaunchTemplateVersion"]["VersionNumber"]
        for n in range(count)
    ]


def numbers(ec2, template: str, **params) -> list[int]:
    found = ec2.describe_launch_template_versions(LaunchTemplateId=template, **params)
    return [v["VersionNumber"] for v in found["LaunchTemplateVersions"]]


def test_deleted_versions_are_gone_and_numbers_are_never_reused(ec2, template):
    assert add_versions(ec2, template, 3) == [2, 3, 4]
    answer = ec2.delete_launch_template_versions(LaunchTemplateId=template, Versions=["2", "4"])
    assert [v["VersionNumber"] for v in answer["SuccessfullyDeletedLaunchTemplateVersions"]] == [
        2,
        4,
    ]
    assert answer["UnsuccessfullyDeletedLaunchTemplateVersions"] == []
    assert numbers(ec2, template) == [1, 3]
    # $Latest is the newest version that still exists
    [latest] = ec2.describe_launch_templates(LaunchTemplateIds=[template])["LaunchTemplates"]
    assert latest["LatestVersionNumber"] == 3
    assert version_data(ec2, template, "$Latest")["KeyName"] == "k1"
    # "Launch template versions are numbered in the order in which they are created"
    assert add_versions(ec2, template, 1) == [5]
    for gone in ("2", "4"):
        with pytest.raises(ClientError) as exc:
            version_data(ec2, template, gone)
        assert error_of(exc) == ("InvalidLaunchTemplateId.VersionNotFound", 400)


def test_the_default_version_and_unknown_versions_are_refused_one_by_one(ec2, template):
    add_versions(ec2, template, 1)
    answer = ec2.delete_launch_template_versions(
        LaunchTemplateId=template, Versions=["1", "2", "9"]
    )
    assert [v["VersionNumber"] for v in answer["SuccessfullyDeletedLaunchTemplateVersions"]] == [2]
    refused = {
        v["VersionNumber"]: v["ResponseError"]["Code"]
        for v in answer["UnsuccessfullyDeletedLaunchTemplateVersions"]
    }
    assert refused == {1: "unexpectedError", 9: "launchTemplateVersionDoesNotExist"}
    assert numbers(ec2, template) == [1]
    again = ec2.delete_launch_template_versions(LaunchTemplateId=template, Versions=["2"])
    assert [
        v["ResponseError"]["Code"] for v in again["UnsuccessfullyDeletedLaunchTemplateVersions"]
    ] == ["launchTemplateVersionDoesNotExist"]


def test_deleting_from_an_unknown_template_or_too_many_at_once(ec2, template):
    answer = ec2.delete_launch_template_versions(
        LaunchTemplateId="lt-0123456789abcdef0", Versions=["2"]
    )
    [refused] = answer["UnsuccessfullyDeletedLaunchTemplateVersions"]
    assert refused["ResponseError"]["Code"] == "launchTemplateIdDoesNotExist"
    with pytest.raises(ClientError) as exc:
        ec2.delete_launch_template_versions(
            LaunchTemplateId=template, Versions=[str(n) for n in range(2, 203)]
        )
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_a_deleted_version_cannot_launch_or_become_the_default(api, ec2, template):
    add_versions(ec2, template, 1)
    ec2.delete_launch_template_versions(LaunchTemplateId=template, Versions=["2"])
    with pytest.raises(ClientError) as exc:
        ec2.run_instances(
            MinCount=1,
            MaxCount=1,
            SubnetId=SUBNET_A,
            LaunchTemplate={"LaunchTemplateId": template, "Version": "2"},
        )
    assert error_of(exc) == ("InvalidLaunchTemplateId.VersionNotFound", 400)
    with pytest.raises(ClientError) as exc:
        ec2.modify_launch_template(LaunchTemplateId=template, DefaultVersion="2")
    assert error_of(exc) == ("InvalidLaunchTemplateId.VersionNotFound", 400)
    # $Latest launches the newest live version (1), not the deleted one
    [instance] = ec2.run_instances(
        MinCount=1,
        MaxCount=1,
        SubnetId=SUBNET_A,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
    )["Instances"]
    assert instance["KeyName"] == "hpc"
    assert api.free("us-east-1a", "c5.large") == 3


def test_the_version_limit_counts_the_versions_that_exist(emu, ec2, template):
    # EC2 quota: 10,000 versions per launch template (a knob makes it small for the test)
    emu.configure(launch_template_version_limit=3)
    add_versions(ec2, template, 2)
    with pytest.raises(ClientError) as exc:
        add_versions(ec2, template, 1)
    # EC2's error table names this code (the emulator used to answer ResourceLimitExceeded)
    assert error_of(exc) == ("MaxTemplateVersionLimitExceeded", 400)
    assert numbers(ec2, template) == [1, 2, 3]
    ec2.delete_launch_template_versions(LaunchTemplateId=template, Versions=["2"])
    assert add_versions(ec2, template, 1) == [4]


def test_the_default_limit_is_ec2s_quota(world):
    from emulator.state import world as state

    assert state.settings.launch_template_version_limit == 10_000


def test_versions_are_described_in_pages_and_windows(ec2, template):
    add_versions(ec2, template, 6)  # versions 1..7
    assert numbers(ec2, template, MinVersion="3", MaxVersion="5") == [4, 5]  # after 3, up to 5
    first = ec2.describe_launch_template_versions(LaunchTemplateId=template, MaxResults=4)
    assert [v["VersionNumber"] for v in first["LaunchTemplateVersions"]] == [1, 2, 3, 4]
    rest = ec2.describe_launch_template_versions(
        LaunchTemplateId=template, MaxResults=4, NextToken=first["NextToken"]
    )
    assert [v["VersionNumber"] for v in rest["LaunchTemplateVersions"]] == [5, 6, 7]
    assert "NextToken" not in rest
    with pytest.raises(ClientError) as exc:
        ec2.describe_launch_template_versions(LaunchTemplateId=template, MaxResults=201)
    assert error_of(exc) == ("InvalidParameterValue", 400)


# DescribeLaunchTemplateVersions' filters: each documented one, a version that has its value
# (the second) and one that does not (the first, BASE), and the filter value that picks the
# second. The emulator used to ignore them all and answer every version (issue 42).
_PROFILE = "arn:aws:iam::123456789012:instance-profile/nodes"
_GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/hosts"
_LICENSE = "arn:aws:license-manager:us-east-1:123456789012:license-configuration:lic-1"
VERSION_FILTER_CASES = {
    "ebs-optimized": ({"EbsOptimized": True}, "true"),
    "host-resource-group-arn": ({"Placement": {"HostResourceGroupArn": _GROUP}}, _GROUP),
    "http-endpoint": ({"MetadataOptions": {"HttpEndpoint": "disabled"}}, "disabled"),
    # No request sets it: the IPv4 endpoint is off only with the whole endpoint.
    "http-protocol-ipv4": ({"MetadataOptions": {"HttpEndpoint": "disabled"}}, "disabled"),
    "http-tokens": ({"MetadataOptions": {"HttpTokens": "required"}}, "required"),
    "iam-instance-profile": ({"IamInstanceProfile": {"Arn": _PROFILE}}, _PROFILE),
    "image-id": ({"ImageId": "ami-0bbbbbbbbbbbbbbb2"}, "ami-0bbbbbbbbbbbbbbb2"),
    "instance-type": ({"InstanceType": "p5.48xlarge"}, "p5.*"),
    "kernel-id": ({"KernelId": "aki-12345678"}, "aki-12345678"),
    "license-configuration-arn": (
        {"LicenseSpecifications": [{"LicenseConfigurationArn": _LICENSE}]},
        _LICENSE,
    ),
    "network-card-index": (
        {"NetworkInterfaces": [{"DeviceIndex": 0, "NetworkCardIndex": 1}]},
        "1",
    ),
    "ram-disk-id": ({"RamDiskId": "ari-12345678"}, "ari-12345678"),
}


def _numbers(ec2, template_id: str, filters: list[dict]) -> list[int]:
    answer = ec2.describe_launch_template_versions(LaunchTemplateId=template_id, Filters=filters)
    return [v["VersionNumber"] for v in answer["LaunchTemplateVersions"]]


def test_is_default_version_picks_the_default_only(ec2, template):
    ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData=BASE)
    ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData=BASE)
    ec2.modify_launch_template(LaunchTemplateId=template, DefaultVersion="2")
    default = [{"Name": "is-default-version", "Values": ["true"]}]
    assert _numbers(ec2, template, default) == [2]
    others = [{"Name": "is-default-version", "Values": ["false"]}]
    assert _numbers(ec2, template, others) == [1, 3]
    # The AWS CLI's own call: every template's $Latest, those that are their default.
    answer = ec2.describe_launch_template_versions(Versions=["$Latest"], Filters=others)
    assert [v["VersionNumber"] for v in answer["LaunchTemplateVersions"]] == [3]


@pytest.mark.parametrize("name", sorted(VERSION_FILTER_CASES))
def test_each_documented_version_filter_picks_its_versions(ec2, template, name):
    data, value = VERSION_FILTER_CASES[name]
    ec2.create_launch_template_version(
        LaunchTemplateId=template, SourceVersion="1", LaunchTemplateData=data
    )
    assert _numbers(ec2, template, [{"Name": name, "Values": [value]}]) == [2]
    assert _numbers(ec2, template, [{"Name": name, "Values": ["no-such-value"]}]) == []


def test_version_filters_combine_and_create_time_is_one(ec2, template):
    ec2.create_launch_template_version(
        LaunchTemplateId=template, SourceVersion="1", LaunchTemplateData={"EbsOptimized": True}
    )
    [second] = ec2.describe_launch_template_versions(LaunchTemplateId=template, Versions=["2"])[
        "LaunchTemplateVersions"
    ]
    created = second["CreateTime"].strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert _numbers(ec2, template, [{"Name": "create-time", "Values": [created]}]) == [2]
    at_the_time = {"Name": "create-time", "Values": [created[:10] + "*"]}
    assert _numbers(ec2, template, [at_the_time]) == [2]
    both = [at_the_time, {"Name": "ebs-optimized", "Values": ["false", "true"]}]
    assert _numbers(ec2, template, both) == [2]
    assert (
        _numbers(ec2, template, [at_the_time, {"Name": "ebs-optimized", "Values": ["false"]}]) == []
    )


def test_every_documented_version_filter_is_tested_and_others_refused(ec2, template):
    from emulator import documented

    names = documented.filter_names("DescribeLaunchTemplateVersions") or frozenset()
    assert set(VERSION_FILTER_CASES) | {"is-default-version", "create-time"} == names
    with pytest.raises(ClientError) as caught:
        ec2.describe_launch_template_versions(
            LaunchTemplateId=template, Filters=[{"Name": "version-number", "Values": ["1"]}]
        )
    assert error_of(caught) == ("InvalidParameterValue", 400)
