"""DescribeCapacityBlockOfferings, PurchaseCapacityBlock and the blocks they create."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError
from emu_helpers import NOW, error_of

pytestmark = pytest.mark.emulator

FIRST_START = datetime(2026, 11, 21, 11, 30, tzinfo=UTC)  # today's 11:30 UTC block start
SIZE_TAG = "aws:ec2capacityreservation:incrementalRequestedQuantity"
TYPE_TAG = "aws:ec2capacityreservation:capacityReservationType"


@pytest.fixture
def catalogue(emu, world):
    """p5 supply in us-east-1b (8 instances) and us-east-1a (2), bookable for 3 weeks; the
    daily blocks only (same-day blocks: ``test_same_day_blocks_end_at_11_30``)."""
    emu.load_scenario(
        {
            "settings": {"same_day_offerings": False},
            "regions": {
                "us-east-1": {
                    "offerings": [
                        {
                            "instance_type": "p5.48xlarge",
                            "availability_zone": "us-east-1b",
                            "max_instance_count": 8,
                            "price_per_instance_hour": "31.46",
                            "earliest_start": "+0h",
                            "latest_start": "+21d",
                        },
                        {
                            "instance_type": "p5.48xlarge",
                            "availability_zone": "us-east-1a",
                            "max_instance_count": 2,
                            "price_per_instance_hour": "30",
                            "earliest_start": "+2d",
                            "latest_start": "+5d",
                        },
                    ]
                }
            },
        }
    )
    return world


def offers(ec2, count=1, hours=24, **kwargs) -> list[dict]:
    return ec2.describe_capacity_block_offerings(
        InstanceType=kwargs.pop("InstanceType", "p5.48xlarge"),
        InstanceCount=count,
        CapacityDurationHours=hours,
        **kwargs,
    )["CapacityBlockOfferings"]


def buy(ec2, offering: dict, **kwargs) -> dict:
    return ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
        InstancePlatform=kwargs.pop("InstancePlatform", "Linux/UNIX"),
        **kwargs,
    )["CapacityReservation"]


# -- offerings -----------------------------------------------------------------------------
def test_offerings_are_daily_blocks_sorted_by_start(catalogue, ec2):
    found = offers(ec2, 2)
    starts = [o["StartDate"] for o in found]
    assert starts == sorted(starts)
    assert starts[0] == FIRST_START
    first = found[0]
    assert first["CapacityBlockOfferingId"].startswith("cb-")
    assert (first["InstanceType"], first["AvailabilityZone"]) == ("p5.48xlarge", "us-east-1b")
    assert first["InstanceCount"] == 2
    assert first["EndDate"] == FIRST_START + timedelta(hours=24)
    assert first["CapacityBlockDurationHours"] == 24
    assert first["UpfrontFee"] == "1510.08"
    assert (first["CurrencyCode"], first["Tenancy"]) == ("USD", "default")
    # us-east-1a's supply appears from +2d to +5d, interleaved by start date
    a_starts = [o["StartDate"] for o in found if o["AvailabilityZone"] == "us-east-1a"]
    assert a_starts == [FIRST_START + timedelta(days=d) for d in (2, 3, 4)]
    assert len(found) == 21 + 3  # 1b: today and the next 20 days; 1a: 3 days


def test_offering_ids_are_stable(catalogue, ec2):
    assert [o["CapacityBlockOfferingId"] for o in offers(ec2)] == [
        o["CapacityBlockOfferingId"] for o in offers(ec2)
    ]
    assert (
        offers(ec2, 1)[0]["CapacityBlockOfferingId"] != offers(ec2, 2)[0]["CapacityBlockOfferingId"]
    )


@pytest.mark.parametrize("days", [*range(1, 15), 21, 28, 91, 175, 182])
def test_valid_durations(catalogue, ec2, days):
    found = offers(ec2, 1, days * 24)
    assert found
    assert {o["CapacityBlockDurationHours"] for o in found} == {days * 24}
    assert all(o["EndDate"] - o["StartDate"] == timedelta(days=days) for o in found)


@pytest.mark.parametrize("hours", [0, 1, 12, 25, 15 * 24, 20 * 24, 22 * 24, 189 * 24, 364 * 24])
def test_invalid_durations(catalogue, ec2, hours):
    with pytest.raises(ClientError) as exc:
        offers(ec2, 1, hours)
    assert error_of(exc) == ("InvalidParameterValue", 400)


@pytest.mark.parametrize("count", [1, 8])
def test_instance_counts_within_supply(catalogue, ec2, count):
    assert offers(ec2, count)


@pytest.mark.parametrize("count", [0, 65, -1])
def test_instance_count_must_be_1_to_64(catalogue, ec2, count):
    with pytest.raises(ClientError) as exc:
        offers(ec2, count)
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_more_than_the_supply_has_is_no_offering(catalogue, ec2):
    assert offers(ec2, 9) == []
    assert offers(ec2, 1, InstanceType="trn1.32xlarge") == []


def test_missing_instance_type_and_optional_count(catalogue, ec2):
    with pytest.raises(ClientError) as exc:
        ec2.describe_capacity_block_offerings(InstanceCount=1, CapacityDurationHours=24)
    assert error_of(exc) == ("MissingParameter", 400)
    # botocore 1.44.5 requires only CapacityDurationHours (it refused a search without
    # InstanceCount): without one, the largest block each supply sells (chosen).
    found = ec2.describe_capacity_block_offerings(
        InstanceType="p5.48xlarge", CapacityDurationHours=24
    )["CapacityBlockOfferings"]
    first = next(o for o in found if o["AvailabilityZone"] == "us-east-1b")
    assert first["InstanceCount"] == 8
    assert {o["InstanceCount"] for o in found if o["AvailabilityZone"] == "us-east-1a"} == {2}


def test_instance_type_preferences(catalogue, ec2, emu):
    emu.capacity().catalogue.supply[1].instance_type = "p5e.48xlarge"
    found = ec2.describe_capacity_block_offerings(
        InstanceTypePreferences=[{"InstanceType": "p5e.48xlarge"}],
        InstanceCount=1,
        CapacityDurationHours=24,
    )["CapacityBlockOfferings"]
    assert {o["InstanceType"] for o in found} == {"p5e.48xlarge"}


def test_start_and_end_date_ranges(catalogue, ec2):
    start = NOW + timedelta(days=3)
    found = offers(ec2, 1, StartDateRange=start)
    assert found
    assert min(o["StartDate"] for o in found) == FIRST_START + timedelta(days=3)
    end = NOW + timedelta(days=5)
    found = offers(ec2, 1, 48, EndDateRange=end)
    assert found
    assert all(o["EndDate"] <= end for o in found)
    assert max(o["EndDate"] for o in found) == FIRST_START + timedelta(days=4)
    window = offers(ec2, 1, 24, StartDateRange=start, EndDateRange=FIRST_START + timedelta(days=5))
    assert sorted({o["StartDate"] for o in window}) == [
        FIRST_START + timedelta(days=3),
        FIRST_START + timedelta(days=4),
    ]
    assert (
        offers(ec2, 1, 24 * 3, StartDateRange=start, EndDateRange=start + timedelta(days=2)) == []
    )


def test_a_start_range_in_the_past_starts_now(catalogue, ec2):
    found = offers(ec2, 1, StartDateRange=NOW - timedelta(days=30))
    assert found[0]["StartDate"] == FIRST_START


def test_offerings_are_paged(catalogue, ec2):
    everything = offers(ec2)
    first = ec2.describe_capacity_block_offerings(
        InstanceType="p5.48xlarge", InstanceCount=1, CapacityDurationHours=24, MaxResults=10
    )
    assert len(first["CapacityBlockOfferings"]) == 10
    assert first["NextToken"]
    paginator = ec2.get_paginator("describe_capacity_block_offerings")
    pages = list(
        paginator.paginate(
            InstanceType="p5.48xlarge",
            InstanceCount=1,
            CapacityDurationHours=24,
            PaginationConfig={"PageSize": 10},
        )
    )
    assert [len(p["CapacityBlockOfferings"]) for p in pages] == [10, 10, 4]
    assert [o for p in pages for o in p["CapacityBlockOfferings"]] == everything


def test_offerings_dry_run(catalogue, ec2):
    with pytest.raises(ClientError) as exc:
        offers(ec2, DryRun=True)
    assert error_of(exc) == ("DryRunOperation", 412)


# -- purchase ------------------------------------------------------------------------------
def test_purchase_creates_a_scheduled_capacity_block(catalogue, ec2, api):
    offering = offers(ec2, 2)[0]
    tags = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]
    block = buy(ec2, offering, TagSpecifications=tags)
    assert block["ReservationType"] == "capacity-block"
    assert block["State"] == "scheduled"
    assert block["CapacityBlockId"].startswith("cb-")
    assert (block["InstanceType"], block["AvailabilityZone"]) == ("p5.48xlarge", "us-east-1b")
    # EC2: "Before a Capacity Block reservation begins, the available capacity appears as
    # zero"; the size is in an aws: tag (the emulator used to report 2 of 2 here)
    assert (block["TotalInstanceCount"], block["AvailableInstanceCount"]) == (0, 0)
    assert block["CapacityAllocations"] == []
    assert (block["StartDate"], block["EndDate"]) == (offering["StartDate"], offering["EndDate"])
    assert (block["EndDateType"], block["InstanceMatchCriteria"]) == ("limited", "targeted")
    assert block["InstancePlatform"] == "Linux/UNIX"
    assert sorted((t["Key"], t["Value"]) for t in block["Tags"]) == sorted(
        [("team", "ml"), (SIZE_TAG, "2"), (TYPE_TAG, "capacity-block")]
    )
    assert api.get(block["CapacityReservationId"]) == block
    described = ec2.describe_tags(
        Filters=[{"Name": "resource-id", "Values": [block["CapacityReservationId"]]}]
    )["Tags"]
    assert sorted((t["ResourceType"], t["Key"], t["Value"]) for t in described) == sorted(
        [
            ("capacity-reservation", "team", "ml"),
            ("capacity-reservation", SIZE_TAG, "2"),
            ("capacity-reservation", TYPE_TAG, "capacity-block"),
        ]
    )
    # a block does not take On-Demand capacity
    assert api.pool("us-east-1b", "p5.48xlarge")["used"] == 0


def test_purchase_of_a_block_that_starts_now_is_active(catalogue, ec2, emu):
    emu.set_time(FIRST_START)
    offering = offers(ec2)[0]
    assert offering["StartDate"] == FIRST_START
    assert buy(ec2, offering)["State"] == "active"


def test_the_same_offering_cannot_be_bought_twice(catalogue, ec2, api):
    offering = offers(ec2, 2)[0]
    buy(ec2, offering)
    with pytest.raises(ClientError) as exc:
        buy(ec2, offering)
    assert error_of(exc) == ("InvalidParameterValue", 400)
    # Read from the answer: "reservation-type" is not among the operation's filters.
    assert [r["ReservationType"] for r in api.all()].count("capacity-block") == 1
    assert offering["CapacityBlockOfferingId"] not in {
        o["CapacityBlockOfferingId"] for o in offers(ec2, 2)
    }


def test_a_purchase_uses_up_supply(catalogue, ec2):
    first_day = [o for o in offers(ec2, 6) if o["StartDate"] == FIRST_START]
    buy(ec2, first_day[0])
    # 2 of 8 left on the first day: 3 no longer fit, 2 still do; other days are untouched
    assert FIRST_START not in {o["StartDate"] for o in offers(ec2, 3)}
    assert FIRST_START in {o["StartDate"] for o in offers(ec2, 2)}
    assert FIRST_START + timedelta(days=1) in {o["StartDate"] for o in offers(ec2, 8)}
    # a two-day block starting the day before would overlap the purchase
    starts = {o["StartDate"] for o in offers(ec2, 3, 48)}
    assert FIRST_START not in starts
    assert FIRST_START + timedelta(days=1) in starts


def test_an_offering_that_has_started_cannot_be_bought(catalogue, ec2, emu):
    offering = offers(ec2)[0]
    emu.advance(6 * 3600)  # past 11:30
    with pytest.raises(ClientError) as exc:
        buy(ec2, offering)
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_unknown_offering_and_bad_platform(catalogue, ec2):
    with pytest.raises(ClientError) as exc:
        ec2.purchase_capacity_block(
            CapacityBlockOfferingId="cb-0123456789abcdef0", InstancePlatform="Linux/UNIX"
        )
    assert error_of(exc) == ("InvalidParameterValue", 400)
    with pytest.raises(ClientError) as exc:
        buy(ec2, offers(ec2)[0], InstancePlatform="Plan 9")
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_purchase_dry_run_buys_nothing(catalogue, ec2, api):
    offering = offers(ec2)[0]
    with pytest.raises(ClientError) as exc:
        buy(ec2, offering, DryRun=True)
    assert error_of(exc) == ("DryRunOperation", 412)
    assert api.all() == []
    buy(ec2, offering)


def test_a_purchased_block_from_purchase_to_expiry(catalogue, ec2, api, emu):
    offering = offers(ec2, 2, 48)[0]
    block_id = buy(ec2, offering)["CapacityReservationId"]
    emu.set_time(offering["StartDate"])
    started = api.get(block_id)
    assert started["State"] == "active"
    # from its start the block reports its size; the size tag stays
    assert (started["TotalInstanceCount"], started["AvailableInstanceCount"]) == (2, 2)
    assert {"Key": SIZE_TAG, "Value": "2"} in started["Tags"]
    ids = api.run_in_block(block_id, 2)
    assert len(ids) == 2
    assert api.get(block_id)["AvailableInstanceCount"] == 0
    emu.set_time(offering["EndDate"])
    r = api.get(block_id)
    assert (r["State"], r["AvailableInstanceCount"]) == ("expired", 0)


def test_instances_in_a_block_are_terminated_from_30_minutes_before_its_end(
    catalogue, ec2, api, emu
):
    """EC2 User Guide, "Work with Capacity Blocks": "Thirty minutes before the reservation
    expires, we begin to terminate any instances that are still running in the Capacity
    Block" (the emulator used to leave them running until the end)."""
    offering = offers(ec2, 2)[0]
    block_id = buy(ec2, offering)["CapacityReservationId"]
    emu.set_time(offering["StartDate"])
    ids = api.run_in_block(block_id, 2)
    emu.set_time(offering["EndDate"] - timedelta(minutes=31))
    assert api.get(block_id)["AvailableInstanceCount"] == 0
    emu.set_time(offering["EndDate"] - timedelta(minutes=30))
    block = api.get(block_id)
    assert (block["State"], block["AvailableInstanceCount"]) == ("active", 2)
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances(InstanceIds=ids)["Reservations"]
        for i in r["Instances"]
    }
    assert set(states.values()) <= {"shutting-down", "terminated"}, states


@pytest.mark.parametrize(
    ("instance_type", "ultraserver_type", "lead", "ultraserver_minutes"),
    [
        ("p5.48xlarge", None, 30, 60),
        ("p6e-gb200.36xlarge", None, 60, 60),  # a type EC2 sells only in UltraServers
        ("trn2.48xlarge", "u-trn2x64", 60, 60),
        # the knob the other way: AWS's own "Thirty minutes" for every block
        ("p6e-gb200.36xlarge", None, 30, 30),
        ("trn2.48xlarge", "u-trn2x64", 30, 30),
    ],
)
def test_a_block_refuses_launches_once_ec2_is_ending_its_instances(
    emu, api, instance_type, ultraserver_type, lead, ultraserver_minutes
):
    """Nothing launched into a block whose instances EC2 is terminating could run: the
    emulator used to launch into it (up to its end) and terminate the instances at once. The
    UltraServer hour is chosen (a third party's word): ``ultraserver_reclaim_minutes``."""
    emu.configure(ultraserver_reclaim_minutes=ultraserver_minutes)
    now = emu.now()
    block = emu.capacity().new_block(
        instance_type=instance_type,
        availability_zone="us-east-1b",
        count=2,
        start=now - timedelta(hours=1),
        end=now + timedelta(minutes=lead + 1),
        ultraserver_type=ultraserver_type,
    )
    emu.capacity().add_existing(block, {})

    def launch():
        return api.run_in_block(block.id, 1, instance_type=instance_type)

    assert len(launch()) == 1
    emu.advance(2 * 60)  # inside its last `lead` minutes
    with pytest.raises(ClientError) as exc:
        launch()
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)


# -- blocks before their start ---------------------------------------------------------------
def _seed_blocks(emu, *blocks: dict) -> dict[str, str]:
    ids = emu.load_scenario({"regions": {"us-east-1": {"capacity_blocks": list(blocks)}}})
    return ids.reservations


def _block(name: str, count: int, start: str, **more) -> dict:
    """A scenario Capacity Block of p5.48xlarge (us-east-1b unless ``more`` says otherwise)."""
    return {
        "name": name,
        "instance_type": "p5.48xlarge",
        "availability_zone": "us-east-1b",
        "count": count,
        "start": start,
        **more,
    }


def test_a_scheduled_block_shows_no_capacity_until_it_starts(emu, api, world):
    ids = _seed_blocks(
        emu,
        _block("next", 4, "+2h", duration_hours=24),
    )
    before = api.get(ids["next"])
    assert before["State"] == "scheduled"
    assert (before["TotalInstanceCount"], before["AvailableInstanceCount"]) == (0, 0)
    assert {"Key": SIZE_TAG, "Value": "4"} in before["Tags"]
    assert {"Key": TYPE_TAG, "Value": "capacity-block"} in before["Tags"]
    # found by its size tag, as EC2 lets a caller filter on any tag
    tagged = api.ids(Filters=[{"Name": f"tag:{SIZE_TAG}", "Values": ["4"]}])
    assert tagged == {ids["next"]}
    emu.advance(2 * 3600)
    after = api.get(ids["next"])
    assert after["State"] == "active"
    assert (after["TotalInstanceCount"], after["AvailableInstanceCount"]) == (4, 4)
    assert after["CapacityAllocations"] == [{"AllocationType": "used", "Count": 0}]


def test_a_payment_pending_block_shows_no_capacity_until_paid_and_started(emu, api, world):
    ids = _seed_blocks(
        emu,
        _block("unpaid", 2, "+2h", payment="pending", paid="+1h"),
        _block("never-paid", 2, "+2h", payment="pending"),
    )
    block = api.get(ids["unpaid"])
    assert block["State"] == "payment-pending"
    assert (block["TotalInstanceCount"], block["AvailableInstanceCount"]) == (0, 0)
    assert {"Key": SIZE_TAG, "Value": "2"} in block["Tags"]
    emu.advance(3600)
    assert api.get(ids["unpaid"])["State"] == "scheduled"
    emu.advance(3600)
    assert api.get(ids["unpaid"])["State"] == "active"
    assert api.get(ids["unpaid"])["AvailableInstanceCount"] == 2
    assert api.get(ids["never-paid"])["State"] == "payment-pending"
    assert api.get(ids["never-paid"])["AvailableInstanceCount"] == 0


def test_an_unpaid_block_fails_its_payment_after_12_hours(emu, api, world):
    """botocore's ``CapacityReservation.State``: "payment-failed - (Capacity Blocks) The
    upfront payment was not processed in the 12-hour time frame. Your Capacity Block was
    released." (the emulator used to keep it payment-pending for ever)."""
    ids = _seed_blocks(
        emu,
        _block("never-paid", 2, "+1d", payment="pending"),
        _block("paid-late", 2, "+1d", payment="pending", paid="+13h"),
    )
    emu.advance(12 * 3600 - 1)
    assert api.get(ids["never-paid"])["State"] == "payment-pending"
    emu.advance(1)
    assert api.get(ids["never-paid"])["State"] == "payment-failed"
    assert api.get(ids["paid-late"])["State"] == "payment-failed"
    emu.advance(3600)
    assert api.get(ids["paid-late"])["State"] == "payment-failed"  # final
    assert api.get(ids["never-paid"])["AvailableInstanceCount"] == 0


def test_the_payment_timeout_is_a_knob(emu, api, world):
    emu.configure(payment_timeout_seconds=3600)
    ids = _seed_blocks(emu, _block("never-paid", 2, "+1d", payment="pending"))
    emu.advance(3600)
    assert api.get(ids["never-paid"])["State"] == "payment-failed"


def test_a_block_that_has_not_started_cannot_be_launched_into(emu, api, world):
    ids = _seed_blocks(
        emu,
        _block("next", 2, "+1h", payment="pending"),
    )
    with pytest.raises(ClientError) as exc:
        api.run_in_block(ids["next"])
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)


def test_callers_cannot_set_or_remove_the_block_size_tag(emu, api, ec2, world):
    ids = _seed_blocks(
        emu,
        _block("next", 2, "+1h"),
    )
    for call in (ec2.create_tags, ec2.delete_tags):
        with pytest.raises(ClientError) as exc:
            call(Resources=[ids["next"]], Tags=[{"Key": SIZE_TAG, "Value": "64"}])
        assert error_of(exc) == ("InvalidParameterValue", 400)
    assert {"Key": SIZE_TAG, "Value": "2"} in api.get(ids["next"])["Tags"]


# -- topology ------------------------------------------------------------------------------
def _topology_world(emu, ec2):
    ec2.create_capacity_reservation(
        InstanceType="c5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1b",
        InstanceCount=1,
    )
    return _seed_blocks(
        emu,
        _block("no-topology", 1, "-1h"),
        _block(
            "not-started",
            1,
            "+1d",
            availability_zone="us-east-1a",
            network_nodes=["nn-xa", "nn-xb"],
        ),
        *[
            _block(f"block-{n}", 1, "-1h", network_nodes=[f"nn-{n}a", f"nn-{n}b"])
            for n in range(12)
        ],
    )


def topology_pages(ec2, **kwargs) -> tuple[list[dict], list[int]]:
    seen, sizes, token = [], [], None
    while True:
        page = ec2.describe_capacity_reservation_topology(
            **kwargs, **({"NextToken": token} if token else {})
        )
        sizes.append(len(page["CapacityReservations"]))
        seen += page["CapacityReservations"]
        token = page.get("NextToken")
        if not token:
            return seen, sizes


def test_capacity_reservation_topology(emu, ec2, world):
    ids = _topology_world(emu, ec2)
    one = ec2.describe_capacity_reservation_topology(CapacityReservationIds=[ids["block-3"]])[
        "CapacityReservations"
    ]
    assert one == [
        {
            "CapacityReservationId": ids["block-3"],
            "State": "active",
            "InstanceType": "p5.48xlarge",
            "NetworkNodes": ["nn-3a", "nn-3b"],
            "AvailabilityZoneId": "use1-az1",
            "AvailabilityZone": "us-east-1b",
        }
    ]
    # every reservation is described, in pages of up to 10; NetworkNodes only where EC2 has a
    # topology for an active or pending reservation (botocore: "null or empty if ... a state
    # other than active or pending")
    seen, sizes = topology_pages(ec2)
    assert sizes == [10, 5]
    nodes = {r["CapacityReservationId"]: r.get("NetworkNodes") for r in seen}
    assert nodes[ids["no-topology"]] is None
    assert nodes[ids["not-started"]] is None
    assert all(nodes[ids[f"block-{n}"]] == [f"nn-{n}a", f"nn-{n}b"] for n in range(12))
    with pytest.raises(ClientError) as exc:
        ec2.describe_capacity_reservation_topology(MaxResults=11)
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_topology_refuses_ids_with_max_results(emu, ec2, world):
    """botocore's model, MaxResults: "You can't specify this parameter and the Capacity
    Reservation IDs parameter in the same request" (the emulator used to answer it)."""
    ids = _topology_world(emu, ec2)
    with pytest.raises(ClientError) as exc:
        ec2.describe_capacity_reservation_topology(
            CapacityReservationIds=[ids["block-1"]], MaxResults=10
        )
    assert error_of(exc) == ("InvalidParameterCombination", 400)


def test_topology_takes_at_most_ten_ids(emu, ec2, world):
    ids = _topology_world(emu, ec2)
    eleven = [ids[f"block-{n}"] for n in range(11)]
    with pytest.raises(ClientError) as exc:
        ec2.describe_capacity_reservation_topology(CapacityReservationIds=eleven)
    assert error_of(exc) == ("InvalidParameterValue", 400)
    ten = ec2.describe_capacity_reservation_topology(CapacityReservationIds=eleven[:10])
    assert len(ten["CapacityReservations"]) == 10
    assert "NextToken" not in ten


def test_topology_filters(emu, ec2, world):
    ids = _topology_world(emu, ec2)
    seen, _ = topology_pages(ec2, Filters=[{"Name": "availability-zone", "Values": ["us-east-1a"]}])
    assert [r["CapacityReservationId"] for r in seen] == [ids["not-started"]]
    seen, _ = topology_pages(ec2, Filters=[{"Name": "instance-type", "Values": ["c5.*"]}])
    assert [r["InstanceType"] for r in seen] == ["c5.large"]
    with pytest.raises(ClientError) as exc:
        ec2.describe_capacity_reservation_topology(Filters=[{"Name": "state", "Values": ["x"]}])
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_the_same_terms_are_offered_again_while_supply_lasts(catalogue, ec2):
    day_one = next(o for o in offers(ec2, 2) if o["StartDate"] == FIRST_START)
    buy(ec2, day_one)
    # 6 of 8 left on day one: 2 more are offered again, under a new offering id
    again = next(o for o in offers(ec2, 2) if o["StartDate"] == FIRST_START)
    assert again["CapacityBlockOfferingId"] != day_one["CapacityBlockOfferingId"]
    with pytest.raises(ClientError):
        buy(ec2, day_one)
    buy(ec2, again)
    buy(ec2, next(o for o in offers(ec2, 4) if o["StartDate"] == FIRST_START))
    assert FIRST_START not in {o["StartDate"] for o in offers(ec2, 1)}  # all 8 sold


def test_a_purchase_may_make_one_reservation_per_segment(emu, ec2):
    """botocore 1.44.5 PurchaseCapacityBlockResult: "When a Capacity Block offering contains
    multiple segments, a separate Capacity Reservation is created for each segment"
    (``CapacityReservations``; ``CapacityReservation`` is the first). A supply's ``segments``
    says how many; each is tagged as the purchase asked."""
    emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "offerings": [
                        {
                            "instance_type": "p4d.24xlarge",
                            "availability_zone": "us-east-1a",
                            "max_instance_count": 8,
                            "earliest_start": "+1d",
                            "latest_start": "+2d",
                            "segments": 2,
                        }
                    ]
                }
            }
        }
    )
    offer = ec2.describe_capacity_block_offerings(
        InstanceType="p4d.24xlarge", InstanceCount=3, CapacityDurationHours=24
    )["CapacityBlockOfferings"][0]
    bought = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
        InstancePlatform="Linux/UNIX",
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": "k", "Value": "v"}]}
        ],
    )
    segments = bought["CapacityReservations"]
    assert len(segments) == 2
    assert bought["CapacityReservation"] == segments[0]
    sizes = [
        next(
            t["Value"]
            for t in s["Tags"]
            if t["Key"] == "aws:ec2capacityreservation:incrementalRequestedQuantity"
        )
        for s in segments
    ]
    assert sorted(sizes) == ["1", "2"]
    assert all({"Key": "k", "Value": "v"} in s["Tags"] for s in segments)
    assert len({s["CapacityBlockId"] for s in segments}) == 1


# -- DescribeCapacityBlocks (issue 42: moto had no answer, the server sent an HTML 500) ------
def test_describe_capacity_blocks_shows_each_block_bought(catalogue, ec2):
    offering = offers(ec2, 2)[0]
    tags = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}]
    reservation = buy(ec2, offering, TagSpecifications=tags)
    block_id = reservation["CapacityBlockId"]
    [block] = ec2.describe_capacity_blocks(CapacityBlockIds=[block_id])["CapacityBlocks"]
    assert block["CapacityBlockId"] == block_id
    assert block["CapacityReservationIds"] == [reservation["CapacityReservationId"]]
    assert (block["StartDate"], block["EndDate"]) == (offering["StartDate"], offering["EndDate"])
    assert (block["AvailabilityZone"], block["State"]) == ("us-east-1b", "scheduled")
    assert block["AvailabilityZoneId"] == reservation["AvailabilityZoneId"]
    assert {"Key": "team", "Value": "ml"} in block["Tags"]
    every = ec2.describe_capacity_blocks()["CapacityBlocks"]
    assert block_id in [b["CapacityBlockId"] for b in every]

    def ids(filters):
        found = ec2.describe_capacity_blocks(Filters=filters)["CapacityBlocks"]
        return [b["CapacityBlockId"] for b in found if b["CapacityBlockId"] == block_id]

    assert ids([{"Name": "state", "Values": ["scheduled"]}]) == [block_id]
    assert ids([{"Name": "state", "Values": ["active"]}]) == []
    assert ids([{"Name": "capacity-block-id", "Values": [block_id]}]) == [block_id]
    assert ids([{"Name": "availability-zone", "Values": ["us-east-1a"]}]) == []
    assert ids([{"Name": "ultraserver-type", "Values": ["instances"]}]) == [block_id]
    assert ids([{"Name": "tags", "Values": ["ml"]}]) == [block_id]
    start = block["StartDate"].strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert ids([{"Name": "start-date", "Values": [start]}]) == [block_id]
    with pytest.raises(ClientError) as unknown:
        ec2.describe_capacity_blocks(CapacityBlockIds=["cb-0123456789abcdef0"])
    assert error_of(unknown) == ("InvalidCapacityBlockId.NotFound", 400)
    with pytest.raises(ClientError) as undocumented:
        ec2.describe_capacity_blocks(Filters=[{"Name": "instance-type", "Values": ["x"]}])
    assert error_of(undocumented) == ("InvalidParameterValue", 400)


# -- GetCapacityReservationUsage ---------------------------------------------------------------
def test_get_capacity_reservation_usage_counts_the_owner_s_instances(world, api):
    made = api.reserve(count=3, InstanceMatchCriteria="targeted")
    reservation_id = made["CapacityReservationId"]
    target = {"CapacityReservationTarget": {"CapacityReservationId": reservation_id}}
    api.run(count=2, CapacityReservationSpecification=target)
    usage = api.ec2.get_capacity_reservation_usage(CapacityReservationId=reservation_id)
    assert usage["CapacityReservationId"] == reservation_id
    assert (usage["InstanceType"], usage["TotalInstanceCount"]) == ("c5.large", 3)
    assert usage["AvailableInstanceCount"] == 1
    assert usage["InstanceUsages"] == [{"AccountId": made["OwnerId"], "UsedInstanceCount": 2}]
    assert usage["State"] == api.get(reservation_id)["State"]
    with pytest.raises(ClientError) as unknown:
        api.ec2.get_capacity_reservation_usage(CapacityReservationId="cr-0123456789abcdef0")
    assert error_of(unknown)[0] == "InvalidCapacityReservationId.NotFound"


# -- contract v4: same-day blocks, segments, the UltraServer fields ----------------------------


def _supply(emu, **extra):
    emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "offerings": [
                        {
                            "instance_type": "p5.48xlarge",
                            "availability_zone": "us-east-1a",
                            "max_instance_count": 64,
                            "price_per_instance_hour": "30",
                            "earliest_start": "+0h",
                            "latest_start": "+5d",
                            **extra,
                        }
                    ]
                }
            }
        }
    )


def test_same_day_blocks_end_at_11_30(emu, ec2):
    """EC2 User Guide, "Find and purchase Capacity Blocks": "All Capacity Blocks end at 11:30AM
    UTC, so the blocks starting on the same day will have durations that are the closest
    match to your desired duration. One block will have a duration that is slightly less than
    your desired duration, while the other will have a duration slightly greater". The
    emulator started every block at 11:30 with whole days."""
    emu.freeze(datetime(2026, 11, 21, 4, 53, tzinfo=UTC))
    _supply(emu)
    found = offers(ec2, 2, 48)
    same_day = [o for o in found if o["StartDate"].time() != FIRST_START.time()]
    start = datetime(2026, 11, 21, 4, 55, tzinfo=UTC)
    assert [(o["StartDate"], o["EndDate"]) for o in same_day] == [
        (start, datetime(2026, 11, 22, 11, 30, tzinfo=UTC)),
        (start, datetime(2026, 11, 23, 11, 30, tzinfo=UTC)),
    ]
    shorter, longer = same_day
    # botocore: "if a Capacity Block starts at 04:55 and ends at 11:30, the hours field would
    # be 6" (and the minutes 35)
    assert (shorter["CapacityBlockDurationHours"], shorter["CapacityBlockDurationMinutes"]) == (
        30,
        35,
    )
    assert (longer["CapacityBlockDurationHours"], longer["CapacityBlockDurationMinutes"]) == (
        54,
        35,
    )
    # priced on the real length: 2 x 30 per hour x 30 h 35 min
    assert shorter["UpfrontFee"] == "1835.00"
    assert all(o["EndDate"].time() == FIRST_START.time() for o in found)
    bought = buy(ec2, shorter)
    assert bought["StartDate"] == start
    emu.configure(same_day_offerings=False)
    assert all(o["StartDate"].time() == FIRST_START.time() for o in offers(ec2, 2, 48))


def test_an_offering_says_its_segments_and_the_purchase_follows_them(emu, ec2):
    """botocore 1.44.5 CapacityBlockOffering.CapacityBlockOfferingSegments: "Each segment
    describes a distinct block of capacity with its own Availability Zone, instance type,
    schedule, and pricing". The emulator never returned them and split every purchase in one
    zone."""
    _supply(emu, segments=2, segment_zones=["us-east-1a", "us-east-1b"])
    offer = offers(ec2, 64, 24)[0]
    segments = offer["CapacityBlockOfferingSegments"]
    assert [(s["AvailabilityZone"], s["InstanceCount"]) for s in segments] == [
        ("us-east-1a", 32),
        ("us-east-1b", 32),
    ]
    assert sum(float(s["UpfrontFee"]) for s in segments) == float(offer["UpfrontFee"])
    answer = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offer["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX"
    )
    made = answer["CapacityReservations"]
    assert [(r["AvailabilityZone"], r["TotalInstanceCount"]) for r in made] == [
        ("us-east-1a", 0),
        ("us-east-1b", 0),
    ]  # not started: EC2 shows no capacity yet
    (block,) = answer["CapacityBlocks"]
    assert block["CapacityReservationIds"] == [r["CapacityReservationId"] for r in made]
    assert block["CapacityBlockId"] == made[0]["CapacityBlockId"] == made[1]["CapacityBlockId"]


def test_segments_may_differ_in_instance_type_and_schedule_too(emu, ec2):
    """The same sentence: "its own Availability Zone, instance type, schedule, and pricing".
    The emulator's segments differed in zone only. A supply's ``segment_types`` and
    ``segment_start_hours`` (chosen: AWS says that they may differ, not how) give each
    segment its own type and start; each is priced at the supply's rate for its own hours,
    and the purchase makes each reservation as its segment says."""
    emu.configure(same_day_offerings=False)
    _supply(
        emu,
        segments=2,
        segment_zones=["us-east-1a", "us-east-1b"],
        segment_types=["p5.48xlarge", "p5e.48xlarge"],
        segment_start_hours=[0, 24],
    )
    offer = offers(ec2, 64, 72)[0]
    first, second = offer["CapacityBlockOfferingSegments"]
    assert (first["InstanceType"], second["InstanceType"]) == ("p5.48xlarge", "p5e.48xlarge")
    assert first["StartDate"] == offer["StartDate"]
    assert second["StartDate"] == offer["StartDate"] + timedelta(hours=24)
    assert first["EndDate"] == second["EndDate"] == offer["EndDate"]
    assert (first["CapacityBlockDurationHours"], second["CapacityBlockDurationHours"]) == (72, 48)
    # 32 instances x 30 an hour, each for its own hours; the offering's fee is theirs together
    assert (first["UpfrontFee"], second["UpfrontFee"]) == ("69120.00", "46080.00")
    assert offer["UpfrontFee"] == "115200.00"
    made = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offer["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX"
    )["CapacityReservations"]
    assert [
        (r["InstanceType"], r["AvailabilityZone"], r["StartDate"], r["EndDate"]) for r in made
    ] == [
        (s["InstanceType"], s["AvailabilityZone"], s["StartDate"], s["EndDate"])
        for s in (first, second)
    ]
    assert len({r["CapacityBlockId"] for r in made}) == 1


def test_block_status_by_block_id_lists_every_reservation(emu, ec2):
    """DescribeCapacityBlockStatus by block id answered one segment of a block of two."""
    _supply(emu, segments=2)
    offer = offers(ec2, 8, 24)[0]
    answer = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offer["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX"
    )
    ids = [r["CapacityReservationId"] for r in answer["CapacityReservations"]]
    emu.advance((offer["StartDate"] - emu.now()).total_seconds() + 60)
    (status,) = ec2.describe_capacity_block_status(
        CapacityBlockIds=[answer["CapacityBlocks"][0]["CapacityBlockId"]]
    )["CapacityBlockStatuses"]
    assert [s["CapacityReservationId"] for s in status["CapacityReservationStatuses"]] == ids
    assert status["TotalCapacity"] == status["TotalAvailableCapacity"] == 8


def test_ultraserver_searches_by_ultraserver_count(emu, ec2):
    """botocore 1.44.5: DescribeCapacityBlockOfferings takes UltraserverType and
    UltraserverCount; an offering says its UltraserverType, UltraserverCount and ZoneType."""
    emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "offerings": [
                        {
                            "instance_type": "p6e-gb200.36xlarge",
                            "availability_zone": "us-east-1a",
                            "max_instance_count": 36,
                            "ultraserver_type": "u-p6e-gb200x72",
                            "instances_per_ultraserver": 18,
                            "earliest_start": "+1d",
                            "latest_start": "+3d",
                        }
                    ]
                }
            }
        }
    )
    found = ec2.describe_capacity_block_offerings(
        InstanceType="p6e-gb200.36xlarge",
        UltraserverType="u-p6e-gb200x72",
        UltraserverCount=2,
        CapacityDurationHours=24,
    )["CapacityBlockOfferings"]
    assert found
    assert {(o["InstanceCount"], o["UltraserverCount"]) for o in found} == {(36, 2)}
    assert {o["UltraserverType"] for o in found} == {"u-p6e-gb200x72"}
    assert {o["ZoneType"] for o in found} == {"availability-zone"}


def test_block_status_counts_instances_in_use_as_unavailable(emu, api, ec2):
    """botocore 1.44.5 CapacityReservationStatus.TotalUnavailableCapacity: "The used capacity.
    Indicates that the capacity is in use by resources that are running in the Capacity
    Reservation". The emulator counted only instances failing their status checks, and its
    TotalCapacity left the instances in use out."""
    now = emu.now()
    block = emu.capacity().new_block(
        instance_type="p5.48xlarge",
        availability_zone="us-east-1b",
        count=4,
        start=now - timedelta(hours=1),
        end=now + timedelta(days=1),
    )
    emu.capacity().add_existing(block, {})
    api.run_in_block(block.id)
    (status,) = ec2.describe_capacity_block_status(CapacityBlockIds=[block.capacity_block_id])[
        "CapacityBlockStatuses"
    ]
    assert (
        status["TotalCapacity"],
        status["TotalAvailableCapacity"],
        status["TotalUnavailableCapacity"],
    ) == (4, 3, 1)
    (one,) = status["CapacityReservationStatuses"]
    assert (one["TotalCapacity"], one["TotalUnavailableCapacity"]) == (4, 1)
