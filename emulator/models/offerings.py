"""The Capacity Block catalogue: supply that DescribeCapacityBlockOfferings turns into offers.

A scenario declares *supply* (an instance type in an AZ, up to N instances, bookable from an
earliest to a latest start, at a price per instance-hour). A search for (type, count,
duration, date range) yields one offering per daily start time where the supply still has
``count`` instances free over the whole block, the way EC2 offers blocks that start at
11:30 UTC. Offering ids are derived from their terms and from how much of the supply has been
sold, so a search repeated later names the same offering until a purchase from that supply
re-issues them (the terms bought stay on offer, under a new id, while supply lasts).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import Any

from ..exceptions import client_error

MAX_BLOCK_INSTANCES = 64
BLOCK_START = time(11, 30)


def valid_duration(hours: int) -> bool:
    """EC2's durations: 1-day steps up to 14 days, then 7-day steps up to 182 days."""
    if hours <= 0 or hours % 24:
        return False
    days = hours // 24
    return days <= 14 or (days % 7 == 0 and days <= 182)


@dataclass
class Purchase:
    start: datetime
    end: datetime
    count: int


@dataclass
class BlockSupply:
    region: str
    availability_zone: str
    instance_type: str
    max_instance_count: int
    price_per_instance_hour: Decimal
    earliest_start: datetime
    latest_start: datetime
    currency: str = "USD"
    tenancy: str = "default"
    ultraserver_type: str | None = None
    # How many reservations a purchase of this supply makes (one per segment of the block).
    segments: int = 1
    purchases: list[Purchase] = field(default_factory=list)

    def free_between(self, start: datetime, end: datetime) -> int:
        taken = sum(p.count for p in self.purchases if p.start < end and start < p.end)
        return self.max_instance_count - taken


@dataclass(frozen=True)
class Offering:
    id: str
    supply_index: int
    instance_type: str
    availability_zone: str
    instance_count: int
    start: datetime
    end: datetime
    duration_hours: int
    upfront_fee: Decimal
    currency: str
    tenancy: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "CapacityBlockOfferingId": self.id,
            "InstanceType": self.instance_type,
            "AvailabilityZone": self.availability_zone,
            "InstanceCount": self.instance_count,
            "StartDate": self.start,
            "EndDate": self.end,
            "CapacityBlockDurationHours": self.duration_hours,
            "UpfrontFee": f"{self.upfront_fee:.2f}",
            "CurrencyCode": self.currency,
            "Tenancy": self.tenancy,
        }


def offering_id(
    region: str, index: int, count: int, start: datetime, hours: int, sold: int = 0
) -> str:
    terms = f"{region}|{index}|{count}|{start.isoformat()}|{hours}|{sold}"
    digest = hashlib.sha256(terms.encode())
    return "cb-" + digest.hexdigest()[:17]


class Catalogue:
    def __init__(self, region: str) -> None:
        self.region = region
        self.supply: list[BlockSupply] = []
        self.bought: set[str] = set()
        self._issued: dict[str, Offering] = {}

    def search(
        self,
        instance_types: list[str],
        instance_count: int,
        duration_hours: int,
        now: datetime,
        start_range: datetime | None,
        end_range: datetime | None,
    ) -> list[Offering]:
        if not valid_duration(duration_hours):
            raise client_error(
                "InvalidParameterValue",
                f"The requested duration {duration_hours} hours is not valid. Capacity Block "
                "durations must be in 1-day increments up to 14 days, and in 7-day increments "
                "up to 182 days.",
            )
        if not 1 <= instance_count <= MAX_BLOCK_INSTANCES:
            raise client_error(
                "InvalidParameterValue",
                f"InstanceCount must be between 1 and {MAX_BLOCK_INSTANCES}.",
            )
        duration = timedelta(hours=duration_hours)
        earliest = max(now, start_range) if start_range else now
        horizon = now + timedelta(weeks=8)
        offers: list[Offering] = []
        for index, supply in enumerate(self.supply):
            if supply.instance_type not in instance_types:
                continue
            day = datetime.combine(earliest.date(), BLOCK_START, tzinfo=earliest.tzinfo)
            while day <= min(supply.latest_start, horizon):
                start, end = day, day + duration
                day += timedelta(days=1)
                if start < earliest or start < supply.earliest_start:
                    continue
                if end_range is not None and end > end_range:
                    continue
                if supply.free_between(start, end) < instance_count:
                    continue
                oid = offering_id(
                    self.region, index, instance_count, start, duration_hours, len(supply.purchases)
                )
                if oid in self.bought:
                    continue
                fee = supply.price_per_instance_hour * instance_count * duration_hours
                offer = Offering(
                    id=oid,
                    supply_index=index,
                    instance_type=supply.instance_type,
                    availability_zone=supply.availability_zone,
                    instance_count=instance_count,
                    start=start,
                    end=end,
                    duration_hours=duration_hours,
                    upfront_fee=fee,
                    currency=supply.currency,
                    tenancy=supply.tenancy,
                )
                self._issued[oid] = offer
                offers.append(offer)
        # Earliest first across every supply (then by zone and price): a stable order to page.
        offers.sort(key=lambda o: (o.start, o.availability_zone, o.upfront_fee, o.id))
        return offers

    def take(self, oid: str, now: datetime) -> Offering:
        offer = self._issued.get(oid)
        if offer is None or oid in self.bought:
            state = "does not exist" if offer is None else "is no longer available"
            raise client_error(
                "InvalidParameterValue", f"The Capacity Block offering '{oid}' {state}."
            )
        supply = self.supply[offer.supply_index]
        if offer.start < now or supply.free_between(offer.start, offer.end) < offer.instance_count:
            raise client_error(
                "InvalidParameterValue",
                f"The Capacity Block offering '{oid}' is no longer available.",
            )
        supply.purchases.append(Purchase(offer.start, offer.end, offer.instance_count))
        self.bought.add(oid)
        return offer
