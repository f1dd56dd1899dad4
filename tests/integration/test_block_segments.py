"""Contract v4, Capacity Blocks: the reservations of one purchase (segments, one
``CapacityBlockId``) are one block. Since botocore 1.44.5 "When a Capacity Block offering
contains multiple segments, a separate Capacity Reservation is created for each segment"
(PurchaseCapacityBlockResult.CapacityReservations), "each with its own Availability Zone,
instance type, schedule, and pricing" (CapacityBlockOffering.CapacityBlockOfferingSegments).

``plan`` tested each reservation on its own: a 64-instance block delivered as two segments of
32 was never "ready" for 64, and ``plan`` recommended buying another block (or a split whose
text said the segments were separate blocks).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from capacity_broker import CapacityBroker
from capacity_broker.cli import EXIT_OK, app
from typer.testing import CliRunner

from .test_training import P5, world_of

P5E = "p5e.48xlarge"

pytestmark = pytest.mark.integration

DECEMBER = ("2026-12-01", "2026-12-31")


def _on_sale(**extra: Any) -> dict[str, Any]:
    """p5.48xlarge Capacity Blocks on sale in us-east-1a: up to 64 at 30 USD an instance-hour."""
    return {
        "instance_type": P5,
        "availability_zone": "us-east-1a",
        "max_instance_count": 64,
        "price_per_instance_hour": "30",
        "earliest_start": "+1d",
        "latest_start": "+8w",
        **extra,
    }


def _buy_64_for_9_days(tf: CapacityBroker) -> Any:
    """The first December offering of 64 for 216 hours, bought through the broker."""
    offer = tf.offerings(P5, 64, 24 * 9, start_after=DECEMBER[0], regions=["us-east-1"])[0]
    return tf.purchase_capacity_block(offer.offering_id, P5, 64, 24 * 9, regions=["us-east-1"])


def _segments(zones: tuple[str, str], starts: tuple[str, str], supply: int) -> dict[str, Any]:
    return {
        "regions": {
            "us-east-1": {
                "capacity_blocks": [
                    {"name": "seg-a", "block": "big", "instance_type": P5,
                     "availability_zone": zones[0], "count": 32, "start": starts[0],
                     "duration_hours": 24 * 14},
                    {"name": "seg-b", "block": "big", "instance_type": P5,
                     "availability_zone": zones[1], "count": 32, "start": starts[1],
                     "duration_hours": 24 * 14},
                ],
                "offerings": [_on_sale(max_instance_count=supply)] if supply else [],
            }
        }
    }  # fmt: skip


DEC_5 = "2026-12-05T11:30:00Z"


def _plan(tf: CapacityBroker, count: int, days: int) -> Any:
    """``plan`` for a training run of ``count`` p5.48xlarge for ``days`` in December."""
    return tf.plan("training", P5, count, days, start_after=DECEMBER[0], end_before=DECEMBER[1])


@pytest.mark.parametrize("supply", [64, 0], ids=["a-block-on-sale", "nothing-on-sale"])
def test_held_segments_that_hold_the_run_are_one_ready_block(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch, supply: int
) -> None:
    """Two held segments of 32 are one block ready for 64, whatever is on sale (was: buy, split)."""
    world = world_of(
        broker,
        container,
        monkeypatch,
        _segments(("us-east-1a", "us-east-1a"), (DEC_5,) * 2, supply),
    )
    answer = _plan(CapacityBroker(regions=["us-east-1"]), 64, 7)
    # was "buy" (another non-refundable block) or, with nothing on sale, a "split"
    assert answer.status == "ready", answer.message
    assert answer.offerings == []
    assert answer.split is None
    assert "separate Capacity Blocks" not in answer.message
    ids = {world.ids["seg-a"], world.ids["seg-b"]}
    assert {b.reservation_id for b in answer.capacity_blocks} == ids
    (block_id,) = {b.capacity_block_id for b in answer.capacity_blocks}
    assert block_id and block_id in answer.message
    assert world.ids["seg-b"] in answer.message
    assert "64 x p5.48xlarge in us-east-1a (32 + 32)" in answer.message


def test_segments_that_differ_are_said_per_segment_and_start_with_the_last(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = world_of(
        broker,
        container,
        monkeypatch,
        _segments(
            ("us-east-1a", "us-east-1b"),
            (DEC_5, "2026-12-06T11:30:00Z"),
            supply=64,
        ),
    )
    tf = CapacityBroker(regions=["us-east-1"])
    answer = _plan(tf, 64, 7)
    assert answer.status == "ready", answer.message
    # The run needs both segments: it starts when the later one does.
    assert answer.run_start is not None
    assert answer.run_start.isoformat().startswith("2026-12-06T11:30")
    assert f"32 x p5.48xlarge in us-east-1a ({world.ids['seg-a']}" in answer.message
    assert f"32 x p5.48xlarge in us-east-1b ({world.ids['seg-b']}" in answer.message
    # A run of 32 is held by one segment alone: that one, from its own start.
    one = _plan(tf, 32, 7)
    assert one.status == "ready", one.message
    assert next(b.reservation_id for b in one.capacity_blocks) == world.ids["seg-a"]
    assert one.run_start is not None
    assert one.run_start.isoformat().startswith("2026-12-05T11:30")


def test_segments_that_run_out_are_extended_together_not_bought_again(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two segments of 32 that stop before a 14-day run ends: the block is extended (each
    segment by the same hours), never a new 64-instance block bought."""
    world = world_of(
        broker,
        container,
        monkeypatch,
        _segments(("us-east-1a", "us-east-1a"), (DEC_5,) * 2, supply=64),
    )
    tf = CapacityBroker(regions=["us-east-1"])
    answer = _plan(tf, 64, 14)
    assert answer.status == "extend", answer.message  # was "buy"
    extension = answer.extension
    assert extension is not None
    assert extension.reservation_id in {world.ids["seg-a"], world.ids["seg-b"]}
    assert extension.instance_count == 64
    assert extension.upfront_fee == 2 * 30 * 32 * extension.duration_hours
    assert "each of its segments" in answer.message
    assert world.ids["seg-a"] in answer.message and world.ids["seg-b"] in answer.message


def test_a_purchase_answered_in_segments_is_one_block_for_plan(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bought through the broker: the purchase answer's CapacityReservations."""
    world_of(
        broker,
        container,
        monkeypatch,
        {
            "regions": {
                "us-east-1": {
                    "offerings": [
                        _on_sale(segments=2),
                    ]
                }
            }
        },
    )
    tf = CapacityBroker(regions=["us-east-1"])
    bought = _buy_64_for_9_days(tf)
    assert bought.status == "purchased", bought.message
    assert len(bought.reservations) == 2
    answer = _plan(tf, 64, 7)
    assert answer.status == "ready", answer.message
    assert {b.reservation_id for b in answer.capacity_blocks} == {
        r.reservation_id for r in bought.reservations
    }


def test_capacity_counts_a_purchase_of_segments_as_one_block(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``capacity --blocks`` said "Total Blocks: 2" for one purchase of two segments."""
    world_of(
        broker,
        container,
        monkeypatch,
        _segments(("us-east-1a", "us-east-1b"), (DEC_5,) * 2, supply=0),
    )
    wide = CliRunner().invoke(app, ["capacity", "--blocks"], env={"COLUMNS": "250"})
    assert wide.exit_code == EXIT_OK, wide.output
    assert "Total Blocks: 1 (2 reservations)" in wide.stdout
    rows = CapacityBroker(regions=["us-east-1"]).capacity(reservation_type="capacity-block")
    (block_id,) = {r.capacity_block_id for r in rows}
    assert block_id is not None
    assert wide.stdout.count(block_id) == 2  # each segment's row names its block


def _running_segments(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, CapacityBroker]:
    world = world_of(
        broker,
        container,
        monkeypatch,
        {
            "settings": {"extension_payment_seconds": 600},
            "regions": {
                "us-east-1": {
                    "capacity_blocks": [
                        {
                            "name": name,
                            "block": "big",
                            "instance_type": P5,
                            "availability_zone": "us-east-1a",
                            "count": 32,
                            "start": "-1d",
                            "duration_hours": 24 * 7,
                        }
                        for name in ("seg-a", "seg-b")
                    ],
                    "offerings": [
                        _on_sale(earliest_start="+0h"),
                    ],
                }
            },
        },
    )
    return world, CapacityBroker(regions=["us-east-1"])


def test_extend_extends_every_segment_of_the_block(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``extend`` on one segment extended that segment alone: a block whose segments end two
    days apart, half of a 64-instance run stopped early."""
    world, tf = _running_segments(broker, container, monkeypatch)
    ids = [world.ids["seg-a"], world.ids["seg-b"]]
    offer = tf.extension_offer(ids[0], 2)
    assert offer.status == "offered", offer.message
    assert [s.reservation_id for s in offer.segments] == sorted(ids, key=lambda i: i != ids[0])
    assert "92,160.00 USD in all" in offer.message  # 2 x (30 x 32 x 48)
    assert world.calls("PurchaseCapacityBlockExtension") == []
    bought = tf.extend(ids[0], 2)
    assert bought.status == "extended", bought.message
    purchases = world.calls("PurchaseCapacityBlockExtension")
    assert sorted(c.params["CapacityReservationId"] for c in purchases) == sorted(ids)
    again = tf.extend(ids[1], 2)  # asked through the other segment: the same block, bought
    assert again.status == "already_extended", again.message
    assert len(world.calls("PurchaseCapacityBlockExtension")) == 2
    world.advance(600)
    ends = {
        r.reservation_id: r.end_date
        for r in tf.capacity(reservation_type="capacity-block")
        if r.reservation_id in ids
    }
    assert len(set(ends.values())) == 1, ends  # one block, one end


def test_a_block_is_never_extended_past_182_days_in_all(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EC2 User Guide, "Extend Capacity Blocks": "You can extend your Capacity Block by 1-day
    increments up to 14 days, and 7-day increments up to 182 days (26 weeks) total". The broker
    and the emulator read 182 days as one extension's length: a 154-day block was offered a
    35-day extension."""
    world = world_of(
        broker,
        container,
        monkeypatch,
        {
            "regions": {
                "us-east-1": {
                    "capacity_blocks": [
                        {
                            "name": "long",
                            "instance_type": P5,
                            "availability_zone": "us-east-1a",
                            "count": 8,
                            "start": "-150d",
                            "duration_hours": 24 * 154,
                        },
                    ],
                    "offerings": [
                        _on_sale(earliest_start="+0h"),
                    ],
                }
            },
        },
    )
    tf = CapacityBroker(regions=["us-east-1"])
    block = world.ids["long"]
    past = tf.extension_offer(block, 35)
    assert past.status == "refused", past.message
    assert "182 days" in past.message
    assert world.calls("DescribeCapacityBlockExtensionOfferings") == []
    assert tf.extension_offer(block, 28).status == "offered"  # 182 days in all
    # EC2 (the emulator, on its own reading) refuses it too
    ec2 = boto3.client("ec2", region_name="us-east-1")
    with pytest.raises(ClientError) as exc:
        ec2.describe_capacity_block_extension_offerings(
            CapacityReservationId=block, CapacityBlockExtensionDurationHours=35 * 24
        )
    assert exc.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_a_purchase_whose_segments_differ_in_type_and_start(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purchase whose offering's segments differ in instance type and schedule too ("each
    with its own Availability Zone, instance type, schedule, and pricing"; the emulator's
    differed in zone only): the purchase says what each segment is (it said "64 x
    p5.48xlarge ... from 12-01 for 216 h" for 32 x p5 and 32 x p5e a day later), ``capacity``
    shows one block of two types, and ``plan`` counts only what launches of the run's type
    can use: 32 p5 are ready from the p5 segment, 64 are not."""
    world_of(
        broker,
        container,
        monkeypatch,
        {
            "settings": {"same_day_offerings": False},
            "regions": {
                "us-east-1": {
                    "offerings": [
                        _on_sale(segments=2, segment_types=[P5, P5E], segment_start_hours=[0, 24]),
                    ]
                }
            },
        },
    )
    tf = CapacityBroker(regions=["us-east-1"])
    bought = _buy_64_for_9_days(tf)
    assert bought.status == "purchased", bought.message
    first, second = bought.reservations
    assert (first.instance_type, second.instance_type) == (P5, P5E)
    assert (
        f"32 x {P5} in us-east-1a from 2026-12-01 11:30 UTC for 216 h ({first.reservation_id})"
        f" + 32 x {P5E} in us-east-1a from 2026-12-02 11:30 UTC for 192 h "
        f"({second.reservation_id})"
    ) in bought.message
    assert f"64 x {P5}" not in bought.message

    wide = CliRunner().invoke(app, ["capacity", "--blocks"], env={"COLUMNS": "250"})
    assert wide.exit_code == EXIT_OK, wide.output
    assert "Total Blocks: 1 (2 reservations)" in wide.stdout
    assert f"Instance Types: 2 ({P5}, {P5E})" in wide.stdout

    one = _plan(tf, 32, 7)
    assert one.status == "ready", one.message
    assert [b.reservation_id for b in one.capacity_blocks] == [first.reservation_id]
    assert one.run_start is not None
    assert one.run_start.isoformat().startswith("2026-12-01T11:30")
    both = _plan(tf, 64, 7)
    assert both.status != "ready", both.message  # the p5e segment runs no p5 instance
    assert second.reservation_id not in both.message
