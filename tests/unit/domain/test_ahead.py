"""Future-dated ODCRs: EC2's terms before any call, and the commitment (domain.ahead)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from capacity_broker.domain import ahead

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)
TWO_WEEKS = timedelta(days=14)


def fields(problems: list[tuple[str, str]]) -> list[str]:
    return [name for name, _ in problems]


@pytest.mark.parametrize(
    "instance_type",
    ["c7i.48xlarge", "m5.xlarge", "r7i.8xlarge", "i4i.8xlarge", "im4gn.8xlarge", "t3.2xlarge",
     "g6.8xlarge", "gr6.8xlarge"],
)  # fmt: skip
def test_the_families_ec2_reserves_ahead(instance_type: str) -> None:
    assert ahead.refusals(instance_type, 8, 4, NOW + 30 * DAY, TWO_WEEKS, NOW) == []


@pytest.mark.parametrize(
    "instance_type",
    # U and X: botocore names "the C, M, R, I, T, and G instance families only"
    [
        "p5.48xlarge",
        "inf2.48xlarge",
        "trn1.32xlarge",
        "mac2.metal",
        "hpc7a.96xlarge",
        "u-6tb1.metal",
        "x2idn.32xlarge",
    ],
)
def test_other_families_are_refused_before_any_call(instance_type: str) -> None:
    assert fields(ahead.refusals(instance_type, 8, 96, NOW + 30 * DAY, TWO_WEEKS, NOW)) == [
        "instance_type"
    ]


def test_at_least_32_vcpus() -> None:
    # "if you request a future-dated Capacity Reservation for m5.xlarge instances, you must
    # request at least 8 instances"
    (problem,) = ahead.refusals("m5.xlarge", 7, 4, NOW + 30 * DAY, TWO_WEEKS, NOW)
    assert problem[0] == "instance_count"
    assert "8 instances" in problem[1]
    assert ahead.refusals("m5.xlarge", 8, 4, NOW + 30 * DAY, TWO_WEEKS, NOW) == []
    # vCPUs unknown: left to EC2
    assert ahead.refusals("m5.xlarge", 1, None, NOW + 30 * DAY, TWO_WEEKS, NOW) == []


@pytest.mark.parametrize(
    ("lead", "ok"),
    [(5 * DAY, True), (120 * DAY, True), (5 * DAY - timedelta(seconds=1), False),
     (121 * DAY, False)],
)  # fmt: skip
def test_between_5_and_120_days_ahead(lead: timedelta, ok: bool) -> None:
    problems = ahead.refusals("c7i.48xlarge", 1, 192, NOW + lead, TWO_WEEKS, NOW)
    assert fields(problems) == ([] if ok else ["start"])


def test_a_commitment_of_14_days_at_least() -> None:
    problems = ahead.refusals("c7i.48xlarge", 1, 192, NOW + 30 * DAY, 13 * DAY, NOW)
    assert fields(problems) == ["commitment_days"]


def test_the_requested_start_is_the_next_whole_hour() -> None:
    assert ahead.requested_start(NOW) == NOW
    assert ahead.requested_start(NOW + timedelta(minutes=1)) == NOW + timedelta(hours=1)


def test_inside_the_commitment() -> None:
    end = NOW + DAY
    assert ahead.in_commitment(end, True, "active", NOW)
    assert not ahead.in_commitment(end, True, "active", end)
    # scheduled for delivery: a cancellation is charged
    assert ahead.in_commitment(None, True, "scheduled", NOW)
    # assessing, delayed: free to cancel; an immediate ODCR has no commitment
    assert not ahead.in_commitment(None, True, "assessing", NOW)
    assert not ahead.in_commitment(None, True, "delayed", NOW)
    assert not ahead.in_commitment(None, False, "active", NOW)
