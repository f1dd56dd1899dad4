"""ClientTokens and EndDates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from capacity_broker.domain.tokens import (
    CLIENT_TOKEN_MAX_LENGTH,
    HOLD_LIFETIME,
    PROBE_LIFETIME,
    client_token,
    end_date,
    token_nonce,
)
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 11, 21, 10, 0, 0, 750_000, tzinfo=UTC)


def test_lifetimes_are_the_contracts() -> None:
    assert timedelta(minutes=2) == PROBE_LIFETIME
    assert timedelta(minutes=5) == HOLD_LIFETIME


@pytest.mark.parametrize(
    ("purpose", "expected"),
    [
        ("probe", datetime(2026, 11, 21, 10, 2, 0, tzinfo=UTC)),
        ("hold", datetime(2026, 11, 21, 10, 5, 0, tzinfo=UTC)),
    ],
)
def test_end_date(purpose: str, expected: datetime) -> None:
    result = end_date(NOW, purpose)
    assert result == expected
    assert result.tzinfo is UTC
    assert result.microsecond == 0


def test_end_date_converts_other_zones_to_utc() -> None:
    paris = timezone(timedelta(hours=1))
    local = datetime(2026, 11, 21, 11, 0, 0, tzinfo=paris)
    assert end_date(local, "hold") == datetime(2026, 11, 21, 10, 5, 0, tzinfo=UTC)
    assert end_date(local, "hold").utcoffset() == timedelta(0)


def test_end_date_refuses_naive_now() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        end_date(datetime(2026, 11, 21, 10, 0, 0), "probe")


def test_end_date_refuses_unknown_purpose() -> None:
    with pytest.raises(ValueError, match="forever"):
        end_date(NOW, "forever")


def test_token_shape() -> None:
    token = client_token("probe", "vdi-42", "g6.xlarge", "subnet-0a00000000000001")
    assert token.startswith("cb-probe-")
    assert len(token) <= CLIENT_TOKEN_MAX_LENGTH
    assert token.isascii()
    assert token == client_token("probe", "vdi-42", "g6.xlarge", "subnet-0a00000000000001")


@pytest.mark.parametrize(
    "other",
    [
        ("hold", "vdi-42", "g6.xlarge", "subnet-0a00000000000001"),
        ("probe", "vdi-43", "g6.xlarge", "subnet-0a00000000000001"),
        ("probe", "vdi-42", "g6.2xlarge", "subnet-0a00000000000001"),
        ("probe", "vdi-42", "g6.xlarge", "subnet-0a00000000000002"),
    ],
)
def test_token_changes_with_every_input(other: tuple[str, str, str, str]) -> None:
    base = client_token("probe", "vdi-42", "g6.xlarge", "subnet-0a00000000000001")
    assert client_token(*other) != base


def test_token_is_not_fooled_by_shifting_separators() -> None:
    assert client_token("hold", "a-b", "c", "d") != client_token("hold", "a", "b-c", "d")


def test_nonce_gives_a_new_token() -> None:
    base = client_token("hold", "r", "c7i.large", "subnet-0a00000000000001")
    assert client_token("hold", "r", "c7i.large", "subnet-0a00000000000001", nonce=None) == base
    fresh = client_token("hold", "r", "c7i.large", "subnet-0a00000000000001", nonce="1")
    assert fresh != base
    assert len(fresh) <= 64


ids = st.text(min_size=1, max_size=200)


@given(st.sampled_from(["probe", "hold"]), ids, ids, ids, st.none() | ids)
def test_token_is_deterministic_ascii_and_bounded(
    purpose: str, request_id: str, instance_type: str, subnet: str, nonce: str | None
) -> None:
    token = client_token(purpose, request_id, instance_type, subnet, nonce)
    assert token == client_token(purpose, request_id, instance_type, subnet, nonce)
    assert 0 < len(token) <= 64
    assert token.isascii()
    assert token.isprintable()


@given(
    st.lists(
        st.tuples(st.sampled_from(["probe", "hold"]), ids, ids, ids),
        min_size=2,
        max_size=30,
        unique=True,
    )
)
def test_distinct_inputs_give_distinct_tokens(inputs: list[tuple[str, str, str, str]]) -> None:
    tokens = {client_token(*args) for args in inputs}
    assert len(tokens) == len(inputs)


offsets = st.builds(
    timezone, st.timedeltas(min_value=timedelta(hours=-14), max_value=timedelta(hours=14))
)


@given(
    st.datetimes(
        min_value=datetime(2000, 1, 1),  # bounds only: the zone comes from `offsets`
        max_value=datetime(2100, 1, 1),
        timezones=offsets,
    ),
    st.sampled_from(["probe", "hold"]),
)
def test_end_date_is_aware_whole_seconds_and_ahead(now: datetime, purpose: str) -> None:
    result = end_date(now, purpose)
    assert result.utcoffset() == timedelta(0)
    assert result.microsecond == 0
    lifetime = PROBE_LIFETIME if purpose == "probe" else HOLD_LIFETIME
    assert lifetime - timedelta(seconds=1) < result - now <= lifetime


T0 = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)


def test_the_first_generation_is_the_plain_token() -> None:
    assert token_nonce("probe", 0, T0) is None
    assert token_nonce("hold", 0, T0) is None


def test_a_holds_later_generations_are_fixed() -> None:
    # duplicates of one reserve request must meet on the same tokens, whenever they run
    assert token_nonce("hold", 1, T0) == token_nonce("hold", 1, T0 + timedelta(hours=1)) == "1"
    assert token_nonce("hold", 2, T0) != token_nonce("hold", 1, T0)


def test_a_probes_later_generations_change_every_second() -> None:
    # a fresh answer for a reused request id: new tokens each second, never used up
    later = T0 + timedelta(seconds=1)
    assert token_nonce("probe", 1, T0) != token_nonce("probe", 1, later)
    assert token_nonce("probe", 1, T0) != token_nonce("probe", 2, T0)
    # within one second, the same (EC2 answers a reused token with the same reservation)
    assert token_nonce("probe", 1, T0) == token_nonce("probe", 1, T0 + timedelta(microseconds=5))
    # the same instant in another zone is the same second
    assert token_nonce("probe", 1, T0) == token_nonce(
        "probe", 1, T0.astimezone(timezone(timedelta(hours=5, minutes=30)))
    )
