"""What the emulator answers fits botocore's EC2 model.

moto serializes a response by walking the operation's output shape, so a key the model does
not know is dropped without a word; these checks catch a misspelt key before it vanishes.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import botocore.session
import pytest
from emu_helpers import NOW

from emulator.models.offerings import Offering

pytestmark = pytest.mark.emulator

EC2 = botocore.session.get_session().get_service_model("ec2")


def members(operation: str, *path: str) -> set[str]:
    shape = EC2.operation_model(operation).output_shape
    for name in path:
        shape = shape.members[name]
        if shape.type_name == "list":
            shape = shape.member
    return set(shape.members)


def test_reservations_fit_the_model(emu, world):
    capacity = emu.capacity()
    block = capacity.new_block(
        instance_type="p5.48xlarge",
        availability_zone="us-east-1b",
        count=1,
        start=NOW,
        end=NOW + timedelta(days=1),
        network_nodes=["nn-1"],
    )
    block.placement_group_arn = "arn:aws:ec2:us-east-1:123456789012:placement-group/pg"
    data = block.to_dict({"k": "v"})
    assert set(data) <= members("DescribeCapacityReservations", "CapacityReservations")
    for allocation in data["CapacityAllocations"]:
        assert set(allocation) <= members(
            "DescribeCapacityReservations", "CapacityReservations", "CapacityAllocations"
        )
    assert set(data) <= members("PurchaseCapacityBlock", "CapacityReservation")
    assert set(data) <= members("CreateCapacityReservation", "CapacityReservation")


def test_offerings_fit_the_model():
    offer = Offering(
        id="cb-0123456789abcdef0",
        supply_index=0,
        instance_type="p5.48xlarge",
        availability_zone="us-east-1b",
        instance_count=1,
        start=NOW,
        end=NOW + timedelta(days=1),
        duration_hours=24,
        upfront_fee=Decimal("1"),
        currency="USD",
        tenancy="default",
    )
    assert set(offer.to_dict()) <= members(
        "DescribeCapacityBlockOfferings", "CapacityBlockOfferings"
    )
