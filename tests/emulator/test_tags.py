"""EC2's tag restrictions on CreateTags, DeleteTags and TagSpecifications (EC2 User Guide, "Tag
your Amazon EC2 resources": 50 tags per resource, keys up to 127 and values up to 255
characters, the aws: prefix reserved and not counted)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from emu_helpers import SUBNET_A, error_of

pytestmark = pytest.mark.emulator

SPEC = "capacity-reservation"


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def create_tagged(api, tags: dict[str, str]) -> dict:
    return api.reserve(TagSpecifications=[{"ResourceType": SPEC, "Tags": tag_list(tags)}])


@pytest.fixture
def reservation(api, world) -> str:
    return str(api.reserve()["CapacityReservationId"])


@pytest.mark.parametrize(
    "tags",
    [{"k" * 127: "v" * 255}, {"team": ""}, {f"k{i}": "v" for i in range(50)}, {"AWSome": "x"}],
)
def test_tags_at_ec2s_limits_are_accepted(api, ec2, reservation, tags):
    ec2.create_tags(Resources=[reservation], Tags=tag_list(tags))
    assert {t["Key"]: t["Value"] for t in api.get(reservation)["Tags"]} == tags
    made = create_tagged(api, tags)
    assert {t["Key"]: t["Value"] for t in made["Tags"]} == tags


@pytest.mark.parametrize(
    ("tags", "code"),
    [
        ({"k" * 128: "v"}, "InvalidParameterValue"),
        ({"team": "v" * 256}, "InvalidParameterValue"),
        ({"aws:createdBy": "me"}, "InvalidParameterValue"),
        ({"AWS:createdBy": "me"}, "InvalidParameterValue"),
        ({f"k{i}": "v" for i in range(51)}, "TagLimitExceeded"),
    ],
)
def test_create_tags_refuses_what_ec2_refuses(api, ec2, reservation, tags, code):
    with pytest.raises(ClientError) as exc:
        ec2.create_tags(Resources=[reservation], Tags=tag_list(tags))
    assert error_of(exc) == (code, 400)
    assert api.get(reservation).get("Tags", []) == []


@pytest.mark.parametrize(
    ("tags", "code"),
    [
        ({"k" * 128: "v"}, "InvalidParameterValue"),
        ({"team": "v" * 256}, "InvalidParameterValue"),
        ({"aws:cloudformation:stack-name": "x"}, "InvalidParameterValue"),
        ({f"k{i}": "v" for i in range(51)}, "TagLimitExceeded"),
    ],
)
def test_tag_specifications_refuse_what_ec2_refuses_and_create_nothing(api, world, tags, code):
    before = api.free("us-east-1a", "c5.large")
    with pytest.raises(ClientError) as exc:
        create_tagged(api, tags)
    assert error_of(exc) == (code, 400)
    assert api.all() == []
    assert api.free("us-east-1a", "c5.large") == before


def test_the_limit_counts_existing_tags_but_not_aws_ones(api, ec2, reservation):
    ec2.create_tags(Resources=[reservation], Tags=tag_list({f"k{i}": "v" for i in range(49)}))
    # overwriting an existing key does not add a tag
    ec2.create_tags(Resources=[reservation], Tags=tag_list({"k0": "new", "k49": "v"}))
    with pytest.raises(ClientError) as exc:
        ec2.create_tags(Resources=[reservation], Tags=tag_list({"one-more": "v"}))
    assert error_of(exc) == ("TagLimitExceeded", 400)


def test_a_block_with_ec2s_own_tags_still_takes_fifty(api, ec2, emu, world):
    ids = emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "capacity_blocks": [
                        {
                            "name": "b",
                            "instance_type": "p5.48xlarge",
                            "availability_zone": "us-east-1b",
                            "count": 2,
                            "start": "+1d",
                        }
                    ]
                }
            }
        }
    )
    block = ids.reservations["b"]
    ec2.create_tags(Resources=[block], Tags=tag_list({f"k{i}": "v" for i in range(50)}))
    assert len(api.get(block)["Tags"]) == 52


def test_delete_tags_refuses_aws_keys(ec2, reservation):
    with pytest.raises(ClientError) as exc:
        ec2.delete_tags(Resources=[reservation], Tags=[{"Key": "aws:anything"}])
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_run_instances_tag_specifications_follow_the_same_rules(api, world):
    with pytest.raises(ClientError) as exc:
        api.run(
            SUBNET_A,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tag_list({"k" * 128: "v"})}],
        )
    assert error_of(exc) == ("InvalidParameterValue", 400)
    assert api.free("us-east-1a", "c5.large") == api.pool("us-east-1a", "c5.large")["capacity"]


def test_instant_fleet_tag_specifications_follow_the_same_rules(api, ec2, world):
    with pytest.raises(ClientError) as exc:
        ec2.create_fleet(
            Type="instant",
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateId": world.launch_templates["hpc-nodes"],
                        "Version": "$Latest",
                    },
                    "Overrides": [{"SubnetId": SUBNET_A}],
                }
            ],
            TargetCapacitySpecification={
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": "on-demand",
            },
            TagSpecifications=[{"ResourceType": "instance", "Tags": tag_list({"aws:x": "y"})}],
        )
    assert error_of(exc) == ("InvalidParameterValue", 400)
