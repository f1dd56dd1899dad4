"""Capacity Block extensions and block status: DescribeCapacityBlockExtensionOfferings,
PurchaseCapacityBlockExtension, DescribeCapacityBlockExtensionHistory and
DescribeCapacityBlockStatus, which moto does not have.

EC2 User Guide, "Extend Capacity Blocks": a block must be ``active`` or ``scheduled`` and have
no extension ``payment-pending``; it can be extended "up to a minimum of 1 hour or a maximum
of 56 days before it expires", by "1-day increments up to 14 days, and 7-day increments up to
182 days"; "Capacity Blocks can only be extended if there is sufficient capacity available";
"The extension will remain in payment-pending until the bill is paid. If your payment can't be
processed within 12 hours, or up to 35 minutes before the Capacity Block is scheduled to end
(whichever comes first), your extension is not successful and the status changes to
payment-failed. Your Capacity Block reservation will remain active and will terminate on the
original end date"; once paid, "the end date of the Capacity Block reservation is updated".
The capacity an extension needs comes from the scenario's supply in the block's AZ
(``models.offerings``): the same supply new blocks are sold from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from ..exceptions import client_error
from ..state import world
from .expiry import Expiry
from .offerings import Purchase, valid_duration
from .reservations import CapacityReservation

# The emulator's own reading of "Extend Capacity Blocks" (never the broker's domain/blocks.py):
# "You can request to extend the duration of your Capacity Block up to a minimum of 1 hour or a
# maximum of 56 days before it expires."
EXTEND_AT_LEAST_BEFORE_END = timedelta(hours=1)
EXTEND_AT_MOST_BEFORE_END = timedelta(days=56)
# "... and 7-day increments up to 182 days (26 weeks) total": the block with its extensions.
MAX_TOTAL = timedelta(days=182)
# "If your payment can't be processed within 12 hours, or up to 35 minutes before the Capacity
# Block is scheduled to end (whichever comes first), your extension is not successful".
PAYMENT_WINDOW = timedelta(hours=12)
PAYMENT_CUTOFF_BEFORE_END = timedelta(minutes=35)
INTERCONNECT_STATUSES = ("ok", "impaired", "insufficient-data")


@dataclass(frozen=True)
class ExtensionOffer:
    id: str
    reservation_id: str
    supply_index: int
    block_end: datetime
    hours: int
    fee: Decimal
    currency: str


@dataclass
class Extension:
    """One extension bought for a block (what DescribeCapacityBlockExtensionHistory lists)."""

    offer: ExtensionOffer
    reservation: CapacityReservation
    purchased: datetime
    paid_at: datetime | None
    fails_at: datetime
    status: str = "payment-pending"

    def to_dict(self) -> dict[str, Any]:
        r = self.reservation
        return {
            "CapacityReservationId": r.id,
            "InstanceType": r.instance_type,
            "InstanceCount": r.total_instance_count,
            "AvailabilityZone": r.availability_zone,
            "AvailabilityZoneId": r.availability_zone_id,
            "CapacityBlockExtensionOfferingId": self.offer.id,
            "CapacityBlockExtensionDurationHours": self.offer.hours,
            "CapacityBlockExtensionStatus": self.status,
            "CapacityBlockExtensionPurchaseDate": self.purchased,
            "CapacityBlockExtensionStartDate": self.offer.block_end,
            "CapacityBlockExtensionEndDate": self.offer.block_end
            + timedelta(hours=self.offer.hours),
            "UpfrontFee": f"{self.offer.fee:.2f}",
            "CurrencyCode": self.offer.currency,
            "ZoneType": "availability-zone",
        }


def extension_offering_id(reservation_id: str, end: datetime, hours: int, sold: int) -> str:
    terms = f"{reservation_id}|{end.isoformat()}|{hours}|{sold}"
    return "cbe-" + hashlib.sha256(terms.encode()).hexdigest()[:17]


class Extensions(Expiry):
    """Extending a Capacity Block, and how its capacity stands."""

    def _extendable(self, reservation_id: str, hours: int, now: datetime) -> CapacityReservation:
        reservation = self.get(reservation_id)
        if not reservation.is_capacity_block:
            raise client_error(
                "InvalidParameterValue",
                f"The Capacity Reservation {reservation_id} is not a Capacity Block.",
            )
        if not valid_duration(hours):
            raise client_error(
                "InvalidParameterValue",
                f"The requested extension duration {hours} hours is not valid. Capacity Block "
                "extensions must be in 1-day increments up to 14 days, and in 7-day increments "
                "up to 182 days.",
            )
        if reservation.state not in ("active", "scheduled"):
            raise client_error(
                "IncorrectState",
                f"The Capacity Block {reservation_id} is in the '{reservation.state}' state "
                "and cannot be extended.",
            )
        if any(e.status == "payment-pending" for e in reservation.extensions):
            raise client_error(
                "IncorrectState",
                f"The Capacity Block {reservation_id} has an extension that is payment-pending.",
            )
        end = reservation.end_date
        assert end is not None
        if now > end - EXTEND_AT_LEAST_BEFORE_END or now < end - EXTEND_AT_MOST_BEFORE_END:
            raise client_error(
                "InvalidParameterValue",
                f"The Capacity Block {reservation_id} can be extended from 56 days to 1 hour "
                "before its end date.",
            )
        # "You can extend your Capacity Block by 1-day increments up to 14 days, and 7-day
        # increments up to 182 days (26 weeks) total" (EC2 User Guide, "Extend Capacity
        # Blocks"): the block with its extensions, not one extension alone.
        if end + timedelta(hours=hours) - reservation.start_date > MAX_TOTAL:
            raise client_error(
                "InvalidParameterValue",
                f"The Capacity Block {reservation_id} would last more than 182 days (26 weeks) "
                "in total with this extension.",
            )
        return reservation

    def _supply_for(self, reservation: CapacityReservation, hours: int) -> int | None:
        """The supply in the block's AZ with room for it over the extension, or None."""
        assert reservation.end_date is not None
        start, end = reservation.end_date, reservation.end_date + timedelta(hours=hours)
        for index, supply in enumerate(self.catalogue.supply):
            if (
                supply.availability_zone == reservation.availability_zone
                and supply.instance_type == reservation.instance_type
                and supply.free_between(start, end) >= reservation.total_instance_count
            ):
                return index
        return None

    def describe_capacity_block_extension_offerings(
        self, reservation_id: str, hours: int
    ) -> list[ExtensionOffer]:
        now = world.clock.now()
        with world.lock:
            self.refresh(now)
            reservation = self._extendable(reservation_id, hours, now)
            index = self._supply_for(reservation, hours)
            if index is None:
                return []  # "only ... if there is sufficient capacity available"
            supply = self.catalogue.supply[index]
            assert reservation.end_date is not None
            offer = ExtensionOffer(
                id=extension_offering_id(
                    reservation.id, reservation.end_date, hours, len(supply.purchases)
                ),
                reservation_id=reservation.id,
                supply_index=index,
                block_end=reservation.end_date,
                hours=hours,
                fee=supply.price_per_instance_hour * reservation.total_instance_count * hours,
                currency=supply.currency,
            )
            self.extension_offers[offer.id] = offer
            return [offer]

    def offer_dict(self, offer: ExtensionOffer) -> dict[str, Any]:
        r = self.get(offer.reservation_id)
        return {
            "CapacityBlockExtensionOfferingId": offer.id,
            "InstanceType": r.instance_type,
            "InstanceCount": r.total_instance_count,
            "AvailabilityZone": r.availability_zone,
            "AvailabilityZoneId": r.availability_zone_id,
            "StartDate": r.start_date,
            "CapacityBlockExtensionStartDate": offer.block_end,
            "CapacityBlockExtensionEndDate": offer.block_end + timedelta(hours=offer.hours),
            "CapacityBlockExtensionDurationHours": offer.hours,
            "UpfrontFee": f"{offer.fee:.2f}",
            "CurrencyCode": offer.currency,
            "Tenancy": r.tenancy,
            "ZoneType": "availability-zone",
        }

    def purchase_capacity_block_extension(self, offering_id: str, reservation_id: str) -> Extension:
        now = world.clock.now()
        with world.lock:
            self.refresh(now)
            offer = self.extension_offers.get(offering_id)
            if offer is None or offer.reservation_id != reservation_id:
                raise client_error(
                    "InvalidParameterValue",
                    f"The Capacity Block extension offering '{offering_id}' does not exist.",
                )
            reservation = self._extendable(reservation_id, offer.hours, now)
            supply = self.catalogue.supply[offer.supply_index]
            assert reservation.end_date is not None
            until = offer.block_end + timedelta(hours=offer.hours)
            if (
                reservation.end_date != offer.block_end
                or supply.free_between(offer.block_end, until) < reservation.total_instance_count
            ):
                raise client_error(
                    "InvalidParameterValue",
                    f"The Capacity Block extension offering '{offering_id}' is no longer "
                    "available.",
                )
            supply.purchases.append(
                Purchase(offer.block_end, until, reservation.total_instance_count)
            )
            del self.extension_offers[offering_id]
            delay = world.settings.extension_payment_seconds
            extension = Extension(
                offer=offer,
                reservation=reservation,
                purchased=now,
                paid_at=None if delay is None else now + timedelta(seconds=delay),
                fails_at=min(now + PAYMENT_WINDOW, offer.block_end - PAYMENT_CUTOFF_BEFORE_END),
            )
            reservation.extensions.append(extension)
            self._settle_extensions(reservation, now)
            return extension

    def _settle_extensions(self, reservation: CapacityReservation, now: datetime) -> None:
        for extension in reservation.extensions:
            if extension.status != "payment-pending":
                continue
            paid = extension.paid_at is not None and extension.paid_at <= extension.fails_at
            if paid and extension.paid_at is not None and now >= extension.paid_at:
                extension.status = "payment-succeeded"
                reservation.end_date = extension.offer.block_end + timedelta(
                    hours=extension.offer.hours
                )
            elif now >= extension.fails_at:
                extension.status = "payment-failed"
                supply = self.catalogue.supply[extension.offer.supply_index]
                until = extension.offer.block_end + timedelta(hours=extension.offer.hours)
                for purchase in supply.purchases:
                    if (purchase.start, purchase.end) == (extension.offer.block_end, until):
                        supply.purchases.remove(purchase)
                        break

    def extension_history(self, ids: list[str]) -> list[Extension]:
        with world.lock:
            self.refresh()
            wanted = [self.get(i) for i in ids] if ids else list(self.reservations.values())
            return [e for r in wanted for e in r.extensions]

    # -- DescribeCapacityBlockStatus ----------------------------------------------------------

    def block_statuses(self, block_ids: list[str]) -> list[list[CapacityReservation]]:
        """Each block asked for (every block without ids) with all its reservations: a
        purchase of several segments is one block ("CapacityReservationStatuses: The
        availability of capacity for the Capacity Block reservations", botocore 1.44.5)."""
        with world.lock:
            self.refresh()
            by_id: dict[str, list[CapacityReservation]] = {}
            for r in self.reservations.values():
                if r.capacity_block_id:
                    by_id.setdefault(r.capacity_block_id, []).append(r)
            if not block_ids:
                return list(by_id.values())
            for block_id in block_ids:
                if block_id not in by_id:
                    raise client_error(
                        "InvalidCapacityBlockId.NotFound",
                        f"The Capacity Block ID '{block_id}' does not exist",
                    )
            return [by_id[b] for b in dict.fromkeys(block_ids)]


def interconnect_status(block: list[CapacityReservation]) -> str:
    """What the block's accelerator interconnect reports: a segment's scenario word (the
    worst), else ``ok`` for a running block and ``insufficient-data`` for one with no
    instances yet (chosen: EC2 documents the three values, not when each appears)."""
    said = [r.interconnect for r in block if r.interconnect is not None]
    for word in ("impaired", "insufficient-data", "ok"):
        if word in said:
            return word
    return "ok" if all(r.state == "active" for r in block) else "insufficient-data"


def _counts(reservation: CapacityReservation) -> dict[str, int]:
    """One reservation's capacity as botocore 1.44.5's CapacityReservationStatus words it:
    Available "the amount of resources that can be launched", Unavailable "the capacity is in
    use by resources that are running in the Capacity Reservation". The block's own
    TotalUnavailableCapacity says "unavailable for use due to a system status check failure":
    chosen, both count (instances in use, and a scenario's ``unavailable`` failing checks),
    since TotalCapacity is "the combined amount of Available and Unavailable capacity"."""
    if reservation.state != "active":
        return {"TotalCapacity": 0, "TotalAvailableCapacity": 0, "TotalUnavailableCapacity": 0}
    total = reservation.total_instance_count
    unavailable = min(reservation.used_instance_count + reservation.unavailable_count, total)
    return {
        "TotalCapacity": total,
        "TotalAvailableCapacity": total - unavailable,
        "TotalUnavailableCapacity": unavailable,
    }


def block_status(block: list[CapacityReservation]) -> dict[str, Any]:
    """DescribeCapacityBlockStatus's item: the block's totals, and each reservation's."""
    each = [{"CapacityReservationId": r.id, **_counts(r)} for r in block]
    totals = {
        key: sum(int(str(item[key])) for item in each)
        for key in ("TotalCapacity", "TotalAvailableCapacity", "TotalUnavailableCapacity")
    }
    return {
        "CapacityBlockId": block[0].capacity_block_id,
        "InterconnectStatus": interconnect_status(block),
        **totals,
        "CapacityReservationStatuses": each,
    }


# -- DescribeCapacityBlocks ---------------------------------------------------------------------
# A Capacity Block as DescribeCapacityBlocks shows it (botocore's ``CapacityBlock``): the block
# a purchase made, and the Capacity Reservations it holds ("When a Capacity Block offering
# contains multiple segments, a separate Capacity Reservation is created for each segment",
# PurchaseCapacityBlock). The block's dates, zone, type and state are its reservations' (they
# share them); its tags are those of its first reservation (the purchase tags them alike).


def capacity_blocks(backend: Any, block_ids: list[str]) -> list[list[CapacityReservation]]:
    """The reservations of each Capacity Block, in the order bought (``block_ids``: those
    only; an unknown one is ``InvalidCapacityBlockId.NotFound``, as DescribeCapacityBlockStatus
    answers it)."""
    with world.lock:
        backend.refresh()
        blocks: dict[str, list[CapacityReservation]] = {}
        for reservation in backend.reservations.values():
            if reservation.capacity_block_id:
                blocks.setdefault(reservation.capacity_block_id, []).append(reservation)
    for block_id in block_ids:
        if block_id not in blocks:
            raise client_error(
                "InvalidCapacityBlockId.NotFound",
                f"The Capacity Block ID '{block_id}' does not exist",
            )
    if block_ids:
        return [blocks[b] for b in dict.fromkeys(block_ids)]
    return sorted(blocks.values(), key=lambda parts: (parts[0].create_date, parts[0].id))


def capacity_block(parts: list[CapacityReservation], tags: dict[str, str]) -> dict[str, Any]:
    first = parts[0]
    item: dict[str, Any] = {
        "CapacityBlockId": first.capacity_block_id,
        "AvailabilityZone": first.availability_zone,
        "AvailabilityZoneId": first.availability_zone_id,
        "CapacityReservationIds": [r.id for r in parts],
        "StartDate": first.start_date,
        "EndDate": first.end_date,
        "CreateDate": first.create_date,
        "State": first.state,
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }
    if first.ultraserver_type:
        item["UltraserverType"] = first.ultraserver_type
    return item


def capacity_block_filter(item: dict[str, Any], name: str) -> list[str]:
    """What a DescribeCapacityBlocks filter compares with (its documented filters, each as its
    line reads): ``ultraserver-type`` is "The Capacity Block type. The type can be instances or
    ultraservers"; ``tags`` "The tags assigned to the Capacity Block", whose value's form EC2
    does not give: a tag's key or its value matches."""
    if name == "ultraserver-type":
        return ["ultraservers" if item.get("UltraserverType") else "instances"]
    if name == "tags":
        return [text for tag in item["Tags"] for text in (tag["Key"], tag["Value"])]
    field = {
        "capacity-block-id": "CapacityBlockId",
        "availability-zone": "AvailabilityZone",
        "start-date": "StartDate",
        "end-date": "EndDate",
        "create-date": "CreateDate",
        "state": "State",
    }.get(name)
    if field is None:
        raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")
    value = item.get(field)
    if isinstance(value, datetime):
        return [value.strftime("%Y-%m-%dT%H:%M:%S.000Z")]
    return [str(value)] if value is not None else []


# -- GetCapacityReservationUsage --------------------------------------------------------------


def reservation_usage(reservation: CapacityReservation, state: str) -> dict[str, Any]:
    """GetCapacityReservationUsage: "If the Capacity Reservation is not shared, it shows only
    the Capacity Reservation owner's usage" (the emulator shares none): the owner's instances in
    it, ``InstanceUsages`` of one account."""
    used = reservation.total_instance_count - reservation.available_instance_count
    return {
        "CapacityReservationId": reservation.id,
        "InstanceType": reservation.instance_type,
        "TotalInstanceCount": reservation.total_instance_count,
        "AvailableInstanceCount": reservation.available_instance_count,
        "State": state,
        "InstanceUsages": [{"AccountId": reservation.owner_id, "UsedInstanceCount": used}],
    }
