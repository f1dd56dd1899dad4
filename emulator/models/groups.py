"""Capacity Reservation groups: resource groups (AWS Resource Groups) whose members are
Capacity Reservations, and which launches may target instead of one reservation.

moto's resource-groups backend keeps a group's name, query and configuration but no members
(GroupResources, UngroupResources and ListGroupResources are not implemented). The members
of each group live here, beside moto's backend for the account and region (as the capacity
state lives beside moto's EC2 backend), so moto's reset clears them too.

EC2 User Guide, "Create a Capacity Reservation group": a group configured with
``AWS::EC2::CapacityReservationPool`` "can be targeted for instance launches", and
``AWS::ResourceGroups::Generic`` with ``allowed-resource-types`` set to
``AWS::EC2::CapacityReservation`` "ensures that the resource group accepts Capacity
Reservations only".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from moto.resourcegroups.models import (
    FakeResourceGroup,
    ResourceGroupsBackend,
    resourcegroups_backends,
)

from ..state import world

POOL = "AWS::EC2::CapacityReservationPool"
GENERIC = "AWS::ResourceGroups::Generic"
HOST_MANAGEMENT = "AWS::EC2::HostManagement"
APPLICATION_GROUP = "AWS::ResourceGroups::ApplicationGroup"
RESERVATION_TYPE = "AWS::EC2::CapacityReservation"
# A Capacity Reservation pool's configuration as the EC2 User Guide creates one.
POOL_CONFIGURATION = (
    {"Type": POOL},
    {
        "Type": GENERIC,
        "Parameters": [{"Name": "allowed-resource-types", "Values": [RESERVATION_TYPE]}],
    },
)
# GroupResources: "You can only use this operation with the following groups:
# AWS::EC2::HostManagement, AWS::EC2::CapacityReservationPool,
# AWS::ResourceGroups::ApplicationGroup" (AWS Resource Groups API Reference).
GROUPABLE = frozenset({POOL, HOST_MANAGEMENT, APPLICATION_GROUP})
# The resource type of an ARN, as ListGroupResources names it (ResourceType's pattern
# AWS::<service>::<type>): the types the emulator can tell from an ARN.
_ARN_TYPES = {
    ("ec2", "capacity-reservation"): RESERVATION_TYPE,
    ("ec2", "dedicated-host"): "AWS::EC2::Host",
    ("ec2", "instance"): "AWS::EC2::Instance",
}
_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):(?P<service>[a-z0-9-]*):(?P<region>[a-z0-9-]*):"
    r"(?P<account>[0-9]{0,12}):(?P<resource>.+)$"
)
_RESERVATION_ARN = re.compile(
    r"^arn:aws[a-z-]*:ec2:(?P<region>[a-z0-9-]+):(?P<account>[0-9]{12}):"
    r"capacity-reservation/(?P<id>cr-[0-9a-f]+)$"
)


@dataclass(frozen=True)
class Failure:
    arn: str
    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"ResourceArn": self.arn, "ErrorCode": self.code, "ErrorMessage": self.message}


def resource_type(arn: str) -> str | None:
    """``AWS::EC2::CapacityReservation`` for a reservation's ARN, and so on; None when the
    emulator cannot tell."""
    found = _ARN.match(arn)
    if found is None:
        return None
    kind = found["resource"].split("/", 1)[0].split(":", 1)[0]
    return _ARN_TYPES.get((found["service"], kind))


@dataclass(frozen=True)
class ReservationArn:
    region: str
    account: str
    id: str


def reservation_arn(arn: str) -> ReservationArn | None:
    """A Capacity Reservation's ARN read into its parts (None: not one)."""
    found = _RESERVATION_ARN.match(arn)
    return ReservationArn(found["region"], found["account"], found["id"]) if found else None


def configuration_types(configuration: list[dict[str, Any]] | None) -> set[str]:
    return {str(item.get("Type")) for item in configuration or [] if isinstance(item, dict)}


def allowed_types(configuration: list[dict[str, Any]] | None) -> set[str] | None:
    """A group configuration's ``allowed-resource-types`` (None: no such restriction)."""
    for item in configuration or []:
        if not isinstance(item, dict):
            continue
        if item.get("Type") != GENERIC:
            continue
        for parameter in item.get("Parameters") or []:
            if parameter.get("Name") == "allowed-resource-types":
                return set(parameter.get("Values") or [])
    return None


def is_pool(group: FakeResourceGroup) -> bool:
    return POOL in configuration_types(group.configuration)


class Members:
    """Each group's members (resource ARNs, in the order they were added), by group ARN."""

    def __init__(self) -> None:
        self.by_group: dict[str, list[str]] = {}

    def of(self, group_arn: str) -> list[str]:
        return list(self.by_group.get(group_arn, []))

    def add(self, group_arn: str, arns: Iterable[str]) -> None:
        members = self.by_group.setdefault(group_arn, [])
        for arn in arns:
            if arn not in members:
                members.append(arn)

    def remove(self, group_arn: str, arns: Iterable[str]) -> None:
        gone = set(arns)
        self.by_group[group_arn] = [a for a in self.by_group.get(group_arn, []) if a not in gone]

    def forget(self, group_arn: str) -> None:
        self.by_group.pop(group_arn, None)


def members(backend: ResourceGroupsBackend) -> Members:
    found = backend.__dict__.get("_members")
    if found is None:
        with world.lock:
            found = backend.__dict__.get("_members")
            if found is None:
                found = Members()
                backend.__dict__["_members"] = found
    return found


def backend_of(account: str, region: str) -> ResourceGroupsBackend:
    return resourcegroups_backends[account][region]


def find_group(backend: ResourceGroupsBackend, name_or_arn: str) -> FakeResourceGroup | None:
    """A group by name or ARN (None when there is none)."""
    groups: Any = backend.groups
    if name_or_arn in groups.by_arn:
        return groups.by_arn[name_or_arn]  # type: ignore[no-any-return]
    return groups.by_name.get(name_or_arn)  # type: ignore[no-any-return]


def pool_reservation_ids(account: str, region: str, group_arn: str) -> list[str] | None:
    """The ids of the Capacity Reservations of the pool group ``group_arn`` in this account
    and region, in the order they were added; None when there is no such group (or it is not
    a Capacity Reservation pool: it "can be targeted for instance launches" only with that
    configuration)."""
    backend = backend_of(account, region)
    group = backend.groups.by_arn.get(group_arn)
    if group is None or not is_pool(group):
        return None
    ids = []
    for arn in members(backend).of(group.arn):
        found = _RESERVATION_ARN.match(arn)
        if found and found["region"] == region:
            ids.append(found["id"])
    return ids


def seed_pool(
    account: str, region: str, name: str, reservation_arns: list[str], tags: dict[str, str]
) -> str:
    """A scenario's Capacity Reservation pool with its members; its ARN."""
    backend = backend_of(account, region)
    group = backend.create_group(
        name=name,
        resource_query={},
        tags=tags,
        configuration=[dict(item) for item in POOL_CONFIGURATION],
    )
    members(backend).add(group.arn, reservation_arns)
    return group.arn
