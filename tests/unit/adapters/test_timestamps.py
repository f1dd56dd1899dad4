"""The fast timestamp parser reads what botocore's does, the same way."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.utils import parse_timestamp
from capacity_broker.adapters.aws import _parse_timestamp


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-21T10:05:00.000Z",
        "2026-11-21T10:05:00Z",
        "2026-11-21T10:05:00+00:00",
        "2026-11-21T10:05:00.123456Z",
        "2026-11-21T12:05:00+02:00",
        "2026-11-21T10:05:00",
        "Sat, 21 Nov 2026 10:05:00 GMT",
        1795240000,
        "1795240000",
    ],
)
def test_it_agrees_with_botocore(value: object) -> None:
    ours = _parse_timestamp(value)
    theirs = parse_timestamp(value)
    assert ours == theirs
    assert (ours.utcoffset() is None) == (theirs.utcoffset() is None)


def test_ec2s_form_is_read_as_utc() -> None:
    assert _parse_timestamp("2026-11-21T10:05:00.000Z") == datetime(2026, 11, 21, 10, 5, tzinfo=UTC)
