"""Reserve's answer when nothing was won, and the checks on a caller's reservation."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from capacity_broker.domain.reserve import (
    ExistingReservation,
    Rejected,
    ReserveStatus,
    StillPending,
    TooLate,
    VersionData,
    WaitForStart,
    Wanted,
    possible_pairs,
    template_version_data,
    validate_existing,
    verdict,
)
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("won", "strict", "pair_count", "expected"),
    [
        (True, False, 1, "reserved"),
        (True, True, 6, "reserved"),
        (False, False, 1, "no_capacity"),  # only one place to try: the job waits
        (False, True, 1, "no_capacity"),
        (False, True, 6, "no_capacity"),  # strict: the job waits
        (False, False, 2, "unreserved"),  # several places: proceed without a guarantee
        (False, False, 200, "unreserved"),
    ],
)
def test_verdict(won: bool, strict: bool, pair_count: int, expected: str) -> None:
    assert verdict(won, strict, pair_count) == expected


def test_verdict_needs_a_pair() -> None:
    with pytest.raises(ValueError, match="pair_count"):
        verdict(False, False, 0)


@given(st.booleans(), st.booleans(), st.integers(min_value=1, max_value=200))
def test_verdict_properties(won: bool, strict: bool, pair_count: int) -> None:
    result = verdict(won, strict, pair_count)
    assert (result is ReserveStatus.RESERVED) is won
    if result is ReserveStatus.UNRESERVED:
        assert not strict
        assert pair_count > 1


ODCR = ExistingReservation(
    id="cr-0123456789abcdef0",
    state="active",
    reservation_type="default",
    instance_type="c7i.48xlarge",
    availability_zone_id="use1-az2",
    platform="Linux/UNIX",
    tenancy="default",
    available_count=8,
    start_date=NOW - timedelta(days=1),
    owner="111122223333",
)
# A scheduled block as EC2 describes it: nothing available yet, its size in a tag.
BLOCK = replace(
    ODCR,
    id="cr-0fedcba9876543210",
    reservation_type="capacity-block",
    instance_type="p5.48xlarge",
    state="scheduled",
    start_date=NOW + timedelta(hours=2, seconds=0.5),
    available_count=0,
    size=8,
)
WANTED = Wanted(
    instance_types=("c7i.48xlarge", "p5.48xlarge"),
    availability_zone_ids=frozenset({"use1-az1", "use1-az2"}),
    platform="Linux/UNIX",
    tenancy="default",
    instance_count=8,
)


def test_a_fitting_odcr_is_usable() -> None:
    assert validate_existing(ODCR, WANTED, NOW) is None


def test_an_active_block_is_usable() -> None:
    assert validate_existing(replace(BLOCK, state="active", available_count=8), WANTED, NOW) is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"state": "cancelled"}, "is cancelled, not active"),
        ({"state": "expired"}, "is expired, not active"),
        ({"state": "failed"}, "is failed, not active"),
        # a scheduled (future-dated) ODCR is waited for when its size fits; this one has none
        ({"state": "scheduled"}, "Capacity Reservation cr-0123456789abcdef0 is for 0 instances"),
        ({"instance_type": "c7i.large"}, "c7i.large, which is not among"),
        ({"availability_zone_id": "use1-az4"}, "use1-az4, where none of the job's subnets"),
        ({"platform": "Windows"}, "is for Windows, the job needs Linux/UNIX"),
        ({"tenancy": "dedicated"}, "dedicated tenancy"),
        ({"available_count": 7}, "has 7 instances available, the job needs 8"),
        ({"available_count": 0}, "has 0 instances available"),
        ({"owned_by_broker": True}, "one of this broker's own reservations"),
    ],
)
def test_rejections(change: dict[str, object], words: str) -> None:
    result = validate_existing(replace(ODCR, **change), WANTED, NOW)  # type: ignore[arg-type]
    assert isinstance(result, Rejected)
    assert words in result.reason


def test_a_pending_odcr_that_fits_is_asked_for_again() -> None:
    """EC2 shows a new ODCR pending while it provisions it ("up to 5 minutes"); it used to be
    rejected, failing a job whose reservation was about to be active."""
    pending = replace(ODCR, state="pending", size=8, available_count=0)
    result = validate_existing(pending, WANTED, NOW)
    assert result == StillPending(
        "Capacity Reservation cr-0123456789abcdef0 is still pending (EC2 is provisioning it); "
        "ask again shortly"
    )


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"size": 7}, "Capacity Reservation cr-0123456789abcdef0 is for 7 instances"),
        ({"platform": "Windows"}, "is for Windows, the job needs Linux/UNIX"),
        ({"instance_type": "c7i.large"}, "c7i.large, which is not among"),
    ],
)
def test_a_pending_odcr_that_cannot_serve_is_rejected_not_awaited(
    change: dict[str, object], words: str
) -> None:
    pending = replace(replace(ODCR, state="pending", size=8), **change)  # type: ignore[arg-type]
    result = validate_existing(pending, WANTED, NOW)
    assert isinstance(result, Rejected)
    assert words in result.reason


def test_more_available_than_needed_is_fine() -> None:
    assert validate_existing(replace(ODCR, available_count=100), WANTED, NOW) is None


def test_a_scheduled_block_answers_wait_until_its_start() -> None:
    """EC2 shows 0 available before the start: the size (its tag) is what must fit. The old
    rule compared the 0 available and rejected the job's own block as too small."""
    result = validate_existing(BLOCK, WANTED, NOW)
    assert isinstance(result, WaitForStart)
    assert result.retry_after_seconds == 7201
    assert result.reason.startswith("Capacity Block cr-0fedcba9876543210 (scheduled) starts at ")
    assert result.reason.endswith(", in 7201 s")


def test_a_payment_pending_block_is_awaited_too() -> None:
    result = validate_existing(replace(BLOCK, state="payment-pending"), WANTED, NOW)
    assert isinstance(result, WaitForStart)
    assert result.retry_after_seconds == 7201
    assert "payment-pending" in result.reason


def test_a_scheduled_block_smaller_than_the_job_is_rejected() -> None:
    result = validate_existing(replace(BLOCK, size=7), WANTED, NOW)
    assert result == Rejected(
        "Capacity Block cr-0fedcba9876543210 is for 7 instances, the job needs 8"
    )


def test_an_active_block_with_too_few_free_is_rejected_whatever_its_size() -> None:
    result = validate_existing(replace(BLOCK, state="active", available_count=3), WANTED, NOW)
    assert isinstance(result, Rejected)
    assert "has 3 instances available" in result.reason


def test_a_scheduled_block_past_its_start_asks_again_soon() -> None:
    late = replace(BLOCK, start_date=NOW - timedelta(minutes=1))
    result = validate_existing(late, WANTED, NOW)
    assert isinstance(result, WaitForStart)
    assert result.retry_after_seconds == 1


def test_a_scheduled_block_that_cannot_serve_is_rejected_not_awaited() -> None:
    result = validate_existing(replace(BLOCK, availability_zone_id="use1-az9"), WANTED, NOW)
    assert isinstance(result, Rejected)
    result = validate_existing(replace(BLOCK, start_date=None), WANTED, NOW)
    assert isinstance(result, Rejected)
    assert "no start date" in result.reason


# -- a block near its end (issue 21) -------------------------------------------------------
ACTIVE = replace(BLOCK, state="active", available_count=8, start_date=NOW - timedelta(days=1))


def test_a_block_in_its_last_half_hour_is_not_used() -> None:
    """EC2 begins terminating a block's instances 30 minutes before its end: a job launched
    then would be killed at once."""
    late = replace(ACTIVE, end_date=NOW + timedelta(minutes=20))
    result = validate_existing(late, WANTED, NOW)
    assert isinstance(result, TooLate)
    assert "ends at 2026-11-21T10:20:00Z" in result.reason
    assert "30 minutes before, at 2026-11-21T09:50:00Z" in result.reason
    assert (
        validate_existing(replace(late, end_date=NOW + timedelta(minutes=31)), WANTED, NOW) is None
    )


def test_an_ultraserver_block_stops_an_hour_before_its_end() -> None:
    ultra = replace(
        ACTIVE, instance_type="p6e-gb200.36xlarge", end_date=NOW + timedelta(minutes=50)
    )
    wanted = replace(WANTED, instance_types=("p6e-gb200.36xlarge",))
    result = validate_existing(ultra, wanted, NOW)
    assert isinstance(result, TooLate)
    assert "60 minutes before" in result.reason
    assert (
        validate_existing(replace(ultra, end_date=NOW + timedelta(minutes=61)), wanted, NOW) is None
    )


def test_a_block_with_less_than_the_jobs_runtime_left_answers_too_late() -> None:
    block = replace(ACTIVE, end_date=NOW + timedelta(hours=3))
    long_job = replace(WANTED, runtime_seconds=3 * 3600)
    result = validate_existing(block, long_job, NOW)
    assert isinstance(result, TooLate)
    assert "has 9000 s left" in result.reason and "the job runs 10800 s" in result.reason
    assert validate_existing(block, replace(WANTED, runtime_seconds=2 * 3600), NOW) is None


def test_a_block_shorter_than_the_job_can_never_take_it() -> None:
    day = replace(BLOCK, end_date=BLOCK.start_date + timedelta(hours=24))  # type: ignore[operator]
    result = validate_existing(day, replace(WANTED, runtime_seconds=24 * 3600), NOW)
    assert isinstance(result, Rejected)
    assert "at most (" in result.reason and "the job runs 86400 s" in result.reason
    # one that fits is awaited until its start, as before
    fits = validate_existing(day, replace(WANTED, runtime_seconds=23 * 3600), NOW)
    assert isinstance(fits, WaitForStart)


def test_an_odcr_end_date_is_not_a_block_end() -> None:
    odcr = replace(ODCR, end_date=NOW + timedelta(minutes=10))
    assert validate_existing(odcr, replace(WANTED, runtime_seconds=3600), NOW) is None


@pytest.mark.parametrize("state", ["payment-failed", "expired", "cancelled"])
def test_blocks_in_other_states_are_rejected(state: str) -> None:
    result = validate_existing(replace(BLOCK, state=state), WANTED, NOW)
    assert isinstance(result, Rejected)
    assert f"Capacity Block cr-0fedcba9876543210 is {state}" in result.reason


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="now"):
        validate_existing(ODCR, WANTED, NOW.replace(tzinfo=None))


ONLY_HERE = {
    "CapacityReservationPreference": "capacity-reservations-only",
    "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"},
}


def test_a_template_version_launches_only_into_the_reservation() -> None:
    made = template_version_data("cr-0123456789abcdef0", False, "default")
    assert made == VersionData({"CapacityReservationSpecification": ONLY_HERE}, inherit=True)


def test_a_block_adds_its_market_type() -> None:
    data = template_version_data("cr-0123456789abcdef0", True, "default").data
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == ONLY_HERE


def test_a_reservation_in_a_placement_group_names_the_group() -> None:
    arn = "arn:aws:ec2:us-east-1:111122223333:placement-group/hpc-cluster"
    data = template_version_data("cr-0123456789abcdef0", False, "dedicated", arn).data
    assert data["Placement"] == {"GroupName": "hpc-cluster", "Tenancy": "dedicated"}


SOURCE = {"ImageId": "ami-0123456789abcdef0", "InstanceType": "c7i.48xlarge", "KeyName": "hpc"}


@pytest.mark.parametrize(
    "market",
    [{"MarketType": "spot", "SpotOptions": {"MaxPrice": "1.0"}}, {"MarketType": "capacity-block"}],
)
def test_an_odcr_version_drops_the_source_market_type(market: dict[str, object]) -> None:
    """Contract step 4: no market type for an ODCR, whatever the source said. EC2 cannot
    unset an inherited parameter, so the version is built whole, without SourceVersion."""
    made = template_version_data(
        "cr-0123456789abcdef0", False, "default", source={**SOURCE, "InstanceMarketOptions": market}
    )
    assert made.inherit is False
    assert made.data == {**SOURCE, "CapacityReservationSpecification": ONLY_HERE}


def test_a_block_version_replaces_the_source_market_type() -> None:
    source = {**SOURCE, "InstanceMarketOptions": {"MarketType": "spot"}}
    made = template_version_data("cr-0123456789abcdef0", True, "default", source=source)
    assert made.inherit is True  # the whole parameter is replaced, SpotOptions included
    assert made.data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}


def test_a_source_without_a_market_type_is_built_on() -> None:
    made = template_version_data("cr-0123456789abcdef0", False, "default", source=SOURCE)
    assert made == VersionData({"CapacityReservationSpecification": ONLY_HERE}, inherit=True)


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        (["insufficient_capacity", "insufficient_capacity"], 2),
        (["unsupported", "insufficient_capacity"], 1),  # only one place could ever hold it
        (["unsupported", "unsupported"], 1),
        (["insufficient_capacity", "not_tried", "throttled"], 3),
    ],
)
def test_possible_pairs_leave_out_types_the_az_does_not_offer(
    outcomes: list[str], expected: int
) -> None:
    assert possible_pairs(outcomes) == expected
