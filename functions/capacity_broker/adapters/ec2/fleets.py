"""What a launch into a hold asks EC2 and what it answered (``Launches.create_instant_fleet``,
``Launches.run_instances``).

A module of its own beside ``launches``: only reserve launches nodes; release and the cleaner,
which use ``Launches`` for launch template versions, never make these records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .launches import TemplateVersion


@dataclass(frozen=True)
class FleetError:
    """One of CreateFleet's Errors[] (the call answers 200 with them; some are transient)."""

    code: str
    message: str
    instance_type: str | None = None
    subnet_id: str | None = None


@dataclass(frozen=True)
class LaunchSpec:
    """The job's nodes, from the version that targets its reservation, in one subnet, under
    one ClientToken, tagged on launch."""

    template: TemplateVersion
    instance_type: str
    subnet_id: str
    count: int
    client_token: str
    tags: Mapping[str, str]

    def tag_specification(self, *resource_types: str) -> list[dict[str, Any]]:
        tags = [{"Key": k, "Value": v} for k, v in self.tags.items()]
        return [{"ResourceType": kind, "Tags": tags} for kind in resource_types]


@dataclass(frozen=True)
class FleetResult:
    """What CreateFleet answered: the fleet, the instances it launched, and its errors."""

    fleet_id: str | None
    instance_ids: list[str]
    errors: list[FleetError] = field(default_factory=list)
