"""Time helpers: the domain only ever compares timezone-aware UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime


def utc(moment: datetime, name: str = "now") -> datetime:
    """``moment`` in UTC; a naive datetime is refused rather than assumed to be UTC.

    A naive value almost always means local time leaked in (``datetime.now()``), and EC2 would
    read it as UTC: a reservation could end hours early or late without any error.
    """
    if not isinstance(moment, datetime):
        raise TypeError(f"{name} must be a datetime, not {type(moment).__name__}")
    if moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None:
        raise ValueError(f"{name} must be timezone-aware (UTC), got naive {moment.isoformat()}")
    return moment.astimezone(UTC)


def whole_seconds(moment: datetime) -> datetime:
    """``moment`` without its fraction of a second (EC2 keeps whole seconds)."""
    return moment.replace(microsecond=0)
