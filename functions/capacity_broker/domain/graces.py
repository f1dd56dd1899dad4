"""How long the cleaner waits before each of its rules applies (contract defaults).

A module of its own, apart from the rules in ``domain.cleaner``: every entry point's settings
carry the graces (``config.Settings.graces``), and a handler's cold import should not build
the cleaner's other records for them (issue 44).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

# The reserve function's longest run: its Lambda timeout (infra/functions.py, "reserve"; a
# test there keeps the two equal). Lambda stops an invocation at its timeout, so no invocation
# that launched a ladder's node is still running this long after the node's launch.
RESERVE_MAX_RUN = timedelta(seconds=120)
# Added to it before a ladder without its done record counts as abandoned: the clocks of the
# Lambda and of EC2's LaunchTime may differ by a little, the done record (a tag) takes a moment
# to show in a listing by tag, and a retry of the request that starts inside the window
# finishes the ladder (or undoes it) itself.
LADDER_GRACE = timedelta(minutes=5)


@dataclass(frozen=True)
class Graces:
    """How long the cleaner waits before each rule applies (contract defaults). ``ladder``:
    how old the youngest node of a ladder without its done record must be before the cleaner
    ends the ladder (``domain.cleaner.abandoned_ladders``); the deployment sets it to the
    reserve function's timeout plus ``LADDER_GRACE``."""

    probe: timedelta = timedelta(seconds=90)
    stack: timedelta = timedelta(seconds=180)
    idle: timedelta = timedelta(seconds=600)
    hold_limit: timedelta = timedelta(seconds=1800)
    ladder: timedelta = RESERVE_MAX_RUN + LADDER_GRACE

    def __post_init__(self) -> None:
        for field_name in ("probe", "stack", "idle", "hold_limit", "ladder"):
            value = getattr(self, field_name)
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ValueError(f"grace {field_name} must be a non-negative timedelta")
