"""Future-dated ODCRs (contract v3): requested once with a purchase-like guard, listed with
their state, start and commitment end, counted by ``plan``, postponed or cancelled only after
EC2's quote; and never cancelled by the cleaner inside their commitment, owned or not."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from capacity_broker import CapacityBroker
from capacity_broker.cli import EXIT_OK, EXIT_USAGE, app
from capacity_broker.client import InvalidArguments
from capacity_broker.handlers import cleaner as cleaner_handler
from capacity_broker.handlers import release as release_handler
from capacity_broker.logic.discovery import base as discovery_base
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

CLUSTER = "demo-cluster"
REGION = "us-east-1"
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)
C7I = "c7i.48xlarge"


def owned(purpose: str, **tags: str) -> dict[str, str]:
    return {
        "capacity-broker:cluster-id": CLUSTER,
        "capacity-broker:purpose": purpose,
        "capacity-broker:request-id": f"req-{purpose}-{len(tags)}",
        **tags,
    }


# Owned future-dated reservations delivered two days ago (14-day commitment), each meeting a
# sweep rule that cancels an ordinary owned reservation: a probe past its grace, an idle hold,
# a hold whose stack does not exist, a hold in use (consumed), all past the hold limit; and one
# the broker does not own.
COMMITTED = [
    ("probe", {"created": "-3d"}, owned("probe"), "leaked_probe"),
    ("idle", {"created": "-3d"}, owned("hold", **{"capacity-broker:job-id": "7"}), "idle"),
    ("orphan", {"created": "-3d"},
     owned("hold", **{"capacity-broker:stack-name": "gone-stack"}), "orphaned"),
    ("used", {"created": "-3d", "used": 2}, owned("hold"), "consumed"),
]  # fmt: skip


@pytest.fixture
def world(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    broker.freeze(NOW)
    monkeypatch.setenv("BROKER_REGIONS", REGION)
    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", "1000")
    broker.throttle(time_scale=1000)
    broker.configure(future_assessment_seconds=86400)
    monkeypatch.setattr(discovery_base, "utcnow", broker.now)
    for name in ("PROBE", "STACK", "IDLE"):
        monkeypatch.delenv(f"BROKER_{name}_GRACE_SECONDS", raising=False)
    monkeypatch.delenv("BROKER_HOLD_LIMIT_SECONDS", raising=False)
    # The handlers' root on the emulator's clock: the cleaner's and the reservation core's
    # (release) "now", which commitments are compared with.
    container.build(clock=broker.now)
    return broker


@pytest.fixture
def tf(world: Any) -> CapacityBroker:
    return CapacityBroker(regions=[REGION], cluster_id=CLUSTER)


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["--cluster-id", CLUSTER, *args])


def state_of(reservation_id: str) -> str:
    ec2 = boto3.client("ec2", region_name=REGION)
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return str(found["CapacityReservations"][0]["State"])


# -- the cleaner ----------------------------------------------------------------------------


def test_the_cleaner_never_cancels_a_reservation_inside_its_commitment(
    world: Any, context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [
        {"name": name, "instance_type": C7I, "availability_zone": "us-east-1a", "count": 2,
         "start": "-2d", "state": "active", "commitment_days": 14, "tags": tags, **extra}
        for name, extra, tags, _ in COMMITTED
    ] + [
        {"name": "not-owned", "instance_type": C7I, "availability_zone": "us-east-1a",
         "count": 2, "start": "-2d", "state": "active", "tags": {"team": "ml"}},
        {"name": "scheduled", "instance_type": C7I, "availability_zone": "us-east-1a",
         "count": 2, "start": "+20d", "state": "scheduled", "tags": owned("hold")},
    ]  # fmt: skip
    ids = world.load_scenario({"regions": {REGION: {"future_reservations": items}}}).reservations
    sweep = {"action": "sweep", "dry_run": False, "regions": [REGION]}

    for dry_run in (True, False):
        answer = cleaner_handler.handler({**sweep, "dry_run": dry_run}, context)
        assert answer["status"] == "ok", answer
        assert answer["cancelled"] == []
        kept = {k["id"]: k["reason"] for k in answer["kept"]}
        for name, *_ in COMMITTED:
            assert kept[ids[name]] == "inside its commitment until 2026-11-14 09:00 UTC"
    assert {state_of(ids[name]) for name, *_ in COMMITTED} == {"active"}
    assert world.calls("CancelCapacityReservation") == []
    # release by id keeps it too, saying why (its core on the emulator's clock, like the
    # cleaner's: the root's)
    released = release_handler.handler(
        {"reservation_id": ids["idle"], "request_id": "rel-1"}, context
    )
    assert released["cancelled"] == []
    assert "inside its commitment" in released["skipped"][0]["reason"]

    # The same reservations once their commitment has passed: every rule applies again (the
    # test would pass for nothing if they were not cancellable otherwise).
    world.advance((12 * DAY).total_seconds())
    answer = cleaner_handler.handler(sweep, context)
    cancelled = {c["id"]: c["reason"] for c in answer["cancelled"]}
    assert cancelled == {ids[name]: reason for name, _, _, reason in COMMITTED}
    assert state_of(ids["not-owned"]) == "active"


def test_a_stack_event_keeps_a_hold_inside_its_commitment(world: Any, context: Any) -> None:
    # A stack event acts at once on its stack's holds (consumed, orphaned) without the sweep's
    # rules: a committed hold of that stack is kept, said why, and never sent to EC2 (it used
    # to be a failed cancel, InCommitment, turning the answer into an error).
    stack = "soca-demo-job-1234"
    arn = f"arn:aws:cloudformation:{REGION}:123456789012:stack/{stack}/6a7e8feb-b491-4cf7"
    hold = owned("hold", **{"capacity-broker:stack-name": stack})
    ids = world.load_scenario({"regions": {REGION: {"future_reservations": [
        {"name": "committed", "instance_type": C7I, "availability_zone": "us-east-1a",
         "count": 2, "start": "-2d", "created": "-3d", "state": "active", "commitment_days": 14,
         "tags": hold},
    ]}}}).reservations  # fmt: skip
    for status in ("ROLLBACK_COMPLETE", "CREATE_COMPLETE", "DELETE_COMPLETE"):
        answer = cleaner_handler.handler(
            {
                "version": "0",
                "id": "2f9b7c1d-5e6a-4b3c-8d2e-0f1a2b3c4d72",
                "detail-type": "CloudFormation Stack Status Change",
                "source": "aws.cloudformation",
                "account": "123456789012",
                "time": world.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
                "region": REGION,
                "resources": [arn],
                "detail": {
                    "stack-id": arn,
                    "status-details": {"status": status, "status-reason": ""},
                },
            },
            context,
        )
        assert answer["status"] == "ok", answer
        assert answer["cancelled"] == []
        kept = {k["id"]: k["reason"] for k in answer["kept"]}
        assert kept == {ids["committed"]: "inside its commitment until 2026-11-14 09:00 UTC"}
    assert state_of(ids["committed"]) == "active"
    assert world.calls("CancelCapacityReservation") == []


# -- request ----------------------------------------------------------------------------------


def test_a_future_dated_reservation_is_requested_once(tf: CapacityBroker, world: Any) -> None:
    start = NOW + 30 * DAY
    made = tf.reserve_ahead(C7I, 2, "us-east-1a", start, 14)
    assert made.status == "requested", made.message
    assert made.reservation is not None
    assert made.reservation.state == "assessing"
    assert made.reservation.start_date == start
    # the broker's request, not a hold: the cleaner never looks at it
    assert "capacity-broker:purpose" not in made.reservation.tags
    # Asked again at once: a listing made a moment after the create may not show it yet
    # (EC2's eventual consistency), and the request key is its ClientToken: EC2 answers with
    # the same reservation, never a second one.
    again = tf.reserve_ahead(C7I, 2, "us-east-1a", "2026-12-02T09:00Z", 14)
    assert again.reservation_id == made.reservation_id
    ec2 = boto3.client("ec2", region_name=REGION)
    assert len(ec2.describe_capacity_reservations()["CapacityReservations"]) == 1
    world.settle()
    world.clear_calls()
    settled = tf.reserve_ahead(C7I, 2, "us-east-1a", "2026-12-02T09:00Z", 14)
    assert settled.status == "already_requested"
    assert settled.reservation_id == made.reservation_id
    assert world.calls("CreateCapacityReservation") == []
    # the CLI: the commitment said, nothing requested without --yes
    guarded = cli("reserve-ahead", "-t", C7I, "-n", "2", "-z", "us-east-1a",
                  "--start", "2026-12-02T09:00Z", "--commitment-days", "14")  # fmt: skip
    assert guarded.exit_code == EXIT_USAGE
    assert "committed for 14 days" in guarded.stderr
    assert "nothing was requested" in guarded.stderr
    repeat = cli("reserve-ahead", "-t", C7I, "-n", "2", "-z", "us-east-1a",
                 "--start", "2026-12-02T09:00Z", "--commitment-days", "14", "--yes", "-o",
                 "json")  # fmt: skip
    assert repeat.exit_code == EXIT_OK, repeat.stderr
    assert json.loads(repeat.stdout)["status"] == "already_requested"
    assert world.calls("CreateCapacityReservation") == []


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((("p5.48xlarge", 2, "us-east-1a", NOW + 30 * DAY, 14)), "instance_type"),
        ((("m5.xlarge", 7, "us-east-1a", NOW + 30 * DAY, 14)), "instance_count"),
        ((("c7i.48xlarge", 2, "us-east-1a", NOW + 3 * DAY, 14)), "start"),
        ((("c7i.48xlarge", 2, "us-east-1a", NOW + 130 * DAY, 14)), "start"),
        ((("c7i.48xlarge", 2, "us-east-1a", NOW + 30 * DAY, 7)), "commitment_days"),
    ],
)
def test_what_ec2_would_refuse_is_refused_before_any_call(
    tf: CapacityBroker, world: Any, args: tuple[Any, ...], field: str
) -> None:
    world.clear_calls()
    with pytest.raises(InvalidArguments) as refused:
        tf.reserve_ahead(*args)
    assert [name for name, _ in refused.value.errors] == [field]
    assert [c.action for c in world.calls()] in ([], ["DescribeInstanceTypes"])


# -- listed and counted -----------------------------------------------------------------------


def test_capacity_lists_it_and_plan_counts_it_once_scheduled(
    tf: CapacityBroker, world: Any
) -> None:
    start = NOW + 30 * DAY
    made = tf.reserve_ahead(C7I, 2, "us-east-1a", start, 14)
    (row,) = tf.capacity(instance_types=[C7I])
    assert (row.state, row.total_capacity, row.start_date) == ("assessing", 2, start)
    window = {"start_after": "2026-12-01", "end_before": "2026-12-31"}
    # not confirmed by EC2: said, not counted
    waiting = tf.plan("inference", C7I, 2, **window)
    assert waiting.status == "unavailable"
    assert any(made.reservation_id in note and "assessing" in note for note in waiting.notes)
    world.advance(DAY.total_seconds())
    ready = tf.plan("inference", C7I, 2, **window)
    assert ready.status == "ready", ready.message
    assert [o.reservation_id for o in ready.odcrs] == [made.reservation_id]
    assert "(scheduled)" in ready.message
    world.advance((29 * DAY).total_seconds())
    (active,) = tf.capacity(instance_types=[C7I])
    assert active.state == "active"
    assert active.commitment_end_date == start + 14 * DAY
    wide = CliRunner().invoke(app, ["capacity", "-t", C7I], env={"COLUMNS": "200"})
    assert "2026-12-16 09:00" in " ".join(wide.stdout.split())
    # delivered: its commitment's end, never "can use indefinitely" (issue 42)
    assert "committed until 2026-12-16 09:00" in " ".join(wide.stdout.split())
    assert "indefinitely" not in wide.stdout


# -- changes: EC2's quote first ---------------------------------------------------------------


def test_a_cancellation_shows_the_quote_before_anything_changes(
    tf: CapacityBroker, world: Any
) -> None:
    made = tf.reserve_ahead(C7I, 2, "us-east-1a", NOW + 30 * DAY, 14)
    rid = made.reservation_id
    assert rid is not None
    world.advance(DAY.total_seconds())  # scheduled: inside its commitment
    world.settle()
    quoted = tf.cancel_ahead(rid)
    assert quoted.status == "quoted", quoted.message
    assert quoted.quote is not None
    assert quoted.quote.charge_hours == 84  # 25% of 336 h: 2 to 8 weeks before the start
    assert state_of(rid) == "scheduled"
    assert world.calls("CancelCapacityReservation") == []
    # a --yes alone does not accept terms that were not shown
    guarded = cli("reserve-ahead", "--reservation-id", rid, "--cancel", "--yes")
    assert guarded.exit_code == EXIT_USAGE
    assert state_of(rid) == "scheduled"
    done = cli("reserve-ahead", "--reservation-id", rid, "--cancel", "--quote",
               quoted.quote.quote_id, "--yes", "-o", "json")  # fmt: skip
    assert done.exit_code == EXIT_OK, done.stderr
    assert json.loads(done.stdout)["status"] == "cancelled"
    assert state_of(rid) == "cancelling"


def test_an_assessing_reservation_cancels_free(tf: CapacityBroker, world: Any) -> None:
    made = tf.reserve_ahead(C7I, 2, "us-east-1a", NOW + 30 * DAY, 14)
    rid = made.reservation_id
    assert rid is not None
    world.settle()
    unconfirmed = tf.cancel_ahead(rid)
    assert unconfirmed.status == "quoted"
    assert "free" in unconfirmed.message
    assert state_of(rid) == "assessing"
    assert tf.cancel_ahead(rid, confirm=True).status == "cancelled"
    assert state_of(rid) == "cancelled"


def test_a_date_change_shows_the_quote_then_applies_that_quote(
    tf: CapacityBroker, world: Any
) -> None:
    start = NOW + 10 * DAY
    made = tf.reserve_ahead(C7I, 2, "us-east-1a", start, 14)
    rid = made.reservation_id
    assert rid is not None
    world.advance(DAY.total_seconds())
    world.settle()
    later = start + 3 * DAY
    quoted = tf.change_start(rid, later)
    assert quoted.status == "quoted"
    assert quoted.quote is not None
    assert quoted.quote.new_start_date == later
    assert quoted.quote.new_commitment_hours == 17 * 24  # within 2 weeks: a day per day
    assert world.calls("ModifyCapacityReservation") == []
    # a quote for another date is not accepted for this one
    wrong = tf.change_start(rid, later + DAY, quote_id=quoted.quote.quote_id, confirm=True)
    assert wrong.status == "refused"
    changed = tf.change_start(rid, later, quote_id=quoted.quote.quote_id, confirm=True)
    assert changed.status == "changed", changed.message
    assert changed.reservation is not None
    assert changed.reservation.start_date == later


def test_only_reservations_requested_here_are_changed(tf: CapacityBroker, world: Any) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    theirs = ec2.create_capacity_reservation(
        InstanceType=C7I, InstancePlatform="Linux/UNIX", AvailabilityZone="us-east-1a",
        InstanceCount=2, InstanceMatchCriteria="targeted", StartDate=NOW + 30 * DAY,
        CommitmentDuration=14 * 86400, DeliveryPreference="incremental",
    )["CapacityReservation"]["CapacityReservationId"]  # fmt: skip
    world.settle()
    answer = tf.cancel_ahead(theirs, confirm=True)
    assert answer.status == "refused"
    assert "not requested through this broker" in answer.message
    assert state_of(theirs) == "assessing"


def test_the_cli_says_a_commitment_is_one_and_a_preview_is_no_error(world: Any) -> None:
    """Issue 42: a 14-day commitment was shown as "can use indefinitely", and the preview of
    what a request commits to printed as an ``error:``."""
    args = ["reserve-ahead", "-t", C7I, "-n", "2", "-z", "us-east-1a",
            "--start", "2026-12-02T09:00Z", "--commitment-days", "14"]  # fmt: skip
    preview = cli(*args)
    assert preview.exit_code == EXIT_USAGE
    assert preview.stderr.startswith("preview: requesting commits you to")
    assert "error:" not in preview.stderr
    made = CliRunner().invoke(
        app, ["--cluster-id", CLUSTER, *args, "--yes"], env={"COLUMNS": "200"}
    )
    assert made.exit_code == EXIT_OK, made.output
    said = " ".join(made.stdout.split())
    assert "indefinitely" not in said
    assert "cannot be cancelled before its commitment ends" in said
