"""Spot prices, and the savings against the On-Demand price from the AWS Price List."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from ...domain import discovery as rules
from ...models.discovery import SpotPriceRow
from ..capacity import Listing, Progress, fan_out
from .base import DEFAULT_PRODUCT, INNER_WORKERS, DiscoveryBase


class SpotPrices(DiscoveryBase):
    """Spot prices per type and AZ, with savings when asked."""

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
        self.check_types([("instance_type", p) for p in patterns], wanted)
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
