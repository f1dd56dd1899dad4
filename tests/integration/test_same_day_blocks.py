"""Contract v4: offerings with hours and minutes. "All Capacity Blocks end at 11:30AM UTC, so
the blocks starting on the same day will have durations that are the closest match to your
desired duration" (EC2 User Guide, "Find and purchase Capacity Blocks"); botocore 1.44.5's
CapacityBlockDurationMinutes is "in addition to capacityBlockDurationHours". The broker read
the hours only: a same-day block's price per instance-hour was too high, its length misstated,
and ``split`` dropped it.

The clock is frozen on Monday 2 November 2026 at 09:00 UTC (``test_training.world_of``): a
same-day block starts at 09:00 and ends at 11:30 on a later day.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from capacity_broker import CapacityBroker
from capacity_broker.cli import app
from typer.testing import CliRunner

from .test_training import NOW, P5, world_of

pytestmark = pytest.mark.integration


def _supply(*zones: tuple[str, int]) -> dict[str, Any]:
    return {
        "regions": {
            "us-east-1": {
                "offerings": [
                    {"instance_type": P5, "availability_zone": zone,
                     "max_instance_count": count, "price_per_instance_hour": "30",
                     "earliest_start": "+0h", "latest_start": "+3w"}
                    for zone, count in zones
                ]
            }
        }
    }  # fmt: skip


@pytest.fixture
def same_day(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> CapacityBroker:
    world_of(broker, container, monkeypatch, _supply(("us-east-1a", 64), ("us-east-1b", 32)))
    return CapacityBroker(regions=["us-east-1"])


def test_a_same_day_offering_is_priced_and_said_on_its_real_length(
    same_day: CapacityBroker,
) -> None:
    found = same_day.offerings(P5, 2, 48, regions=["us-east-1"])
    today = [o for o in found if o.start_date == NOW]
    longer = max(today, key=lambda o: o.duration_hours)
    assert (longer.duration_hours, longer.duration_minutes) == (50, 30)
    assert longer.end_date == datetime(2026, 11, 4, 11, 30, tzinfo=UTC)
    # 2 x 30 an hour for 50 h 30 min: 3,030.00, 30 per instance-hour (not 30.3)
    assert longer.upfront_fee == 3030.0
    assert longer.price_per_instance_hour == 30.0
    table = CliRunner().invoke(
        app, ["offerings", "--instance-type", P5, "--count", "2", "--hours", "48"],
        env={"COLUMNS": "250"},
    )  # fmt: skip
    assert "50 h 30 min" in table.stdout, table.output


def test_plan_buys_a_same_day_block_when_it_is_the_better_one(same_day: CapacityBroker) -> None:
    # A 2-day run needs a 3-day block; today's shorter same-day block (09:00 to 4 November
    # 11:30, 50 h 30 min) holds it, at the same rate and a lower fee.
    answer = same_day.plan("training", P5, 16, 2, regions=["us-east-1"])
    assert answer.status == "buy", answer.message
    offer = answer.offerings[0]
    assert offer.start_date == NOW
    assert (offer.duration_hours, offer.duration_minutes) == (50, 30)
    assert "for 50 h 30 min" in answer.message


def test_a_split_takes_same_day_offerings(same_day: CapacityBroker) -> None:
    answer = same_day.plan("training", P5, 96, 2, regions=["us-east-1"])
    assert answer.status == "split", answer.message
    assert answer.split is not None
    assert answer.split.run_start == NOW  # was today's 11:30: the same-day blocks were dropped
    assert sum(p.instance_count for p in answer.split.pieces) == 96
