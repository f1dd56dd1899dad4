"""reserve with a caller's Capacity Block that has not started (contract, reserve steps 1 and 6).

EC2 User Guide, "View Capacity Blocks": "Before a Capacity Block reservation begins, the
available capacity appears as zero. You can see how many instances will be available in your
Capacity Block by the tag value for the tag key
aws:ec2capacityreservation:incrementalRequestedQuantity". Such a block whose size fits the job
answers ``no_capacity`` with ``retry_after_seconds`` until its start; nothing is held, no
template version is made and nothing is launched meanwhile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.handlers.reserve import handler as reserve

# The broker's waits on the emulator's clock (conftest: ``waits_on_emulated_time``).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("waits_on_emulated_time")]

SCENARIO = Path(__file__).parent / "scenarios" / "hpc.yaml"
SUBNETS = ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2", "subnet-0aaaaaaaaaaaaaaa3"]
TEMPLATE = "lt-0ddddddddddddddd1"
SCHEDULED = "cr-0fffffffffffffff2"  # hpc.yaml's block-later: 4 x p5.48xlarge, starts in 3 h
UNPAID = "cr-0fffffffffffffff3"
HOUR = 3600


@pytest.fixture
def blocks(broker: Any) -> Any:
    broker.load_scenario(SCENARIO)
    broker.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "capacity_blocks": [
                        {
                            "name": "unpaid",
                            "id": UNPAID,
                            "instance_type": "p5.48xlarge",
                            "availability_zone": "us-east-1b",
                            "count": 2,
                            "start": "+5h",
                            "duration_hours": 24,
                            "payment": "pending",
                            "paid": "+1h",
                        }
                    ]
                }
            }
        }
    )
    broker.clear_calls()
    return broker


def job(block: str, count: int, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": "77",
        "instance_types": ["p5.48xlarge"],
        "subnet_ids": SUBNETS,
        "instance_count": count,
        "capacity_reservation_id": block,
        **fields,
    }


def described(reservation_id: str) -> dict[str, Any]:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    (found,) = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])[
        "CapacityReservations"
    ]
    return dict(found)


def nothing_was_made(world: Any) -> None:
    for action in (
        "CreateCapacityReservation",
        "CancelCapacityReservation",
        "CreateLaunchTemplateVersion",
        "CreateFleet",
        "RunInstances",
    ):
        assert world.calls(action) == [], action


def test_ec2_shows_the_block_with_nothing_available_before_its_start(blocks: Any) -> None:
    block = described(SCHEDULED)
    assert (block["State"], block["AvailableInstanceCount"], block["TotalInstanceCount"]) == (
        "scheduled",
        0,
        0,
    )
    tags = {t["Key"]: t["Value"] for t in block["Tags"]}
    assert tags["aws:ec2capacityreservation:incrementalRequestedQuantity"] == "4"


def test_a_scheduled_block_that_fits_answers_no_capacity_until_its_start(
    blocks: Any, context: Any
) -> None:
    answer = reserve(job(SCHEDULED, 4, launch_template={"id": TEMPLATE}, provision=True), context)
    assert answer["status"] == "no_capacity", answer
    assert 3 * HOUR - 120 <= answer["retry_after_seconds"] <= 3 * HOUR + 5
    assert SCHEDULED in answer["reason"] and "scheduled" in answer["reason"]
    assert "reservation" not in answer and "launch_template" not in answer
    nothing_was_made(blocks)


def test_a_payment_pending_block_that_fits_answers_no_capacity_too(
    blocks: Any, context: Any
) -> None:
    assert described(UNPAID)["State"] == "payment-pending"
    answer = reserve(job(UNPAID, 2), context)
    assert answer["status"] == "no_capacity", answer
    assert 5 * HOUR - 120 <= answer["retry_after_seconds"] <= 5 * HOUR + 5
    assert "payment-pending" in answer["reason"]
    nothing_was_made(blocks)


def test_a_scheduled_block_smaller_than_the_job_is_rejected_by_its_size(
    blocks: Any, context: Any
) -> None:
    answer = reserve(job(SCHEDULED, 8), context)
    assert answer["status"] == "rejected", answer
    assert answer["reason"] == f"Capacity Block {SCHEDULED} is for 4 instances, the job needs 8"
    nothing_was_made(blocks)


def test_once_the_block_has_started_the_same_job_is_provisioned_from_it(
    blocks: Any, context: Any
) -> None:
    first = reserve(job(SCHEDULED, 4, request_id="job-77-a1"), context)
    assert first["status"] == "no_capacity"
    blocks.advance(3 * HOUR + 60)
    assert described(SCHEDULED)["AvailableInstanceCount"] == 4
    answer = reserve(
        job(
            SCHEDULED,
            4,
            request_id="job-77-a2",
            launch_template={"id": TEMPLATE},
            provision=True,
        ),
        context,
    )
    assert answer["status"] == "provisioned", answer
    assert answer["reservation"]["id"] == SCHEDULED
    assert answer["reservation"]["owned"] is False
    assert len(answer["instances"]) == 4
    assert blocks.calls("CancelCapacityReservation") == []


# -- a block near its end (issue 21) ----------------------------------------------------------

ENDING = "cr-0fffffffffffffff4"


def ending_block(world: Any, minutes_left: int, instance_type: str = "p5.48xlarge") -> None:
    """An active 24-hour block that ends ``minutes_left`` from now."""
    world.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "pools": [
                        {
                            "availability_zone": "us-east-1b",
                            "instance_type": instance_type,
                            "capacity": 0,
                        }
                    ],
                    "capacity_blocks": [
                        {
                            "name": "ending",
                            "id": ENDING,
                            "instance_type": instance_type,
                            "availability_zone": "us-east-1b",
                            "count": 2,
                            "start": f"-{24 * 60 - minutes_left}m",
                            "duration_hours": 24,
                        }
                    ],
                }
            }
        }
    )
    world.clear_calls()


def test_a_block_in_its_last_half_hour_is_no_capacity_naming_its_end(
    blocks: Any, context: Any
) -> None:
    """EC2 begins terminating a block's instances 30 minutes before its end: the broker used
    to launch into it 20 minutes before (and the nodes were killed at once)."""
    ending_block(blocks, 20)
    answer = reserve(job(ENDING, 2, launch_template={"id": TEMPLATE}, provision=True), context)
    assert answer["status"] == "no_capacity", answer
    assert f"Capacity Block {ENDING} has 0 s left" in answer["reason"]
    assert "ends at" in answer["reason"] and answer["retry_after_seconds"] > 0
    nothing_was_made(blocks)


def test_a_block_with_less_than_the_jobs_runtime_left_is_not_used(
    blocks: Any, context: Any
) -> None:
    ending_block(blocks, 180)
    answer = reserve(job(ENDING, 2, runtime_seconds=3 * HOUR), context)
    assert answer["status"] == "no_capacity", answer
    assert "the job runs 10800 s" in answer["reason"]
    nothing_was_made(blocks)
    fits = reserve(job(ENDING, 2, runtime_seconds=2 * HOUR, request_id="job-77-short"), context)
    assert fits["status"] == "reserved", fits


def test_a_block_shorter_than_the_job_is_rejected(blocks: Any, context: Any) -> None:
    answer = reserve(job(SCHEDULED, 4, runtime_seconds=24 * HOUR), context)  # a 24 h block
    assert answer["status"] == "rejected", answer
    assert "the job runs 86400 s" in answer["reason"]
    nothing_was_made(blocks)


def test_an_ultraserver_block_stops_an_hour_before_its_end(blocks: Any, context: Any) -> None:
    ending_block(blocks, 50, instance_type="p6e-gb200.36xlarge")
    answer = reserve(
        {**job(ENDING, 2), "instance_types": ["p6e-gb200.36xlarge"]},
        context,
    )
    assert answer["status"] == "no_capacity", answer
    assert "60 minutes before" in answer["reason"]


FUTURE = "cr-0fffffffffffffff9"


def test_a_scheduled_future_dated_odcr_is_waited_for_with_its_start(
    blocks: Any, context: Any
) -> None:
    """``plan`` counts a future-dated ODCR EC2 has scheduled as ready; ``reserve`` rejected it
    ("is scheduled, not active"). It waits as for a scheduled block, naming its start."""
    blocks.load_scenario(
        {"regions": {"us-east-1": {"future_reservations": [
            {"name": "future", "id": FUTURE, "instance_type": "c7i.48xlarge",
             "availability_zone": "us-east-1b", "count": 4, "start": "+6d",
             "state": "scheduled"}]}}}
    )  # fmt: skip
    assert described(FUTURE)["State"] == "scheduled"
    start = described(FUTURE)["StartDate"]
    answer = reserve(job(FUTURE, 4, instance_types=["c7i.48xlarge"]), context)
    assert answer["status"] == "no_capacity", answer
    assert 6 * 24 * HOUR - 120 <= answer["retry_after_seconds"] <= 6 * 24 * HOUR + 5
    assert FUTURE in answer["reason"] and "scheduled" in answer["reason"]
    assert start.strftime("%Y-%m-%dT%H:%M:%SZ") in answer["reason"]
    nothing_was_made(blocks)
    # larger than it holds: rejected by its size, as a block is
    bigger = reserve(job(FUTURE, 5, instance_types=["c7i.48xlarge"]), context)
    assert bigger["status"] == "rejected", bigger
