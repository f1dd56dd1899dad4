"""From an AMI's billing platform to the platform a Capacity Reservation must be created with.

A reservation is only used by instances whose platform matches it, so a wrong guess would hold
capacity that the job's instances can never launch into (and that is billed all the same).
Unknown values therefore raise :class:`UnsupportedPlatform`; the caller can always pass
``instance_platform`` explicitly.

Sources:

* PlatformDetails values: Amazon EC2 User Guide, "AMI billing information fields"
  (billing-info-fields.html), the table "Sample data: usage operation by platform".
* Reservation platforms: botocore's EC2 model, shape ``CapacityReservationInstancePlatform``
  (``PLATFORMS`` below; a unit test compares it with the installed botocore).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# EC2's CapacityReservationInstancePlatform enum, in botocore's order (botocore 1.44.5).
PLATFORMS: tuple[str, ...] = (
    "Linux/UNIX",
    "Red Hat Enterprise Linux",
    "SUSE Linux",
    "Windows",
    "Windows with SQL Server",
    "Windows with SQL Server Enterprise",
    "Windows with SQL Server Standard",
    "Windows with SQL Server Web",
    "Linux with SQL Server Standard",
    "Linux with SQL Server Web",
    "Linux with SQL Server Enterprise",
    "RHEL with SQL Server Standard",
    "RHEL with SQL Server Enterprise",
    "RHEL with SQL Server Web",
    "RHEL with HA",
    "RHEL with HA and SQL Server Standard",
    "RHEL with HA and SQL Server Enterprise",
    "Ubuntu Pro",
)
DEFAULT_PLATFORM = "Linux/UNIX"

# AMI PlatformDetails (as DescribeImages returns them) -> reservation platform.
# Every PlatformDetails value in AWS's billing table is listed, usage operation in comments.
PLATFORM_DETAILS: Mapping[str, str] = MappingProxyType(
    {
        "Linux/UNIX": "Linux/UNIX",  # RunInstances
        # RunInstances:00g0. Cloud Access (bring your own subscription) RHEL carries no
        # Red Hat charge from AWS; the contract maps it to Linux/UNIX.
        "Red Hat BYOL Linux": "Linux/UNIX",
        "Red Hat Enterprise Linux": "Red Hat Enterprise Linux",  # RunInstances:0010
        "Red Hat Enterprise Linux with HA": "RHEL with HA",  # RunInstances:1010
        "Red Hat Enterprise Linux with SQL Server Standard and HA": (
            "RHEL with HA and SQL Server Standard"  # RunInstances:1014
        ),
        "Red Hat Enterprise Linux with SQL Server Enterprise and HA": (
            "RHEL with HA and SQL Server Enterprise"  # RunInstances:1110
        ),
        "Red Hat Enterprise Linux with SQL Server Standard": (
            "RHEL with SQL Server Standard"  # RunInstances:0014
        ),
        "Red Hat Enterprise Linux with SQL Server Web": "RHEL with SQL Server Web",  # :0210
        "Red Hat Enterprise Linux with SQL Server Enterprise": (
            "RHEL with SQL Server Enterprise"  # RunInstances:0110
        ),
        # The bare "SQL Server <edition>" billing codes (0100/0004/0200) are SQL Server on
        # Linux; SQL Server on Windows is "Windows with SQL Server <edition>" (0102/0006/0202).
        "SQL Server Enterprise": "Linux with SQL Server Enterprise",  # RunInstances:0100
        "SQL Server Standard": "Linux with SQL Server Standard",  # RunInstances:0004
        "SQL Server Web": "Linux with SQL Server Web",  # RunInstances:0200
        "SUSE Linux": "SUSE Linux",  # RunInstances:000g
        "Ubuntu Pro": "Ubuntu Pro",  # RunInstances:0g00
        "Windows": "Windows",  # RunInstances:0002
        "Windows with SQL Server Enterprise": "Windows with SQL Server Enterprise",  # :0102
        "Windows with SQL Server Standard": "Windows with SQL Server Standard",  # :0006
        "Windows with SQL Server Web": "Windows with SQL Server Web",  # RunInstances:0202
    }
)

# Values AWS documents but that no reservation platform can serve, with the reason.
UNRESERVABLE: Mapping[str, str] = MappingProxyType(
    {
        # RunInstances:0800. AWS prices BYOL Windows at Linux rates only on Dedicated Hosts
        # (VM Import/Export, "Licensing considerations for Windows"), and Capacity Reservations
        # have no "host" tenancy (CapacityReservationTenancy is default|dedicated): there is no
        # reservation platform these instances would match.
        "Windows BYOL": (
            "Windows BYOL instances run on Dedicated Hosts, which Capacity Reservations do not "
            "cover; pass instance_platform explicitly if your licensing differs"
        ),
    }
)

_BY_FOLDED = {key.casefold(): value for key, value in PLATFORM_DETAILS.items()}
_UNRESERVABLE_FOLDED = {key.casefold(): value for key, value in UNRESERVABLE.items()}


class UnsupportedPlatform(ValueError):
    """The AMI's platform has no Capacity Reservation platform the broker can vouch for."""

    def __init__(self, details: str | None, reason: str | None = None) -> None:
        self.details = details
        self.reason = reason or (
            "not a PlatformDetails value AWS documents; pass instance_platform explicitly"
        )
        shown = "no PlatformDetails" if details is None else f"PlatformDetails {details[:100]!r}"
        super().__init__(f"cannot reserve capacity for {shown}: {self.reason}")


def _normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


def reservation_platform(platform_details: str | None, platform: str | None = None) -> str:
    """The ``InstancePlatform`` for instances launched from an AMI with these fields.

    ``platform_details`` is the AMI's ``PlatformDetails``; ``platform`` its ``Platform``
    (``windows`` for Windows AMIs, otherwise absent). PlatformDetails decides; Platform only
    fills in when PlatformDetails is missing, and a contradiction between them is refused.
    """
    is_windows = (platform or "").strip().casefold() == "windows"
    if platform_details is None or not platform_details.strip():
        if is_windows:
            return "Windows"
        raise UnsupportedPlatform(None, "the image has no PlatformDetails")
    key = _normalise(platform_details)
    if key in _UNRESERVABLE_FOLDED:
        raise UnsupportedPlatform(platform_details, _UNRESERVABLE_FOLDED[key])
    found = _BY_FOLDED.get(key)
    if found is None:
        raise UnsupportedPlatform(platform_details)
    if is_windows and not found.startswith("Windows"):
        raise UnsupportedPlatform(
            platform_details, f"the image says Platform=windows but PlatformDetails is {found}"
        )
    return found
