"""AMI PlatformDetails -> Capacity Reservation platform."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.loaders import Loader
from capacity_broker.domain.platform import (
    PLATFORM_DETAILS,
    PLATFORMS,
    UNRESERVABLE,
    UnsupportedPlatform,
    reservation_platform,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def ec2_model() -> dict[str, Any]:
    model: dict[str, Any] = Loader().load_service_model("ec2", "service-2")
    return model


def test_platforms_are_botocores_enum(ec2_model: dict[str, Any]) -> None:
    assert list(PLATFORMS) == ec2_model["shapes"]["CapacityReservationInstancePlatform"]["enum"]


def test_every_mapping_lands_on_a_real_platform() -> None:
    assert set(PLATFORM_DETAILS.values()) <= set(PLATFORMS)


# The AMI billing table (Amazon EC2 User Guide, "AMI billing information fields"), row by row.
@pytest.mark.parametrize(
    ("details", "expected"),
    [
        ("Linux/UNIX", "Linux/UNIX"),
        ("Red Hat BYOL Linux", "Linux/UNIX"),
        ("Red Hat Enterprise Linux", "Red Hat Enterprise Linux"),
        ("Red Hat Enterprise Linux with HA", "RHEL with HA"),
        (
            "Red Hat Enterprise Linux with SQL Server Standard and HA",
            "RHEL with HA and SQL Server Standard",
        ),
        (
            "Red Hat Enterprise Linux with SQL Server Enterprise and HA",
            "RHEL with HA and SQL Server Enterprise",
        ),
        ("Red Hat Enterprise Linux with SQL Server Standard", "RHEL with SQL Server Standard"),
        ("Red Hat Enterprise Linux with SQL Server Web", "RHEL with SQL Server Web"),
        ("Red Hat Enterprise Linux with SQL Server Enterprise", "RHEL with SQL Server Enterprise"),
        ("SQL Server Enterprise", "Linux with SQL Server Enterprise"),
        ("SQL Server Standard", "Linux with SQL Server Standard"),
        ("SQL Server Web", "Linux with SQL Server Web"),
        ("SUSE Linux", "SUSE Linux"),
        ("Ubuntu Pro", "Ubuntu Pro"),
        ("Windows", "Windows"),
        ("Windows with SQL Server Enterprise", "Windows with SQL Server Enterprise"),
        ("Windows with SQL Server Standard", "Windows with SQL Server Standard"),
        ("Windows with SQL Server Web", "Windows with SQL Server Web"),
    ],
)
def test_billing_table(details: str, expected: str) -> None:
    platform = "windows" if details.startswith("Windows") else None
    assert reservation_platform(details, platform) == expected
    assert reservation_platform(details) == expected


def test_table_covers_every_documented_value() -> None:
    documented = {
        "Linux/UNIX",
        "Red Hat BYOL Linux",
        "Red Hat Enterprise Linux",
        "Red Hat Enterprise Linux with HA",
        "Red Hat Enterprise Linux with SQL Server Standard and HA",
        "Red Hat Enterprise Linux with SQL Server Enterprise and HA",
        "Red Hat Enterprise Linux with SQL Server Standard",
        "Red Hat Enterprise Linux with SQL Server Web",
        "Red Hat Enterprise Linux with SQL Server Enterprise",
        "SQL Server Enterprise",
        "SQL Server Standard",
        "SQL Server Web",
        "SUSE Linux",
        "Ubuntu Pro",
        "Windows",
        "Windows BYOL",
        "Windows with SQL Server Enterprise",
        "Windows with SQL Server Standard",
        "Windows with SQL Server Web",
    }
    assert set(PLATFORM_DETAILS) | set(UNRESERVABLE) == documented


def test_windows_byol_is_refused_with_the_reason() -> None:
    with pytest.raises(UnsupportedPlatform, match="Dedicated Hosts") as caught:
        reservation_platform("Windows BYOL", "windows")
    assert caught.value.details == "Windows BYOL"


@pytest.mark.parametrize(
    "details",
    ["Ubuntu Pro Linux", "Windows with SQL Server", "Linux", "FreeBSD", "Red Hat", "unknown"],
)
def test_unknown_values_are_never_guessed(details: str) -> None:
    with pytest.raises(UnsupportedPlatform) as caught:
        reservation_platform(details)
    assert caught.value.details == details
    assert details in str(caught.value)


def test_spacing_and_case_are_forgiven() -> None:
    assert reservation_platform("  red hat   enterprise linux ") == "Red Hat Enterprise Linux"
    assert reservation_platform("linux/unix") == "Linux/UNIX"


def test_missing_details_fall_back_on_windows_platform_only() -> None:
    assert reservation_platform(None, "windows") == "Windows"
    assert reservation_platform("", "Windows") == "Windows"
    with pytest.raises(UnsupportedPlatform, match="no PlatformDetails"):
        reservation_platform(None, None)
    with pytest.raises(UnsupportedPlatform):
        reservation_platform("   ")


def test_contradiction_between_fields_is_refused() -> None:
    with pytest.raises(UnsupportedPlatform, match="Platform=windows"):
        reservation_platform("Linux/UNIX", "windows")


@given(st.text(max_size=80), st.none() | st.sampled_from(["windows", "", "linux"]))
def test_answer_is_a_platform_or_a_refusal(details: str, platform: str | None) -> None:
    message = ""
    try:
        result = reservation_platform(details, platform)
    except UnsupportedPlatform as error:
        message = str(error)
    else:
        assert result in PLATFORMS
    assert len(message) < 400
