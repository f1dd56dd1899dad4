"""What every discovery look-up shares: the regions, the EC2 adapters, the capacity lister."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from ...adapters.aws import AwsError
from ...adapters.ec2 import Pricing
from ...models.capacity import (
    CapacityRequest,
    CapacityRow,
)
from ...models.item_error import ItemError
from ..capacity import CapacityLister, Ec2Factory, Listing, Progress, check_types, fan_out, to_row

DEFAULT_PRODUCT = "Linux/UNIX"
# Look-ups inside one region (per instance type, per price) at once.
INNER_WORKERS = 8


def utcnow() -> datetime:
    return datetime.now(UTC)


class OnDemandPrices:
    """On-Demand prices from the Price List, asked once per (type, region) per object; a
    failure is remembered as the reason savings cannot be shown (never an estimate)."""

    def __init__(self, pricing: Pricing) -> None:
        self.pricing = pricing
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


class DiscoveryBase:
    def __init__(
        self,
        default_regions: Sequence[str],
        cluster_id: str | None = None,
        max_workers: int = 16,
        *,
        ec2_for: Ec2Factory,
        pricing: Pricing,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.default_regions = list(default_regions)
        self.max_workers = max_workers
        # The lister counts blocks' hours left on this object's clock (which a test may set).
        self.lister = CapacityLister(
            cluster_id, default_regions, max_workers, ec2_for=ec2_for, clock=lambda: self.clock()
        )
        self.ec2 = self.lister.ec2
        self.on_demand = OnDemandPrices(pricing)
        # What "now" is for blocks' hours left, windows and relative dates; without a clock of
        # its own, this module's ``utcnow`` at each call (a test may replace it).
        self.clock: Callable[[], datetime] = clock or (lambda: utcnow())

    def _regions(self, regions: Sequence[str] | None) -> list[str]:
        return list(dict.fromkeys(regions or self.default_regions))

    def check_types(self, named: Sequence[tuple[str, str]], regions: Sequence[str]) -> None:
        """``InvalidInput`` for a type no region asked offers (``logic.capacity.check_types``)."""
        check_types(self.ec2, named, regions, self.max_workers)

    # -- capacity ---------------------------------------------------------------------------
    def capacity(
        self, request: CapacityRequest, progress: Progress | None = None
    ) -> Listing[CapacityRow]:
        return self.lister.rows(request, progress=progress)

    def find_reservation(
        self, reservation_id: str, regions: Sequence[str]
    ) -> tuple[CapacityRow | None, list[ItemError]]:
        """The reservation ``reservation_id`` in whichever of ``regions`` has it (ids are
        regional), as a capacity row; and the regions that could not be asked."""

        def one(region: str) -> list[CapacityRow]:
            found = self.ec2(region).reservation(reservation_id)
            if found is None:
                return []
            return [to_row(found, {}, self.lister.cluster_id, None, now=self.clock())]

        rows, errors = fan_out(regions, one, self.max_workers)
        hits = [row for region in regions for row in rows.get(region, [])]
        return (hits[0] if hits else None), errors
