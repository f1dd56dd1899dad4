"""``capacity`` request and answer (contract, "capacity: what reserved capacity exists")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

from .common import (
    INSTANCE_TYPE_FILTER_PATTERN,
    ItemError,
    Regions,
    RequestId,
    RequestModel,
    ResponseModel,
    UtcDateTime,
    unique,
)

InstanceTypeFilter = Annotated[
    str, StringConstraints(max_length=64, pattern=INSTANCE_TYPE_FILTER_PATTERN)
]
MAX_FILTERS = 50
MAX_MIN_CAPACITY = 100_000


class CapacityRequest(RequestModel):
    """Which ODCRs and Capacity Blocks exist. By default only usable ones: ODCRs ``active``,
    blocks ``active`` or ``scheduled`` (``include_inactive`` lists the rest too)."""

    reservation_type: Literal["odcr", "capacity-block", "all"] = "odcr"
    instance_types: (
        Annotated[
            list[InstanceTypeFilter],
            Field(min_length=1, max_length=MAX_FILTERS),
            AfterValidator(unique),
        ]
        | None
    ) = None
    regions: Regions | None = None
    gpu_only: bool = False
    available_only: bool = False
    min_capacity: Annotated[int, Field(ge=0, le=MAX_MIN_CAPACITY)] = 0
    include_inactive: bool = False
    request_id: RequestId | None = None


class CapacityRow(ResponseModel):
    reservation_id: str
    reservation_type: Literal["odcr", "capacity-block"]
    capacity_block_id: str | None = None
    instance_type: str
    region: str
    availability_zone: str | None = None
    availability_zone_id: str | None = None
    total_capacity: int
    available_capacity: int
    used_capacity: int
    state: str
    start_date: UtcDateTime | None = None
    end_date: UtcDateTime | None = None
    end_date_type: str | None = None
    duration_hours: float | None = None
    instance_match_criteria: str | None = None
    platform: str | None = None
    tenancy: str | None = None
    owner_id: str | None = None
    owned_by_broker: bool = False
    tags: dict[str, str] = Field(default_factory=dict)


class DurationRange(ResponseModel):
    min_hours: float
    max_hours: float


class CapacitySummary(ResponseModel):
    """Counts per type, capacity totals with the free share, and the blocks' durations."""

    reservations: int = 0
    by_type: dict[str, int] = Field(default_factory=dict)
    total_capacity: int = 0
    available_capacity: int = 0
    free_percent: float = 0.0
    block_duration_hours: DurationRange | None = None


class CapacityResponse(ResponseModel):
    status: Literal["ok", "partial", "error", "invalid_request"]
    request_id: str
    regions: list[str] = Field(default_factory=list)
    summary: CapacitySummary = Field(default_factory=CapacitySummary)
    reservations: list[CapacityRow] = Field(default_factory=list)
    errors: list[ItemError] = Field(default_factory=list)
    message: str
