"""Presets: named sets of the emulator's timings (``state.Settings``), applied at once.

- ``default``: EC2 as it usually is: every lag short (``state.Settings`` as it stands).
- ``slow``: EC2's documented worst cases, all on the emulator's clock so tests stay fast. In
  seconds of the emulator clock, what EC2 documents: a new reservation may show ``pending`` for
  "up to 5 minutes"; its advice for eventual consistency backs off "up to a few minutes"; a
  block's terminated instance takes "several minutes" to clean up; a limited reservation ends
  "within an hour" of its EndDate. Tests freeze the clock, so the calls that see a lag are
  counted too (whichever of the count and the clock comes first ends it): several times the
  default, as many as a caller that waits in earnest makes within a few seconds of patience
  (the broker's ``Patience``: 10 looks). A lag longer than a whole invocation is what the
  fault matrix's persistent ``lag`` kind and ``tests/integration/test_truth.py`` give (and
  ``lag_pending_calls: None``: only the clock ends it).

A preset is the base a scenario's own ``settings`` and a test's ``emu.configure(...)`` refine:
``emu.preset("slow")`` (or ``preset: slow`` in a scenario) sets it for the world, and the world
keeps it across ``emu.reset()`` until the emulator is left (``emulator.mock``) or another is
chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

MINUTE = 60.0

PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "default": MappingProxyType({}),
        "slow": MappingProxyType(
            {
                # Ids unknown to the next calls naming them (reservations, instances).
                "lag_unknown_calls": 3,
                "lag_instance_calls": 3,
                "lag_seconds": 3 * MINUTE,
                # Pending for minutes (View the state of a Capacity Reservation: "up to 5
                # minutes"); a cancel meanwhile is IncorrectState.
                "lag_pending_calls": 8,
                "lag_pending_seconds": 5 * MINUTE,
                # Listings filtered by tag miss what was made, and show it without its tags.
                "lag_listing_calls": 6,
                "lag_listing_seconds": 3 * MINUTE,
                # A cancel (a terminated instance) keeps counting toward the limits.
                "quota_lag_checks": 3,
                "quota_lag_seconds": 3 * MINUTE,
                # A block's terminated instance: "several minutes" to clean up.
                "block_cleanup_seconds": 10 * MINUTE,
                # A limited reservation ends "within an hour" of its EndDate.
                "expiry_lag_seconds": 60 * MINUTE,
            }
        ),
    }
)


def settings_of(name: str) -> Mapping[str, Any]:
    """The settings a preset sets (the others keep their defaults)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(
            f"unknown emulator preset {name!r} (known: {', '.join(PRESETS)})"
        ) from None
