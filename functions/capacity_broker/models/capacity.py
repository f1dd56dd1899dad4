"""``capacity`` request and answer (contract, "capacity: what reserved capacity exists"), and
the answers of the discovery commands around it (offerings, search, az, spot, plan, purchase).

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
    instance_types: list[str] = Field(default_factory=list)
    by_instance_type: dict[str, int] = Field(default_factory=dict)
    regions: list[str] = Field(default_factory=list)
    total_capacity: int = 0
    available_capacity: int = 0
    used_capacity: int = 0
    free_percent: float = 0.0
    block_duration_hours: DurationRange | None = None
    ultra_cluster_placement: bool | None = None


class CapacityResponse(ResponseModel):
    status: Literal["ok", "partial", "error", "invalid_request"]
    request_id: str
    regions: list[str] = Field(default_factory=list)
    summary: CapacitySummary = Field(default_factory=CapacitySummary)
    reservations: list[CapacityRow] = Field(default_factory=list)
    errors: list[ItemError] = Field(default_factory=list)
    message: str


# -- discovery answers ----------------------------------------------------------------------


class BlockOffering(ResponseModel):
    """A Capacity Block that can be bought (DescribeCapacityBlockOfferings)."""

    offering_id: str
    region: str
    instance_type: str
    availability_zone: str | None = None
    instance_count: int
    start_date: UtcDateTime | None = None
    end_date: UtcDateTime | None = None
    duration_hours: int
    # "The number of minutes (in addition to capacityBlockDurationHours)": a same-day block
    # that starts at 08:55 and ends at 11:30 is 2 h 35 min (botocore 1.44.5).
    duration_minutes: int = 0
    upfront_fee: float | None = None
    price_per_instance_hour: float | None = None
    currency: str | None = None
    tenancy: str | None = None
    ultraserver_type: str | None = None
    ultraserver_count: int | None = None

    @property
    def capacity_block_offering_id(self) -> str:
        return self.offering_id

    @property
    def duration_text(self) -> str:
        """``192 h``, or ``6 h 35 min`` for a same-day block."""
        minutes = f" {self.duration_minutes} min" if self.duration_minutes else ""
        return f"{self.duration_hours} h{minutes}"


class InstanceTypeRow(ResponseModel):
    """``search``: an instance type offered in a region, as DescribeInstanceTypes has it."""

    instance_type: str
    region: str
    vcpus: int
    memory_gib: float
    architectures: list[str] = Field(default_factory=list)
    accelerated: bool = False
    gpus: int = 0
    accelerator: str | None = None
    current_generation: bool | None = None
    network_performance: str | None = None


class AzRow(ResponseModel):
    """``az``: where a type is offered (DescribeInstanceTypeOfferings by Availability Zone)."""

    instance_type: str
    region: str
    availability_zones: list[str] = Field(default_factory=list)
    availability_zone_ids: list[str] = Field(default_factory=list)
    az_count: int = 0


class SpotPriceRow(ResponseModel):
    """``spot``: a Spot price (DescribeSpotPriceHistory), with the On-Demand price and the
    saving only when the AWS Price List gave one (never estimated)."""

    instance_type: str
    region: str
    availability_zone: str
    product_description: str
    spot_price: float
    timestamp: UtcDateTime
    on_demand_price: float | None = None
    savings_percent: float | None = None
    savings_note: str | None = None


class ExtensionOffer(ResponseModel):
    """A Capacity Block extension EC2 offers (DescribeCapacityBlockExtensionOfferings): the
    block ``reservation_id`` would end at ``end_date`` instead of ``start_date``."""

    offering_id: str
    reservation_id: str
    region: str
    instance_type: str
    instance_count: int
    availability_zone: str | None = None
    start_date: UtcDateTime | None = None
    end_date: UtcDateTime | None = None
    duration_hours: int
    upfront_fee: float | None = None
    currency: str | None = None


class SplitPiece(ResponseModel):
    """One block of a split: one held (``held``, its reservation id) or to buy (``offering``,
    its offering id)."""

    source: Literal["held", "offering"]
    id: str
    region: str
    availability_zone: str | None = None
    instance_type: str
    instance_count: int
    start_date: UtcDateTime | None = None
    end_date: UtcDateTime | None = None
    upfront_fee: float | None = None
    currency: str | None = None


class Split(ResponseModel):
    """Several blocks that together hold the run's instances over the same hours, and what
    splitting costs (``costs``: separate blocks, no shared placement)."""

    pieces: list[SplitPiece] = Field(default_factory=list)
    instance_count: int
    run_start: UtcDateTime
    upfront_fee: float | None = None
    costs: list[str] = Field(default_factory=list)


class PlanAnswer(ResponseModel):
    """``plan`` (contract v3): the decision guide's recommendation and what really covers the
    run in its window. ``status`` is the verdict: ``ready`` (held capacity covers it),
    ``buy`` (an offering does: ``offerings[0]``, the cheapest), ``split`` (no single block
    holds the count: ``split``), ``extend`` (a held block would, extended: ``extension``),
    ``unavailable`` (nothing does: ``largest_offerings`` say what is on sale), or ``error``
    (no region could be asked). ``run_start`` is when the run can start under the verdict.
    ``commands``: the CLI commands that do what the verdict asks (``buy``: the purchase;
    ``extend``: the extension; ``split``: a purchase per offering in it), else empty."""

    status: Literal["ready", "buy", "split", "extend", "unavailable", "error"]
    workload: str
    instance_type: str
    instance_types: list[str] = Field(default_factory=list)
    instance_count: int
    days: float | None = None
    run_hours: float | None = None
    start_after: UtcDateTime | None = None
    end_before: UtcDateTime | None = None
    recommendation: Literal["odcr", "capacity-block"]
    reasons: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    block_duration_hours: int | None = None
    run_start: UtcDateTime | None = None
    capacity_blocks: list[CapacityRow] = Field(default_factory=list)
    odcrs: list[CapacityRow] = Field(default_factory=list)
    offerings: list[BlockOffering] = Field(default_factory=list)
    largest_offerings: list[BlockOffering] = Field(default_factory=list)
    split: Split | None = None
    extension: ExtensionOffer | None = None
    commands: list[str] = Field(default_factory=list)
    errors: list[ItemError] = Field(default_factory=list)
    message: str


class BlockExtension(ResponseModel):
    """An extension bought for a block (DescribeCapacityBlockExtensionHistory)."""

    offering_id: str | None = None
    status: str
    duration_hours: int
    purchase_date: UtcDateTime | None = None
    start_date: UtcDateTime | None = None
    end_date: UtcDateTime | None = None
    upfront_fee: float | None = None
    currency: str | None = None


class ExtendAnswer(ResponseModel):
    """``extend``: extending one Capacity Block, at most once per idempotency key.

    ``offered`` (what it would cost: nothing bought), ``extended``, ``already_extended`` (an
    extension with this key is already bought: ``extension``), ``not_offered`` (EC2 offers no
    extension of that length now), ``refused`` (EC2 would not extend this block: the message
    says why), ``unknown`` (the purchase failed without a clear answer and no extension shows
    yet: the same command checks again and never buys twice), ``error``."""

    status: Literal[
        "offered", "extended", "already_extended", "not_offered", "refused", "unknown", "error"
    ]
    reservation_id: str
    region: str | None = None
    duration_hours: int
    idempotency_key: str
    offer: ExtensionOffer | None = None
    extension: BlockExtension | None = None
    reservation: CapacityRow | None = None
    error_code: str | None = None
    message: str
    # A block bought as several segments (one CapacityBlockId) is extended as one: each
    # segment's own answer (each is extended on its own, PurchaseCapacityBlockExtension naming
    # one CapacityReservationId); empty for a block of one reservation.
    segments: list[ExtendAnswer] = Field(default_factory=list)


class AheadQuote(ResponseModel):
    """EC2's quote before a future-dated reservation changes: ``cancellation`` (the charge:
    ``charge_hours`` of the committed instances at the On-Demand rate, until
    ``charge_end_date``) or ``date-change`` (the new start and the commitment it brings)."""

    quote_id: str
    kind: Literal["cancellation", "date-change"]
    reservation_id: str
    state: str | None = None
    expires: UtcDateTime | None = None
    reservation_state_after: str | None = None
    committed_instance_count: int | None = None
    charge_hours: int | None = None
    charge_end_date: UtcDateTime | None = None
    current_start_date: UtcDateTime | None = None
    new_start_date: UtcDateTime | None = None
    new_commitment_hours: float | None = None
    new_commitment_end_date: UtcDateTime | None = None


class AheadAnswer(ResponseModel):
    """``reserve-ahead``: requesting a future-dated ODCR (``requested``, ``already_requested``,
    ``unknown``), or changing one: ``quoted`` (EC2's quote shown, nothing changed),
    ``changed`` / ``cancelled`` (the quote accepted), ``refused`` (EC2 said no: the message
    says why), ``not_found``, ``error``."""

    status: Literal[
        "requested",
        "already_requested",
        "quoted",
        "changed",
        "cancelled",
        "refused",
        "not_found",
        "unknown",
        "error",
    ]
    action: Literal["request", "change-start", "cancel"]
    reservation_id: str | None = None
    region: str | None = None
    request_key: str | None = None
    reservation: CapacityRow | None = None
    quote: AheadQuote | None = None
    error_code: str | None = None
    message: str


class PurchaseAnswer(ResponseModel):
    """``offerings --purchase``: what buying one Capacity Block came to.

    ``already_purchased``: a block carrying this purchase key exists (an earlier run of the
    same command bought it); ``unknown``: the purchase call failed without a clear answer and
    no block was found yet (re-running the same command checks again and never buys twice).
    """

    status: Literal["purchased", "already_purchased", "unknown", "not_found", "error"]
    offering_id: str
    purchase_key: str
    region: str | None = None
    # The first (or only) reservation the purchase made; ``reservations``: every one, one per
    # segment of the block, each tagged with the purchase key (contract v3).
    reservation: CapacityRow | None = None
    reservations: list[CapacityRow] = Field(default_factory=list)
    offering: BlockOffering | None = None
    error_code: str | None = None
    message: str


class PoolRow(ResponseModel):
    """One reservation of a cluster's reserved pool (issue 43, ``capacity --pool``): what it
    holds, what no instance uses now, and what that idle part costs an hour (the type's
    On-Demand rate from the Price List, what an ODCR bills whether used or not; ``None`` for a
    Capacity Block, prepaid, or when the Price List has no price)."""

    reservation_id: str
    kind: Literal["odcr", "capacity-block", "interruptible"]
    region: str
    instance_type: str
    availability_zone: str
    state: str
    total_instances: int
    unused_instances: int
    hourly_price_usd: float | None = None
    unused_hourly_cost_usd: float | None = None
