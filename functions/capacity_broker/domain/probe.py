"""Probe's overall answer from its attempts' outcomes (contract)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from .errors import Outcome


class ProbeStatus(StrEnum):
    AVAILABLE = "available"
    UNAVAILABLE = "unavailable"
    SKIPPED = "skipped"
    ERROR = "error"
    INVALID_REQUEST = "invalid_request"


_NO_CAPACITY = frozenset({Outcome.INSUFFICIENT_CAPACITY, Outcome.UNSUPPORTED})


def probe_status(outcomes: Iterable[str]) -> ProbeStatus:
    """``available`` if any attempt found capacity; ``unavailable`` only when every attempt
    was insufficient capacity or unsupported; otherwise ``error`` (a quota, permission,
    throttling past the budget or other failure left the question open).

    A ``not_tried`` attempt is an open question too: it only exists because something stopped
    the probe, so it can never add up to "unavailable".
    """
    seen = [Outcome(outcome) for outcome in outcomes]
    if not seen:
        raise ValueError("a probe has at least one attempt")
    if Outcome.AVAILABLE in seen:
        return ProbeStatus.AVAILABLE
    if all(outcome in _NO_CAPACITY for outcome in seen):
        return ProbeStatus.UNAVAILABLE
    return ProbeStatus.ERROR
