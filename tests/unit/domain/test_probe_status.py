"""Probe's overall status from its attempts."""

from __future__ import annotations

import pytest
from capacity_broker.domain.errors import Outcome
from capacity_broker.domain.probe import ProbeStatus, probe_status
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        (["available"], "available"),
        (["insufficient_capacity", "available"], "available"),
        (["limit_exceeded", "available", "not_tried"], "available"),  # won while in flight
        (["insufficient_capacity"], "unavailable"),
        (["unsupported"], "unavailable"),
        (["insufficient_capacity", "unsupported", "insufficient_capacity"], "unavailable"),
        (["insufficient_capacity", "limit_exceeded"], "error"),
        (["limit_exceeded", "not_tried", "not_tried"], "error"),
        (["throttled"], "error"),
        (["insufficient_capacity", "throttled"], "error"),
        (["error"], "error"),
        (["insufficient_capacity", "not_tried"], "error"),  # an open question is not a no
    ],
)
def test_probe_status(outcomes: list[str], expected: str) -> None:
    assert probe_status(outcomes) == expected


def test_probe_status_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="at least one"):
        probe_status([])
    with pytest.raises(ValueError, match="maybe"):
        probe_status(["maybe"])


@given(st.lists(st.sampled_from(list(Outcome)), min_size=1, max_size=20))
def test_probe_status_properties(outcomes: list[Outcome]) -> None:
    status = probe_status(outcomes)
    no_capacity = {Outcome.INSUFFICIENT_CAPACITY, Outcome.UNSUPPORTED}
    assert (status is ProbeStatus.AVAILABLE) == (Outcome.AVAILABLE in outcomes)
    assert (status is ProbeStatus.UNAVAILABLE) == all(o in no_capacity for o in outcomes)
    assert status in (ProbeStatus.AVAILABLE, ProbeStatus.UNAVAILABLE, ProbeStatus.ERROR)
