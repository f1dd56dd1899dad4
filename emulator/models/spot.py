"""Spot prices for one account and region, seeded by scenarios (``spot_prices``).

moto answers DescribeSpotPriceHistory with one made-up price (0.00001, dated 2006) for every
offering; the broker needs real-looking prices with a history, EC2's time-window semantics
and pagination. Prices live beside moto's EC2 backend (like ``capacity_backend``), so moto's
reset clears them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from moto.ec2.models import EC2Backend

from ..exceptions import client_error
from .filters import compile_value

DEFAULT_PRODUCT = "Linux/UNIX"
# botocore's model (DescribeSpotPriceHistory.Filters).
_FILTERS = {
    "availability-zone",
    "availability-zone-id",
    "instance-type",
    "product-description",
    "spot-price",
    "timestamp",
}
_lock = threading.Lock()


@dataclass(frozen=True)
class SpotPrice:
    instance_type: str
    availability_zone: str
    product_description: str
    price: Decimal
    timestamp: datetime
    availability_zone_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "AvailabilityZone": self.availability_zone,
            "AvailabilityZoneId": self.availability_zone_id,
            "InstanceType": self.instance_type,
            "ProductDescription": self.product_description,
            "SpotPrice": f"{self.price:f}",
            "Timestamp": self.timestamp,
        }

    def filter_value(self, name: str) -> str:
        return {
            "availability-zone": self.availability_zone,
            "availability-zone-id": self.availability_zone_id,
            "instance-type": self.instance_type,
            "product-description": self.product_description,
            "spot-price": f"{self.price:f}",
            "timestamp": self.timestamp.isoformat(),
        }[name]


class SpotMarket:
    def __init__(self, region: str) -> None:
        self.region = region
        self.prices: list[SpotPrice] = []

    def add(
        self,
        instance_type: str,
        availability_zone: str,
        price: Decimal,
        timestamp: datetime,
        product_description: str = DEFAULT_PRODUCT,
        availability_zone_id: str = "",
    ) -> SpotPrice:
        point = SpotPrice(
            instance_type,
            availability_zone,
            product_description,
            price,
            timestamp,
            availability_zone_id,
        )
        with _lock:
            self.prices.append(point)
        return point

    def history(
        self,
        now: datetime,
        instance_types: Iterable[str] = (),
        products: Iterable[str] = (),
        availability_zones: Iterable[str] = (),
        start: datetime | None = None,
        end: datetime | None = None,
        filters: Mapping[str, list[str]] | None = None,
    ) -> list[SpotPrice]:
        """EC2's rules: price changes between ``start`` and ``end`` (default now), plus the
        last change before ``start`` (the price in effect at ``start``); without ``start``,
        the whole history up to ``end``. Newest first."""
        for name in filters or {}:
            if name not in _FILTERS:
                raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        if start is not None and end is not None and end < start:
            raise client_error(
                "InvalidParameterValue", "The end time must be later than the start time."
            )
        end = end or now
        types, wanted_products, zones = set(instance_types), set(products), set(availability_zones)
        patterns = {
            name: [compile_value(str(v)) for v in values]
            for name, values in (filters or {}).items()
        }
        series: dict[tuple[str, str, str], list[SpotPrice]] = {}
        with _lock:
            points = list(self.prices)
        for point in points:
            if types and point.instance_type not in types:
                continue
            if wanted_products and point.product_description not in wanted_products:
                continue
            if zones and point.availability_zone not in zones:
                continue
            if not all(
                any(p.match(point.filter_value(name)) for p in compiled)
                for name, compiled in patterns.items()
            ):
                continue
            key = (point.instance_type, point.availability_zone, point.product_description)
            series.setdefault(key, []).append(point)
        found: list[SpotPrice] = []
        for items in series.values():
            items.sort(key=lambda p: p.timestamp)
            inside = [
                p for p in items if p.timestamp <= end and (start is None or p.timestamp >= start)
            ]
            if start is not None:
                before = [p for p in items if p.timestamp < start]
                if before:
                    inside.insert(0, before[-1])
            found.extend(inside)
        found.sort(key=lambda p: (-p.timestamp.timestamp(), p.instance_type, p.availability_zone))
        return found


def spot_market(ec2: EC2Backend) -> SpotMarket:
    """The Spot prices that live beside moto's EC2 backend for one account and region."""
    market = ec2.__dict__.get("_spot")
    if market is None:
        with _lock:
            market = ec2.__dict__.get("_spot")
            if market is None:
                market = ec2.__dict__["_spot"] = SpotMarket(ec2.region_name)
    return market
