"""Capacity Block offerings, and buying one at most once (PurchaseCapacityBlock has no
ClientToken and a bought block cannot be cancelled)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...adapters.aws import AwsError
from ...adapters.ec2 import Reservation
from ...domain import discovery as rules
from ...domain.errors import ErrorClass
from ...domain.tags import TAG_CLUSTER_ID, TAG_NAME, TAG_PREFIX
from ...models.capacity import CapacityRow
from ...models.discovery import BlockOffering, PurchaseAnswer
from ...models.item_error import ItemError
from .. import InvalidInput
from ..capacity import Listing, Progress, fan_out, to_row
from .base import DiscoveryBase

# Tag that makes a Capacity Block purchase findable again (PurchaseCapacityBlock has no
# ClientToken, and a bought block cannot be cancelled).
TAG_PURCHASE_KEY = f"{TAG_PREFIX}purchase-key"


def purchase_key(offering_id: str) -> str:
    """Deterministic: the same offering asked for twice has the same key, so a retried
    command finds the block its first run bought."""
    return "pk-" + hashlib.sha256(offering_id.encode()).hexdigest()[:24]


def offering_of(region: str, item: dict[str, Any]) -> BlockOffering:
    """One DescribeCapacityBlockOfferings item as an offering row."""
    count = int(item.get("InstanceCount") or 0)
    hours = int(item.get("CapacityBlockDurationHours") or 0)
    # "The number of minutes (in addition to capacityBlockDurationHours)": the price per
    # instance-hour divides by the block's real length, not its whole hours.
    minutes = int(item.get("CapacityBlockDurationMinutes") or 0)
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
        duration_minutes=minutes,
        upfront_fee=fee,
        price_per_instance_hour=rules.per_instance_hour(fee, count, hours + minutes / 60)
        if fee is not None
        else None,
        currency=item.get("CurrencyCode"),
        tenancy=item.get("Tenancy"),
        ultraserver_type=item.get("UltraserverType"),
        ultraserver_count=item.get("UltraserverCount"),
    )


def _offering_order(o: BlockOffering) -> tuple[float, float, float, str, str]:
    return rules.offering_order(
        o.price_per_instance_hour, o.upfront_fee, o.start_date, o.availability_zone, o.offering_id
    )


class BlockOfferings(DiscoveryBase):
    """Capacity Block offerings, and the purchase of one."""

    def offerings(
        self,
        instance_type: str,
        instance_count: int = 1,
        duration_hours: int = 24,
        start_after: datetime | None = None,
        end_before: datetime | None = None,
        regions: Sequence[str] | None = None,
        progress: Progress | None = None,
        *,
        ultraservers: int | None = None,
        ultraserver_type: str | None = None,
    ) -> Listing[BlockOffering]:
        """``ultraservers``: offerings of that many UltraServers (``instance_count`` is then
        not asked); ``ultraserver_type``: of that UltraServer type only."""
        check_offering_terms(
            instance_type,
            instance_count,
            duration_hours,
            start_after,
            end_before,
            ultraservers=ultraservers,
            ultraserver_type=ultraserver_type,
        )
        wanted = self._regions(regions)
        self.check_types([("instance_type", instance_type)], wanted)

        def one(region: str) -> list[BlockOffering]:
            items = self.ec2(region).block_offerings(
                instance_type,
                instance_count,
                duration_hours,
                start_after,
                end_before,
                ultraservers=ultraservers,
                ultraserver_type=ultraserver_type,
            )
            return [offering_of(region, item) for item in items]

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
        *,
        ultraservers: int | None = None,
        ultraserver_type: str | None = None,
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
        if earlier:
            return PurchaseAnswer(
                status="already_purchased",
                region=earlier[0].region,
                reservation=earlier[0],
                reservations=earlier,
                message=f"Already bought: Capacity Block {_ids(earlier)} carries "
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
            instance_type,
            instance_count,
            duration_hours,
            start_after,
            end_before,
            wanted,
            ultraservers=ultraservers,
            ultraserver_type=ultraserver_type,
        )
        offer = next((o for o in listing.items if o.offering_id == offering_id), None)
        if offer is None:
            failed = f" (could not search {', '.join(str(e.region) for e in listing.errors)})"
            return PurchaseAnswer(
                status="not_found",
                message=f"Offering {offering_id} is not on sale for "
                f"{rules.searched(instance_type, instance_count, ultraservers, ultraserver_type)} "
                f"for {duration_hours} h in {', '.join(wanted)}"
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
                if again:
                    return PurchaseAnswer(
                        status="purchased",
                        region=offer.region,
                        reservation=again[0],
                        reservations=again,
                        offering=offer,
                        message=f"Bought Capacity Block {_ids(again)} (the purchase answer "
                        "was lost; found by its purchase key).",
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
        # Every segment's reservation carries the purchase key (the next run finds them all
        # by it): one EC2 did not tag on create is tagged now.
        untagged = [b.id for b in bought if b.tags.get(TAG_PURCHASE_KEY) != key]
        note = ""
        if untagged:
            try:
                ec2.tag_reservations(untagged, tags)
            except AwsError as error:
                note = (
                    f" Could not tag {', '.join(untagged)} with the purchase key "
                    f"({error.code}): tag them before running the command again."
                )
        rows = [to_row(b, {}, self.lister.cluster_id, None) for b in bought]
        return PurchaseAnswer(
            status="purchased",
            region=offer.region,
            reservation=rows[0],
            reservations=rows,
            offering=offer,
            message=f"Bought Capacity Block {_ids(rows)}: {_bought(offer, rows)}." + note,
            **base,
        )

    def _purchased(
        self, key: str, regions: Sequence[str]
    ) -> tuple[list[CapacityRow], list[ItemError]]:
        """Every reservation carrying the purchase key (a purchase makes one per segment)."""

        def one(region: str) -> list[CapacityRow]:
            items = self.ec2(region).describe_reservations({f"tag:{TAG_PURCHASE_KEY}": [key]})
            return [
                to_row(Reservation.from_api(region, raw), raw, self.lister.cluster_id, None)
                for raw in items
            ]

        found, errors = fan_out(regions, one, self.max_workers)
        rows = [row for region in regions for row in found.get(region, [])]
        return rows, errors


def _bought(offer: Any, rows: Sequence[CapacityRow]) -> str:
    """What the purchase made: the offering's terms, or each segment's own where EC2 made
    segments that differ ("each with its own Availability Zone, instance type, schedule, and
    pricing", botocore 1.44.5): never one type, zone and start for them all."""
    kinds = {(r.instance_type, r.availability_zone, r.start_date, r.end_date) for r in rows}
    if len(kinds) <= 1:
        return (
            f"{offer.instance_count} x {offer.instance_type} in {offer.availability_zone} from "
            f"{offer.start_date:%Y-%m-%d %H:%M} UTC for {offer.duration_hours} h"
        )
    return " + ".join(
        f"{r.total_capacity} x {r.instance_type} in {r.availability_zone} from "
        + (f"{r.start_date:%Y-%m-%d %H:%M} UTC" if r.start_date else "a start EC2 did not say")
        + (f" for {r.duration_hours:g} h" if r.duration_hours is not None else "")
        + f" ({r.reservation_id})"
        for r in rows
    )


def _ids(rows: Sequence[CapacityRow]) -> str:
    """The reservations of one block, for a message: "cr-1" or "cr-1 (2 segments: cr-1, cr-2)"."""
    if len(rows) == 1:
        return rows[0].reservation_id
    return (
        f"{rows[0].reservation_id} ({len(rows)} segments: "
        f"{', '.join(r.reservation_id for r in rows)})"
    )


def check_offering_terms(
    instance_type: str,
    instance_count: int,
    duration_hours: int,
    start_after: datetime | None,
    end_before: datetime | None,
    *,
    ultraservers: int | None = None,
    ultraserver_type: str | None = None,
) -> None:
    """Refuse what EC2 would refuse, before asking it."""
    problems: list[tuple[str, str]] = []
    if not instance_type or rules.has_wildcard(instance_type) or "." not in instance_type:
        problems.append(("instance_type", "must be one instance type, such as p5.48xlarge"))
    if ultraservers is not None:
        # A search by UltraServers asks no instance count (botocore: UltraserverCount).
        if ultraservers < 1:
            problems.append(("ultraservers", "must be at least 1"))
    elif not 1 <= instance_count <= rules.MAX_BLOCK_INSTANCES:
        problems.append(("instance_count", f"must be between 1 and {rules.MAX_BLOCK_INSTANCES}"))
    if ultraserver_type is not None and (
        not ultraserver_type or rules.has_wildcard(ultraserver_type)
    ):
        problems.append(("ultraserver_type", "must be one UltraServer type"))
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
