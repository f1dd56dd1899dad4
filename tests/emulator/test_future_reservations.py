"""Future-dated Capacity Reservations: CreateCapacityReservation with a start date, their
states on the emulator clock, and the cancellation and date-change quotes (botocore 1.44.5;
EC2 User Guide, "Concepts", "Cancel a Capacity Reservation", "Modify a Capacity
Reservation")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from emu_helpers import NOW, error_of

pytestmark = pytest.mark.emulator

DAY = timedelta(days=1)
WEEK = timedelta(days=7)
TWO_WEEKS = 14 * 86400


def ahead(ec2, start=NOW + 30 * DAY, count=2, instance_type="c7i.48xlarge", **extra):
    return ec2.create_capacity_reservation(
        InstanceType=instance_type,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=count,
        InstanceMatchCriteria=extra.pop("InstanceMatchCriteria", "targeted"),
        StartDate=start,
        CommitmentDuration=extra.pop("CommitmentDuration", TWO_WEEKS),
        DeliveryPreference=extra.pop("DeliveryPreference", "incremental"),
        **extra,
    )["CapacityReservation"]


def get(ec2, reservation_id):
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return found["CapacityReservations"][0]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"start": NOW + 4 * DAY}, "InvalidParameterValue"),  # 5 to 120 days ahead
        ({"start": NOW + 121 * DAY}, "InvalidParameterValue"),
        ({"CommitmentDuration": 13 * 86400}, "InvalidParameterValue"),  # 14 days at least
        ({"instance_type": "p5.48xlarge"}, "InvalidParameterValue"),  # families
        ({"instance_type": "m5.xlarge", "count": 7}, "InvalidParameterValue"),  # 32 vCPUs
        ({"DeliveryPreference": "fixed"}, "InvalidParameterValue"),  # incremental only
        ({"InstanceMatchCriteria": "open"}, "InvalidParameterValue"),  # targeted only
    ],
)
def test_what_ec2_refuses(world, ec2, change, code):
    with pytest.raises(ClientError) as exc:
        ahead(ec2, **change)
    assert error_of(exc) == (code, 400)


def test_a_start_date_needs_the_other_future_parameters(world, ec2):
    with pytest.raises(ClientError) as exc:
        ec2.create_capacity_reservation(
            InstanceType="c7i.48xlarge", InstancePlatform="Linux/UNIX",
            AvailabilityZone="us-east-1a", InstanceCount=1, StartDate=NOW + 30 * DAY,
            CommitmentDuration=TWO_WEEKS,
        )  # fmt: skip
    assert error_of(exc) == ("MissingParameter", 400)


def test_assessed_scheduled_delivered_then_committed(emu, world, ec2):
    made = ahead(ec2)
    assert made["State"] == "assessing"
    assert made["TotalInstanceCount"] == 0
    assert made["CommitmentInfo"] == {"CommittedInstanceCount": 2, "CommitmentDuration": TWO_WEEKS}
    assert made["DeliveryPreference"] == "incremental"
    emu.advance(DAY.total_seconds())  # the emulator assesses in a day (knob)
    scheduled = get(ec2, made["CapacityReservationId"])
    assert scheduled["State"] == "scheduled"
    # "The total instance count remains 0 ... in the scheduled state"
    assert scheduled["TotalInstanceCount"] == 0
    assert scheduled["CapacityAllocations"] == [{"AllocationType": "future", "Count": 2}]
    emu.advance((29 * DAY).total_seconds())
    active = get(ec2, made["CapacityReservationId"])
    assert active["State"] == "active"
    assert active["TotalInstanceCount"] == active["AvailableInstanceCount"] == 2
    # the commitment runs from delivery
    assert active["CommitmentInfo"]["CommitmentEndDate"] == NOW + 30 * DAY + 2 * WEEK


def test_a_pool_too_small_is_unsupported_and_a_full_one_delays(emu, world, ec2):
    emu.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 3)
    unsupported = ahead(ec2, count=4)
    delayed = ahead(ec2, count=3)
    emu.advance(DAY.total_seconds())
    assert get(ec2, unsupported["CapacityReservationId"])["State"] == "unsupported"
    assert get(ec2, delayed["CapacityReservationId"])["State"] == "scheduled"
    taken = ec2.create_capacity_reservation(
        InstanceType="c7i.48xlarge", InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a", InstanceCount=1,
    )["CapacityReservation"]["CapacityReservationId"]  # fmt: skip
    emu.advance((29 * DAY).total_seconds())
    assert get(ec2, delayed["CapacityReservationId"])["State"] == "delayed"
    emu.settle()
    ec2.cancel_capacity_reservation(CapacityReservationId=taken)
    emu.advance(60)
    assert get(ec2, delayed["CapacityReservationId"])["State"] == "active"


def test_cancelling_inside_the_commitment_takes_a_quote(emu, world, ec2):
    rid = ahead(ec2)["CapacityReservationId"]
    emu.advance(DAY.total_seconds())  # scheduled, 29 days before its start
    emu.settle()
    with pytest.raises(ClientError) as exc:
        ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    assert error_of(exc) == ("MissingParameter", 400)
    quote = ec2.create_capacity_reservation_cancellation_quote(CapacityReservationId=rid)[
        "CapacityReservationCancellationQuote"
    ]
    (terms,) = quote["CancellationTerms"]
    # 2 to 8 weeks before the original start: 25% of the 336-hour commitment
    assert terms["ChargeCommitmentDurationHours"] == 84
    assert terms["ReservationState"] == "cancelling"
    assert quote["QuoteState"] == "active"
    assert quote["ExpirationTime"] == quote["CreateTime"] + DAY
    described = ec2.describe_capacity_reservation_cancellation_quotes(
        CapacityReservationCancellationQuoteIds=[quote["CapacityReservationCancellationQuoteId"]]
    )["CapacityReservationCancellationQuotes"]
    assert described[0]["CancellationTerms"] == [terms]
    ec2.cancel_capacity_reservation(
        CapacityReservationId=rid,
        QuoteId=quote["CapacityReservationCancellationQuoteId"],
        ApplyCancellationCharges="commitment-wind-down",
    )
    assert get(ec2, rid)["State"] == "cancelling"
    emu.advance(84 * 3600)
    assert get(ec2, rid)["State"] == "cancelled"


def test_an_expired_quote_is_not_accepted(emu, world, ec2):
    rid = ahead(ec2)["CapacityReservationId"]
    emu.advance(DAY.total_seconds())
    emu.settle()
    quote = ec2.create_capacity_reservation_cancellation_quote(CapacityReservationId=rid)[
        "CapacityReservationCancellationQuote"
    ]
    emu.advance(DAY.total_seconds())
    with pytest.raises(ClientError) as exc:
        ec2.cancel_capacity_reservation(
            CapacityReservationId=rid,
            QuoteId=quote["CapacityReservationCancellationQuoteId"],
            ApplyCancellationCharges="commitment-wind-down",
        )
    assert error_of(exc) == ("InvalidParameterValue", 400)
    assert get(ec2, rid)["State"] == "scheduled"


def test_assessing_cancels_free(emu, world, ec2):
    rid = ahead(ec2)["CapacityReservationId"]
    emu.settle()
    with pytest.raises(ClientError) as exc:
        ec2.create_capacity_reservation_cancellation_quote(CapacityReservationId=rid)
    assert error_of(exc) == ("IncorrectState", 400)
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    assert get(ec2, rid)["State"] == "cancelled"


def test_postponing_the_start_takes_a_quote(emu, world, ec2):
    rid = ahead(ec2, start=NOW + 10 * DAY)["CapacityReservationId"]
    emu.advance(DAY.total_seconds())
    emu.settle()
    with pytest.raises(ClientError) as exc:
        ec2.modify_capacity_reservation(CapacityReservationId=rid, StartDate=NOW + 12 * DAY)
    assert error_of(exc) == ("MissingParameter", 400)
    quote = ec2.create_capacity_reservation_date_change_quote(
        CapacityReservationId=rid, NewStartDate=NOW + 13 * DAY
    )["CapacityReservationModificationQuote"]
    update = quote["ModificationTerms"]["ReservationUpdate"]
    # within two weeks of the start: a day of commitment per day postponed
    assert update["NewCommitmentDuration"] == TWO_WEEKS + 3 * 86400
    assert update["NewCommitmentEndDate"] == NOW + 13 * DAY + 17 * DAY
    ec2.modify_capacity_reservation(
        CapacityReservationId=rid,
        QuoteId=quote["CapacityReservationModificationQuoteId"],
        AcceptModificationTerms=True,
    )
    changed = get(ec2, rid)
    assert changed["StartDate"] == NOW + 13 * DAY
    assert changed["OriginalStartDate"] == NOW + 10 * DAY
    assert changed["AdjustmentStatus"] == "applied"
    # up to 30 cumulative days from the original start
    with pytest.raises(ClientError) as exc:
        ec2.create_capacity_reservation_date_change_quote(
            CapacityReservationId=rid, NewStartDate=NOW + 41 * DAY
        )
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_committed_reservations_count_toward_the_quota(emu, world, ec2):
    emu.load_scenario({"regions": {"us-east-1": {"quotas": {"instances": {"c7i.48xlarge": 3}}}}})
    ahead(ec2, count=2)
    with pytest.raises(ClientError) as exc:
        ahead(ec2, count=2, start=NOW + 31 * DAY)
    assert error_of(exc) == ("InstanceLimitExceeded", 400)


def test_a_scenario_seeds_them(emu, world, ec2):
    ids = emu.load_scenario(
        {"regions": {"us-east-1": {"future_reservations": [
            {"name": "next", "instance_type": "c7i.48xlarge", "availability_zone": "us-east-1a",
             "count": 4, "start": "+30d", "state": "scheduled"},
            {"name": "now", "instance_type": "c7i.48xlarge", "availability_zone": "us-east-1a",
             "count": 4, "start": "-2d", "state": "active"}]}}}
    )  # fmt: skip
    assert get(ec2, ids.reservations["next"])["State"] == "scheduled"
    delivered = get(ec2, ids.reservations["now"])
    assert delivered["CommitmentInfo"]["CommitmentEndDate"] == NOW - 2 * DAY + 2 * WEEK
