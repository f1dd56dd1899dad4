"""The answers of the discovery commands around ``capacity`` (offerings, search, az, spot,
plan, extend, ahead, purchase) and of the reserved pool's listing (``capacity --pool``).

The client's look-ups (``root.discovery``) and the CLI read them; no entry point answers with
one, so no handler builds them (a module apart from ``capacity``'s request and answer: cold
import, issue 44). Answers leave out what is unknown (``exclude_none``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .capacity import CapacityRow
from .common import ResponseModel, empty_list
from .item_error import ItemError
from .times import UtcDateTime


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
    architectures: list[str] = Field(default_factory=empty_list)
    accelerated: bool = False
    gpus: int = 0
    accelerator: str | None = None
    current_generation: bool | None = None
    network_performance: str | None = None


class AzRow(ResponseModel):
    """``az``: where a type is offered (DescribeInstanceTypeOfferings by Availability Zone)."""

    instance_type: str
    region: str
    availability_zones: list[str] = Field(default_factory=empty_list)
    availability_zone_ids: list[str] = Field(default_factory=empty_list)
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

    pieces: list[SplitPiece] = Field(default_factory=empty_list)
    instance_count: int
    run_start: UtcDateTime
    upfront_fee: float | None = None
    costs: list[str] = Field(default_factory=empty_list)


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
    instance_types: list[str] = Field(default_factory=empty_list)
    instance_count: int
    days: float | None = None
    run_hours: float | None = None
    start_after: UtcDateTime | None = None
    end_before: UtcDateTime | None = None
    recommendation: Literal["odcr", "capacity-block"]
    reasons: list[str] = Field(default_factory=empty_list)
    notes: list[str] = Field(default_factory=empty_list)
    block_duration_hours: int | None = None
    run_start: UtcDateTime | None = None
    capacity_blocks: list[CapacityRow] = Field(default_factory=empty_list)
    odcrs: list[CapacityRow] = Field(default_factory=empty_list)
    offerings: list[BlockOffering] = Field(default_factory=empty_list)
    largest_offerings: list[BlockOffering] = Field(default_factory=empty_list)
    split: Split | None = None
    extension: ExtensionOffer | None = None
    commands: list[str] = Field(default_factory=empty_list)
    errors: list[ItemError] = Field(default_factory=empty_list)
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
    segments: list[ExtendAnswer] = Field(default_factory=empty_list)


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
    reservations: list[CapacityRow] = Field(default_factory=empty_list)
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
