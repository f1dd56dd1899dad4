"""How long the cleaner waits before each of its rules applies (contract defaults).

A module of its own, apart from the rules in ``domain.cleaner``: every entry point's settings
carry the graces (``config.Settings.graces``), and a handler's cold import should not build
the cleaner's other records for them (issue 44).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class Graces:
    """How long the cleaner waits before each rule applies (contract defaults)."""

    probe: timedelta = timedelta(seconds=90)
    stack: timedelta = timedelta(seconds=180)
    idle: timedelta = timedelta(seconds=600)
    hold_limit: timedelta = timedelta(seconds=1800)

    def __post_init__(self) -> None:
        for field_name in ("probe", "stack", "idle", "hold_limit"):
            value = getattr(self, field_name)
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ValueError(f"grace {field_name} must be a non-negative timedelta")
