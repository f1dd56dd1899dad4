"""Reserved capacity as EC2 serves it (issue 43): Capacity Reservation groups (AWS Resource
Groups), launches into a group or a reservation, instant fleets on reserved capacity and
interruptible Capacity Reservations. Every behaviour and its source: docs/fidelity.md."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from emu_helpers import NOW, error_of

from emulator.iam.context import Caller, requests

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


def seed_block(emu: Any, count: int = 1, **extra: Any) -> str:
    """The id of an active p5.48xlarge Capacity Block in us-east-1a, seeded by a scenario."""
    block = {
        "name": "block",
        "instance_type": "p5.48xlarge",
        "availability_zone": "us-east-1a",
        "count": count,
        "start": "-1h",
        **extra,
    }
    ids = emu.load_scenario({"regions": {"us-east-1": {"capacity_blocks": [block]}}})
    return str(ids.reservations["block"])


def reserve_role(account: str) -> Caller:
    """The reserve function's role, as the emulator's IAM sees the caller."""
    return Caller(
        principal_arn="arn:aws:iam::123456789012:role/reserve",
        session_arn="arn:aws:sts::123456789012:assumed-role/reserve/s",
        user_id="AROAEXAMPLE:s",
        account=account,
        region="us-east-1",
        now=NOW,
    )


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


def _block_and_lent(api: Any, ec2: Any, emu: Any) -> list[str]:
    """The ARNs of an active Capacity Block and of an interruptible reservation."""
    block = seed_block(emu)
    source = api.reserve(count=1)["CapacityReservationId"]
    lend(ec2, source, 1)
    return [
        api.get(block)["CapacityReservationArn"],
        api.get(interruptible_of(api, source))["CapacityReservationArn"],
    ]


@pytest.mark.parametrize(
    ("knobs", "takes"),
    [({}, True), ({"groups_take_blocks": False}, False)],
    ids=["takes-them", "knob-keeps-pools-to-odcrs"],
)
def test_whether_a_pool_takes_capacity_blocks_and_interruptible_reservations(
    api, ec2, emu, groups, knobs, takes
):
    """A pool takes Capacity Blocks and interruptible reservations, unless the knob says not."""
    emu.configure(**knobs)
    pool = make_pool(groups)
    arns = _block_and_lent(api, ec2, emu)
    answer = groups.group_resources(Group=pool, ResourceArns=arns)
    assert answer["Succeeded"] == (arns if takes else [])
    assert sorted(f["ResourceArn"] for f in answer["Failed"]) == ([] if takes else sorted(arns))


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


def reservation_target(reservation_id: str) -> dict[str, Any]:
    """A launch's CapacityReservationSpecification naming one reservation."""
    return {
        "CapacityReservationSpecification": {
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id}
        }
    }


def group_target(arn: str, preference: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": arn}
    }
    if preference:
        spec["CapacityReservationPreference"] = preference
    return {"CapacityReservationSpecification": spec}


def test_an_instance_in_a_reservation_names_it_and_uses_it(api, ec2):
    reservation = api.reserve(count=2, InstanceMatchCriteria="targeted")
    target = reservation_target(reservation["CapacityReservationId"])
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


# -- interruptible Capacity Reservations ----------------------------------------------------


def lend(ec2: Any, source: str, count: int, **extra: Any) -> dict[str, Any]:
    return ec2.create_interruptible_capacity_reservation_allocation(  # type: ignore[no-any-return]
        CapacityReservationId=source, InstanceCount=count, **extra
    )


def interruptible_of(api: Any, source: str) -> str:
    return str(
        api.get(source)["InterruptibleCapacityAllocation"]["InterruptibleCapacityReservationId"]
    )


def test_an_interruptible_allocation_is_a_reservation_lent_from_its_source(api, ec2):
    source = api.reserve(count=4)["CapacityReservationId"]
    answer = lend(ec2, source, 3)
    assert answer["SourceCapacityReservationId"] == source
    assert answer["TargetInstanceCount"] == 3
    assert answer["Status"] == "active"
    assert answer["InterruptionType"] == "adhoc"
    described = api.get(source)
    assert described["AvailableInstanceCount"] == 1
    assert described["Interruptible"] is False
    allocation = described["InterruptibleCapacityAllocation"]
    assert (allocation["InstanceCount"], allocation["TargetInstanceCount"]) == (3, 3)
    lent = api.get(allocation["InterruptibleCapacityReservationId"])
    assert lent["Interruptible"] is True
    assert lent["InterruptionInfo"] == {
        "SourceCapacityReservationId": source,
        "InterruptionType": "adhoc",
    }
    assert (lent["InstanceType"], lent["AvailabilityZone"]) == ("c5.large", "us-east-1a")
    assert (lent["TotalInstanceCount"], lent["AvailableInstanceCount"]) == (3, 3)
    assert lent["ZeroSizePreference"] == "default"


def test_only_unused_capacity_of_an_unlimited_active_odcr_can_be_lent(api, ec2):
    source = api.reserve(count=2)["CapacityReservationId"]
    api.run(count=1)  # an open launch uses one of the two
    with pytest.raises(ClientError) as exc:
        lend(ec2, source, 2)
    assert error_of(exc) == ("InvalidParameterValue", 400)
    limited = api.reserve_until(minutes=60, count=2)["CapacityReservationId"]
    with pytest.raises(ClientError) as exc:
        lend(ec2, limited, 1)
    assert error_of(exc) == ("InvalidParameterValue", 400)
    assert "InterruptibleCapacityAllocation" not in api.get(limited)


def test_an_interruptible_reservation_is_a_launch_target(api, ec2):
    source = api.reserve(count=3)["CapacityReservationId"]
    lend(ec2, source, 2)
    lent = interruptible_of(api, source)
    target = reservation_target(lent)
    ids = api.run(count=2, **target)
    assert {reservation_of(ec2, i) for i in ids} == {lent}
    assert api.get(lent)["AvailableInstanceCount"] == 0
    assert api.get(source)["AvailableInstanceCount"] == 1
    with pytest.raises(ClientError) as exc:
        api.run(count=1, **target)
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)


def _reclaimed(api: Any, ec2: Any) -> tuple[str, str, list[str], dict[str, Any]]:
    """An interruptible reservation of 3 with 2 running, reclaimed down to 1."""
    source = api.reserve(count=3)["CapacityReservationId"]
    lend(ec2, source, 3)
    lent = interruptible_of(api, source)
    target = reservation_target(lent)
    ids = api.run(count=2, **target)
    answer = ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source, TargetInstanceCount=1
    )
    return source, lent, ids, answer


def states(ec2: Any, ids: list[str]) -> list[str]:
    found = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    return sorted(i["State"]["Name"] for r in found for i in r["Instances"])


def test_reclaiming_terminates_what_runs_beyond_the_new_count_after_the_notice(api, ec2, emu):
    source, lent, ids, answer = _reclaimed(api, ec2)
    assert answer["InterruptibleCapacityReservationId"] == lent
    assert (answer["InstanceCount"], answer["TargetInstanceCount"]) == (3, 1)
    assert answer["Status"] == "updating"
    assert api.get(lent)["AvailableInstanceCount"] == 0  # nothing launches into what goes
    emu.advance(119)
    assert states(ec2, ids) == ["running", "running"]
    emu.advance(1)
    assert states(ec2, ids) == ["running", "terminated"]
    allocation = api.get(source)["InterruptibleCapacityAllocation"]
    assert (allocation["InstanceCount"], allocation["Status"]) == (1, "active")
    assert api.get(source)["AvailableInstanceCount"] == 2
    assert api.get(lent)["TotalInstanceCount"] == 1


def test_the_notice_knob_reclaims_at_once(api, ec2, emu):
    emu.configure(interruption_notice_seconds=0)
    source, _, ids, answer = _reclaimed(api, ec2)
    assert (answer["InstanceCount"], answer["Status"]) == (1, "active")
    assert states(ec2, ids) == ["running", "terminated"]
    assert api.get(source)["AvailableInstanceCount"] == 2


def test_an_allocation_reduced_to_zero_is_cancelled_unless_retained(api, ec2):
    first = api.reserve(count=2)["CapacityReservationId"]
    lend(ec2, first, 2)
    ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=first, TargetInstanceCount=0
    )
    assert api.get(interruptible_of(api, first))["State"] == "cancelled"
    assert api.get(first)["AvailableInstanceCount"] == 2
    kept = api.reserve(count=2)["CapacityReservationId"]
    lend(ec2, kept, 2, ZeroSizePreference="retain")
    ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=kept, TargetInstanceCount=0
    )
    assert api.get(interruptible_of(api, kept))["State"] == "active"
    ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=kept, TargetInstanceCount=1
    )
    assert api.get(interruptible_of(api, kept))["AvailableInstanceCount"] == 1
    assert api.get(kept)["AvailableInstanceCount"] == 1


# -- instant fleets on reserved capacity ----------------------------------------------------

SUBNET_A = "subnet-0a00000000000001"
SUBNET_B = "subnet-0b00000000000002"
ODCR, BLOCK, INTERRUPTIBLE = (
    "on-demand-capacity-reservation",
    "capacity-block",
    "interruptible-capacity-reservation",
)


def template(ec2: Any, name: str = "nodes", **data: Any) -> str:
    made = ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": "ami-0aaaaaaaaaaaaaaa1", "InstanceType": "c5.large", **data},
    )
    return str(made["LaunchTemplate"]["LaunchTemplateId"])


def override(subnet: str = SUBNET_A, instance_type: str = "c5.large", **extra: Any) -> dict:
    return {"SubnetId": subnet, "InstanceType": instance_type, **extra}


def reserved_fleet(
    ec2: Any,
    template_id: str,
    overrides: list[dict[str, Any]],
    total: int,
    types: list[str] | None = None,
    fallback: bool = False,
    **options: Any,
) -> dict[str, Any]:
    reserved: dict[str, Any] = {**options}
    if types is not None:
        reserved["ReservationTypes"] = types
    if fallback:
        reserved["ReservedCapacityFallbackOptions"] = {"MarketTypes": ["on-demand"]}
    extra = {"ReservedCapacityOptions": reserved} if reserved else {}
    return ec2.create_fleet(  # type: ignore[no-any-return]
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateId": template_id,
                    "Version": "$Latest",
                },
                "Overrides": overrides,
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": total,
            "DefaultTargetCapacityType": "reserved-capacity",
        },
        **extra,
    )


def launched(answer: dict[str, Any]) -> list[tuple[str, str]]:
    """(lifecycle, instance id) of each instance a fleet launched."""
    return [(i["Lifecycle"], iid) for i in answer["Instances"] for iid in i["InstanceIds"]]


def sources(ec2: Any, answer: dict[str, Any]) -> list[str | None]:
    return sorted((reservation_of(ec2, i) for _, i in launched(answer)), key=str)


def test_a_reserved_fleet_fills_the_reservations_it_names_and_calls_them_on_demand(api, ec2):
    first = api.reserve(count=2, InstanceMatchCriteria="targeted")["CapacityReservationId"]
    second = api.reserve(instance_type="m5.large", count=1, InstanceMatchCriteria="targeted")[
        "CapacityReservationId"
    ]
    answer = reserved_fleet(
        ec2,
        template(ec2),
        [override(), override(instance_type="m5.large")],
        3,
        types=[ODCR],
        CapacityReservationTarget={"CapacityReservationIds": [first, second]},
    )
    assert answer["Errors"] == []
    assert {lifecycle for lifecycle, _ in launched(answer)} == {"on-demand"}
    assert sources(ec2, answer) == sorted([first, first, second])
    assert api.get(first)["AvailableInstanceCount"] == 0
    assert api.get(second)["AvailableInstanceCount"] == 0
    [described] = ec2.describe_fleets(FleetIds=[answer["FleetId"]])["Fleets"]
    assert described["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == (
        "reserved-capacity"
    )
    assert described["ReservedCapacityOptions"] == {"ReservationTypes": [ODCR]}


@pytest.mark.parametrize(
    ("fallback", "on_demand", "errors"),
    [(False, 0, ["ReservationCapacityExceeded"]), (True, 1, [])],
    ids=["without-fallback-as-many-as-it-can", "fallback-launches-the-rest-on-demand"],
)
def test_a_reserved_fleet_for_more_than_its_reservation_holds(
    api, ec2, fallback, on_demand, errors
):
    """A fleet of 3 on a reservation of 2 launches the third On-Demand only with the fallback."""
    reservation = api.reserve(count=2, InstanceMatchCriteria="targeted")["CapacityReservationId"]
    free = api.free("us-east-1a", "c5.large")
    answer = reserved_fleet(
        ec2,
        template(ec2),
        [override()],
        3,
        types=[ODCR],
        fallback=fallback,
        CapacityReservationTarget={"CapacityReservationIds": [reservation]},
    )
    assert [e["ErrorCode"] for e in answer["Errors"]] == errors
    assert sources(ec2, answer) == sorted([reservation] * 2 + [None] * on_demand, key=str)
    assert api.free("us-east-1a", "c5.large") == free - on_demand
    # One entry for the override: ODCR and On-Demand instances alike say on-demand.
    [entry] = answer["Instances"]
    assert (entry["Lifecycle"], len(entry["InstanceIds"])) == ("on-demand", 2 + on_demand)


def test_a_reservation_serves_only_overrides_of_its_type_az_platform_and_tenancy(api, ec2):
    elsewhere = api.reserve(
        availability_zone="us-east-1b", count=2, InstanceMatchCriteria="targeted"
    )["CapacityReservationId"]
    rhel = template(ec2, "rhel", ImageId="ami-0bbbbbbbbbbbbbbb2")
    answer = reserved_fleet(
        ec2,
        template(ec2),
        [override(SUBNET_A), override(SUBNET_A, "m5.large")],
        1,
        types=[ODCR],
        CapacityReservationTarget={"CapacityReservationIds": [elsewhere]},
    )
    assert answer["Instances"] == []
    assert api.get(elsewhere)["AvailableInstanceCount"] == 2
    answer = reserved_fleet(
        ec2,
        rhel,
        [override(SUBNET_B)],
        1,
        types=[ODCR],
        CapacityReservationTarget={"CapacityReservationIds": [elsewhere]},
    )
    assert answer["Instances"] == []  # a RHEL image: another platform
    answer = reserved_fleet(
        ec2,
        template(ec2, "b"),
        [override(SUBNET_B)],
        1,
        types=[ODCR],
        CapacityReservationTarget={"CapacityReservationIds": [elsewhere]},
    )
    assert sources(ec2, answer) == [elsewhere]


def test_a_reserved_fleet_targets_a_group_or_its_templates_target(api, ec2, groups):
    pool = make_pool(groups)
    first = api.reserve(count=1, InstanceMatchCriteria="targeted")
    second = api.reserve(availability_zone="us-east-1b", count=1, InstanceMatchCriteria="targeted")
    groups.group_resources(
        Group=pool,
        ResourceArns=[first["CapacityReservationArn"], second["CapacityReservationArn"]],
    )
    answer = reserved_fleet(
        ec2,
        template(ec2),
        [override(SUBNET_A), override(SUBNET_B)],
        1,
        types=[ODCR],
        CapacityReservationTarget={"CapacityReservationResourceGroupArns": [pool]},
    )
    assert sources(ec2, answer) == [first["CapacityReservationId"]]
    by_template = template(
        ec2,
        "grouped",
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": pool}
        },
    )
    answer = reserved_fleet(
        ec2, by_template, [override(SUBNET_A), override(SUBNET_B)], 1, types=[ODCR]
    )
    assert sources(ec2, answer) == [second["CapacityReservationId"]]


def test_a_capacity_block_in_a_reserved_fleet_says_capacity_block(api, ec2, emu):
    block = seed_block(emu, count=2, duration_hours=24)
    answer = reserved_fleet(
        ec2,
        template(ec2),
        [override(SUBNET_A, "p5.48xlarge")],
        2,
        types=[BLOCK],
        CapacityReservationTarget={"CapacityReservationIds": [block]},
    )
    assert {lifecycle for lifecycle, _ in launched(answer)} == {"capacity-block"}
    assert sources(ec2, answer) == [block, block]


def _two_rungs(api: Any, ec2: Any) -> tuple[str, str, dict[str, Any]]:
    """An ODCR that the first override (priority 1) matches and an interruptible reservation
    that the second (priority 2) matches."""
    odcr = api.reserve(count=1, InstanceMatchCriteria="targeted")["CapacityReservationId"]
    source = api.reserve(availability_zone="us-east-1b", count=1)["CapacityReservationId"]
    lend(ec2, source, 1)
    lent = interruptible_of(api, source)
    options = {
        "AllocationStrategy": "prioritized",
        "CapacityReservationTarget": {"CapacityReservationIds": [odcr, lent]},
    }
    return odcr, lent, options


def _order_fleet(ec2: Any, options: dict[str, Any]) -> dict[str, Any]:
    return reserved_fleet(
        ec2,
        template(ec2),
        [override(SUBNET_A, Priority=1.0), override(SUBNET_B, Priority=2.0)],
        1,
        types=[INTERRUPTIBLE, ODCR],
        **options,
    )


def test_reservation_types_are_tried_in_the_order_listed_by_default(api, ec2):
    odcr, lent, options = _two_rungs(api, ec2)
    answer = _order_fleet(ec2, options)
    assert sources(ec2, answer) == [lent]
    assert api.get(odcr)["AvailableInstanceCount"] == 1
    assert [lifecycle for lifecycle, _ in launched(answer)] == [
        "interruptible-capacity-reservation"
    ]


def test_the_knob_reads_the_override_priority_first(api, ec2, emu):
    emu.configure(reserved_fleet_order="override-priority")
    odcr, lent, options = _two_rungs(api, ec2)
    answer = _order_fleet(ec2, options)
    assert sources(ec2, answer) == [odcr]
    assert api.get(lent)["AvailableInstanceCount"] == 1


def _interruptible_only(api: Any, ec2: Any) -> dict[str, Any]:
    source = api.reserve(availability_zone="us-east-1b", count=1)["CapacityReservationId"]
    lend(ec2, source, 1)
    lent = interruptible_of(api, source)
    return reserved_fleet(
        ec2,
        template(ec2),
        [override(SUBNET_B)],
        2,
        types=[INTERRUPTIBLE],
        fallback=True,
        CapacityReservationTarget={"CapacityReservationIds": [lent]},
    )


def test_an_interruptible_only_fleet_does_not_fall_back_by_default(api, ec2):
    answer = _interruptible_only(api, ec2)
    assert [lifecycle for lifecycle, _ in launched(answer)] == [
        "interruptible-capacity-reservation"
    ]
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["ReservationCapacityExceeded"]


def test_the_knob_lets_an_interruptible_only_fleet_fall_back(api, ec2, emu):
    emu.configure(interruptible_fallback=True)
    answer = _interruptible_only(api, ec2)
    assert sorted(lifecycle for lifecycle, _ in launched(answer)) == [
        "interruptible-capacity-reservation",
        "on-demand",
    ]
    assert answer["Errors"] == []


def _short_fleet_with_minimum(api: Any, ec2: Any) -> dict[str, Any]:
    reservation = api.reserve(count=1, InstanceMatchCriteria="targeted")["CapacityReservationId"]
    return ec2.create_fleet(  # type: ignore[no-any-return]
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template(ec2), "Version": "1"},
                "Overrides": [override()],
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": 2,
            "DefaultTargetCapacityType": "reserved-capacity",
        },
        OnDemandOptions={"MinTargetCapacity": 2, "SingleAvailabilityZone": True},
        ReservedCapacityOptions={
            "ReservationTypes": [ODCR],
            "CapacityReservationTarget": {"CapacityReservationIds": [reservation]},
        },
    )


def test_min_target_capacity_does_not_bind_a_reserved_fleet_by_default(api, ec2):
    answer = _short_fleet_with_minimum(api, ec2)
    assert len(launched(answer)) == 1


def test_the_knob_makes_min_target_capacity_bind_a_reserved_fleet(api, ec2, emu):
    emu.configure(reserved_fleet_min_target=True)
    answer = _short_fleet_with_minimum(api, ec2)
    assert launched(answer) == []
    assert answer["Errors"]


@pytest.mark.parametrize(
    ("target", "reserved", "fleet_type"),
    [
        # ReservedCapacityOptions without reserved-capacity
        ({"DefaultTargetCapacityType": "on-demand"}, {"ReservationTypes": [ODCR]}, "instant"),
        # OnDemandTargetCapacity beside reserved-capacity
        (
            {"DefaultTargetCapacityType": "reserved-capacity", "OnDemandTargetCapacity": 1},
            {"ReservationTypes": [ODCR]},
            "instant",
        ),
        # reserved capacity in a fleet that is not instant
        (
            {"DefaultTargetCapacityType": "reserved-capacity"},
            {"ReservationTypes": [ODCR]},
            "request",
        ),
        # ids and groups both
        (
            {"DefaultTargetCapacityType": "reserved-capacity"},
            {
                "CapacityReservationTarget": {
                    "CapacityReservationIds": ["cr-0123456789abcdef0"],
                    "CapacityReservationResourceGroupArns": [
                        "arn:aws:resource-groups:us-east-1:123456789012:group/pool"
                    ],
                }
            },
            "instant",
        ),
    ],
)
def test_reserved_fleets_refuse_what_aws_does_not_support(api, ec2, target, reserved, fleet_type):
    with pytest.raises(ClientError) as exc:
        ec2.create_fleet(
            Type=fleet_type,
            LaunchTemplateConfigs=[
                {"LaunchTemplateSpecification": {"LaunchTemplateId": template(ec2), "Version": "1"}}
            ],
            TargetCapacitySpecification={"TotalTargetCapacity": 1, **target},
            ReservedCapacityOptions=reserved,
        )
    assert error_of(exc) == ("InvalidParameterCombination", 400)


# -- use-capacity-reservations-first ---------------------------------------------------------


def _first_fleet(ec2: Any, strategy: bool) -> dict[str, Any]:
    name = "first" if strategy else "plain"
    options: dict[str, Any] = {"AllocationStrategy": "prioritized"}
    if strategy:
        options["CapacityReservationOptions"] = {"UsageStrategy": "use-capacity-reservations-first"}
    return ec2.create_fleet(  # type: ignore[no-any-return]
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateId": template(ec2, name),
                    "Version": "1",
                },
                "Overrides": [override(SUBNET_A, Priority=1.0), override(SUBNET_B, Priority=2.0)],
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": 2,
            "DefaultTargetCapacityType": "on-demand",
        },
        OnDemandOptions=options,
    )


def test_reservations_first_uses_every_overrides_reservations_before_on_demand(api, ec2):
    # Without the strategy the first override (priority 1, no reservation) launches
    # On-Demand, beside the second's unused reservation.
    reservation = api.reserve(availability_zone="us-east-1b", count=2)["CapacityReservationId"]
    answer = _first_fleet(ec2, strategy=False)
    assert sources(ec2, answer) == [None, None]
    assert api.get(reservation)["AvailableInstanceCount"] == 2
    answer = _first_fleet(ec2, strategy=True)
    assert sources(ec2, answer) == [reservation, reservation]


# -- IAM: what a resource-groups call asks ---------------------------------------------------


def test_resource_group_calls_are_authorized_on_the_group_they_name():
    caller = reserve_role("123456789012")
    pool = "arn:aws:resource-groups:us-east-1:123456789012:group/pool"
    for params in ({"Group": "pool"}, {"Group": pool}, {"GroupName": "pool"}):
        [request] = requests("resource-groups", "ListGroupResources", params, caller)
        assert (request.action, request.resource) == ("resource-groups:ListGroupResources", pool)


def test_a_reserved_fleet_runs_instances_in_the_reservations_it_names(api, ec2):
    reservation = api.reserve(count=1, InstanceMatchCriteria="targeted")
    params = {
        "Type": "instant",
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template(ec2), "Version": "1"},
                "Overrides": [override()],
            }
        ],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "reserved-capacity",
        },
        "ReservedCapacityOptions": {
            "CapacityReservationTarget": {
                "CapacityReservationIds": [reservation["CapacityReservationId"]]
            }
        },
    }
    caller = reserve_role(reservation["OwnerId"])
    asked = {(r.action, r.resource) for r in requests("ec2", "CreateFleet", params, caller)}
    assert ("ec2:RunInstances", reservation["CapacityReservationArn"]) in asked


# -- served ----------------------------------------------------------------------------------


def test_the_server_answers_the_group_operations(monkeypatch: pytest.MonkeyPatch) -> None:
    """``capacity-broker local`` and the integration suite reach the emulator as a server:
    moto's server builds each service's routes from its URL map, which lacked these paths."""
    from emulator.server import Server
    from emulator.state import world

    monkeypatch.setattr(world, "mode", world.mode)  # the server sets it: given back after
    with Server() as server:
        groups = boto3.client(
            "resource-groups", region_name="us-east-1", endpoint_url=server.endpoint
        )
        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=server.endpoint)
        pool = make_pool(groups, "served")
        made = ec2.create_capacity_reservation(
            InstanceType="c5.large",
            InstancePlatform="Linux/UNIX",
            AvailabilityZone="us-east-1a",
            InstanceCount=1,
        )["CapacityReservation"]
        added = groups.group_resources(Group=pool, ResourceArns=[made["CapacityReservationArn"]])
        assert added["Succeeded"] == [made["CapacityReservationArn"]]
        assert [i["ResourceArn"] for i in listed(groups, pool)] == [made["CapacityReservationArn"]]
        groups.ungroup_resources(Group=pool, ResourceArns=[made["CapacityReservationArn"]])
        assert listed(groups, pool) == []


# -- scenarios ---------------------------------------------------------------------------


def test_a_scenario_seeds_interruptible_reservations_and_pools(api, ec2, emu, groups):
    ids = emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "reservations": [
                        {
                            "name": "source",
                            "instance_type": "c5.large",
                            "availability_zone": "us-east-1b",
                            "count": 4,
                        },
                        {
                            "name": "standing",
                            "instance_type": "c5.large",
                            "availability_zone": "us-east-1a",
                            "count": 2,
                            "match": "targeted",
                        },
                    ],
                    "interruptible_reservations": [
                        {"name": "lent", "source": "source", "count": 3}
                    ],
                    "reservation_groups": [
                        {"name": "cluster-pool", "members": ["standing", "lent"]}
                    ],
                }
            }
        }
    )
    lent = api.get(ids.reservations["lent"])
    assert lent["Interruptible"] is True
    assert lent["InterruptionInfo"]["SourceCapacityReservationId"] == ids.reservations["source"]
    assert api.get(ids.reservations["source"])["AvailableInstanceCount"] == 1
    pool = ids.groups["cluster-pool"]
    assert [i["ResourceArn"] for i in listed(groups, pool)] == [
        api.get(ids.reservations["standing"])["CapacityReservationArn"],
        lent["CapacityReservationArn"],
    ]
    assert ids.to_dict()["groups"] == {"cluster-pool": pool}


def test_an_interruptible_allocation_is_authorized_on_its_source(api):
    source = api.reserve(count=2)
    caller = reserve_role(source["OwnerId"])
    for action in (
        "CreateInterruptibleCapacityReservationAllocation",
        "UpdateInterruptibleCapacityReservationAllocation",
    ):
        params = {"CapacityReservationId": source["CapacityReservationId"], "InstanceCount": 1}
        asked = {(r.action, r.resource) for r in requests("ec2", action, params, caller)}
        assert asked == {(f"ec2:{action}", source["CapacityReservationArn"])}


def test_a_capacity_block_launch_into_a_group_takes_its_blocks_only(api, ec2, emu, groups):
    block = api.get(seed_block(emu))
    pool = make_pool(groups)
    groups.group_resources(Group=pool, ResourceArns=[block["CapacityReservationArn"]])
    market = {"InstanceMarketOptions": {"MarketType": "capacity-block"}}
    [instance] = api.run(instance_type="p5.48xlarge", count=1, **market, **group_target(pool))
    assert reservation_of(ec2, instance) == block["CapacityReservationId"]
    with pytest.raises(ClientError) as exc:  # the block is full: never On-Demand beside it
        api.run(instance_type="p5.48xlarge", count=1, **market, **group_target(pool))
    assert error_of(exc) == ("ReservationCapacityExceeded", 400)
