"""Probe's overall answer (contract). Which one a probe gives follows the fan-out's decision
(``logic.probe._answer`` over ``logic.attempts.Ran``), not a count of outcomes."""

from __future__ import annotations

from enum import StrEnum


class ProbeStatus(StrEnum):
    AVAILABLE = "available"
    UNAVAILABLE = "unavailable"
    SKIPPED = "skipped"
    ERROR = "error"
    INVALID_REQUEST = "invalid_request"
