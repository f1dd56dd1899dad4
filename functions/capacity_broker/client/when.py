"""How long ago and when: the values of ``history --since`` and ``offerings --start-after`` /
``--end-before``, and of the client's ``since=``, ``start_after=`` and ``end_before=``.

One home for their grammar and their bounds. ``timedelta`` holds at most 999,999,999 days and
``datetime`` the years 1 to 9999, so an unbounded "99999999999w" used to end in an
``OverflowError`` wherever it was first used. Here every value is checked against a range
before any arithmetic: how long ago from nothing to ten years, a moment within ten years of
now (the capacity memory keeps a week, Capacity Blocks are sold weeks ahead: both far inside).
A value outside it is refused by name, with the range, as a :class:`BadTime`.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

# How far either way a value may reach, in days (the message says it in these words).
RANGE_DAYS = 3650
RANGE = timedelta(days=RANGE_DAYS)
AGO_RANGE = f"from 0s to {RANGE_DAYS}d (10 years)"
MOMENT_RANGE = f"from +0h to +{RANGE_DAYS}d, or a date within 10 years of now"

_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# ASCII digits only: ``\d`` would also take other scripts' digits, which float() reads.
_AGO = re.compile(r"(\d+(?:\.\d+)?)([smhdw])", re.ASCII)
_AHEAD = re.compile(r"\+(\d+(?:\.\d+)?)([hdw])", re.ASCII)


class BadTime(ValueError):
    """A duration or date that does not parse or is out of range; ``name`` is the option or
    argument it was given as."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def _amount(digits: str, unit: str, name: str, value: str, allowed: str) -> timedelta:
    # float("1" * 400) is inf: the bound is checked on the float, before timedelta sees it.
    seconds = float(digits) * _SECONDS[unit]
    if not math.isfinite(seconds) or seconds > RANGE.total_seconds():
        raise BadTime(name, f"{value!r} is out of range: {allowed}")
    return timedelta(seconds=seconds)


def ago(value: str | timedelta, name: str = "since") -> timedelta:
    """How long ago: ``90s``, ``30m``, ``1h``, ``2d``, ``1w`` (or a ``timedelta``), from 0 to
    ten years."""
    if isinstance(value, timedelta):
        if not timedelta(0) <= value <= RANGE:
            raise BadTime(name, f"{value.total_seconds():g}s is out of range: {AGO_RANGE}")
        return value
    match = _AGO.fullmatch(value.strip())
    if match is None:
        raise BadTime(name, f"{value!r} is not a duration: use 30m, 1h, 2d or 1w ({AGO_RANGE})")
    return _amount(match[1], match[2], name, value, AGO_RANGE)


def moment(value: str | datetime, name: str, now: datetime | None = None) -> datetime:
    """A moment: ISO 8601 (a date, or a time; UTC unless it says otherwise), ``+12h`` /
    ``+3d`` / ``+2w`` from now, or an aware ``datetime``; within ten years of ``now``."""
    now = now or datetime.now(UTC)
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise BadTime(name, "must be timezone-aware (UTC)")
        return _near(value, value.isoformat(), name, now)
    text = value.strip()
    match = _AHEAD.fullmatch(text)
    if match:
        return now + _amount(match[1], match[2], name, value, MOMENT_RANGE)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadTime(
            name, f"{value!r} is not a date: use 2026-12-01, 2026-12-01T11:30Z or +3d"
        ) from None
    return _near(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC), repr(value), name, now)


def optional_moment(
    value: str | datetime | None, name: str, now: datetime | None = None
) -> datetime | None:
    return None if value is None else moment(value, name, now)


def _near(when: datetime, shown: str, name: str, now: datetime) -> datetime:
    # Aware datetimes compare through their difference (a timedelta), never by building a
    # datetime: a date at the ends of year 1 or 9999 compares without overflowing.
    if abs(when - now) > RANGE:
        raise BadTime(name, f"{shown} is out of range: {MOMENT_RANGE}")
    return when


def since(value: str | timedelta | datetime, name: str = "since") -> datetime:
    """Where a look back starts: a moment, or how long ago (``ago``)."""
    if isinstance(value, datetime):
        return moment(value, name)
    return datetime.now(UTC) - ago(value, name)
