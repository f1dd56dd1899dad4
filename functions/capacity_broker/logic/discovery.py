"""Discovery around the capacity listing: Capacity Block offerings (and buying one), instance
type search, Availability Zone coverage, Spot prices, and the reservation-type plan.

Read-only except :meth:`Discovery.purchase`, which buys at most one Capacity Block per
purchase key (see there). Every multi-region look-up runs the regions at once
(``logic.capacity.fan_out``); within a region, independent look-ups run at once too.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from ..adapters.aws import AwsError
from ..adapters.ec2 import Pricing, Reservation
from ..domain import discovery as rules
from ..domain.errors import ErrorClass
from ..domain.tags import TAG_CLUSTER_ID, TAG_NAME, TAG_PREFIX
from ..models.capacity import (
    AzRow,
    BlockOffering,
    CapacityRequest,
    CapacityRow,
    InstanceTypeRow,
    PlanAnswer,
    PurchaseAnswer,
    SpotPriceRow,
)
from ..models.common import ItemError
from . import InvalidInput
from .capacity import CapacityLister, Ec2Factory, Listing, Progress, fan_out, to_row

# Tag that makes a Capacity Block purchase findable again (PurchaseCapacityBlock has no
# ClientToken, and a bought block cannot be cancelled).
TAG_PURCHASE_KEY = f"{TAG_PREFIX}purchase-key"
DEFAULT_PRODUCT = "Linux/UNIX"
# Look-ups inside one region (per instance type, per price) at once.
INNER_WORKERS = 8


def utcnow() -> datetime:
    return datetime.now(UTC)


def purchase_key(offering_id: str) -> str:
    """Deterministic: the same offering asked for twice has the same key, so a retried
    command finds the block its first run bought."""
    return "pk-" + hashlib.sha256(offering_id.encode()).hexdigest()[:24]


def _offering(region: str, item: dict[str, Any]) -> BlockOffering:
    count = int(item.get("InstanceCount") or 0)
    hours = int(item.get("CapacityBlockDurationHours") or 0)
    fee = rules.parse_price(item.get("UpfrontFee"))
    return BlockOffering(
        offering_id=item["CapacityBlockOfferingId"],
        region=region,
        instance_type=item.get("InstanceType", ""),
        availability_zone=item.get("AvailabilityZone"),
        instance_count=count,
        start_date=item.get("StartDate"),
        end_date=item.get("EndDate"),
        duration_hours=hours,
        upfront_fee=fee,
        price_per_instance_hour=rules.per_instance_hour(fee, count, hours)
        if fee is not None
        else None,
        currency=item.get("CurrencyCode"),
        tenancy=item.get("Tenancy"),
        ultraserver_type=item.get("UltraserverType"),
    )


def _offering_order(o: BlockOffering) -> tuple[float, float, float, str, str]:
    return rules.offering_order(
        o.price_per_instance_hour, o.upfront_fee, o.start_date, o.availability_zone, o.offering_id
    )


def _size_order(row: InstanceTypeRow) -> tuple[str, int, float, str, str]:
    family = row.instance_type.split(".", 1)[0]
    return (family, row.vcpus, row.memory_gib, row.instance_type, row.region)


class OnDemandPrices:
    """On-Demand prices from the Price List, asked once per (type, region) per object; a
    failure is remembered as the reason savings cannot be shown (never an estimate)."""

    def __init__(self, pricing: Pricing | None = None) -> None:
        self.pricing = pricing or Pricing()
        # a price, or why there is none
        self._known: dict[tuple[str, str], float | str] = {}
        self._lock = threading.Lock()

    def get(self, instance_type: str, region: str) -> float | str:
        """The Linux On-Demand price per hour, or why it is unavailable."""
        key = (instance_type, region)
        with self._lock:
            known = self._known.get(key)
        if known is None:
            try:
                price = self.pricing.on_demand_price(instance_type, region)
            except AwsError as error:
                known = (
                    "On-Demand price unavailable: the AWS Price List answered "
                    f"{error.code or 'nothing'}"
                )
            else:
                known = (
                    price
                    if price is not None
                    else f"On-Demand price unavailable: the AWS Price List has no Linux "
                    f"On-Demand price for {instance_type} in {region}"
                )
            with self._lock:
                self._known[key] = known
        return known


class Discovery:
    def __init__(
        self,
        default_regions: Sequence[str],
        cluster_id: str | None = None,
        max_workers: int = 16,
        ec2_for: Ec2Factory | None = None,
        pricing: Pricing | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.default_regions = list(default_regions)
        self.max_workers = max_workers
        self.lister = CapacityLister(cluster_id, default_regions, max_workers, ec2_for)
        self.ec2 = self.lister.ec2
        self.on_demand = OnDemandPrices(pricing)
        self.clock = clock

    def _regions(self, regions: Sequence[str] | None) -> list[str]:
        return list(dict.fromkeys(regions or self.default_regions))

    # -- capacity ---------------------------------------------------------------------------
    def capacity(
        self, request: CapacityRequest, progress: Progress | None = None
    ) -> Listing[CapacityRow]:
        return self.lister.rows(request, progress=progress)

    # -- Capacity Block offerings ---------------------------------------------------------------
    def offerings(
        self,
        instance_type: str,
        instance_count: int = 1,
        duration_hours: int = 24,
        start_after: datetime | None = None,
        end_before: datetime | None = None,
        regions: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> Listing[BlockOffering]:
        check_offering_terms(instance_type, instance_count, duration_hours, start_after, end_before)
        wanted = self._regions(regions)

        def one(region: str) -> list[BlockOffering]:
            items = self.ec2(region).block_offerings(
                instance_type, instance_count, duration_hours, start_after, end_before
            )
            return [_offering(region, item) for item in items]

        found, errors = fan_out(wanted, one, self.max_workers, progress)
        rows = sorted((o for r in wanted for o in found.get(r, [])), key=_offering_order)
        return Listing(rows, errors, wanted)

    def purchase(
        self,
        offering_id: str,
        instance_type: str,
        instance_count: int = 1,
        duration_hours: int = 24,
        start_after: datetime | None = None,
        end_before: datetime | None = None,
        regions: Sequence[str] | None = None,
        platform: str = "Linux/UNIX",
        key: str | None = None,
    ) -> PurchaseAnswer:
        """Buy the Capacity Block offering ``offering_id``, at most once.

        PurchaseCapacityBlock has no ClientToken and a block cannot be cancelled, so:
        1. the purchase is tagged on create with a purchase key derived from the offering;
        2. before buying, every region is searched for a block carrying that key: found, the
           answer is ``already_purchased`` with that block (a retried command);
        3. the offering must still be on sale for these terms (it names its region);
        4. the purchase call is made exactly once (no SDK or broker retry); if it fails
           without a clear answer the key is looked up again, and without a block the answer
           is ``unknown``: re-running the same command checks again and never buys twice.
        """
        key = key or purchase_key(offering_id)
        wanted = self._regions(regions)
        base = {"offering_id": offering_id, "purchase_key": key}
        earlier, errors = self._purchased(key, wanted)
        if earlier is not None:
            return PurchaseAnswer(
                status="already_purchased",
                region=earlier.region,
                reservation=earlier,
                message=f"Already bought: Capacity Block {earlier.reservation_id} carries "
                f"purchase key {key}; nothing was bought again.",
                **base,
            )
        if errors:
            # Without every region's answer a second purchase cannot be ruled out.
            return PurchaseAnswer(
                status="error",
                error_code=errors[0].error_code,
                message="Could not check for an earlier purchase in "
                + ", ".join(f"{e.region} ({e.error_code})" for e in errors)
                + "; nothing was bought.",
                **base,
            )
        listing = self.offerings(
            instance_type, instance_count, duration_hours, start_after, end_before, wanted
        )
        offer = next((o for o in listing.items if o.offering_id == offering_id), None)
        if offer is None:
            failed = f" (could not search {', '.join(str(e.region) for e in listing.errors)})"
            return PurchaseAnswer(
                status="not_found",
                message=f"Offering {offering_id} is not on sale for {instance_count} x "
                f"{instance_type} for {duration_hours} h in {', '.join(wanted)}"
                + (failed if listing.errors else "")
                + "; nothing was bought.",
                **base,
            )
        tags = {
            TAG_PURCHASE_KEY: key,
            TAG_NAME: f"capacity-broker-purchase-{key}",
        }
        if self.lister.cluster_id:
            tags[TAG_CLUSTER_ID] = self.lister.cluster_id
        ec2 = self.ec2(offer.region)
        try:
            bought = ec2.purchase_capacity_block(offering_id, platform, tags)
        except AwsError as error:
            # No code (timeout, dropped connection) or a server fault: the request may have
            # reached EC2 and the block may exist. Look before answering.
            if error.code is None or error.error_class is ErrorClass.TRANSIENT:
                again, _ = self._purchased(key, [offer.region])
                if again is not None:
                    return PurchaseAnswer(
                        status="purchased",
                        region=offer.region,
                        reservation=again,
                        offering=offer,
                        message=f"Bought Capacity Block {again.reservation_id} (the purchase "
                        "answer was lost; found by its purchase key).",
                        **base,
                    )
                return PurchaseAnswer(
                    status="unknown",
                    region=offer.region,
                    offering=offer,
                    error_code=error.code or "RequestTimeout",
                    message="The purchase call failed without a clear answer and no block "
                    f"with purchase key {key} is visible yet. Run the same command again to "
                    "check: it never buys twice.",
                    **base,
                )
            return PurchaseAnswer(
                status="error",
                region=offer.region,
                offering=offer,
                error_code=error.code,
                message=f"EC2 refused the purchase, nothing was bought: {error.message}"[:500],
                **base,
            )
        row = to_row(bought, {}, self.lister.cluster_id, None)
        return PurchaseAnswer(
            status="purchased",
            region=offer.region,
            reservation=row,
            offering=offer,
            message=f"Bought Capacity Block {row.reservation_id}: {offer.instance_count} x "
            f"{offer.instance_type} in {offer.availability_zone} from "
            f"{offer.start_date:%Y-%m-%d %H:%M} UTC for {offer.duration_hours} h.",
            **base,
        )

    def _purchased(
        self, key: str, regions: Sequence[str]
    ) -> tuple[CapacityRow | None, list[ItemError]]:
        def one(region: str) -> list[CapacityRow]:
            items = self.ec2(region).describe_reservations({f"tag:{TAG_PURCHASE_KEY}": [key]})
            return [
                to_row(Reservation.from_api(region, raw), raw, self.lister.cluster_id, None)
                for raw in items
            ]

        found, errors = fan_out(regions, one, self.max_workers)
        rows = [row for region in regions for row in found.get(region, [])]
        return (rows[0] if rows else None), errors

    # -- instance types -------------------------------------------------------------------------
    def search(
        self,
        pattern: str,
        regions: Sequence[str] | None = None,
        architecture: str | None = None,
        min_vcpus: int | None = None,
        min_memory: float | None = None,
        gpu_only: bool = False,
        progress: Progress | None = None,
    ) -> Listing[InstanceTypeRow]:
        wanted = self._regions(regions)
        patterns = rules.expand_pattern(pattern)
        filters = {"processor-info.supported-architecture": [architecture]} if architecture else {}

        def one(region: str) -> list[InstanceTypeRow]:
            rows = []
            for item in self.ec2(region).instance_types(patterns=patterns, filters=filters):
                facts = rules.instance_facts(item)
                if not rules.matches_any(facts.instance_type, patterns):
                    continue
                if not rules.fits(facts, architecture, min_vcpus, min_memory, gpu_only):
                    continue
                rows.append(
                    InstanceTypeRow(
                        instance_type=facts.instance_type,
                        region=region,
                        vcpus=facts.vcpus,
                        memory_gib=facts.memory_gib,
                        architectures=list(facts.architectures),
                        accelerated=facts.accelerators.accelerated,
                        gpus=facts.accelerators.gpus,
                        accelerator=facts.accelerators.label or None,
                        current_generation=facts.current_generation,
                        network_performance=facts.network_performance,
                    )
                )
            return rows

        found, errors = fan_out(wanted, one, self.max_workers, progress)
        rows = sorted((r for region in wanted for r in found.get(region, [])), key=_size_order)
        return Listing(rows, errors, wanted)

    # -- Availability Zones ---------------------------------------------------------------------
    def az(
        self,
        pattern: str,
        regions: Sequence[str] | None = None,
        min_az_count: int | None = None,
        azs: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> Listing[AzRow]:
        wanted = self._regions(regions)
        patterns = rules.expand_pattern(pattern)
        only = {z.strip() for z in azs or () if z.strip()}

        def one(region: str) -> list[AzRow]:
            ec2 = self.ec2(region)
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="az") as pool:
                zones_job = pool.submit(ec2.zones)
                offers_job = pool.submit(ec2.instance_type_offerings, patterns)
                zones = {z.name: z.zone_id for z in zones_job.result()}
                offers = offers_job.result()
            by_type: dict[str, set[str]] = {}
            for instance_type, zone in offers:
                if not rules.matches_any(instance_type, patterns):
                    continue
                if only and zone not in only and zones.get(zone) not in only:
                    continue
                by_type.setdefault(instance_type, set()).add(zone)
            rows = []
            for instance_type, names in by_type.items():
                ordered = sorted(names)
                if min_az_count is not None and len(ordered) < min_az_count:
                    continue
                rows.append(
                    AzRow(
                        instance_type=instance_type,
                        region=region,
                        availability_zones=ordered,
                        availability_zone_ids=[zones.get(z, "") for z in ordered],
                        az_count=len(ordered),
                    )
                )
            return rows

        found, errors = fan_out(wanted, one, self.max_workers, progress)
        rows = sorted(
            (r for region in wanted for r in found.get(region, [])),
            key=lambda r: (
                r.instance_type.split(".", 1)[0],
                -r.az_count,
                r.instance_type,
                r.region,
            ),
        )
        return Listing(rows, errors, wanted)

    # -- Spot prices ----------------------------------------------------------------------------
    def spot(
        self,
        pattern: str,
        regions: Sequence[str] | None = None,
        max_price: float | None = None,
        show_savings: bool = False,
        sort_by_price: bool = False,
        history_hours: float | None = None,
        product_description: str = DEFAULT_PRODUCT,
        progress: Progress | None = None,
    ) -> Listing[SpotPriceRow]:
        """Current Spot prices per type and AZ (``history_hours``: every change in that
        window). Patterns are resolved to instance types with DescribeInstanceTypes first,
        since DescribeSpotPriceHistory takes exact names."""
        wanted = self._regions(regions)
        patterns = rules.expand_pattern(pattern)
        now = self.clock()

        def one(region: str) -> list[SpotPriceRow]:
            ec2 = self.ec2(region)
            names = rules.exact_types([pattern])
            if names is None:
                names = [
                    item["InstanceType"]
                    for item in ec2.instance_types(patterns=patterns)
                    if rules.matches_any(item["InstanceType"], patterns)
                ]
            if not names:
                return []
            if history_hours:
                raw = ec2.spot_price_history(
                    names,
                    [product_description],
                    start=now - timedelta(hours=history_hours),
                    end=now,
                )
            else:
                raw = ec2.spot_price_history(names, [product_description], start=now, end=now)
            points = [
                rules.PricePoint(
                    instance_type=item["InstanceType"],
                    availability_zone=item.get("AvailabilityZone", ""),
                    product_description=item.get("ProductDescription", ""),
                    price=price,
                    timestamp=item["Timestamp"],
                )
                for item in raw
                if (price := rules.parse_price(item.get("SpotPrice"))) is not None
            ]
            if not history_hours:
                points = rules.latest_prices(points)
            if max_price is not None:
                points = [p for p in points if p.price <= max_price]
            return [
                SpotPriceRow(
                    instance_type=p.instance_type,
                    region=region,
                    availability_zone=p.availability_zone,
                    product_description=p.product_description,
                    spot_price=p.price,
                    timestamp=p.timestamp,
                )
                for p in points
            ]

        found, errors = fan_out(wanted, one, self.max_workers, progress)
        rows = [r for region in wanted for r in found.get(region, [])]
        if show_savings and rows:
            self._savings(rows)
        if sort_by_price:
            rows.sort(key=lambda r: (r.spot_price, r.instance_type, r.region, r.availability_zone))
        else:
            rows.sort(
                key=lambda r: (
                    r.instance_type,
                    r.region,
                    r.availability_zone,
                    -r.timestamp.timestamp(),
                )
            )
        return Listing(rows, errors, wanted)

    def _savings(self, rows: list[SpotPriceRow]) -> None:
        keys = sorted({(r.instance_type, r.region) for r in rows})
        with ThreadPoolExecutor(
            max_workers=min(INNER_WORKERS, len(keys)), thread_name_prefix="price"
        ) as pool:
            prices = dict(zip(keys, pool.map(lambda k: self.on_demand.get(*k), keys), strict=True))
        for row in rows:
            price = prices[(row.instance_type, row.region)]
            if isinstance(price, str):
                row.savings_note = price
                continue
            row.on_demand_price = price
            row.savings_percent = rules.savings_percent(row.spot_price, price)

    # -- the plan -------------------------------------------------------------------------------
    def plan(
        self,
        workload: str,
        instance_type: str,
        instance_count: int,
        days: float | None = None,
        regions: Sequence[str] | None = None,
        start_after: datetime | None = None,
        progress: Progress | None = None,
    ) -> PlanAnswer:
        """The decision guide, then what exists: owned blocks that cover the run, ODCRs with
        enough free instances, and offerings to buy (the seeds' validate_training_capacity)."""
        try:
            workload = rules.Workload(workload).value
        except ValueError:
            raise InvalidInput(
                [("workload", "must be one of " + ", ".join(w.value for w in rules.Workload))]
            ) from None
        if rules.has_wildcard(instance_type):
            raise InvalidInput([("instance_type", "must be one instance type, not a pattern")])
        if instance_count < 1:
            raise InvalidInput([("instance_count", "must be at least 1")])
        if days is not None and days <= 0:
            raise InvalidInput([("days", "must be more than 0")])
        wanted = self._regions(regions)
        errors: list[ItemError] = []
        facts = self.lister.accelerators
        accelerated: bool | None = None
        try:
            known = facts.of(self.ec2(wanted[0]), [instance_type]).get(instance_type)
            accelerated = known.accelerated if known is not None else None
        except AwsError as error:
            if error.code == "InvalidInstanceType":
                raise InvalidInput(
                    [("instance_type", f"EC2 knows no instance type {instance_type}")]
                ) from None
            errors.append(
                ItemError(region=wanted[0], error_code=error.code, message=error.message[:300])
            )
        choice = rules.recommend(workload, instance_count, days, accelerated)
        listing = self.lister.rows(
            CapacityRequest(reservation_type="all", instance_types=[instance_type], regions=wanted),
            progress=progress,
        )
        errors.extend(listing.errors)
        blocks = [
            r
            for r in listing.items
            if r.is_capacity_block
            and days is not None
            and rules.block_covers(
                r.total_capacity, r.duration_hours, r.state, instance_count, days
            )
        ]
        odcrs = [
            r
            for r in listing.items
            if not r.is_capacity_block and r.available_capacity >= instance_count
        ]
        offers: list[BlockOffering] = []
        block_hours = choice.block_hours
        if (
            choice.reservation_type is rules.ReservationKind.CAPACITY_BLOCK
            and block_hours is not None
            and not blocks
        ):
            found = self.offerings(
                instance_type, instance_count, block_hours, start_after, None, wanted
            )
            offers = found.items[:5]
            errors.extend(found.errors)
        base: dict[str, Any] = {
            "workload": workload,
            "instance_type": instance_type,
            "instance_count": instance_count,
            "days": days,
            "recommendation": choice.reservation_type.value,
            "reasons": list(choice.reasons),
            "notes": list(choice.notes),
            "block_duration_hours": block_hours,
            "capacity_blocks": blocks,
            "odcrs": odcrs,
            "offerings": offers,
            "errors": errors,
        }
        if choice.reservation_type is rules.ReservationKind.CAPACITY_BLOCK:
            if blocks:
                b = blocks[0]
                return PlanAnswer(
                    status="ready",
                    message=f"Capacity Block {b.reservation_id} covers it: "
                    f"{b.total_capacity} x {b.instance_type} for {b.duration_hours} h "
                    f"({b.state}), UltraCluster networking.",
                    **base,
                )
            if odcrs:
                o = odcrs[0]
                return PlanAnswer(
                    status="ready",
                    message=f"No Capacity Block covers it; ODCR {o.reservation_id} has "
                    f"{o.available_capacity} free in {o.availability_zone} (standard "
                    "networking, not UltraCluster).",
                    **base,
                )
            if offers:
                offer = offers[0]
                price = (
                    f" at {offer.price_per_instance_hour:g} {offer.currency or 'USD'} per "
                    "instance-hour"
                    if offer.price_per_instance_hour is not None
                    else ""
                )
                return PlanAnswer(
                    status="bookable",
                    message=f"Nothing held covers it; offering {offer.offering_id} sells "
                    f"{offer.instance_count} x {offer.instance_type} in "
                    f"{offer.availability_zone} from {offer.start_date:%Y-%m-%d} for "
                    f"{offer.duration_hours} h{price}.",
                    **base,
                )
        elif odcrs:
            o = odcrs[0]
            return PlanAnswer(
                status="ready",
                message=f"ODCR {o.reservation_id} has {o.available_capacity} of "
                f"{o.total_capacity} free in {o.availability_zone}.",
                **base,
            )
        status = "error" if errors and len(errors) >= len(wanted) else "unavailable"
        advice = (
            f"buy a Capacity Block for {instance_type}"
            if choice.reservation_type is rules.ReservationKind.CAPACITY_BLOCK
            else f"create an ODCR for {instance_count} x {instance_type}"
        )
        return PlanAnswer(
            status=status,
            message=f"No capacity held or on sale for {instance_count} x {instance_type}: "
            f"{advice}.",
            **base,
        )


def check_offering_terms(
    instance_type: str,
    instance_count: int,
    duration_hours: int,
    start_after: datetime | None,
    end_before: datetime | None,
) -> None:
    """Refuse what EC2 would refuse, before asking it."""
    problems: list[tuple[str, str]] = []
    if not instance_type or rules.has_wildcard(instance_type) or "." not in instance_type:
        problems.append(("instance_type", "must be one instance type, such as p5.48xlarge"))
    if not 1 <= instance_count <= rules.MAX_BLOCK_INSTANCES:
        problems.append(("instance_count", f"must be between 1 and {rules.MAX_BLOCK_INSTANCES}"))
    message = rules.block_duration_error(duration_hours)
    if message:
        problems.append(("duration_hours", message))
    for name, value in (("start_after", start_after), ("end_before", end_before)):
        if value is not None and (value.tzinfo is None or value.utcoffset() is None):
            problems.append((name, "must be timezone-aware (UTC)"))
    if (
        start_after is not None
        and end_before is not None
        and start_after.tzinfo is not None
        and end_before.tzinfo is not None
        and end_before <= start_after
    ):
        problems.append(("end_before", "must be later than start_after"))
    if problems:
        raise InvalidInput(problems)
