"""Feature flag names, paths and values."""

from __future__ import annotations

import pytest
from capacity_broker.domain.flags import (
    DEFAULT_ENABLE,
    DEFAULT_STRICT,
    FLAG_ENABLE,
    FLAG_STRICT,
    FlagError,
    flag_path,
    flags_folder,
    parse_flag,
)
from capacity_broker.domain.names import default_parameter_prefix
from hypothesis import given
from hypothesis import strategies as st


def test_names_and_defaults_are_the_contracts() -> None:
    assert FLAG_ENABLE == "EnableCapacityReservation"
    assert FLAG_STRICT == "EnforceStrictCapacityReservation"
    assert DEFAULT_ENABLE is True
    assert DEFAULT_STRICT is False


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (
            "/capacity-broker/hpc",
            "/capacity-broker/hpc/configuration/FeatureFlags/EnableCapacityReservation",
        ),
        (
            "/capacity-broker/hpc/",
            "/capacity-broker/hpc/configuration/FeatureFlags/EnableCapacityReservation",
        ),
        ("soca/prod", "/soca/prod/configuration/FeatureFlags/EnableCapacityReservation"),
        ("", "/configuration/FeatureFlags/EnableCapacityReservation"),
        ("/", "/configuration/FeatureFlags/EnableCapacityReservation"),
    ],
)
def test_flag_path(prefix: str, expected: str) -> None:
    assert flag_path(prefix, FLAG_ENABLE) == expected


def test_folder_and_empty_name() -> None:
    assert flags_folder("/capacity-broker/hpc") == "/capacity-broker/hpc/configuration/FeatureFlags"
    assert flag_path("/capacity-broker/hpc", "") == (
        "/capacity-broker/hpc/configuration/FeatureFlags/"
    )
    with pytest.raises(ValueError, match="segment"):
        flag_path("/p", "a/b")


def test_default_prefix() -> None:
    assert default_parameter_prefix("hpc-prod") == "/capacity-broker/hpc-prod"
    with pytest.raises(ValueError, match="cluster_id"):
        default_parameter_prefix("")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        (" true\n", True),
        ("false", False),
        ("FALSE", False),
        ("\tFalse ", False),
    ],
)
def test_parse_flag_values(raw: str, expected: bool) -> None:
    assert parse_flag("/p/x", raw, default=not expected) is expected


@pytest.mark.parametrize("default", [True, False])
def test_missing_parameter_is_the_default(default: bool) -> None:
    assert parse_flag("/p/x", None, default) is default


@pytest.mark.parametrize("raw", ["", "yes", "1", "0", "no", "t", "truee", "on", "tru e"])
def test_malformed_values_name_the_parameter(raw: str) -> None:
    with pytest.raises(FlagError, match="/cb/configuration/FeatureFlags/Enable") as caught:
        parse_flag("/cb/configuration/FeatureFlags/Enable", raw, True)
    assert caught.value.name == "/cb/configuration/FeatureFlags/Enable"
    assert caught.value.raw == raw


def test_huge_value_is_shortened_in_the_message() -> None:
    with pytest.raises(FlagError) as caught:
        parse_flag("/p/x", "x" * 4096, True)
    assert len(str(caught.value)) < 200


@given(st.text(max_size=50))
def test_only_true_or_false_parse(raw: str) -> None:
    try:
        value = parse_flag("/p/x", raw, default=True)
    except FlagError:
        assert not raw.isascii() or raw.strip().lower() not in ("true", "false")
    else:
        assert raw.isascii()
        assert raw.strip().lower() == ("true" if value else "false")


def test_look_alike_letters_are_not_false() -> None:
    with pytest.raises(FlagError):
        parse_flag("/p/x", "fal\u017fe", default=True)
