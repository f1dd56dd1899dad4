"""How long ago and when (``client.when``): whatever string ``--since``, ``--start-after`` or
``--end-before`` (or the client's ``since=``/``start_after=``/``end_before=``) is given, it
ends in a value inside the documented range or in a ``BadTime`` naming the option; never in
an ``OverflowError`` or any other exception."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest
from capacity_broker.client import when
from hypothesis import example, given, settings
from hypothesis import strategies as st

SCALE = max(1, int(os.environ.get("BROKER_PROOF_SCALE", "1")))
RANDOM = os.environ.get("BROKER_PROOF_RANDOM", "") == "1"
PROOF = settings(
    max_examples=600 * SCALE,
    deadline=None,
    derandomize=not RANDOM,
    database=settings.default.database if RANDOM else None,
)
T = TypeVar("T")
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)

# Numbers of any size and shape (huge, fractional, other scripts' digits), signed or not,
# with every unit the grammars know and some they do not.
digits = st.one_of(
    st.integers(0, 10**40).map(str),
    st.integers(1, 400).map(lambda n: "9" * n),
    st.decimals(allow_nan=False, allow_infinity=False).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(st.characters(categories=["Nd"]), min_size=1, max_size=6),
)
durations = st.builds(
    lambda sign, number, unit, pad: f"{pad}{sign}{number}{unit}{pad}",
    st.sampled_from(["", "+", "-", "--", " "]),
    digits,
    st.sampled_from([*"smhdwy", "", "ms", "H", "\n"]),
    st.sampled_from(["", " ", "\t"]),
)
offsets = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
iso = st.one_of(
    st.datetimes(timezones=st.none() | offsets).map(lambda d: d.isoformat()),
    st.dates().map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%MZ")),
)
values = st.one_of(durations, iso, st.text(max_size=40))


def outcome(parse: Callable[..., T], *args: Any) -> T | when.BadTime:
    """What ``parse`` ends in: its value or its ``BadTime`` (any other exception fails)."""
    try:
        return parse(*args)
    except when.BadTime as error:
        return error


@PROOF
@given(values)
@example("99999999999w")
@example("1e400h")
@example("9" * 400 + "s")
@example("3650d")
@example("3650.0000001d")
@example("٣h")  # an Arabic-Indic three: a digit to \d, not to the grammar
def test_since_is_a_bounded_duration_or_a_usage_error(value: str) -> None:
    got = outcome(when.ago, value, "--since")
    if isinstance(got, when.BadTime):
        assert got.name == "--since"
        assert when.AGO_RANGE in got.message
    else:
        assert timedelta(0) <= got <= when.RANGE


@PROOF
@given(values)
@example("+99999999999d")
@example("+1000000000h")  # hours fit a timedelta; the same number of days does not
@example("+3650d")
@example("+3651d")
@example("9999-12-31T23:59:59-23:59")
@example("0001-01-01")
@example("2026-12-01T11:30Z")
def test_start_after_is_a_bounded_moment_or_a_usage_error(value: str) -> None:
    got = outcome(when.moment, value, "--start-after", NOW)
    if isinstance(got, when.BadTime):
        assert got.name == "--start-after"
        assert "is not a date" in got.message or when.MOMENT_RANGE in got.message
    else:
        assert got.utcoffset() is not None
        assert abs(got - NOW) <= when.RANGE


@PROOF
@given(
    st.one_of(
        st.timedeltas(),
        st.datetimes(timezones=st.none() | offsets | st.just(UTC)),
        values,
    )
)
def test_the_clients_since_is_a_moment_in_range_or_refused(value: object) -> None:
    got = outcome(when.since, value, "since")
    if isinstance(got, when.BadTime):
        assert got.name == "since"
    else:
        assert abs(got - datetime.now(UTC)) <= when.RANGE + timedelta(minutes=1)


def test_the_grammar() -> None:
    assert when.ago("90s", "x") == timedelta(seconds=90)
    assert when.ago(" 1.5h ", "x") == timedelta(minutes=90)
    assert when.ago("2w", "x") == timedelta(days=14)
    assert when.moment("+12h", "x", NOW) == NOW + timedelta(hours=12)
    assert when.moment("+2w", "x", NOW) == NOW + timedelta(days=14)
    assert when.moment("2026-12-01", "x", NOW) == datetime(2026, 12, 1, tzinfo=UTC)
    assert when.moment("2026-12-01T11:30Z", "x", NOW) == datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
    with pytest.raises(when.BadTime, match="timezone-aware"):
        when.moment(datetime(2026, 12, 1), "start_after", NOW)
    with pytest.raises(when.BadTime, match=r"-3600s is out of range"):
        when.ago(timedelta(hours=-1), "since")
