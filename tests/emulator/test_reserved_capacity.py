"""Reserved capacity as EC2 serves it (issue 43): Capacity Reservation groups (AWS Resource
Groups), launches into a group or a reservation, instant fleets on reserved capacity and
interruptible Capacity Reservations. Every behaviour and its source: docs/fidelity.md."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from emu_helpers import error_of

POOL_CONFIGURATION = [
    {"Type": "AWS::EC2::CapacityReservationPool"},
    {
        "Type": "AWS::ResourceGroups::Generic",
        "Parameters": [
            {"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}
        ],
    },
]


@pytest.fixture
def groups(client: Any, world: Any) -> Any:
    return client("resource-groups")


def make_pool(groups: Any, name: str = "pool") -> str:
    made = groups.create_group(Name=name, Configuration=POOL_CONFIGURATION)
    return str(made["Group"]["GroupArn"])


def listed(groups: Any, group: str, **extra: Any) -> list[dict[str, str]]:
    answer = groups.list_group_resources(Group=group, **extra)
    return [r["Identifier"] for r in answer["Resources"]]


# -- Capacity Reservation groups ------------------------------------------------------------


def test_a_pool_lists_the_reservations_grouped_into_it(api, groups):
    pool = make_pool(groups)
    first = api.reserve(count=2)
    second = api.reserve(instance_type="m5.large", count=1)
    added = groups.group_resources(
        Group=pool,
        ResourceArns=[first["CapacityReservationArn"], second["CapacityReservationArn"]],
    )
    assert added["Succeeded"] == [first["CapacityReservationArn"], second["CapacityReservationArn"]]
    assert added["Failed"] == []
    assert listed(groups, pool) == [
        {
            "ResourceArn": first["CapacityReservationArn"],
            "ResourceType": "AWS::EC2::CapacityReservation",
        },
        {
            "ResourceArn": second["CapacityReservationArn"],
            "ResourceType": "AWS::EC2::CapacityReservation",
        },
    ]
    by_name = groups.list_group_resources(Group="pool")
    assert [i["ResourceArn"] for i in by_name["ResourceIdentifiers"]] == [
        first["CapacityReservationArn"],
        second["CapacityReservationArn"],
    ]


def test_ungrouped_reservations_leave_the_list(api, groups):
    pool = make_pool(groups)
    first, second = api.reserve(), api.reserve()
    arns = [first["CapacityReservationArn"], second["CapacityReservationArn"]]
    groups.group_resources(Group=pool, ResourceArns=arns)
    removed = groups.ungroup_resources(Group=pool, ResourceArns=[arns[0]])
    assert removed["Succeeded"] == [arns[0]]
    assert [i["ResourceArn"] for i in listed(groups, pool)] == [arns[1]]


def test_a_pool_refuses_what_is_not_a_reservation_of_its_own(api, groups):
    pool = make_pool(groups)
    real = api.reserve()["CapacityReservationArn"]
    unknown = real.rsplit("/", 1)[0] + "/cr-0123456789abcdef0"
    instance = "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"
    answer = groups.group_resources(Group=pool, ResourceArns=[real, unknown, instance])
    assert answer["Succeeded"] == [real]
    assert sorted(f["ResourceArn"] for f in answer["Failed"]) == sorted([unknown, instance])
    assert [i["ResourceArn"] for i in listed(groups, pool)] == [real]


def test_a_pool_group_needs_its_generic_configuration(groups):
    with pytest.raises(ClientError) as exc:
        groups.create_group(
            Name="bare", Configuration=[{"Type": "AWS::EC2::CapacityReservationPool"}]
        )
    assert error_of(exc) == ("BadRequestException", 400)


def test_list_group_resources_pages_and_filters(api, groups):
    pool = make_pool(groups)
    arns = [api.reserve()["CapacityReservationArn"] for _ in range(3)]
    groups.group_resources(Group=pool, ResourceArns=arns)
    first = groups.list_group_resources(Group=pool, MaxResults=2)
    assert [r["Identifier"]["ResourceArn"] for r in first["Resources"]] == arns[:2]
    rest = groups.list_group_resources(Group=pool, MaxResults=2, NextToken=first["NextToken"])
    assert [r["Identifier"]["ResourceArn"] for r in rest["Resources"]] == arns[2:]
    assert "NextToken" not in rest
    hosts = groups.list_group_resources(
        Group=pool, Filters=[{"Name": "resource-type", "Values": ["AWS::EC2::Host"]}]
    )
    assert hosts["Resources"] == []


def test_an_unknown_group_is_not_found(groups):
    with pytest.raises(ClientError) as exc:
        groups.list_group_resources(Group="nothing")
    assert error_of(exc) == ("NotFoundException", 404)


# -- launches into a reservation or a group -------------------------------------------------


def reservation_of(ec2: Any, instance_id: str) -> str | None:
    [reservation] = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    [instance] = reservation["Instances"]
    return instance.get("CapacityReservationId")


def group_target(arn: str, preference: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": arn}
    }
    if preference:
        spec["CapacityReservationPreference"] = preference
    return {"CapacityReservationSpecification": spec}


def test_an_instance_in_a_reservation_names_it_and_uses_it(api, ec2):
    reservation = api.reserve(count=2, InstanceMatchCriteria="targeted")
    target = {
        "CapacityReservationSpecification": {
            "CapacityReservationTarget": {
                "CapacityReservationId": reservation["CapacityReservationId"]
            }
        }
    }
    [instance] = api.run(count=1, **target)
    assert reservation_of(ec2, instance) == reservation["CapacityReservationId"]
    assert api.get(reservation["CapacityReservationId"])["AvailableInstanceCount"] == 1
    [outside] = api.run(subnet_id="subnet-0b00000000000002", count=1)
    assert reservation_of(ec2, outside) is None


def test_an_open_reservation_serves_a_matching_launch_and_says_so(api, ec2):
    reservation = api.reserve(count=1)
    [inside, outside] = api.run(count=2)
    assert {reservation_of(ec2, inside), reservation_of(ec2, outside)} == {
        reservation["CapacityReservationId"],
        None,
    }


def test_a_launch_into_a_group_uses_its_matching_reservations_then_on_demand(api, ec2, groups):
    pool = make_pool(groups)
    other_type = api.reserve(instance_type="m5.large", count=2, InstanceMatchCriteria="targeted")
    other_az = api.reserve(
        availability_zone="us-east-1b", count=2, InstanceMatchCriteria="targeted"
    )
    matching = api.reserve(count=2, InstanceMatchCriteria="targeted")
    groups.group_resources(
        Group=pool,
        ResourceArns=[r["CapacityReservationArn"] for r in (other_type, other_az, matching)],
    )
    ids = api.run(count=3, **group_target(pool))
    sources = [reservation_of(ec2, i) for i in ids]
    assert sorted(sources, key=str) == sorted(
        [matching["CapacityReservationId"]] * 2 + [None], key=str
    )
    assert api.get(matching["CapacityReservationId"])["AvailableInstanceCount"] == 0
    assert api.get(other_type["CapacityReservationId"])["AvailableInstanceCount"] == 2
    assert api.get(other_az["CapacityReservationId"])["AvailableInstanceCount"] == 2


def test_a_group_launch_that_only_takes_reservations_fails_when_they_are_short(api, groups):
    pool = make_pool(groups)
    matching = api.reserve(count=1, InstanceMatchCriteria="targeted")
    groups.group_resources(Group=pool, ResourceArns=[matching["CapacityReservationArn"]])
    with pytest.raises(ClientError) as exc:
        api.run(count=2, **group_target(pool, "capacity-reservations-only"))
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
    assert api.get(matching["CapacityReservationId"])["AvailableInstanceCount"] == 1
    api.run(count=1, **group_target(pool, "capacity-reservations-only"))
    assert api.get(matching["CapacityReservationId"])["AvailableInstanceCount"] == 0


def test_a_group_that_is_not_a_pool_cannot_be_targeted(api, groups):
    made = groups.create_group(
        Name="tagged",
        ResourceQuery={
            "Type": "TAG_FILTERS_1_0",
            "Query": '{"ResourceTypeFilters": ["AWS::AllSupported"], "TagFilters": '
            '[{"Key": "k", "Values": ["v"]}]}',
        },
    )
    with pytest.raises(ClientError) as exc:
        api.run(count=1, **group_target(made["Group"]["GroupArn"]))
    assert error_of(exc) == ("InvalidParameterValue", 400)
