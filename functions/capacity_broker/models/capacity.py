"""``capacity`` request and answer (contract, "capacity: what reserved capacity exists"); the
answers of the discovery commands around it are in ``discovery``.

Rows carry the contract's field names; where the seed documents name a field differently
(``instance_count``) a read-only property gives that name too. Answers leave out what is
unknown (``exclude_none``), except the fields the contract lists for a capacity row and the
summary's block duration range: those are always there, ``null`` when unknown.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
)

from .common import (
    INSTANCE_TYPE_FILTER_PATTERN,
    Regions,
    RequestId,
    RequestModel,
    ResponseModel,
    empty_list,
    unique,
)
from .item_error import ItemError
from .times import UtcDateTime

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


class _KeepsContractFields(ResponseModel):
    """An answer part whose contract fields are always in its JSON: ``exclude_none`` (the
    answers' rule) leaves out only the fields beyond ``CONTRACT_FIELDS`` (a client reading
    ``row["capacity_block_id"]`` gets ``None``, not a ``KeyError``)."""

    CONTRACT_FIELDS: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _keep_contract_fields(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not info.exclude_none:
            return data
        restore = self.CONTRACT_FIELDS
        if info.exclude or info.exclude_unset or info.exclude_defaults:
            # Something besides exclude_none may have left a field out: put back only what
            # exclude_none dropped.
            restore = frozenset(
                name
                for name in restore
                if name not in data and getattr(self, name) is None and not _excluded(info, name)
            )
        return {
            name: data.get(name)
            for name in type(self).model_fields
            if name in data or name in restore
        }


def _excluded(info: SerializationInfo, name: str) -> bool:
    """Left out on purpose (``exclude=``), not for being ``None``."""
    exclude = info.exclude
    return exclude is not None and name in exclude


# The contract's capacity row, in its order ("capacity: what reserved capacity exists").
CAPACITY_ROW_FIELDS = (
    "reservation_id",
    "reservation_type",
    "capacity_block_id",
    "instance_type",
    "region",
    "availability_zone",
    "availability_zone_id",
    "total_capacity",
    "available_capacity",
    "used_capacity",
    "state",
    "start_date",
    "end_date",
    "end_date_type",
    "duration_hours",
    "instance_match_criteria",
    "platform",
    "tenancy",
    "owner_id",
    "owned_by_broker",
    "tags",
    # v3: blocks' interconnect and the hours they can still run; future-dated ODCRs' end of
    # commitment ("Block life", "Future-dated ODCRs").
    "interconnect_status",
    "hours_left",
    "commitment_end_date",
)


class CapacityRow(_KeepsContractFields):
    """One ODCR or Capacity Block. Every contract field is in the answer (``null`` when
    unknown: an ODCR's ``capacity_block_id``, an unlimited ODCR's ``end_date``); the
    placement details beyond the contract only when EC2 gave them. A Capacity Block that has
    not started shows its size as ``total_capacity`` (from the tag EC2 puts on it) with none of
    it available or used yet, as EC2 does."""

    CONTRACT_FIELDS: ClassVar[frozenset[str]] = frozenset(CAPACITY_ROW_FIELDS)

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
    # whole hours stay ints (168, as EC2 sells blocks), so `duration_hours // 24` reads 7
    duration_hours: int | float | None = None
    instance_match_criteria: str | None = None
    platform: str | None = None
    tenancy: str | None = None
    owner_id: str | None = None
    owned_by_broker: bool = False
    tags: dict[str, str] = Field(default_factory=dict)
    # Capacity Blocks: DescribeCapacityBlockStatus's InterconnectStatus (ok | impaired |
    # insufficient-data; null when EC2 did not say), and the hours a run starting now (or at
    # the block's start) can last before EC2 stops the block's instances
    # (``domain.blocks.hours_left``: 30 minutes before its end, 60 for UltraServers).
    interconnect_status: str | None = None
    hours_left: float | None = None
    # Future-dated ODCRs (CommitmentInfo): until when the reservation cannot be cancelled or
    # shrunk without EC2's charge; null before delivery and for other reservations.
    commitment_end_date: UtcDateTime | None = None
    # Capacity Blocks, from DescribeCapacityReservationTopology: True when EC2 places the
    # block on network nodes (EC2 UltraCluster placement), False when it answered without
    # them, None when not asked (ODCRs, blocks that are not active), when EC2 would not answer
    # or answered in a shape the broker cannot read.
    ultra_cluster_placement: bool | None = None
    network_nodes: list[str] | None = None

    @property
    def instance_count(self) -> int:
        """The seeds' name for the size of a reservation (``total_capacity``)."""
        return self.total_capacity

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == "capacity-block"


class DurationRange(ResponseModel):
    min_hours: float
    max_hours: float


class CapacitySummary(_KeepsContractFields):
    """Counts per type, capacity totals with the free share, and the blocks' durations
    (``block_duration_hours`` is ``null`` when no block is listed; the UltraCluster placement,
    beyond the contract, is left out when unknown)."""

    CONTRACT_FIELDS: ClassVar[frozenset[str]] = frozenset({"block_duration_hours"})

    reservations: int = 0
    # per reservation type ("odcr", "capacity-block") and per instance type
    by_type: dict[str, int] = Field(default_factory=dict)
    instance_types: list[str] = Field(default_factory=empty_list)
    by_instance_type: dict[str, int] = Field(default_factory=dict)
    regions: list[str] = Field(default_factory=empty_list)
    total_capacity: int = 0
    available_capacity: int = 0
    used_capacity: int = 0
    free_percent: float = 0.0
    block_duration_hours: DurationRange | None = None
    ultra_cluster_placement: bool | None = None


class CapacityResponse(ResponseModel):
    status: Literal["ok", "partial", "error", "invalid_request"]
    request_id: str
    regions: list[str] = Field(default_factory=empty_list)
    summary: CapacitySummary = Field(default_factory=CapacitySummary)
    reservations: list[CapacityRow] = Field(default_factory=empty_list)
    errors: list[ItemError] = Field(default_factory=empty_list)
    message: str
