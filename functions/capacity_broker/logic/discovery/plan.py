"""The reservation-type plan: the decision guide, then what exists (the seeds'
validate_training_capacity)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...adapters.aws import AwsError
from ...domain import discovery as rules
from ...models.capacity import (
    BlockOffering,
    CapacityRequest,
    PlanAnswer,
)
from ...models.common import ItemError
from .. import InvalidInput
from ..capacity import Progress
from .blocks import BlockOfferings


class Planning(BlockOfferings):
    """The reservation-type plan."""

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
        self.check_types([("instance_type", instance_type)], wanted)
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
