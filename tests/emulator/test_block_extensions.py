"""Capacity Block extensions and status: DescribeCapacityBlockExtensionOfferings,
PurchaseCapacityBlockExtension, DescribeCapacityBlockExtensionHistory and
DescribeCapacityBlockStatus, as the EC2 User Guide ("Extend Capacity Blocks") and botocore's
model describe them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from emu_helpers import NOW, error_of

pytestmark = pytest.mark.emulator

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


@pytest.fixture
def block(emu, world, ec2):
    """A running 8 x p5 block ending in two days, supply for 8 more in its AZ, and a 4 x p5
    block starting in a week with an impaired interconnect."""
    ids = emu.load_scenario(
        {
            "settings": {"extension_payment_seconds": 600},
            "regions": {
                "us-east-1": {
                    "capacity_blocks": [
                        {"name": "running", "instance_type": "p5.48xlarge",
                         "availability_zone": "us-east-1b", "count": 8, "start": "-1d",
                         "duration_hours": 72},
                        {"name": "later", "instance_type": "p5.48xlarge",
                         "availability_zone": "us-east-1a", "count": 4, "start": "+7d",
                         "duration_hours": 24, "interconnect": "impaired"},
                    ],
                    "offerings": [
                        {"instance_type": "p5.48xlarge", "availability_zone": "us-east-1b",
                         "max_instance_count": 8, "price_per_instance_hour": "10",
                         "earliest_start": "+0h", "latest_start": "+30d"},
                    ],
                }
            },
        }
    )  # fmt: skip
    return ids.reservations


def extension_offers(ec2, reservation_id, hours=24):
    return ec2.describe_capacity_block_extension_offerings(
        CapacityReservationId=reservation_id, CapacityBlockExtensionDurationHours=hours
    )["CapacityBlockExtensionOfferings"]


def history(ec2, reservation_id, **kwargs):
    return ec2.describe_capacity_block_extension_history(
        CapacityReservationIds=[reservation_id], **kwargs
    )["CapacityBlockExtensions"]


def end_of(ec2, reservation_id):
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return found["CapacityReservations"][0]["EndDate"]


def test_an_extension_is_offered_bought_paid_and_moves_the_end(emu, ec2, block):
    running = block["running"]
    end = end_of(ec2, running)
    (offer,) = extension_offers(ec2, running, 48)
    assert offer["CapacityBlockExtensionStartDate"] == end
    assert offer["CapacityBlockExtensionEndDate"] == end + 2 * DAY
    assert offer["InstanceCount"] == 8
    assert offer["UpfrontFee"] == "3840.00"  # 10 per instance-hour x 8 x 48
    bought = ec2.purchase_capacity_block_extension(
        CapacityBlockExtensionOfferingId=offer["CapacityBlockExtensionOfferingId"],
        CapacityReservationId=running,
    )["CapacityBlockExtensions"]
    assert [e["CapacityBlockExtensionStatus"] for e in bought] == ["payment-pending"]
    # "payment-pending until the bill is paid": the end moves only then
    assert end_of(ec2, running) == end
    with pytest.raises(ClientError) as exc:
        extension_offers(ec2, running, 24)
    assert error_of(exc) == ("IncorrectState", 400)
    emu.advance(600)
    assert end_of(ec2, running) == end + 2 * DAY
    (done,) = history(ec2, running)
    assert done["CapacityBlockExtensionStatus"] == "payment-succeeded"
    assert history(ec2, running, Filters=[
        {"Name": "capacity-block-extension-status", "Values": ["payment-failed"]}
    ]) == []  # fmt: skip
    # the same offering is not sold twice
    with pytest.raises(ClientError) as exc:
        ec2.purchase_capacity_block_extension(
            CapacityBlockExtensionOfferingId=offer["CapacityBlockExtensionOfferingId"],
            CapacityReservationId=running,
        )
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_a_payment_not_made_in_time_fails_and_the_end_stays(emu, ec2, block):
    emu.configure(extension_payment_seconds=None)
    running = block["running"]
    end = end_of(ec2, running)
    (offer,) = extension_offers(ec2, running)
    ec2.purchase_capacity_block_extension(
        CapacityBlockExtensionOfferingId=offer["CapacityBlockExtensionOfferingId"],
        CapacityReservationId=running,
    )
    # "within 12 hours, or up to 35 minutes before the Capacity Block is scheduled to end"
    emu.advance(12 * 3600)
    (failed,) = history(ec2, running)
    assert failed["CapacityBlockExtensionStatus"] == "payment-failed"
    assert end_of(ec2, running) == end
    assert extension_offers(ec2, running)  # the capacity is on offer again


def test_when_a_block_can_be_extended(emu, ec2, block):
    with pytest.raises(ClientError) as exc:
        extension_offers(ec2, block["running"], 36)  # not a duration EC2 sells
    assert error_of(exc) == ("InvalidParameterValue", 400)
    assert extension_offers(ec2, block["running"], 24 * 7 * 3)  # 21 days: a 7-day step
    # "a minimum of 1 hour ... before it expires"
    emu.advance((2 * DAY - HOUR + timedelta(seconds=1)).total_seconds())
    with pytest.raises(ClientError) as exc:
        extension_offers(ec2, block["running"])
    assert error_of(exc) == ("InvalidParameterValue", 400)
    # no supply in us-east-1a: "only ... if there is sufficient capacity available"
    assert extension_offers(ec2, block["later"]) == []
    # an ODCR is not a block
    reservation = ec2.create_capacity_reservation(
        InstanceType="c5.large", InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a", InstanceCount=1,
    )["CapacityReservation"]["CapacityReservationId"]  # fmt: skip
    with pytest.raises(ClientError) as exc:
        extension_offers(ec2, reservation)
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_a_block_more_than_56_days_from_its_end_cannot_be_extended(emu, ec2):
    emu.freeze(NOW)
    ids = emu.load_scenario(
        {"regions": {"us-east-1": {"capacity_blocks": [
            {"name": "far", "instance_type": "p5.48xlarge", "availability_zone": "us-east-1b",
             "count": 1, "start": "+50d", "duration_hours": 168}]}}}
    )  # fmt: skip
    with pytest.raises(ClientError) as exc:
        extension_offers(ec2, ids.reservations["far"])
    assert error_of(exc) == ("InvalidParameterValue", 400)


def test_block_status(emu, ec2, block):
    statuses = ec2.describe_capacity_block_status()["CapacityBlockStatuses"]
    by_id = {s["CapacityBlockId"]: s for s in statuses}
    running = ec2.describe_capacity_reservations(CapacityReservationIds=[block["running"]])
    running_block = running["CapacityReservations"][0]["CapacityBlockId"]
    assert by_id[running_block]["InterconnectStatus"] == "ok"
    assert by_id[running_block]["TotalAvailableCapacity"] == 8
    assert (
        by_id[running_block]["CapacityReservationStatuses"][0]["CapacityReservationId"]
        == (block["running"])
    )
    impaired = ec2.describe_capacity_block_status(
        Filters=[{"Name": "interconnect-status", "Values": ["impaired"]}]
    )["CapacityBlockStatuses"]
    assert len(impaired) == 1
    assert impaired[0]["TotalCapacity"] == 0  # not started: nothing available yet
    with pytest.raises(ClientError) as exc:
        ec2.describe_capacity_block_status(Filters=[{"Name": "state", "Values": ["active"]}])
    assert error_of(exc) == ("InvalidParameterValue", 400)
    with pytest.raises(ClientError) as exc:
        ec2.describe_capacity_block_status(CapacityBlockIds=["cb-0000000000000000f"])
    assert error_of(exc)[1] == 400
