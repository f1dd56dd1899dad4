"""AWS Resource Groups for Capacity Reservations: GroupResources, UngroupResources and
ListGroupResources (moto has none of them), and CreateGroup's rule for a Capacity Reservation
pool. ``emulator.install`` sets these methods on moto's ``ResourceGroupsResponse`` and adds the
operations' paths to moto's resource-groups URLs.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from moto.ec2.models import ec2_backends
from moto.resourcegroups.exceptions import BadRequestException, NotFoundException
from moto.resourcegroups.models import FakeResourceGroup, ResourceGroupsBackend
from moto.resourcegroups.responses import ResourceGroupsResponse

from ..models import CapacityReservation, capacity_backend
from ..models import groups as rules
from ..state import world

# The operations moto's resource-groups URLs lack (their requestUri in botocore's model).
URL_PATHS = {
    "{0}/group-resources$": ResourceGroupsResponse.dispatch,
    "{0}/ungroup-resources$": ResourceGroupsResponse.dispatch,
    "{0}/list-group-resources$": ResourceGroupsResponse.dispatch,
}


def _group(backend: ResourceGroupsBackend, name_or_arn: str | None) -> FakeResourceGroup:
    group = rules.find_group(backend, str(name_or_arn or ""))
    if group is None:
        raise NotFoundException(f"Cannot find group {name_or_arn}.")
    return group


class ResourceGroups(ResourceGroupsResponse):
    """Methods copied onto moto's ``ResourceGroupsResponse`` (``emulator.install``)."""

    def create_group(self) -> str:
        _check_pool_configuration(self._get_param("Configuration"))
        return _MOTO_CREATE_GROUP(self)

    def delete_group(self) -> str:
        group = _group(
            self.resourcegroups_backend, self._get_param("Group") or self._get_param("GroupName")
        )
        answer = _MOTO_DELETE_GROUP(self)
        rules.members(self.resourcegroups_backend).forget(group.arn)
        return answer

    def group_resources(self) -> str:
        backend = self.resourcegroups_backend
        group = _group(backend, self._get_param("Group"))
        types = rules.configuration_types(group.configuration)
        if not types & rules.GROUPABLE:
            # "You can only use this operation with the following groups:
            # AWS::EC2::HostManagement, AWS::EC2::CapacityReservationPool,
            # AWS::ResourceGroups::ApplicationGroup".
            raise BadRequestException(
                f"GroupResources is not supported for group {group.name}: it is configured "
                "with none of AWS::EC2::HostManagement, AWS::EC2::CapacityReservationPool, "
                "AWS::ResourceGroups::ApplicationGroup."
            )
        arns = list(self._get_param("ResourceArns") or [])
        succeeded: list[str] = []
        failed: list[rules.Failure] = []
        with world.lock:
            for arn in arns:
                failure = self._refusal(group, arn)
                if failure is None:
                    succeeded.append(arn)
                else:
                    failed.append(failure)
            rules.members(backend).add(group.arn, succeeded)
        return json.dumps(
            {"Succeeded": succeeded, "Failed": [f.to_dict() for f in failed], "Pending": []}
        )

    def _refusal(self, group: FakeResourceGroup, arn: str) -> rules.Failure | None:
        """Why ``arn`` cannot join ``group`` (chosen codes: AWS documents none), or None."""
        kind = rules.resource_type(arn)
        allowed = rules.allowed_types(group.configuration)
        if allowed is not None and kind not in allowed:
            # "allowed-resource-types: ... the resource group can consist of resources of
            # only the specified type or types" (Resource Groups User Guide).
            return rules.Failure(
                arn,
                "InvalidParameter",
                f"The group {group.name} accepts only {', '.join(sorted(allowed))}.",
            )
        if kind == rules.RESERVATION_TYPE:
            # "A resource group is a logical grouping of AWS resources that are all in the
            # same AWS Region"; a reservation that does not exist cannot join.
            found = self._reservation(rules.reservation_arn(arn))
            if found is None:
                return rules.Failure(
                    arn, "NotFound", f"The Capacity Reservation {arn} does not exist."
                )
            if (found.is_capacity_block or found.interruptible) and not (
                world.settings.groups_take_blocks
            ):
                return rules.Failure(
                    arn,
                    "InvalidParameter",
                    f"{found.id} is a {found.kind}: the group takes On-Demand Capacity "
                    "Reservations only.",
                )
        return None

    def _reservation(self, arn: rules.ReservationArn | None) -> CapacityReservation | None:
        """The account's reservation in the group's Region that ``arn`` names, if any (one
        shared by another account: the emulator has none)."""
        if arn is None or arn.region != self.region or arn.account != self.current_account:
            return None
        capacity = capacity_backend(ec2_backends[arn.account][self.region])
        return capacity.reservations.get(arn.id)

    def ungroup_resources(self) -> str:
        backend = self.resourcegroups_backend
        group = _group(backend, self._get_param("Group"))
        arns = list(self._get_param("ResourceArns") or [])
        with world.lock:
            present = set(rules.members(backend).of(group.arn))
            succeeded = [a for a in arns if a in present]
            failed = [
                rules.Failure(a, "NotFound", f"{a} is not a member of {group.name}.").to_dict()
                for a in arns
                if a not in present
            ]
            rules.members(backend).remove(group.arn, succeeded)
        return json.dumps({"Succeeded": succeeded, "Failed": failed, "Pending": []})

    def list_group_resources(self) -> str:  # type: ignore[override]
        backend = self.resourcegroups_backend
        group = _group(backend, self._get_param("Group") or self._get_param("GroupName"))
        if group.resource_query and not group.configuration:
            raise BadRequestException(
                "The emulator lists the members of groups made with a configuration only "
                "(GroupResources), not those of a resource query."
            )
        wanted: set[str] | None = None
        for item in self._get_param("Filters") or []:
            if item.get("Name") == "resource-type":
                wanted = (wanted or set()) | set(item.get("Values") or [])
        identifiers = []
        for arn in rules.members(backend).of(group.arn):
            kind = rules.resource_type(arn)
            if wanted is not None and kind not in wanted:
                continue
            identifier = {"ResourceArn": arn}
            if kind is not None:
                identifier["ResourceType"] = kind
            identifiers.append(identifier)
        page, token = _page(
            identifiers, self._get_param("MaxResults"), self._get_param("NextToken")
        )
        answer: dict[str, Any] = {
            "Resources": [{"Identifier": i} for i in page],
            "ResourceIdentifiers": page,
            "QueryErrors": [],
        }
        if token:
            answer["NextToken"] = token
        return json.dumps(answer)


def _page(
    items: list[dict[str, str]], max_results: Any, token: str | None
) -> tuple[list[dict[str, str]], str | None]:
    """ListGroupResources' MaxResults (1-50, botocore's model) and NextToken."""
    size = int(max_results) if max_results is not None else 50
    if not 1 <= size <= 50:
        raise BadRequestException("MaxResults must be between 1 and 50.")
    start = 0
    if token:
        try:
            start = int(base64.b64decode(token.encode()).decode())
        except ValueError:
            raise BadRequestException("The NextToken is not valid.") from None
    following = start + size
    next_token = (
        base64.b64encode(str(following).encode()).decode() if following < len(items) else None
    )
    return items[start:following], next_token


def _check_pool_configuration(configuration: Any) -> None:
    """A Capacity Reservation pool's configuration needs the generic item that keeps its
    members to reservations: ``allowed-resource-types`` = ``AWS::EC2::CapacityReservation``
    "is required when the service configuration also contains a Configuration item of type
    AWS::EC2::CapacityReservationPool" (Resource Groups User Guide, "Supported resource types
    and their configuration")."""
    items = configuration if isinstance(configuration, list) else []
    if rules.POOL not in rules.configuration_types(items):
        return
    allowed = rules.allowed_types(items)
    if allowed != {rules.RESERVATION_TYPE}:
        raise BadRequestException(
            "A group of type AWS::EC2::CapacityReservationPool needs an "
            "AWS::ResourceGroups::Generic configuration with allowed-resource-types "
            "AWS::EC2::CapacityReservation."
        )


_MOTO_CREATE_GROUP: Callable[[Any], str] = ResourceGroupsResponse.create_group
_MOTO_DELETE_GROUP: Callable[[Any], str] = ResourceGroupsResponse.delete_group
