"""The UTC instant of the answers that carry dates (reserve, capacity, the discovery commands,
the history).

A module apart from ``common``: its serializer loads a part of pydantic
(``functional_serializers``) that the probe, release and cleaner handlers, whose answers carry
no date, need not import (cold import, issue 44).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import PlainSerializer


def _iso_z(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("datetimes in answers must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Answers carry UTC instants as "2026-11-21T10:05:00Z" (whole seconds, like EC2).
UtcDateTime = Annotated[datetime, PlainSerializer(_iso_z, return_type=str, when_used="json")]
