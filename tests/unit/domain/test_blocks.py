"""A Capacity Block's hours, runs in a window, extensions and splits (domain.blocks)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from capacity_broker.domain import blocks
from capacity_broker.domain.blocks import Bought, Piece, Window

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
H = timedelta(hours=1)
DAY = timedelta(days=1)
WEEK = timedelta(days=7)


def test_a_block_stops_30_minutes_before_its_end_an_ultraserver_60() -> None:
    end = NOW + WEEK
    assert blocks.usable_until(end, "p5.48xlarge") == end - timedelta(minutes=30)
    assert blocks.usable_until(end, "p6e-gb200.36xlarge") == end - timedelta(minutes=60)
    assert blocks.usable_until(end, "p5.48xlarge", "u-p6e-gb200x72") == end - 60 * timedelta(
        minutes=1
    )


def test_hours_left_count_to_the_stop_from_now_or_the_start() -> None:
    # The README's block: started a day ago, 168 h long. 143.5 h left, not 168 (nor 144).
    assert blocks.hours_left(NOW - DAY, NOW - DAY + WEEK, "p5.48xlarge", NOW) == 143.5
    # Not started: its whole usable window.
    assert blocks.hours_left(NOW + DAY, NOW + DAY + WEEK, "p5.48xlarge", NOW) == 167.5
    # In its last half hour: nothing left to run.
    assert blocks.hours_left(NOW - WEEK, NOW + 10 * timedelta(minutes=1), "p5.48xlarge", NOW) == 0
    assert blocks.hours_left(NOW, None, "p5.48xlarge", NOW) is None


@pytest.mark.parametrize(
    ("days", "hours"),
    [(1, 48), (7, 192), (6.5, 168), (13, 336), (14, 504), (21, 672), (182, None)],
)
def test_a_run_needs_a_block_longer_than_itself(days: float, hours: int | None) -> None:
    # 7 days of run + EC2's 30-minute stop > 168 h: the shortest block EC2 sells is 8 days;
    # 14 days + 30 min needs 15 days, which EC2 sells only as 21 (7-day steps past 14).
    assert blocks.block_hours_for_run(days * 24, "p5.48xlarge") == hours


def test_a_run_fits_in_a_window_or_not() -> None:
    window = Window(NOW + 2 * DAY, NOW + 20 * DAY)
    run = WEEK
    # starts later than the window: the run starts with the block
    assert blocks.run_start(NOW + 3 * DAY, NOW + 12 * DAY, run, window) == NOW + 3 * DAY
    # started before: the run starts with the window
    assert blocks.run_start(NOW, NOW + 12 * DAY, run, window) == NOW + 2 * DAY
    # runs out mid-run
    assert blocks.run_start(NOW, NOW + 8 * DAY, run, window) is None
    # the window ends first
    assert blocks.run_start(NOW + 15 * DAY, None, run, window) is None
    # no end at all (an unlimited ODCR)
    assert blocks.run_start(None, None, run, Window(NOW)) == NOW


def test_the_extension_a_run_needs() -> None:
    end = NOW + DAY
    assert blocks.extension_hours_needed(end, "p5.48xlarge", end - H) == 0
    # 30 minutes short: the shortest extension EC2 sells is a day
    assert blocks.extension_hours_needed(end, "p5.48xlarge", end) == 24
    assert blocks.extension_hours_needed(end, "p5.48xlarge", end + 14 * DAY) == 21 * 24
    assert blocks.extension_hours_needed(end, "p5.48xlarge", end + 200 * DAY) is None


@pytest.mark.parametrize(
    ("state", "end_in", "hours", "pending", "refused"),
    [
        ("active", DAY, 24, False, None),
        ("scheduled", 50 * DAY, 168, False, None),
        ("active", 2 * H, 24, False, None),
        ("active", H - timedelta(seconds=1), 24, False, "at least 1 hour"),
        ("scheduled", 57 * DAY, 24, False, "at most 56 days"),
        ("expired", DAY, 24, False, "active or scheduled"),
        ("payment-pending", DAY, 24, False, "active or scheduled"),
        ("active", DAY, 24, True, "payment-pending"),
        ("active", DAY, 12, False, "not an extension"),
        ("active", DAY, 15 * 24, False, "not an extension"),
    ],
)
def test_when_ec2_extends_a_block(
    state: str, end_in: timedelta, hours: int, pending: bool, refused: str | None
) -> None:
    why = blocks.extension_refusal(state, NOW + end_in, hours, NOW, payment_pending=pending)
    if refused is None:
        assert why is None
    else:
        assert why is not None
        assert refused in why


def bought(status: str, start: datetime, hours: int = 24, ago: timedelta = H) -> Bought:
    return Bought(status, hours, start, start + timedelta(hours=hours), NOW - ago)


def test_an_extension_is_bought_once() -> None:
    end = NOW + DAY
    # payment-pending: EC2 has not moved the end yet; the same request finds it
    pending = bought("payment-pending", end)
    assert blocks.earlier_extension([pending], 24, end, NOW) == pending
    # paid: the end moved; the same request (its new end) finds it for REPEAT_WINDOW
    paid = bought("payment-succeeded", end - DAY)
    assert blocks.earlier_extension([paid], 24, end, NOW) == paid
    assert blocks.earlier_extension([paid], 24, end, NOW, again=True) is None
    assert blocks.earlier_extension([paid], 48, end, NOW) is None
    old = bought("payment-succeeded", end - DAY, ago=blocks.REPEAT_WINDOW + H)
    assert blocks.earlier_extension([old], 24, end, NOW) is None
    # a failed payment bought nothing
    assert blocks.earlier_extension([bought("payment-failed", end)], 24, end, NOW) is None
    # pending is never skipped, again or not
    assert blocks.earlier_extension([pending], 24, end, NOW, again=True) == pending


def piece(ref: str, count: int, *, held: bool = False, az: str = "a", fee: float = 0.0,
          start: datetime | None = None, days: int = 8, region: str = "us-east-1",
          instance_type: str = "p5.48xlarge") -> Piece:  # fmt: skip
    begin = start or NOW + DAY
    key = ("held", ref) if held else ("offering", region, az, instance_type)
    return Piece(key, ref, held, region, instance_type, count, begin,
                 begin + timedelta(days=days) - timedelta(minutes=30), fee)  # fmt: skip


def test_a_split_holds_the_count_over_the_same_hours() -> None:
    window = Window(NOW)
    plan = blocks.split([piece("big", 32, az="a", fee=100), piece("small", 16, az="b", fee=50)],
                        48, WEEK, window)  # fmt: skip
    assert plan is not None
    assert {p.ref for p in plan.pieces} == {"big", "small"}
    assert plan.count == 48
    assert plan.fee == 150
    assert plan.run_start == NOW + DAY


def test_a_split_takes_held_blocks_first_and_the_cheapest_last_piece() -> None:
    pieces = [
        piece("held", 32, held=True, start=NOW + 3 * DAY, days=14),
        piece("sixteen", 16, az="a", fee=500, start=NOW + 3 * DAY),
        piece("eight-b", 8, az="b", fee=90, start=NOW + 3 * DAY),
        piece("eight-c", 8, az="c", fee=80, start=NOW + 3 * DAY),
    ]
    plan = blocks.split(pieces, 40, WEEK, Window(NOW))
    assert plan is not None
    assert [p.ref for p in plan.pieces] == ["held", "eight-c"]


def test_two_offerings_of_one_zone_are_one_capacity() -> None:
    pieces = [piece("one", 16, az="a"), piece("two", 16, az="a")]
    assert blocks.split(pieces, 32, WEEK, Window(NOW)) is None


def test_a_split_stays_in_one_region_and_type() -> None:
    pieces = [piece("east", 16), piece("west", 16, region="us-west-2")]
    assert blocks.split(pieces, 32, WEEK, Window(NOW)) is None
    mixed = [piece("p5", 16), piece("p5e", 16, az="b", instance_type="p5e.48xlarge")]
    assert blocks.split(mixed, 32, WEEK, Window(NOW)) is None


def test_a_block_that_runs_out_mid_run_is_no_piece() -> None:
    short = [piece("short", 16, az="a", days=5), piece("long", 16, az="b")]
    assert blocks.split(short, 32, WEEK, Window(NOW)) is None
