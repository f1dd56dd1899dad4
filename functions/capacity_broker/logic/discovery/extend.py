"""Extending a Capacity Block: what EC2 offers, and buying it at most once.

PurchaseCapacityBlockExtension has no ClientToken and an extension cannot be undone, so the
purchase is guarded like a block purchase (``blocks.BlockOfferings.purchase``): EC2's own
record of the block's extensions (DescribeCapacityBlockExtensionHistory) is read before
buying, and a request that was already bought (``domain.blocks.earlier_extension``) answers
``already_extended``; the purchase call is made once, and an unclear failure is resolved by
reading that history again, never by buying again. The idempotency key names the request:
the block, the length, and the end it extends from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ...adapters.aws import AwsError
from ...domain import blocks as block_rules
from ...domain import discovery as rules
from ...domain.errors import ErrorClass
from ...models.capacity import CapacityRow
from ...models.discovery import BlockExtension, ExtendAnswer, ExtensionOffer
from .. import InvalidInput
from ..capacity import to_row
from .base import DiscoveryBase


def extension_key(reservation_id: str, hours: int, extends_from: datetime) -> str:
    """Deterministic: the same block, length and starting end give the same key."""
    terms = f"{reservation_id}|{hours}|{extends_from.isoformat()}"
    return "ek-" + hashlib.sha256(terms.encode()).hexdigest()[:24]


def _offer(region: str, reservation_id: str, item: Mapping[str, Any]) -> ExtensionOffer:
    return ExtensionOffer(
        offering_id=item["CapacityBlockExtensionOfferingId"],
        reservation_id=reservation_id,
        region=region,
        instance_type=item.get("InstanceType", ""),
        instance_count=int(item.get("InstanceCount") or 0),
        availability_zone=item.get("AvailabilityZone"),
        start_date=item.get("CapacityBlockExtensionStartDate"),
        end_date=item.get("CapacityBlockExtensionEndDate"),
        duration_hours=int(item.get("CapacityBlockExtensionDurationHours") or 0),
        upfront_fee=rules.parse_price(item.get("UpfrontFee")),
        currency=item.get("CurrencyCode"),
    )


def _bought(item: Mapping[str, Any]) -> block_rules.Bought:
    return block_rules.Bought(
        status=str(item.get("CapacityBlockExtensionStatus") or ""),
        hours=int(item.get("CapacityBlockExtensionDurationHours") or 0),
        start=item.get("CapacityBlockExtensionStartDate"),
        end=item.get("CapacityBlockExtensionEndDate"),
        purchased=item.get("CapacityBlockExtensionPurchaseDate"),
    )


def _extension(item: Mapping[str, Any]) -> BlockExtension:
    return BlockExtension(
        offering_id=item.get("CapacityBlockExtensionOfferingId"),
        status=str(item.get("CapacityBlockExtensionStatus") or ""),
        duration_hours=int(item.get("CapacityBlockExtensionDurationHours") or 0),
        purchase_date=item.get("CapacityBlockExtensionPurchaseDate"),
        start_date=item.get("CapacityBlockExtensionStartDate"),
        end_date=item.get("CapacityBlockExtensionEndDate"),
        upfront_fee=rules.parse_price(item.get("UpfrontFee")),
        currency=item.get("CurrencyCode"),
    )


class BlockExtensions(DiscoveryBase):
    """What extending a Capacity Block costs, and the purchase of it."""

    def extension_offers(
        self, region: str, reservation_id: str, hours: int
    ) -> list[ExtensionOffer]:
        """EC2's extension offerings of ``hours`` for the block, cheapest first."""
        items = self.ec2(region).block_extension_offerings(reservation_id, hours)
        offers = [_offer(region, reservation_id, item) for item in items]
        return sorted(offers, key=lambda o: (o.upfront_fee is None, o.upfront_fee or 0.0))

    def extend(
        self,
        reservation_id: str,
        hours: int,
        regions: Sequence[str] | None = None,
        *,
        buy: bool = True,
        again: bool = False,
    ) -> ExtendAnswer:
        """Extend the Capacity Block ``reservation_id`` by ``hours`` (``buy=False``: only say
        what EC2 offers and what it costs). ``again``: buy another extension of the same length
        even when one was bought for this block within ``REPEAT_WINDOW``."""
        if not reservation_id.startswith("cr-"):
            raise InvalidInput([("reservation_id", "must be a Capacity Block's id (cr-...)")])
        message = rules.block_duration_error(hours)
        if message:
            raise InvalidInput([("days", message.replace("Capacity Block", "extension"))])
        wanted = self._regions(regions)
        row, errors = self.find_reservation(reservation_id, wanted)
        if row is None:
            if errors:
                return ExtendAnswer(
                    status="error",
                    reservation_id=reservation_id,
                    duration_hours=hours,
                    idempotency_key="",
                    error_code=errors[0].error_code,
                    message="Could not look for the block in "
                    + ", ".join(f"{e.region} ({e.error_code})" for e in errors)
                    + "; nothing was bought.",
                )
            raise InvalidInput(
                [("reservation_id", f"no reservation {reservation_id} in {', '.join(wanted)}")]
            )
        if not row.is_capacity_block or row.end_date is None:
            raise InvalidInput(
                [("reservation_id", f"{reservation_id} is an ODCR, not a Capacity Block")]
            )
        segments = self._segments(row)
        if len(segments) > 1:
            return self._extend_block(row, segments, hours, buy=buy, again=again)
        return self._extend_one(row, hours, buy=buy, again=again)

    def _segments(self, row: CapacityRow) -> list[CapacityRow]:
        """Every reservation of ``row``'s block (the segments of one purchase), ``row`` first;
        just ``row`` when it is a block of one."""
        if not row.capacity_block_id:
            return [row]
        found = self.ec2(row.region).reservations()
        others = [
            to_row(r, {}, self.lister.cluster_id, None, now=self.clock())
            for r in found
            if r.capacity_block_id == row.capacity_block_id and r.id != row.reservation_id
        ]
        return [row, *sorted(others, key=lambda r: r.reservation_id)]

    def _extend_block(
        self, row: CapacityRow, segments: list[CapacityRow], hours: int, *, buy: bool, again: bool
    ) -> ExtendAnswer:
        """Extend every segment of the block by ``hours``, or none: each segment is first asked
        what EC2 offers (nothing bought), and only when every one can be extended (or already
        is) is each bought, so the block never ends up with segments ending apart."""
        block = row.capacity_block_id
        looked = [self._extend_one(s, hours, buy=False, again=again) for s in segments]
        blocked = [a for a in looked if a.status not in ("offered", "already_extended")]
        if blocked or not buy:
            first = blocked[0] if blocked else looked[0]
            fees = [a.offer.upfront_fee if a.offer else None for a in looked]
            total = (
                f" ({sum(f for f in fees if f is not None):,.2f} "
                f"{next((a.offer.currency for a in looked if a.offer), None) or 'USD'} in all)"
                if not blocked and None not in fees
                else ""
            )
            said = (
                f"Capacity Block {block} is {len(segments)} segments, extended together or not "
                "at all: "
                + "; ".join(a.message.rstrip(".") for a in looked)
                + f". Nothing was bought{total}."
            )
            return first.model_copy(
                update={
                    "reservation_id": row.reservation_id,
                    "segments": looked,
                    "message": said,
                    "status": first.status if blocked else "offered",
                }
            )
        bought = [
            a
            if a.status == "already_extended"
            else self._extend_one(s, hours, buy=True, again=again)
            for s, a in zip(segments, looked, strict=True)
        ]
        done = all(a.status in ("extended", "already_extended") for a in bought)
        statuses = {a.status for a in bought}
        status = (
            "already_extended"
            if statuses == {"already_extended"}
            else "extended"
            if done
            else next(a.status for a in bought if a.status not in ("extended", "already_extended"))
        )
        return bought[0].model_copy(
            update={
                "reservation_id": row.reservation_id,
                "status": status,
                "segments": bought,
                "message": f"Capacity Block {block} ({len(segments)} segments): "
                + "; ".join(a.message.rstrip(".") for a in bought)
                + ".",
            }
        )

    def _extend_one(self, row: CapacityRow, hours: int, *, buy: bool, again: bool) -> ExtendAnswer:
        """Extend the one reservation ``row`` (see ``extend``)."""
        assert row.end_date is not None
        reservation_id = row.reservation_id
        ec2 = self.ec2(row.region)
        now = self.clock()
        items = ec2.block_extensions([reservation_id])
        history = [_bought(i) for i in items]
        base: dict[str, Any] = {
            "reservation_id": reservation_id,
            "region": row.region,
            "duration_hours": hours,
            "reservation": row,
            "idempotency_key": extension_key(reservation_id, hours, row.end_date),
        }
        earlier = block_rules.earlier_extension(history, hours, row.end_date, now, again)
        if earlier is not None:
            match = items[history.index(earlier)]
            if earlier.start is not None:
                base["idempotency_key"] = extension_key(reservation_id, hours, earlier.start)
            hint = (
                ""
                if earlier.status == "payment-pending"
                else " (again=True, or --again, buys another extension of the same length)"
            )
            return ExtendAnswer(
                status="already_extended",
                extension=_extension(match),
                message=f"Already extended: {reservation_id} has an extension of {hours} h "
                f"({earlier.status}) bought {_at(earlier.purchased)}; nothing was bought "
                f"again{hint}.",
                **base,
            )
        refusal = block_rules.extension_refusal(
            row.state,
            row.end_date,
            hours,
            now,
            payment_pending=block_rules.pending_extension(history) is not None,
            start_date=row.start_date,
        )
        if refusal is not None:
            return ExtendAnswer(
                status="refused",
                message=f"EC2 would not extend {reservation_id}: {refusal}; nothing was bought.",
                **base,
            )
        offers = self.extension_offers(row.region, reservation_id, hours)
        if not offers:
            return ExtendAnswer(
                status="not_offered",
                message=f"EC2 offers no {hours} h extension of {reservation_id} now (capacity "
                "for it is not there); nothing was bought.",
                **base,
            )
        offer = offers[0]
        if not buy:
            return ExtendAnswer(
                status="offered",
                offer=offer,
                message=f"Extending {reservation_id} by {hours} h costs {_fee(offer)} up front: "
                f"it would end {_at(offer.end_date)} instead of {_at(offer.start_date)}.",
                **base,
            )
        try:
            bought = ec2.purchase_block_extension(offer.offering_id, reservation_id)
        except AwsError as error:
            if error.code is None or error.error_class is ErrorClass.TRANSIENT:
                items = ec2.block_extensions([reservation_id])
                again_found = block_rules.earlier_extension(
                    [_bought(i) for i in items], hours, row.end_date, self.clock()
                )
                if again_found is not None:
                    match = items[[_bought(i) for i in items].index(again_found)]
                    return ExtendAnswer(
                        status="extended",
                        offer=offer,
                        extension=_extension(match),
                        message=f"Extended {reservation_id} by {hours} h (the purchase answer "
                        "was lost; found in the block's extension history).",
                        **base,
                    )
                return ExtendAnswer(
                    status="unknown",
                    offer=offer,
                    error_code=error.code or "RequestTimeout",
                    message="The extension purchase failed without a clear answer and the "
                    "block's history shows none yet. Run the same command again to check: it "
                    "never buys twice.",
                    **base,
                )
            return ExtendAnswer(
                status="error",
                offer=offer,
                error_code=error.code,
                message=f"EC2 refused the extension, nothing was bought: {error.message}"[:500],
                **base,
            )
        return ExtendAnswer(
            status="extended",
            offer=offer,
            extension=_extension(bought) if bought else None,
            message=f"Extended {reservation_id} by {hours} h for {_fee(offer)}: it ends "
            f"{_at(offer.end_date)} once EC2 has the payment (status "
            f"{bought.get('CapacityBlockExtensionStatus', 'unknown')}).",
            **base,
        )


def _at(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment is not None else "at an unknown time"


def _fee(offer: ExtensionOffer) -> str:
    if offer.upfront_fee is None:
        return "an unknown fee"
    return f"{offer.upfront_fee:,.2f} {offer.currency or 'USD'}"
