"""The Capacity Block catalogue: supply that DescribeCapacityBlockOfferings turns into offers.

A scenario declares *supply* (an instance type in an AZ, up to N instances, bookable from an
earliest to a latest start, at a price per instance-hour). A search for (type, count,
duration, date range) yields the blocks the supply still has ``count`` instances free for,
as the EC2 User Guide describes them ("Find and purchase Capacity Blocks"): "All Capacity
Blocks end at 11:30AM UTC, so the blocks starting on the same day will have durations that are
the closest match to your desired duration. One block will have a duration that is slightly
less than your desired duration, while the other will have a duration slightly greater than
your desired duration." So: the two same-day blocks (starting now, ending at 11:30 before and
after the length asked; ``Settings.same_day_offerings``) and one block per later day, from
11:30 to 11:30. Offering ids are derived from their terms and from how much of the supply has been
sold, so a search repeated later names the same offering until a purchase from that supply
re-issues them (the terms bought stay on offer, under a new id, while supply lasts).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import Any

from ..exceptions import client_error

# botocore 1.44.5, DescribeCapacityBlockOfferings.InstanceCount: "Each Capacity Block can have
# up to 64 instances".
MAX_BLOCK_INSTANCES = 64
# "All Capacity Blocks end at 11:30AM UTC" (EC2 User Guide, "Find and purchase Capacity
# Blocks"): a block that is not a same-day one starts at that time too.
BLOCK_END = time(11, 30)
# A same-day block starts at the next whole 5 minutes (chosen: AWS's examples are 04:55 and
# 08:55, botocore's CapacityBlockDurationHours/Minutes; it documents no step).
SAME_DAY_STEP = timedelta(minutes=5)


def valid_duration(hours: int) -> bool:
    """EC2's durations, botocore 1.44.5 DescribeCapacityBlockOfferings.CapacityDurationHours:
    "You must specify the duration in 1-day increments up 14 days, and in 7-day increments up
    to 182 days"."""
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
    # Instances per UltraServer, for searches by UltraserverCount (chosen: botocore says how
    # many UltraServers an offering has, not how many instances each holds).
    instances_per_ultraserver: int = 1
    # How many reservations a purchase of this supply makes (one per segment of the block),
    # and, when the segments sit in different zones, each one's zone (botocore 1.44.5: "Each
    # segment describes a distinct block of capacity with its own Availability Zone, instance
    # type, schedule, and pricing").
    segments: int = 1
    segment_zones: tuple[str, ...] = ()
    # Each segment's instance type and how many hours after the offering's start it starts,
    # in turn, when they differ (the same sentence: "its own ... instance type, schedule").
    # Chosen: AWS says segments may differ, not how; a segment ends with its offering (every
    # block ends at 11:30 UTC) and is priced at the supply's rate for its own hours.
    segment_types: tuple[str, ...] = ()
    segment_start_hours: tuple[int, ...] = ()
    # botocore's ZoneType ("availability-zone", "local-zone").
    zone_type: str = "availability-zone"
    purchases: list[Purchase] = field(default_factory=list)

    def free_between(self, start: datetime, end: datetime) -> int:
        taken = sum(p.count for p in self.purchases if p.start < end and start < p.end)
        return self.max_instance_count - taken


@dataclass(frozen=True)
class Segment:
    """One part of an offering, bought as a reservation of its own."""

    availability_zone: str
    instance_count: int
    instance_type: str
    start: datetime
    end: datetime
    upfront_fee: Decimal

    @property
    def minutes(self) -> int:
        return int((self.end - self.start).total_seconds() // 60)


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
    # "The number of minutes (in addition to capacityBlockDurationHours)": a same-day block.
    duration_minutes: int = 0
    ultraserver_type: str | None = None
    ultraserver_count: int | None = None
    zone_type: str = "availability-zone"
    segments: tuple[Segment, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "CapacityBlockOfferingId": self.id,
            "InstanceType": self.instance_type,
            "AvailabilityZone": self.availability_zone,
            "InstanceCount": self.instance_count,
            "StartDate": self.start,
            "EndDate": self.end,
            "CapacityBlockDurationHours": self.duration_hours,
            "CapacityBlockDurationMinutes": self.duration_minutes,
            "UpfrontFee": f"{self.upfront_fee:.2f}",
            "CurrencyCode": self.currency,
            "Tenancy": self.tenancy,
            "ZoneType": self.zone_type,
        }
        if self.ultraserver_type is not None:
            data["UltraserverType"] = self.ultraserver_type
            data["UltraserverCount"] = self.ultraserver_count
        if len(self.segments) > 1:
            data["CapacityBlockOfferingSegments"] = [
                {
                    "InstanceType": s.instance_type,
                    "AvailabilityZone": s.availability_zone,
                    "InstanceCount": s.instance_count,
                    "StartDate": s.start,
                    "EndDate": s.end,
                    "CapacityBlockDurationHours": s.minutes // 60,
                    "CapacityBlockDurationMinutes": s.minutes % 60,
                    "UpfrontFee": f"{s.upfront_fee:.2f}",
                    "CurrencyCode": self.currency,
                    "ZoneType": self.zone_type,
                }
                for s in self.segments
            ]
        return data


def offering_id(
    region: str, index: int, count: int, start: datetime, end: datetime, sold: int = 0
) -> str:
    terms = f"{region}|{index}|{count}|{start.isoformat()}|{end.isoformat()}|{sold}"
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
        instance_count: int | None,
        duration_hours: int,
        now: datetime,
        start_range: datetime | None,
        end_range: datetime | None,
        ultraserver_type: str | None = None,
        ultraserver_count: int | None = None,
        same_day: bool = True,
    ) -> list[Offering]:
        """``instance_count`` None (botocore requires only CapacityDurationHours): the
        largest block each supply can sell at each start, up to 64 (chosen: AWS does not say
        what it answers without a count). ``ultraserver_count``: that many UltraServers of a
        supply that sells them (``instances_per_ultraserver`` each)."""
        if not valid_duration(duration_hours):
            raise client_error(
                "InvalidParameterValue",
                f"The requested duration {duration_hours} hours is not valid. Capacity Block "
                "durations must be in 1-day increments up to 14 days, and in 7-day increments "
                "up to 182 days.",
            )
        if instance_count is not None and not 1 <= instance_count <= MAX_BLOCK_INSTANCES:
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
            if ultraserver_type is not None and supply.ultraserver_type != ultraserver_type:
                continue
            if ultraserver_count is not None and supply.ultraserver_type is None:
                continue  # an UltraServer search finds only UltraServer supply
            wanted = instance_count
            if ultraserver_count is not None:
                wanted = ultraserver_count * supply.instances_per_ultraserver
            for start, end in _blocks(earliest, now, duration, same_day):
                if start > min(supply.latest_start, horizon):
                    break
                if start < earliest or start < supply.earliest_start:
                    continue
                if end_range is not None and end > end_range:
                    continue
                free = supply.free_between(start, end)
                count = wanted if wanted is not None else min(free, MAX_BLOCK_INSTANCES)
                if count < 1 or free < count:
                    continue
                offer = self._offer(index, supply, count, start, end)
                if offer is not None:
                    offers.append(offer)
        # Earliest first across every supply (then by zone and price): a stable order to page.
        offers.sort(key=lambda o: (o.start, o.availability_zone, o.upfront_fee, o.id))
        return offers

    def _offer(
        self, index: int, supply: BlockSupply, count: int, start: datetime, end: datetime
    ) -> Offering | None:
        oid = offering_id(self.region, index, count, start, end, len(supply.purchases))
        if oid in self.bought:
            return None
        minutes = int((end - start).total_seconds() // 60)
        hours = Decimal(minutes) / 60
        parts = max(1, min(supply.segments, count))
        zones = list(supply.segment_zones) or [supply.availability_zone]
        types = list(supply.segment_types) or [supply.instance_type]
        delays = list(supply.segment_start_hours) or [0]
        segments = []
        for i in range(parts):
            size = count // parts + (1 if i < count % parts else 0)
            begins = min(start + timedelta(hours=delays[i % len(delays)]), end)
            segments.append(
                Segment(
                    availability_zone=zones[i % len(zones)],
                    instance_count=size,
                    instance_type=types[i % len(types)],
                    start=begins,
                    end=end,
                    upfront_fee=supply.price_per_instance_hour
                    * size
                    * Decimal(int((end - begins).total_seconds() // 60))
                    / 60,
                )
            )
        per_server = max(supply.instances_per_ultraserver, 1)
        offer = Offering(
            id=oid,
            supply_index=index,
            instance_type=supply.instance_type,
            availability_zone=supply.availability_zone,
            instance_count=count,
            start=start,
            end=end,
            duration_hours=minutes // 60,
            duration_minutes=minutes % 60,
            # The segments' fees together (the whole block's when they share its schedule).
            upfront_fee=sum((seg.upfront_fee for seg in segments), Decimal(0))
            if len(segments) > 1
            else supply.price_per_instance_hour * count * hours,
            currency=supply.currency,
            tenancy=supply.tenancy,
            ultraserver_type=supply.ultraserver_type,
            ultraserver_count=count // per_server if supply.ultraserver_type else None,
            zone_type=supply.zone_type,
            segments=tuple(segments),
        )
        self._issued[oid] = offer
        return offer

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


def _blocks(
    earliest: datetime, now: datetime, duration: timedelta, same_day: bool
) -> Iterator[tuple[datetime, datetime]]:
    """The (start, end) of each block a search may offer, earliest first: today's two
    same-day blocks (when ``same_day`` and the search starts today; "One block will have a
    duration that is slightly less than your desired duration, while the other will have a
    duration slightly greater"), then one from 11:30 to 11:30 per day ("All Capacity Blocks
    end at 11:30AM UTC")."""
    tz = earliest.tzinfo
    day = datetime.combine(earliest.date(), BLOCK_END, tzinfo=tz)
    if same_day and earliest.date() == now.date():
        step = SAME_DAY_STEP.total_seconds()
        start = datetime.fromtimestamp(-(-earliest.timestamp() // step) * step, tz=tz)
        if start.time() != BLOCK_END:
            asked_end = start + duration
            longer = datetime.combine(asked_end.date(), BLOCK_END, tzinfo=tz)
            if longer < asked_end:
                longer += timedelta(days=1)
            shorter = longer - timedelta(days=1)
            for end in (shorter, longer):
                if end > start:
                    yield start, end
    while True:
        yield day, day + duration
        day += timedelta(days=1)
