"""EC2's request buckets as the emulator models them (``emulator.throttling``), on a driven
clock: sizes from the "Request throttling" page, raised limits, another client's share."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.throttling import (
    Throttling,
    TokenBucket,
    bucket_name,
    category,
    published_limits,
    raise_limits,
)

pytestmark = pytest.mark.emulator


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("action", "params", "kind", "limits"),
    [
        ("CancelCapacityReservation", None, "mutating", (50, 5)),
        ("CreateCapacityReservation", None, "mutating", (50, 5)),
        ("DescribeCapacityReservations", None, "non_mutating", (100, 20)),
        ("SearchTransitGatewayRoutes", None, "non_mutating", (100, 20)),
        ("GetCapacityReservationUsage", None, "non_mutating", (100, 20)),
        ("RequestSpotInstances", None, "resource_intensive", (50, 5)),
        ("DescribeCapacityBlockOfferings", None, "uncategorized", (10, 0.15)),
        ("PurchaseCapacityBlock", None, "uncategorized", (10, 0.15)),
        ("PurchaseCapacityBlockExtension", None, "uncategorized", (10, 0.15)),
        ("CreateLaunchTemplateVersion", None, "uncategorized", (100, 5)),
        ("RunInstances", None, "uncategorized", (5, 2)),
        ("DescribeInstances", None, "unfiltered_non_mutating", (50, 10)),
        ("DescribeInstances", {"NextToken": "t"}, "non_mutating", (100, 20)),
        ("DescribeVolumes", {"Filters": [{"Name": "size"}]}, "non_mutating", (100, 20)),
    ],
)
def test_categories_and_sizes_follow_the_page(action, params, kind, limits) -> None:
    assert category(action, params) == kind
    assert published_limits(action, params) == limits


def test_every_action_is_its_own_bucket() -> None:
    assert bucket_name("CancelCapacityReservation") == "CancelCapacityReservation"
    assert bucket_name("DescribeInstances") == "DescribeInstances (unfiltered)"
    assert bucket_name("DescribeInstances", {"MaxResults": 5}) == "DescribeInstances"


@given(
    st.floats(min_value=0, max_value=1000),
    st.floats(min_value=0.01, max_value=100),
    st.floats(min_value=0.1, max_value=30),
)
def test_a_raise_multiplies_the_refill_and_keeps_the_bucket_above_it(burst, refill, times):
    new_burst, new_refill = raise_limits((burst, refill), times)
    assert new_refill == pytest.approx(refill * times)
    assert new_burst >= burst and new_burst >= new_refill


def test_raising_the_capacity_block_bucket() -> None:
    assert raise_limits((10, 0.15), 10) == (10, pytest.approx(1.5))
    assert raise_limits((50, 5), 10) == (50, 50)
    assert raise_limits((50, 5), 20) == (100, 100)


def test_a_bucket_refills_at_its_rate_after_its_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(10, 0.15, clock=clock)
    assert [bucket.take() for _ in range(11)] == [True] * 10 + [False]
    clock.now += 6.0  # 0.9 of a token
    assert not bucket.take()
    clock.now += 0.7
    assert bucket.take()


def test_another_client_takes_its_share_and_leaves_the_rest() -> None:
    clock = Clock()
    bucket = TokenBucket(50, 5.0, other_rate=2.5, clock=clock)
    ours = sum(bucket.take() for _ in range(100))
    assert ours == 50  # the burst: the other client has made no call yet
    taken = 0
    for _ in range(400):  # 40 s, a call of ours every 0.1 s: twice what the bucket refills
        clock.now += 0.1
        taken += bucket.take()
    # 200 tokens refilled: the other client's 100 calls each got theirs (first in line) ...
    assert bucket.other_taken + bucket.other_waiting == pytest.approx(100, abs=1)
    assert bucket.other_waiting <= 1
    # ... and we had the rest, nothing more.
    assert taken + bucket.other_taken <= 200
    assert taken == pytest.approx(100, abs=2)


def test_the_other_client_waits_for_what_the_bucket_cannot_give_yet() -> None:
    # It wants 2 tokens a second from a bucket that refills 1: its calls wait, none is lost,
    # and it takes every token as it comes, leaving none to us.
    clock = Clock()
    bucket = TokenBucket(1, 1.0, other_rate=2.0, clock=clock)
    clock.now += 10.01
    assert not bucket.take()
    assert bucket.other_taken == 10  # the one token at 0.5 s, then one a second from 1.5 s
    assert bucket.other_taken + bucket.other_waiting == 20  # every call it made


def test_without_refill_the_other_client_waits_forever_and_nothing_loops() -> None:
    clock = Clock()
    bucket = TokenBucket(2, 0.0, other_rate=1.0, clock=clock)
    clock.now += 5.5
    assert not bucket.take()
    assert (bucket.other_taken, bucket.other_waiting) == (2, 3)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=1, max_value=100),
    st.floats(min_value=0.1, max_value=50),
    st.floats(min_value=0, max_value=1),
    st.lists(st.floats(min_value=0, max_value=2), max_size=200),
)
def test_the_two_clients_never_take_more_than_the_bucket_gives(burst, refill, share, gaps):
    clock = Clock()
    bucket = TokenBucket(burst, refill, other_rate=share * refill, clock=clock)
    start = clock.now
    ours = 0
    for gap in gaps:
        clock.now += gap
        ours += bucket.take()
    given_out = burst + refill * (clock.now - start)
    assert ours + bucket.other_taken <= given_out + 1e-6


def test_knobs_pick_the_bucket_size() -> None:
    throttling = Throttling()
    throttling.configure(
        buckets={"mutating": (4, 1.0), "CancelCapacityReservation": (2, 3.0), "blocks": (1, 1)},
        groups={"PurchaseCapacityBlock": "blocks"},
        raised=2,
    )
    assert throttling.limits("CreateCapacityReservation") == (4, 2.0)
    assert throttling.limits("CancelCapacityReservation") == (6, 6.0)  # 3 x 2 passes 2
    assert throttling.limits("PurchaseCapacityBlock") == (2, 2)
    assert throttling.limits("DescribeCapacityBlockOfferings") == (10, 0.3)


def test_a_throttled_call_draws_from_its_own_account_region_and_bucket() -> None:
    clock = Clock()
    throttling = Throttling(clock=clock)
    throttling.configure(time_scale=0)
    blocks = [throttling.allow("1", "us-east-1", "PurchaseCapacityBlock", dict) for _ in range(11)]
    assert blocks == [True] * 10 + [False]
    assert throttling.allow("2", "us-east-1", "PurchaseCapacityBlock", dict)
    assert throttling.allow("1", "us-west-2", "PurchaseCapacityBlock", dict)
    assert throttling.allow("1", "us-east-1", "DescribeCapacityBlockOfferings", dict)


def test_the_other_clients_are_reported_per_bucket() -> None:
    clock = Clock()
    throttling = Throttling(clock=clock)
    throttling.configure(others={"CancelCapacityReservation": 0.5})
    throttling.allow("1", "eu-west-1", "CancelCapacityReservation", dict)
    clock.now += 10.01  # 25 calls of the other client (2.5 a second)
    throttling.allow("1", "eu-west-1", "CancelCapacityReservation", dict)
    assert throttling.others_report() == {
        "1/eu-west-1/CancelCapacityReservation": {"taken": 25, "waiting": 0}
    }


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="raised"):
        Throttling().configure(raised=0)
    with pytest.raises(ValueError, match="share"):
        Throttling().configure(others={"mutating": 1.5})


def test_with_seconds_per_call_the_buckets_time_is_counted_in_calls() -> None:
    """A bucket whose time moves only with the calls it serves: which calls are throttled
    depends on how many came, never on how fast (the machine's clock is not read)."""

    def machine_clock() -> float:
        raise AssertionError("the machine's clock was read")

    throttling = Throttling(clock=machine_clock)
    throttling.configure(buckets={"mutating": (4, 3.5)}, seconds_per_call=0.25)
    # 7/8 of a token a call: from 4 tokens, dry after 24 calls in a row, then 1 call in 8.
    answers = [throttling.allow("1", "r", "CancelCapacityReservation", dict) for _ in range(48)]
    assert answers[:24] == [True] * 24
    assert answers.count(False) == 3
    again = Throttling(clock=machine_clock)
    again.configure(buckets={"mutating": (4, 3.5)}, seconds_per_call=0.25)
    assert [again.allow("1", "r", "CancelCapacityReservation", dict) for _ in range(48)] == (
        answers
    )
    with pytest.raises(ValueError, match="seconds_per_call"):
        Throttling().configure(seconds_per_call=0)
