"""The ML user's question (the seeds): "can I train on 32 x p5.48xlarge for 7 days next month?",
answered truthfully (contract v3, ``plan``): blocks that start mid-window, blocks that run out
mid-window, blocks that would cover the run if extended, offerings, splits; the same verdict
words and exit codes in ``plan``, ``offerings`` and ``capacity``; blocks' hours left and
interconnect; an extension offered and bought once.

The emulator's clock is frozen on Monday 2 November 2026 and handed to the broker: "next month"
is December 2026.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from capacity_broker import CapacityBroker
from capacity_broker.cli import EXIT_NO_CAPACITY, EXIT_OK, EXIT_USAGE, app
from capacity_broker.client import InvalidArguments
from capacity_broker.logic.discovery import base as discovery_base
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
DECEMBER = ("2026-12-01", "2026-12-31")
P5 = "p5.48xlarge"
DAY = timedelta(days=1)

# us-east-1, all p5.48xlarge:
#   running-out  32 in us-east-1c, running, ends 5 Dec 09:00: runs out early in the month; no
#                capacity to extend it in its zone
#   extendable   32 in us-east-1a, running, ends 4 Dec 09:00: the 1a supply can extend it
#   later        32 in us-east-1b, starts 20 Dec 09:00 for 14 days: starts mid-month
#   short        2 in us-east-1b, started yesterday, 168 h: the README's block (143.5 h left)
# Offerings: 32 in us-east-1a and 16 in us-east-1b (any day at 11:30 from tomorrow), 64 in
# us-west-2b.
SCENARIO = {
    "settings": {"extension_payment_seconds": 600},
    "regions": {
        "us-east-1": {
            "capacity_blocks": [
                {"name": "running-out", "instance_type": P5, "availability_zone": "us-east-1c",
                 "count": 32, "start": "-10d", "duration_hours": 24 * 43},
                {"name": "extendable", "instance_type": P5, "availability_zone": "us-east-1a",
                 "count": 32, "start": "-10d", "duration_hours": 24 * 42},
                {"name": "later", "instance_type": P5, "availability_zone": "us-east-1b",
                 "count": 32, "start": "2026-12-20T09:00:00Z", "duration_hours": 24 * 14,
                 "interconnect": "impaired"},
                {"name": "short", "instance_type": P5, "availability_zone": "us-east-1b",
                 "count": 2, "start": "-1d", "duration_hours": 168},
            ],
            "offerings": [
                {"instance_type": P5, "availability_zone": "us-east-1a",
                 "max_instance_count": 32, "price_per_instance_hour": "30",
                 "earliest_start": "+1d", "latest_start": "+8w"},
                {"instance_type": P5, "availability_zone": "us-east-1b",
                 "max_instance_count": 16, "price_per_instance_hour": "31",
                 "earliest_start": "+1d", "latest_start": "+8w"},
            ],
        },
        "us-west-2": {
            "offerings": [
                {"instance_type": P5, "availability_zone": "us-west-2b",
                 "max_instance_count": 64, "price_per_instance_hour": "33",
                 "earliest_start": "+1d", "latest_start": "+8w"},
            ],
        },
    },
}  # fmt: skip


def world_of(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch, scenario: dict[str, Any]
) -> Any:
    """``scenario`` on a frozen clock the broker shares; EC2's request buckets compressed on
    both sides (a plan asks for offerings of a few sizes)."""
    broker.freeze(NOW)
    ids = broker.load_scenario(scenario)
    monkeypatch.setenv("BROKER_REGIONS", "us-east-1")
    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", "1000")
    broker.throttle(time_scale=1000)
    container.fresh()  # built from the variables above on first use
    # Every broker this test makes (the CLI's too) reads the emulator's clock.
    monkeypatch.setattr(discovery_base, "utcnow", broker.now)
    broker.ids = ids.reservations
    return broker


@pytest.fixture
def ml(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    return world_of(broker, container, monkeypatch, SCENARIO)


@pytest.fixture
def tf(ml: Any) -> CapacityBroker:
    return CapacityBroker(regions=["us-east-1"])


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


# -- the question, for next month ------------------------------------------------------------


def test_next_month_a_block_that_starts_mid_month_covers_it(tf: CapacityBroker, ml: Any) -> None:
    answer = tf.plan("training", P5, 32, 7, start_after=DECEMBER[0], end_before=DECEMBER[1])
    assert answer.status == "ready", answer.message
    # Not the block running out on 5 December, nor the one ending on the 4th: the one that
    # starts on the 20th and lasts past the run.
    assert [b.reservation_id for b in answer.capacity_blocks] == [ml.ids["later"]]
    assert answer.run_start == datetime(2026, 12, 20, 9, 0, tzinfo=UTC)
    assert "2026-12-27 09:00 UTC" in answer.message


# December's edges, nothing on sale: a block that ends mid-month with the run's hours left
# before it stops (8 days from 3 Dec 11:30), and one of exactly the run's length from the 1st
# (168 h: EC2 stops it 30 minutes before the run ends).
EDGES = {
    "regions": {
        "us-east-1": {
            "capacity_blocks": [
                {"name": "ends-mid-month", "instance_type": P5, "availability_zone": "us-east-1a",
                 "count": 32, "start": "2026-12-03T11:30:00Z", "duration_hours": 192},
                {"name": "one-week", "instance_type": P5, "availability_zone": "us-east-1b",
                 "count": 32, "start": "2026-12-01T11:30:00Z", "duration_hours": 168},
            ],
        },
    },
}  # fmt: skip


def test_next_month_a_block_that_ends_mid_month_covers_it_only_with_the_hours(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    edges = world_of(broker, container, monkeypatch, EDGES)
    tf = CapacityBroker(regions=["us-east-1"])
    answer = tf.plan("training", P5, 32, 7, start_after=DECEMBER[0], end_before=DECEMBER[1])
    assert answer.status == "ready", answer.message
    # the block of the run's length starts first but stops 30 minutes short
    assert [b.reservation_id for b in answer.capacity_blocks] == [edges.ids["ends-mid-month"]]
    assert answer.run_start == datetime(2026, 12, 3, 11, 30, tzinfo=UTC)
    # a window that ends before the run could: neither block covers it, and nothing is on sale
    short = tf.plan("training", P5, 32, 7, start_after=DECEMBER[0], end_before="2026-12-10")
    assert short.status == "unavailable", short.message
    assert short.capacity_blocks == []
    # a 6-day run fits the week-long block, from the 1st
    six = tf.plan("training", P5, 32, 6, start_after=DECEMBER[0], end_before="2026-12-10")
    assert six.status == "ready", six.message
    assert edges.ids["one-week"] in [b.reservation_id for b in six.capacity_blocks]
    assert six.run_start == datetime(2026, 12, 1, 11, 30, tzinfo=UTC)


def test_early_in_the_month_a_block_that_runs_out_is_extended(tf: CapacityBroker, ml: Any) -> None:
    answer = tf.plan("training", P5, 32, 7, start_after=DECEMBER[0], end_before="2026-12-15")
    assert answer.status == "extend", answer.message
    assert answer.capacity_blocks == []
    extension = answer.extension
    assert extension is not None
    assert extension.reservation_id == ml.ids["extendable"]
    # The run ends 8 Dec 00:00; the block stops 4 Dec 08:30: 3 days 15.5 h short, and EC2
    # sells whole days: 4.
    assert extension.duration_hours == 96
    assert extension.end_date == datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
    # The block in us-east-1c runs out too, and nothing can extend it there: said, not counted.
    assert any(ml.ids["running-out"] in note and "no such extension" in note
               for note in answer.notes)  # fmt: skip


def test_more_than_any_block_holds_is_a_split(tf: CapacityBroker, ml: Any) -> None:
    answer = tf.plan("training", P5, 48, 7, start_after=DECEMBER[0], end_before="2026-12-15")
    assert answer.status == "split", answer.message
    split = answer.split
    assert split is not None
    assert split.instance_count == 48
    assert sorted(p.instance_count for p in split.pieces) == [16, 32]
    assert {p.availability_zone for p in split.pieces} == {"us-east-1a", "us-east-1b"}
    assert any("no shared placement" in cost for cost in split.costs)
    # the largest single offering is said
    assert answer.largest_offerings[0].instance_count == 32
    assert "the largest on sale is 32" in answer.message


def test_a_split_can_use_a_held_block(tf: CapacityBroker, ml: Any) -> None:
    answer = tf.plan("training", P5, 48, 7, start_after="2026-12-20", end_before=DECEMBER[1])
    assert answer.status == "split", answer.message
    assert answer.split is not None
    held = [p for p in answer.split.pieces if p.source == "held"]
    assert [p.id for p in held] == [ml.ids["later"]]
    assert sum(p.instance_count for p in answer.split.pieces) == 48


def test_nothing_big_enough_says_the_largest(tf: CapacityBroker) -> None:
    answer = tf.plan("training", P5, 100, 7, start_after=DECEMBER[0], end_before=DECEMBER[1])
    assert answer.status == "unavailable", answer.message
    assert "the largest on sale is 32 x p5.48xlarge in us-east-1a" in answer.message


def test_what_is_on_sale_is_bought(tf: CapacityBroker) -> None:
    answer = tf.plan("training", P5, 16, 7, regions=["us-west-2"], start_after=DECEMBER[0])
    assert answer.status == "buy", answer.message
    offer = answer.offerings[0]
    assert offer.instance_count == 16
    # a 7-day run needs an 8-day block: EC2 stops its instances 30 minutes before the end
    assert offer.duration_hours == answer.block_duration_hours == 192
    assert offer.offering_id in answer.message


def test_the_readme_example_no_longer_counts_a_blocks_full_length(
    tf: CapacityBroker, ml: Any
) -> None:
    # The 2 x p5 block started yesterday, 168 h: 143.5 h left, not enough for 168 h. (The
    # plan used to answer "ready" with it.) The blocks of 32 cover it.
    answer = tf.plan("training", P5, 2, 7)
    assert answer.status == "ready"
    covering = [b.reservation_id for b in answer.capacity_blocks]
    assert ml.ids["short"] not in covering
    assert covering
    assert not tf.validate_training_capacity(P5, 2, 60)


def test_instance_type_preferences_in_one_call(tf: CapacityBroker, ml: Any) -> None:
    ml.clear_calls()
    answer = tf.plan("training", "p5e.48xlarge,p5.48xlarge", 16, 7, regions=["us-west-2"])
    assert answer.status == "buy"
    assert answer.instance_types == ["p5e.48xlarge", "p5.48xlarge"]
    (first, *_) = ml.calls("DescribeCapacityBlockOfferings")
    assert [p["InstanceType"] for p in first.params["InstanceTypePreferences"]] == [
        "p5e.48xlarge",
        P5,
    ]


def test_the_window_is_checked(tf: CapacityBroker) -> None:
    with pytest.raises(InvalidArguments, match="end_before"):
        tf.plan("training", P5, 2, 7, start_after="2026-12-10", end_before="2026-12-12")
    with pytest.raises(InvalidArguments, match="start_after"):
        tf.plan("training", P5, 2, 7, start_after="next month")


# -- the same words and exit codes in plan, offerings and capacity ---------------------------


def test_the_same_exit_codes_for_the_same_verdict(ml: Any) -> None:
    window = ("--start-after", DECEMBER[0], "--end-before", DECEMBER[1])
    ready = cli("plan", "-w", "training", "-t", P5, "-n", "32", "--days", "7", *window)
    assert ready.exit_code == EXIT_OK, ready.stderr
    assert ready.stdout.startswith("Recommendation: Capacity Blocks")
    assert "ready: Capacity Block" in ready.stdout
    none = cli("plan", "-w", "training", "-t", P5, "-n", "100", "--days", "7", *window)
    assert none.exit_code == EXIT_NO_CAPACITY
    # offerings and capacity say "no" the same way (offerings used to exit 0 on nothing)
    offers = cli("offerings", "-t", P5, "-n", "64", "--days", "8", "-o", "json")
    assert (offers.exit_code, offers.stdout) == (EXIT_NO_CAPACITY, "[]\n")
    held = cli("capacity", "--blocks", "-t", "p4d.24xlarge", "-o", "json")
    assert (held.exit_code, held.stdout) == (EXIT_NO_CAPACITY, "[]\n")
    assert cli("offerings", "-t", P5, "-n", "16", "--days", "8").exit_code == EXIT_OK
    assert cli("capacity", "--blocks").exit_code == EXIT_OK
    data = json.loads(cli("capacity", "--blocks", "--full", "-o", "json").stdout)
    assert data["verdict"] == "ready"


def test_the_python_api_says_the_same_words(tf: CapacityBroker) -> None:
    assert tf.offerings(P5, 16, 192, start_after=DECEMBER[0]).verdict == "buy"
    assert tf.offerings(P5, 64, 192, start_after="2026-12-01T11:30Z").verdict == "unavailable"
    assert tf.capacity(reservation_type="capacity-block").verdict == "ready"
    assert tf.capacity(instance_types=["p4d.24xlarge"]).verdict == "unavailable"


# -- blocks' life -----------------------------------------------------------------------------


def test_capacity_rows_of_blocks_carry_hours_left_and_interconnect(
    tf: CapacityBroker, ml: Any
) -> None:
    rows = {r.reservation_id: r for r in tf.capacity(reservation_type="capacity-block")}
    assert rows[ml.ids["short"]].hours_left == 143.5
    assert rows[ml.ids["short"]].interconnect_status == "ok"
    later = rows[ml.ids["later"]]
    assert later.hours_left == 14 * 24 - 0.5  # its whole usable window, from its start
    assert later.interconnect_status == "impaired"
    table = cli("capacity", "--blocks", "-o", "json")
    by_id = {r["reservation_id"]: r for r in json.loads(table.stdout)}
    assert by_id[ml.ids["short"]]["hours_left"] == 143.5
    wide = CliRunner().invoke(app, ["capacity", "--blocks"], env={"COLUMNS": "200"})
    assert "impaired" in wide.stdout
    assert "143.5h" in wide.stdout


def test_an_extension_is_offered_then_bought_once(tf: CapacityBroker, ml: Any) -> None:
    block = ml.ids["extendable"]
    offer = tf.extension_offer(block, 2)
    assert offer.status == "offered"
    assert offer.offer is not None
    assert offer.offer.upfront_fee == 30 * 32 * 48
    assert ml.calls("PurchaseCapacityBlockExtension") == []
    # the CLI shows the fee and buys nothing without --yes
    guarded = cli("extend", "--reservation-id", block, "--days", "2")
    assert guarded.exit_code == EXIT_USAGE
    assert "46,080.00 USD" in guarded.stderr
    assert "nothing was bought" in guarded.stderr
    # a fee shown is a preview, not an error (issue 42)
    assert guarded.stderr.startswith("preview: ") and "error:" not in guarded.stderr
    assert ml.calls("PurchaseCapacityBlockExtension") == []

    bought = tf.extend(block, 2)
    assert bought.status == "extended", bought.message
    assert bought.extension is not None
    assert bought.extension.status == "payment-pending"
    # the same request again, while EC2 waits for the payment and after: never a second one
    again = tf.extend(block, 2)
    assert again.status == "already_extended"
    assert again.idempotency_key == bought.idempotency_key
    ml.advance(600)
    after = cli("extend", "--reservation-id", block, "--days", "2", "--yes", "-o", "json")
    assert after.exit_code == EXIT_OK, after.stderr
    assert json.loads(after.stdout)["status"] == "already_extended"
    assert len(ml.calls("PurchaseCapacityBlockExtension")) == 1
    (row,) = [r for r in tf.capacity(reservation_type="capacity-block")
              if r.reservation_id == block]  # fmt: skip
    assert row.end_date == datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
    # asked for explicitly, a second extension of the same length is bought
    second = tf.extend(block, 2, again=True)
    assert second.status == "extended"
    assert len(ml.calls("PurchaseCapacityBlockExtension")) == 2


def test_an_extension_whose_answer_was_lost_is_found_not_bought_again(
    tf: CapacityBroker, ml: Any
) -> None:
    block = ml.ids["extendable"]
    ml.fail("PurchaseCapacityBlockExtension", mode="timeout", times=1)
    lost = tf.extend(block, 1)
    assert lost.status == "extended", lost.message
    assert "answer was lost" in lost.message
    assert tf.extend(block, 1).status == "already_extended"
    assert len(ml.calls("PurchaseCapacityBlockExtension")) == 1


def test_what_ec2_would_refuse_is_not_bought(tf: CapacityBroker, ml: Any) -> None:
    refused = tf.extend(ml.ids["running-out"], 1)
    assert refused.status == "not_offered"
    with pytest.raises(InvalidArguments, match="days"):
        tf.extend(ml.ids["extendable"], 15)
    ml.advance((32 * DAY - timedelta(minutes=30)).total_seconds())  # its end: 30 minutes away
    late = tf.extend(ml.ids["extendable"], 1)
    assert late.status == "refused"
    assert "at least 1 hour" in late.message
    assert ml.calls("PurchaseCapacityBlockExtension") == []


def test_a_block_ec2_will_not_extend_now_is_a_note_not_a_failed_region(
    tf: CapacityBroker, ml: Any
) -> None:
    # An extension still payment-pending: EC2 refuses to offer another (IncorrectState). The
    # plan says so and goes on to what is on sale; no region failed.
    assert tf.extend(ml.ids["extendable"], 1).status == "extended"
    answer = tf.plan("training", P5, 32, 7, start_after=DECEMBER[0], end_before="2026-12-15")
    assert answer.errors == []
    assert answer.status == "buy", answer.message
    assert any(
        ml.ids["extendable"] in note and "would not extend it" in note for note in answer.notes
    )


def test_a_region_that_could_not_be_asked_is_no_answer(tf: CapacityBroker, ml: Any) -> None:
    # us-west-2 refuses every offerings call: us-east-1's "nothing" is not the whole answer
    # (exit 1: partial), and a plan none of whose regions answered is an error (exit 3). One
    # region failing twice used to count as every region failing.
    ml.fail("DescribeCapacityBlockOfferings", "UnauthorizedOperation", region="us-west-2",
            times=999)  # fmt: skip
    both = ["us-east-1", "us-west-2"]
    window = {"start_after": DECEMBER[0], "end_before": "2026-12-15"}
    answer = tf.plan("training", P5, 60, 7, regions=both, **window)
    assert answer.status == "unavailable", answer.message
    assert {e.region for e in answer.errors} == {"us-west-2"}
    ml.fail("DescribeCapacityBlockOfferings", "UnauthorizedOperation", region="us-east-1",
            times=999)  # fmt: skip
    assert tf.plan("training", P5, 60, 7, regions=both, **window).status == "error"
    result = cli("plan", "-w", "training", "-t", P5, "-n", "60", "--days", "7", "-r",
                 "us-east-1,us-west-2", "--start-after", DECEMBER[0])  # fmt: skip
    assert result.exit_code == 3


def test_at_80_columns_capacity_keeps_hours_left(tf: CapacityBroker, ml: Any) -> None:
    """The README promises a training run the hours a block can still run (``Left``); at 80
    columns the table dropped that column first (issue 42)."""
    narrow = CliRunner().invoke(app, ["capacity", "--blocks"], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    assert "Left" in narrow.stdout
    assert "143.5h" in narrow.stdout
    assert all(len(line) <= 80 for line in narrow.stdout.splitlines())
    # every id whole
    for reservation_id in (ml.ids["short"], ml.ids["later"]):
        assert reservation_id in narrow.stdout


# -- issue 42: fewer questions, said while asked; the command each verdict asks for -----------


def test_a_plan_asks_ec2_the_block_sizes_not_a_halving(tf: CapacityBroker, ml: Any) -> None:
    """64 x p5 for 7 days is on sale nowhere; the largest block is 32 in us-east-1a. The plan
    asked 64, then halved 1..63 (32, 48, 40, 36, 34, 33: seven questions from a bucket of 10
    that refills at 0.15 a second); it asks 64, then the sizes EC2 sells below it, halving
    1, 2, 4, 8, 16, 32 (4, 16, 32): four, each said as it is asked."""
    ml.clear_calls()
    asked: list[str] = []
    answer = tf.plan(
        "training", P5, 64, 7, start_after=DECEMBER[0], end_before="2026-12-15", asking=asked.append
    )
    assert answer.status == "unavailable", answer.message  # 32 + 16 on sale, not 64
    calls = ml.calls("DescribeCapacityBlockOfferings")
    assert [c.params["InstanceCount"] for c in calls] == [64, 4, 16, 32]
    assert asked == [f"{n} x {P5} for 192 h in us-east-1" for n in (64, 4, 16, 32)]
    assert answer.largest_offerings[0].instance_count == 32
    # 48 is 32 + 16, and 16 was asked on the way to 32: not asked again
    ml.clear_calls()
    split = tf.plan("training", P5, 48, 7, start_after=DECEMBER[0], end_before="2026-12-15")
    assert split.status == "split", split.message
    calls = ml.calls("DescribeCapacityBlockOfferings")
    assert [c.params["InstanceCount"] for c in calls] == [48, 4, 16, 32]


def test_a_plan_on_a_terminal_says_what_it_asks_ec2(
    ml: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan's offerings search on a terminal shows on stderr what EC2 is being asked (it
    used to show nothing for one Region, for up to 50 s); piped, stderr stays empty."""
    args = ["plan", "-w", "training", "-t", P5, "-n", "100", "--days", "7",
            "--start-after", DECEMBER[0], "--end-before", DECEMBER[1]]  # fmt: skip
    monkeypatch.setenv("COLUMNS", "120")  # wide enough for the whole question
    piped = cli(*args)
    assert piped.exit_code == EXIT_NO_CAPACITY
    assert piped.stderr == ""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # Rich: stderr is a terminal
    shown = cli(*args)
    assert shown.exit_code == EXIT_NO_CAPACITY
    assert f"plan: EC2 offerings of 4 x {P5} for 192 h in us-east-1" in shown.stderr
    assert "unavailable: Nothing held or on sale" in shown.stdout


def _run(command: str) -> Any:
    """A command a verdict printed, run as printed."""
    words = command.split()
    assert words[0] == "capacity-broker"
    return cli(*words[1:])


def test_buy_prints_the_purchase_that_works(ml: Any) -> None:
    """``buy`` named the offering only; ``offerings --purchase`` then needs the count, the
    block's days (8 for a 7-day run) and the Region again. The verdict prints that command,
    and it buys the offering as printed."""
    shown = cli("plan", "-w", "training", "-t", P5, "-n", "16", "--days", "7",
                "--regions", "us-west-2", "--start-after", DECEMBER[0])  # fmt: skip
    assert shown.exit_code == EXIT_OK, shown.stderr
    data = json.loads(
        cli("plan", "-w", "training", "-t", P5, "-n", "16", "--days", "7",
            "--regions", "us-west-2", "--start-after", DECEMBER[0], "-o", "json").stdout
    )  # fmt: skip
    assert data["status"] == "buy"
    offer = data["offerings"][0]["offering_id"]
    (command,) = data["commands"]
    assert command == (
        f"capacity-broker offerings --instance-type {P5} --count 16 --days 8 "
        f"--regions us-west-2 --purchase {offer} --yes"
    )
    assert command in shown.stdout  # whole, on one line
    bought = _run(command)
    assert bought.exit_code == EXIT_OK, bought.stderr
    assert bought.stdout.startswith("purchased:")
    assert len(ml.calls("PurchaseCapacityBlock")) == 1


def test_extend_prints_the_extension_that_works(tf: CapacityBroker, ml: Any) -> None:
    extend = tf.plan("training", P5, 32, 7, start_after=DECEMBER[0], end_before="2026-12-15")
    assert extend.status == "extend", extend.message
    (command,) = extend.commands
    assert command == (
        f"capacity-broker extend --reservation-id {ml.ids['extendable']} --days 4 "
        "--regions us-east-1 --yes"
    )
    extended = _run(command)
    assert extended.exit_code == EXIT_OK, extended.stderr
    assert extended.stdout.startswith("extended:")


def test_split_prints_a_purchase_per_offering(tf: CapacityBroker, ml: Any) -> None:
    split = tf.plan("training", P5, 48, 7, start_after=DECEMBER[0], end_before="2026-12-15")
    assert split.status == "split", split.message
    assert split.split is not None
    offered = [p for p in split.split.pieces if p.source == "offering"]
    assert len(split.commands) == len(offered) == 2
    for piece, command in zip(offered, split.commands, strict=True):
        assert f"--count {piece.instance_count} --days 8" in command
        assert f"--purchase {piece.id} --yes" in command
        assert _run(command).exit_code == EXIT_OK
    assert len(ml.calls("PurchaseCapacityBlock")) == 2
