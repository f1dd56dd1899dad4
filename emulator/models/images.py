"""What an AMI's instances bill as, and so which Capacity Reservations they can use.

EC2 matches an instance to a reservation by instance type, platform, Availability Zone and
tenancy ("Capacity Reservations ... match new instances ... that have matching attributes
(instance type, platform, Availability Zone, and tenancy)", EC2 User Guide, "Work with
Capacity Reservations"; for Capacity Blocks: "Your instance can't launch using an AMI with a
different platform than the platform for your Capacity Block", "Launch instances using
Capacity Blocks"). An instance's platform is its AMI's billing product: the AMI's
``PlatformDetails`` and ``UsageOperation`` (EC2 User Guide, "AMI billing information fields",
table "Sample data: usage operation by platform"). ``BILLING`` is that table, with the
``CapacityReservationInstancePlatform`` value (botocore's EC2 model) each row matches.
"""

from __future__ import annotations

from typing import Any

# (PlatformDetails, UsageOperation, reservation platform or None when none can match)
BILLING: tuple[tuple[str, str, str | None], ...] = (
    ("Linux/UNIX", "RunInstances", "Linux/UNIX"),
    # Cloud Access RHEL: no Red Hat charge from AWS; it runs as Linux/UNIX.
    ("Red Hat BYOL Linux", "RunInstances:00g0", "Linux/UNIX"),
    ("Red Hat Enterprise Linux", "RunInstances:0010", "Red Hat Enterprise Linux"),
    ("Red Hat Enterprise Linux with HA", "RunInstances:1010", "RHEL with HA"),
    (
        "Red Hat Enterprise Linux with SQL Server Standard and HA",
        "RunInstances:1014",
        "RHEL with HA and SQL Server Standard",
    ),
    (
        "Red Hat Enterprise Linux with SQL Server Enterprise and HA",
        "RunInstances:1110",
        "RHEL with HA and SQL Server Enterprise",
    ),
    (
        "Red Hat Enterprise Linux with SQL Server Standard",
        "RunInstances:0014",
        "RHEL with SQL Server Standard",
    ),
    (
        "Red Hat Enterprise Linux with SQL Server Web",
        "RunInstances:0210",
        "RHEL with SQL Server Web",
    ),
    (
        "Red Hat Enterprise Linux with SQL Server Enterprise",
        "RunInstances:0110",
        "RHEL with SQL Server Enterprise",
    ),
    ("SQL Server Enterprise", "RunInstances:0100", "Linux with SQL Server Enterprise"),
    ("SQL Server Standard", "RunInstances:0004", "Linux with SQL Server Standard"),
    ("SQL Server Web", "RunInstances:0200", "Linux with SQL Server Web"),
    ("SUSE Linux", "RunInstances:000g", "SUSE Linux"),
    ("Ubuntu Pro", "RunInstances:0g00", "Ubuntu Pro"),
    ("Windows", "RunInstances:0002", "Windows"),
    # Bring-your-own-license Windows runs on Dedicated Hosts, which no reservation covers.
    ("Windows BYOL", "RunInstances:0800", None),
    (
        "Windows with SQL Server Enterprise",
        "RunInstances:0102",
        "Windows with SQL Server Enterprise",
    ),
    ("Windows with SQL Server Standard", "RunInstances:0006", "Windows with SQL Server Standard"),
    ("Windows with SQL Server Web", "RunInstances:0202", "Windows with SQL Server Web"),
)
_BY_DETAILS = {details: operation for details, operation, _ in BILLING}
_BY_OPERATION = {operation: platform for _, operation, platform in BILLING}
# A platform no reservation has: the launch matches none.
NO_RESERVATION = "(none)"


def usage_operation(platform_details: str) -> str:
    """The UsageOperation EC2 shows beside an AMI's PlatformDetails (the table's pair)."""
    return _BY_DETAILS.get(platform_details, "RunInstances")


def launch_platform(image: Any) -> str:
    """The reservation platform an AMI's instances run as. moto's own images carry no billing
    fields: their ``Platform`` (``windows`` or none) decides, as EC2's did before them."""
    operation = getattr(image, "usage_operation", None)
    if operation in _BY_OPERATION:
        return _BY_OPERATION[operation] or NO_RESERVATION
    details = getattr(image, "platform_details", None)
    if details in _BY_DETAILS:
        return _BY_OPERATION[_BY_DETAILS[details]] or NO_RESERVATION
    return "Windows" if getattr(image, "platform", None) == "windows" else "Linux/UNIX"


SSM_PREFIX = "resolve:ssm:"


def resolve(account_id: str, region: str, image_id: str | None) -> str | None:
    """A launch's image: ``resolve:ssm:<parameter>[:<version or label>]`` is the AMI id the
    Systems Manager parameter holds when the instance launches (EC2 User Guide, "Use a
    Systems Manager parameter instead of an AMI ID"); any other value is the id itself.

    A parameter that does not exist refuses the launch; the code is the emulator's choice
    (EC2 does not document it): ``InvalidParameterValue``, its code for a bad parameter value.
    """
    if not image_id or not image_id.startswith(SSM_PREFIX):
        return image_id
    from moto.ssm.models import ssm_backends

    from ..exceptions import client_error

    name = image_id[len(SSM_PREFIX) :]
    try:
        found = ssm_backends[account_id][region].get_parameter(name)
    except Exception:  # noqa: BLE001 - moto's version/label errors: the same answer
        found = None
    if found is None:
        raise client_error(
            "InvalidParameterValue",
            f"The image {image_id} could not be resolved: parameter {name} does not exist.",
        )
    return str(found.value)
