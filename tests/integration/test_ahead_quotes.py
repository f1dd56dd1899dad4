"""Contract v4: a cancellation quote that is ``pending`` or carries no terms is never shown as
"no charge" (botocore 1.44.5 CapacityReservationCancellationQuoteState: pending | active |
expired); ``cancel-ahead`` on a reservation EC2 is already winding down (``cancelling``)
asks EC2 for nothing."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from capacity_broker import CapacityBroker
from capacity_broker.client import InvalidArguments

from .test_reserve_ahead import C7I, DAY, NOW, state_of, tf, world

pytestmark = pytest.mark.integration

__all__ = ["tf", "world"]  # the fixtures, shared


def _scheduled(tf: CapacityBroker, world: Any) -> str:
    made = tf.reserve_ahead(C7I, 2, "us-east-1a", NOW + 30 * DAY, 14)
    assert made.reservation_id is not None
    world.advance(DAY.total_seconds())  # scheduled: inside its commitment
    world.settle()
    return made.reservation_id


def test_a_pending_quote_is_not_no_charge_and_cannot_be_accepted(
    tf: CapacityBroker, world: Any
) -> None:
    rid = _scheduled(tf, world)
    world.configure(quote_pending_seconds=600)
    quoted = tf.cancel_ahead(rid)
    assert quoted.status == "quoted", quoted.message
    assert quoted.quote is not None
    assert quoted.quote.state == "pending"
    assert "no charge" not in quoted.message  # it said "no charge": the terms were missing
    assert "pending" in quoted.message
    accepted = tf.cancel_ahead(rid, quote_id=quoted.quote.quote_id, confirm=True)
    assert accepted.status == "refused", accepted.message
    assert state_of(rid) == "scheduled"
    # once EC2 has worked the terms out, the same quote says them and is the one applied
    world.advance(600)
    shown = tf.cancel_ahead(rid, quote_id=quoted.quote.quote_id)
    assert shown.quote is not None
    assert shown.quote.charge_hours == 84
    assert "84 h" in shown.message
    done = tf.cancel_ahead(rid, quote_id=quoted.quote.quote_id, confirm=True)
    assert done.status == "cancelled", done.message
    assert "84 h" in done.message


def test_cancel_ahead_on_a_cancelling_reservation_asks_ec2_nothing(
    tf: CapacityBroker, world: Any
) -> None:
    rid = _scheduled(tf, world)
    quoted = tf.cancel_ahead(rid)
    assert quoted.quote is not None
    tf.cancel_ahead(rid, quote_id=quoted.quote.quote_id, confirm=True)
    assert state_of(rid) == "cancelling"
    world.clear_calls()
    again = tf.cancel_ahead(rid)
    assert again.status == "cancelled", again.message
    assert "already cancelling" in again.message
    assert world.calls("CreateCapacityReservationCancellationQuote") == []


@pytest.mark.parametrize("instance_type", ["x2idn.32xlarge", "u-6tb1.112xlarge"])
def test_only_the_families_botocore_names_are_reserved_ahead(
    tf: CapacityBroker, world: Any, instance_type: str
) -> None:
    """botocore 1.44.5, CreateCapacityReservation.InstanceType: "You can request future-dated
    Capacity Reservations for instance types in the C, M, R, I, T, and G instance families
    only". The broker and the emulator both took U and X."""
    world.clear_calls()
    with pytest.raises(InvalidArguments, match="C, M, R, I, T and G"):
        tf.reserve_ahead(instance_type, 1, "us-east-1a", NOW + 30 * DAY, 14)
    assert world.calls("CreateCapacityReservation") == []
    # and EC2 (the emulator, on its own reading) refuses it too
    ec2 = boto3.client("ec2", region_name="us-east-1")
    with pytest.raises(ClientError) as exc:
        ec2.create_capacity_reservation(
            InstanceType=instance_type, InstancePlatform="Linux/UNIX",
            AvailabilityZone="us-east-1a", InstanceCount=1, InstanceMatchCriteria="targeted",
            StartDate=NOW + 30 * DAY, CommitmentDuration=14 * 86400,
            DeliveryPreference="incremental", EndDateType="unlimited",
        )  # fmt: skip
    assert exc.value.response["Error"]["Code"] == "InvalidParameterValue"
