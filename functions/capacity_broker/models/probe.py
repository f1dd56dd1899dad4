"""``probe`` request and answer (contract, "probe: is there capacity right now?")."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from ..domain.probe import ProbeStatus
from .attempt import Attempt
from .common import (
    InstanceCount,
    InstanceType,
    ResponseModel,
    SubnetIds,
    empty_list,
)
from .placement import PlacementFields

# Statuses are the domain's StrEnums: plain strings ("available") are accepted too,
# comparisons work both ways, and the JSON carries the plain value.


class ProbeRequest(PlacementFields):
    """Is there capacity for ``instance_count`` x ``instance_type`` in one of these subnets?"""

    instance_type: InstanceType
    subnet_ids: SubnetIds
    instance_count: InstanceCount = 1

    @property
    def named_types(self) -> list[tuple[str, str]]:
        return [("instance_type", self.instance_type)]

    @model_validator(mode="after")
    def _platform_source(self) -> Self:
        self._check_platform_source()
        return self


ProbeAttempt = Attempt


class ProbeGroup(ResponseModel):
    """Contract v3, "Grouped probes": the group that answered this probe, its size (members),
    and the reservation (of the group's summed count, or of the part this probe was in) that
    answered it (none when no subnet had room for it)."""

    id: str
    size: int
    reservation_id: str | None = None


class ProbeResponse(ResponseModel):
    status: ProbeStatus
    request_id: str
    instance_type: str | None = None
    subnet_id: str | None = None
    availability_zone: str | None = None
    availability_zone_id: str | None = None
    attempts: list[Attempt] = Field(default_factory=empty_list)
    error_code: str | None = None
    cleanup: Literal["pending"] | None = None
    # Contract v2: the seconds every reservation this request created was held, summed, as
    # the broker measured them (0 when it made none).
    reservation_seconds: float = 0.0
    # Contract v3: answered with other probes alike; ``reservation_seconds`` is then this
    # probe's share (its count over the reservation's) of the reservation that answered it.
    group: ProbeGroup | None = None
    message: str
