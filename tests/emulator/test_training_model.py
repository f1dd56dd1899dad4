"""Every answer of the operations the training work added to the emulator (Capacity Block
extensions and status, future-dated reservations and their quotes) fits botocore 1.44.5's EC2
model: each key a member of its shape, each enumerated value one the model lists.

botocore checks what the broker sends (parameter names and types) before the request leaves;
it checks nothing the emulator answers. moto serializes an answer by walking the operation's
output shape, so a misspelt key vanishes without a word, and an enum value EC2 never sends
(``payment-pending`` written ``pending``) would be parsed as given. These tests read what the
emulator answered before serialization, in every state the operations reach on its clock.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import botocore.session
import pytest
from botocore import xform_name
from botocore.model import Shape
from emu_helpers import NOW

from emulator.responses import capacity_blocks, capacity_reservations, future

pytestmark = pytest.mark.emulator

EC2 = botocore.session.get_session().get_service_model("ec2")
OPERATIONS = {xform_name(name): name for name in EC2.operation_names}
DAY = timedelta(days=1)
TWO_WEEKS = 14 * 86400
# The operations the training work added, and the one whose answer it extended.
ADDED = {
    "DescribeCapacityBlockExtensionOfferings",
    "PurchaseCapacityBlockExtension",
    "DescribeCapacityBlockExtensionHistory",
    "DescribeCapacityBlockStatus",
    "DescribeCapacityBlockOfferings",
    "CreateCapacityReservationCancellationQuote",
    "CreateCapacityReservationDateChangeQuote",
    "DescribeCapacityReservationCancellationQuotes",
    "DescribeCapacityReservationDateChangeQuotes",
    "CreateCapacityReservation",
    "DescribeCapacityReservations",
}


def misfits(value: Any, shape: Shape, where: str) -> Iterator[str]:
    """What in ``value`` its model shape does not have: unknown keys, enum values not listed."""
    if value is None:
        return
    if shape.type_name == "structure":
        assert isinstance(value, dict), f"{where}: {value!r} is not a structure"
        for key, item in value.items():
            if key not in shape.members:
                yield f"{where}.{key}: not a member of {shape.name}"
            else:
                yield from misfits(item, shape.members[key], f"{where}.{key}")
    elif shape.type_name == "list":
        for index, item in enumerate(value):
            yield from misfits(item, shape.member, f"{where}[{index}]")
    elif shape.type_name == "string" and shape.enum and value not in shape.enum:
        yield f"{where}: {value!r} is not one of {shape.name}'s {sorted(shape.enum)}"


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Every answer the emulator's capacity responses build, with its operation's name."""
    seen: list[tuple[str, dict[str, Any]]] = []
    for module in (capacity_blocks, capacity_reservations, future):
        real = module.ActionResult

        def recording(result: dict[str, Any], _real: Any = real) -> Any:
            # the nearest caller named after an operation (describe_..._quotes share a helper)
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_name not in OPERATIONS:
                frame = frame.f_back
            assert frame is not None, "an answer built outside any operation's method"
            seen.append((OPERATIONS[frame.f_code.co_name], result))
            return _real(result)

        monkeypatch.setattr(module, "ActionResult", recording)
    return seen


def check(answers: list[tuple[str, dict[str, Any]]]) -> set[str]:
    problems = [
        problem
        for operation, result in answers
        for problem in misfits(result, EC2.operation_model(operation).output_shape, operation)
    ]
    assert problems == []
    return {operation for operation, _ in answers}


def test_block_extensions_and_status_fit_the_model(emu, ec2, answers):
    emu.freeze(NOW)
    ids = emu.load_scenario(
        {
            "settings": {"extension_payment_seconds": 600},
            "regions": {
                "us-east-1": {
                    "capacity_blocks": [
                        {"name": "paid", "instance_type": "p5.48xlarge",
                         "availability_zone": "us-east-1b", "count": 4, "start": "-1d",
                         "duration_hours": 72},
                        {"name": "unpaid", "instance_type": "p5.48xlarge",
                         "availability_zone": "us-east-1b", "count": 4, "start": "-1d",
                         "duration_hours": 72, "interconnect": "impaired"},
                        {"name": "later", "instance_type": "p5.48xlarge",
                         "availability_zone": "us-east-1a", "count": 4, "start": "+7d",
                         "duration_hours": 24},
                    ],
                    "offerings": [
                        {"instance_type": "p5.48xlarge", "availability_zone": "us-east-1b",
                         "max_instance_count": 8, "price_per_instance_hour": "10",
                         "earliest_start": "+0h", "latest_start": "+30d"},
                    ],
                }
            },
        }
    ).reservations  # fmt: skip
    ec2.describe_capacity_block_offerings(
        InstanceTypePreferences=[{"InstanceType": "p5.48xlarge"}],
        InstanceCount=4,
        CapacityDurationHours=24,
    )

    def extend(name: str) -> None:
        (offer,) = ec2.describe_capacity_block_extension_offerings(
            CapacityReservationId=ids[name], CapacityBlockExtensionDurationHours=24
        )["CapacityBlockExtensionOfferings"]
        ec2.purchase_capacity_block_extension(
            CapacityBlockExtensionOfferingId=offer["CapacityBlockExtensionOfferingId"],
            CapacityReservationId=ids[name],
        )

    extend("paid")
    ec2.describe_capacity_block_extension_history()  # payment-pending
    emu.advance(600)  # paid in the scenario's 600 s
    emu.configure(extension_payment_seconds=None)  # never paid: fails after 12 h
    extend("unpaid")
    emu.advance(12 * 3600)
    history = ec2.describe_capacity_block_extension_history()["CapacityBlockExtensions"]
    assert {e["CapacityBlockExtensionStatus"] for e in history} == {
        "payment-succeeded",
        "payment-failed",
    }
    statuses = ec2.describe_capacity_block_status()["CapacityBlockStatuses"]
    assert {s["InterconnectStatus"] for s in statuses} == {"ok", "impaired", "insufficient-data"}
    ec2.describe_capacity_reservations()
    assert check(answers) >= {
        "DescribeCapacityBlockOfferings",
        "DescribeCapacityBlockExtensionOfferings",
        "PurchaseCapacityBlockExtension",
        "DescribeCapacityBlockExtensionHistory",
        "DescribeCapacityBlockStatus",
        "DescribeCapacityReservations",
    }


def _ahead(ec2: Any, count: int, start_days: int = 30) -> str:
    return str(
        ec2.create_capacity_reservation(
            InstanceType="c7i.48xlarge",
            InstancePlatform="Linux/UNIX",
            AvailabilityZone="us-east-1a",
            InstanceCount=count,
            InstanceMatchCriteria="targeted",
            StartDate=NOW + start_days * DAY,
            CommitmentDuration=TWO_WEEKS,
            DeliveryPreference="incremental",
        )["CapacityReservation"]["CapacityReservationId"]
    )


def test_future_dated_reservations_and_quotes_fit_the_model(emu, world, ec2, answers):
    emu.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 3)
    too_big = _ahead(ec2, 4)  # unsupported once assessed
    late = _ahead(ec2, 3)  # delayed: the pool is taken at its start
    moved = _ahead(ec2, 1, start_days=40)
    ec2.describe_capacity_reservations()  # assessing
    emu.advance(DAY.total_seconds())
    ec2.describe_capacity_reservations()  # scheduled, unsupported
    quote = ec2.create_capacity_reservation_date_change_quote(
        CapacityReservationId=moved, NewStartDate=NOW + 45 * DAY
    )["CapacityReservationModificationQuote"]
    ec2.describe_capacity_reservation_date_change_quotes(
        CapacityReservationModificationQuoteIds=[quote["CapacityReservationModificationQuoteId"]]
    )
    cancel = ec2.create_capacity_reservation_cancellation_quote(CapacityReservationId=late)[
        "CapacityReservationCancellationQuote"
    ]
    emu.advance(2 * DAY.total_seconds())  # both quotes expired
    ec2.describe_capacity_reservation_cancellation_quotes(
        CapacityReservationCancellationQuoteIds=[cancel["CapacityReservationCancellationQuoteId"]]
    )
    ec2.describe_capacity_reservation_date_change_quotes()
    ec2.create_capacity_reservation(
        InstanceType="c7i.48xlarge", InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a", InstanceCount=1,
    )  # fmt: skip
    emu.advance(27 * DAY.total_seconds())  # the start of "late": delayed
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[too_big, late])
    states = {r["CapacityReservationId"]: r["State"] for r in found["CapacityReservations"]}
    assert states == {too_big: "unsupported", late: "delayed"}
    emu.advance(20 * DAY.total_seconds())  # "moved" delivered: active, committed
    ec2.describe_capacity_reservations()
    assert check(answers) >= {
        "CreateCapacityReservation",
        "DescribeCapacityReservations",
        "CreateCapacityReservationCancellationQuote",
        "CreateCapacityReservationDateChangeQuote",
        "DescribeCapacityReservationCancellationQuotes",
        "DescribeCapacityReservationDateChangeQuotes",
    }


# The filters each added operation accepts, named in that operation's Filters documentation in
# botocore's model (the model lists filter names only there).
FILTERS = [
    ("DescribeCapacityBlockExtensionHistory", set(capacity_blocks._HISTORY_FILTERS)),
    ("DescribeCapacityBlockStatus", {capacity_blocks.STATUS_FILTER}),
    ("DescribeCapacityReservationTopology", set(capacity_blocks._TOPOLOGY_FILTERS)),
]


def documented_filters(operation: str) -> set[str]:
    doc = EC2.operation_model(operation).input_shape.members["Filters"].documentation
    return set(re.findall(r"<code>([a-z][a-z0-9-]*)</code>", doc))


@pytest.mark.parametrize(("operation", "accepted"), FILTERS)
def test_every_filter_accepted_is_documented(operation: str, accepted: Any) -> None:
    assert set(accepted) <= documented_filters(operation)


def test_the_operations_the_training_work_uses_are_ec2s() -> None:
    """Every operation named above is one of botocore's EC2 operations (a misspelt or
    invented one would be modelled by nobody)."""
    assert set(OPERATIONS.values()) >= ADDED, ADDED - set(OPERATIONS.values())
