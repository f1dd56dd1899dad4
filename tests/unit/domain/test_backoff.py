"""Backoff delays, the deadline budget and retry-after for schedulers."""

from __future__ import annotations

import random

import pytest
from capacity_broker.domain.backoff import (
    RETRY_AFTER_CAP,
    Budget,
    delay,
    retry_after_seconds,
)
from hypothesis import given
from hypothesis import strategies as st


class Fixed:
    """A random source that always answers the top (or a fraction) of the range."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.fraction


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [(0, 0.2), (1, 0.4), (2, 0.8), (3, 1.6), (4, 3.2), (5, 5.0), (6, 5.0), (1000, 5.0)],
)
def test_delay_ceiling_doubles_up_to_the_cap(attempt: int, ceiling: float) -> None:
    assert delay(attempt, 0.2, 5.0, Fixed(1.0)) == pytest.approx(ceiling)
    assert delay(attempt, 0.2, 5.0, Fixed(0.0)) == 0.0
    assert delay(attempt, 0.2, 5.0, Fixed(0.5)) == pytest.approx(ceiling / 2)


def test_delay_refuses_negative_input() -> None:
    with pytest.raises(ValueError, match="attempt"):
        delay(-1, 0.2, 5.0, Fixed(0.5))
    with pytest.raises(ValueError, match="base and cap"):
        delay(0, -0.2, 5.0, Fixed(0.5))


@given(
    st.integers(min_value=0, max_value=10_000),
    st.floats(min_value=0, max_value=10),
    st.floats(min_value=0, max_value=60),
    st.randoms(use_true_random=False),
)
def test_delay_is_within_bounds(attempt: int, base: float, cap: float, rng: random.Random) -> None:
    result = delay(attempt, base, cap, rng)
    assert 0.0 <= result <= cap


def test_budget() -> None:
    budget = Budget.starting(100.0, 10.0)
    assert budget.deadline == 110.0
    assert budget.remaining(104.0) == 6.0
    assert budget.remaining(120.0) == 0.0
    assert budget.allows(5.9, 104.0)
    assert not budget.allows(6.0, 104.0)
    assert not budget.allows(-1.0, 104.0)
    assert not budget.expired(109.9)
    assert budget.expired(110.0)


@pytest.mark.parametrize(
    ("attempt", "seconds"),
    [(None, 60), (0, 60), (1, 120), (2, 240), (3, 480), (4, 900), (5, 900), (10**9, 900)],
)
def test_retry_after_grows_with_the_schedulers_attempts(attempt: int | None, seconds: int) -> None:
    assert retry_after_seconds(attempt) == seconds


def test_retry_after_refuses_negative_attempts() -> None:
    with pytest.raises(ValueError, match="attempt"):
        retry_after_seconds(-1)


@given(st.integers(min_value=0, max_value=10**12))
def test_retry_after_is_monotonic_bounded_and_deterministic(attempt: int) -> None:
    now = retry_after_seconds(attempt)
    assert now == retry_after_seconds(attempt)
    assert 60 <= now <= RETRY_AFTER_CAP
    assert retry_after_seconds(attempt + 1) >= now
