"""The injectable clock: pending → active, EndDate expiry (with EC2's lag), block life cycle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError
from emu_helpers import NOW, error_of

pytestmark = pytest.mark.emulator


# -- the clock -----------------------------------------------------------------------------
def test_the_clock_runs_in_real_time_by_default(emu):
    before = datetime.now(UTC)
    now = emu.now()
    assert before - timedelta(seconds=1) <= now <= datetime.now(UTC) + timedelta(seconds=1)
    shifted = emu.advance(3600)
    assert shifted - now >= timedelta(hours=1)


def test_freeze_advance_and_set(emu):
    assert emu.freeze(NOW) == NOW
    assert emu.now() == NOW
    assert emu.advance(90) == NOW + timedelta(seconds=90)
    assert emu.now() == NOW + timedelta(seconds=90)
    later = datetime(2027, 1, 1, tzinfo=UTC)
    assert emu.set_time(later) == later
    assert emu.now() == later


def test_a_naive_time_means_utc(emu):
    assert emu.freeze(datetime(2026, 11, 21, 6, 0)) == NOW


def test_set_time_on_a_running_clock_keeps_running(emu):
    emu.set_time(NOW)
    assert NOW <= emu.now() < NOW + timedelta(seconds=5)


def test_api_timestamps_follow_the_clock(api, emu):
    emu.advance(3600)
    r = api.reserve()
    assert r["CreateDate"] == NOW + timedelta(hours=1)


# -- limited reservations expire -------------------------------------------------------------
def test_a_limited_reservation_expires_at_its_end_date_without_lag(api, emu):
    rid = api.reserve_until(minutes=5, count=3)["CapacityReservationId"]
    assert api.free("us-east-1a", "c5.large") == 1
    emu.advance(299)
    assert api.get(rid)["State"] == "active"
    emu.advance(1)
    r = api.get(rid)
    assert r["State"] == "expired"
    assert r["AvailableInstanceCount"] == 0
    assert api.free("us-east-1a", "c5.large") == 4  # expiry returns the capacity


def test_expiry_lag_keeps_a_reservation_past_its_end_date(api, emu):
    emu.configure(expiry_lag_seconds=1800)
    rid = api.reserve_until(minutes=5, count=2)["CapacityReservationId"]
    emu.advance(5 * 60 + 1)
    r = api.get(rid)
    assert r["State"] == "active"  # EndDate passed, EC2 is still within its lag
    assert r["EndDate"] < emu.now()
    assert api.free("us-east-1a", "c5.large") == 2
    emu.advance(1800)
    assert api.get(rid)["State"] == "expired"
    assert api.free("us-east-1a", "c5.large") == 4


def test_the_lag_can_be_configured_after_the_reservation_exists(api, emu):
    rid = api.reserve_until(minutes=5)["CapacityReservationId"]
    emu.configure(expiry_lag_seconds=600)
    emu.advance(5 * 60)
    assert api.get(rid)["State"] == "active"
    emu.advance(600)
    assert api.get(rid)["State"] == "expired"


def test_a_seeded_reservation_can_carry_its_own_lag(api, emu):
    ids = emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "reservations": [
                        {
                            "name": "slow",
                            "instance_type": "r5.large",
                            "availability_zone": "us-east-1d",
                            "count": 1,
                            "end_date": "+1m",
                            "expiry_lag_seconds": 3600,
                        }
                    ]
                }
            }
        }
    )
    rid = ids.reservations["slow"]
    emu.advance(60 + 3599)
    assert api.get(rid)["State"] == "active"
    emu.advance(1)
    assert api.get(rid)["State"] == "expired"


def test_pool_view_reflects_expiry_without_an_api_call(api, emu):
    api.reserve_until(minutes=1, count=4)
    assert api.free("us-east-1a", "c5.large") == 0
    emu.advance(61)
    assert api.free("us-east-1a", "c5.large") == 4


def test_an_expired_reservation_frees_capacity_for_a_new_one(api, emu):
    api.reserve_until(minutes=1, count=4)
    with pytest.raises(ClientError) as exc:
        api.reserve(count=1)
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)
    emu.advance(60)
    assert api.reserve(count=4)["State"] == "active"


def test_an_unlimited_reservation_never_expires(api, emu):
    rid = api.reserve()["CapacityReservationId"]
    emu.advance(365 * 24 * 3600)
    assert api.get(rid)["State"] == "active"


def test_expired_reservations_filter_and_refuse_changes(api, ec2, emu):
    rid = api.reserve_until(minutes=1)["CapacityReservationId"]
    emu.advance(120)
    found = ec2.describe_capacity_reservations(Filters=[{"Name": "state", "Values": ["expired"]}])
    assert [r["CapacityReservationId"] for r in found["CapacityReservations"]] == [rid]
    with pytest.raises(ClientError) as exc:
        ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    assert error_of(exc) == ("IncorrectState", 400)
    with pytest.raises(ClientError) as exc:
        ec2.modify_capacity_reservation(CapacityReservationId=rid, InstanceCount=2)
    assert error_of(exc) == ("IncorrectState", 400)


def test_extending_the_end_date_postpones_expiry(api, ec2, emu):
    rid = api.reserve_until(minutes=5)["CapacityReservationId"]
    ec2.modify_capacity_reservation(CapacityReservationId=rid, EndDate=NOW + timedelta(hours=1))
    emu.advance(30 * 60)
    assert api.get(rid)["State"] == "active"
    emu.advance(30 * 60)
    assert api.get(rid)["State"] == "expired"


def test_instances_outlive_their_reservation(api, ec2, emu):
    rid = api.reserve_until(minutes=5, count=3)["CapacityReservationId"]
    [instance] = api.run(count=1)
    assert api.get(rid)["AvailableInstanceCount"] == 2
    emu.advance(300)
    assert api.get(rid)["State"] == "expired"
    # the instance keeps running on On-Demand capacity; the 2 free slots went back
    assert api.pool("us-east-1a", "c5.large") == {"capacity": 4, "used": 1, "available": 3}
    ec2.terminate_instances(InstanceIds=[instance])
    assert api.free("us-east-1a", "c5.large") == 4


# -- pending → active ----------------------------------------------------------------------
def test_pending_then_active(api, ec2, emu):
    emu.configure(pending_seconds=30)
    rid = api.reserve(count=2)["CapacityReservationId"]
    r = api.get(rid)
    assert r["State"] == "pending"
    assert api.free("us-east-1a", "c5.large") == 2  # held from the start
    found = ec2.describe_capacity_reservations(Filters=[{"Name": "state", "Values": ["pending"]}])
    assert len(found["CapacityReservations"]) == 1
    emu.advance(29)
    assert api.get(rid)["State"] == "pending"
    emu.advance(1)
    assert api.get(rid)["State"] == "active"


def test_a_pending_reservation_can_be_neither_cancelled_nor_modified(api, ec2, emu):
    # CancelCapacityReservation: only `assessing` or `active` reservations can be cancelled
    # (the emulator used to cancel a pending one).
    emu.configure(pending_seconds=30)
    rid = api.reserve(count=2)["CapacityReservationId"]
    with pytest.raises(ClientError) as exc:  # AWS: "pending: can't modify in any way"
        ec2.modify_capacity_reservation(CapacityReservationId=rid, InstanceCount=1)
    assert error_of(exc) == ("IncorrectState", 400)
    with pytest.raises(ClientError) as exc:  # and nothing can launch into it yet
        api.run(
            count=1,
            CapacityReservationSpecification={
                "CapacityReservationTarget": {"CapacityReservationId": rid}
            },
        )
    assert error_of(exc) == ("IncorrectState", 400)
    with pytest.raises(ClientError) as exc:
        ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    assert error_of(exc) == ("IncorrectState", 400)
    assert api.get(rid)["State"] == "pending"
    emu.advance(30)
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    assert api.get(rid)["State"] == "cancelled"
    assert api.free("us-east-1a", "c5.large") == 4


def test_unknown_setting_is_refused(emu):
    with pytest.raises(ValueError, match="unknown emulator setting"):
        emu.configure(expiry_lag=5)


# -- Capacity Blocks: scheduled → active → expired -------------------------------------------
@pytest.fixture
def block(api, emu):
    start = NOW + timedelta(hours=2)
    b = emu.capacity().new_block(
        instance_type="p5.48xlarge",
        availability_zone="us-east-1b",
        count=2,
        start=start,
        end=start + timedelta(days=1),
    )
    emu.capacity().add_existing(b, {})
    return b.id


def test_capacity_block_life_cycle(api, emu, block):
    assert api.get(block)["State"] == "scheduled"
    emu.advance(2 * 3600 - 1)
    assert api.get(block)["State"] == "scheduled"
    emu.advance(1)
    r = api.get(block)
    assert r["State"] == "active"
    assert r["AvailableInstanceCount"] == 2
    emu.advance(24 * 3600)
    r = api.get(block)
    assert r["State"] == "expired"
    assert r["AvailableInstanceCount"] == 0


def test_a_block_launches_only_while_active(api, ec2, emu, block):
    def launch():
        return api.run_in_block(block)

    with pytest.raises(ClientError) as exc:
        launch()
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)  # not started yet
    emu.advance(2 * 3600)
    [instance] = launch()
    assert api.get(block)["AvailableInstanceCount"] == 1
    emu.advance(24 * 3600)
    assert api.get(block)["State"] == "expired"
    with pytest.raises(ClientError) as exc:
        launch()
    assert error_of(exc) == ("IncorrectState", 400)
    # blocks never touch the On-Demand pool
    assert api.pool("us-east-1b", "p5.48xlarge")["used"] == 0
    ec2.terminate_instances(InstanceIds=[instance])
    assert api.pool("us-east-1b", "p5.48xlarge")["used"] == 0


def test_instances_in_an_expired_capacity_block_are_terminated(api, ec2, emu, block):
    emu.advance(2 * 3600)
    ids = api.run_in_block(block, 2)
    emu.advance(24 * 3600)
    assert api.get(block)["State"] == "expired"
    found = ec2.describe_instances(InstanceIds=ids)["Reservations"]
    assert {i["State"]["Name"] for r in found for i in r["Instances"]} == {"terminated"}
    ec2.terminate_instances(InstanceIds=ids)  # terminating them again changes nothing
    assert api.pool("us-east-1b", "p5.48xlarge")["used"] == 0
