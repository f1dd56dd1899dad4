"""The broker's discovery calls: the capacity listing (``capacity``), Capacity Block
offerings and buying one, instance type search, Availability Zones, Spot prices and the plan.

They read AWS with this broker's session (``Discovery``); a deployed broker's ``capacity``
asks the ``<prefix>-capacity`` function instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..logic.capacity import Progress
from ..models.capacity import (
    AzRow,
    BlockOffering,
    CapacityRequest,
    CapacityResponse,
    CapacityRow,
    InstanceTypeRow,
    PlanAnswer,
    PurchaseAnswer,
    SpotPriceRow,
)
from . import regions as where
from . import when
from .base import BrokerBase, _arguments, _request
from .results import (
    BrokerError,
    InvalidArguments,
    RegionsFailed,
    ReservationType,
    Results,
)


class DiscoveryCalls(BrokerBase):
    """Capacity, offerings, purchase, search, az, spot and plan."""

    # -- capacity ---------------------------------------------------------------------------
    def capacity(
        self,
        instance_types: Sequence[str] | str | None = None,
        regions: Sequence[str] | str | None = None,
        reservation_type: ReservationType | str = ReservationType.ODCR,
        gpu_only: bool = False,
        available_only: bool = False,
        min_capacity: int | None = None,
        active_only: bool = True,
        *,
        progress: Progress | None = None,
    ) -> Results[CapacityRow]:
        """ODCRs and/or Capacity Blocks (``reservation_type``), kept apart by EC2's own
        ReservationType. ``active_only`` (default) lists ODCRs that are ``active`` and blocks
        that are ``active`` or ``scheduled``."""
        try:
            kind = ReservationType(reservation_type)
        except ValueError:
            raise InvalidArguments(
                [("reservation_type", "must be odcr, capacity-block or all (ReservationType)")]
            ) from None
        fields: dict[str, Any] = {
            "reservation_type": str(kind.value),
            "gpu_only": bool(gpu_only),
            "available_only": bool(available_only),
            "min_capacity": int(min_capacity or 0),
            "include_inactive": not active_only,
        }
        types = [t.lower() for t in where.names(instance_types)]
        if types:
            fields["instance_types"] = types
        if self.function_prefix:
            explicit = self._explicit(regions)
            if explicit:
                fields["regions"] = explicit
            fields["request_id"] = f"client-{uuid.uuid4().hex}"
            response = self._typed(CapacityResponse, self.invoke("capacity", fields))
            if response.status == "error":
                raise (
                    RegionsFailed(response.errors)
                    if response.errors
                    else BrokerError(response.message, response.to_json_dict())
                )
        else:
            fields["regions"] = self.resolve_regions(regions)
            request = _request(CapacityRequest, fields)
            with _arguments():
                response = self.discovery.lister.answer(
                    request, f"client-{uuid.uuid4().hex}", progress=progress
                )
            if response.status == "error":
                raise RegionsFailed(response.errors)
        return Results(
            response.reservations,
            response.errors,
            response.regions,
            response.summary,
            response.message,
        )

    # -- discovery --------------------------------------------------------------------------
    def offerings(
        self,
        instance_type: str,
        instance_count: int = 1,
        duration_hours: int = 24,
        start_after: datetime | str | None = None,
        end_before: datetime | str | None = None,
        regions: Sequence[str] | str | None = None,
        *,
        progress: Progress | None = None,
    ) -> Results[BlockOffering]:
        """Capacity Blocks on sale, cheapest per instance-hour first, then soonest."""
        with _arguments():
            listing = self.discovery.offerings(
                instance_type,
                instance_count,
                duration_hours,
                when.optional_moment(start_after, "start_after"),
                when.optional_moment(end_before, "end_before"),
                self.resolve_regions(regions),
                progress,
            )
        return self._results(listing)

    def purchase_capacity_block(
        self,
        offering_id: str,
        instance_type: str,
        instance_count: int = 1,
        duration_hours: int = 24,
        start_after: datetime | str | None = None,
        end_before: datetime | str | None = None,
        regions: Sequence[str] | str | None = None,
        instance_platform: str = "Linux/UNIX",
        purchase_key: str | None = None,
    ) -> PurchaseAnswer:
        """Buy one Capacity Block, at most once per offering (see ``Discovery.purchase``).
        Capacity Blocks cannot be cancelled."""
        if not offering_id:
            raise InvalidArguments([("offering_id", "is required")])
        with _arguments():
            return self.discovery.purchase(
                offering_id,
                instance_type,
                instance_count,
                duration_hours,
                when.optional_moment(start_after, "start_after"),
                when.optional_moment(end_before, "end_before"),
                self.resolve_regions(regions),
                instance_platform,
                purchase_key,
            )

    def search(
        self,
        pattern: str,
        regions: Sequence[str] | str | None = None,
        architecture: str | None = None,
        min_vcpus: int | None = None,
        min_memory: float | None = None,
        *,
        gpu_only: bool = False,
        progress: Progress | None = None,
    ) -> Results[InstanceTypeRow]:
        """Instance types matching ``pattern`` (``m7i.large``, ``m8g.*``, ``p5``) with at
        least ``min_vcpus`` vCPUs and ``min_memory`` GiB."""
        with _arguments():
            listing = self.discovery.search(
                pattern,
                self.resolve_regions(regions),
                architecture,
                min_vcpus,
                min_memory,
                gpu_only,
                progress,
            )
        return self._results(listing)

    def az(
        self,
        pattern: str,
        regions: Sequence[str] | str | None = None,
        min_az_count: int | None = None,
        azs: Sequence[str] | str | None = None,
        *,
        progress: Progress | None = None,
    ) -> Results[AzRow]:
        """Which Availability Zones offer each type (``azs``: only these, by name or id)."""
        with _arguments():
            listing = self.discovery.az(
                pattern,
                self.resolve_regions(regions),
                min_az_count,
                where.names(azs),
                progress,
            )
        return self._results(listing)

    def spot(
        self,
        pattern: str,
        regions: Sequence[str] | str | None = None,
        max_price: float | None = None,
        show_savings: bool = False,
        sort_by_price: bool = False,
        *,
        history_hours: float | None = None,
        product_description: str = "Linux/UNIX",
        progress: Progress | None = None,
    ) -> Results[SpotPriceRow]:
        """Current Spot prices per type and AZ. ``show_savings`` adds the On-Demand price from
        the AWS Price List, or says why it is unavailable (never an estimate)."""
        with _arguments():
            listing = self.discovery.spot(
                pattern,
                self.resolve_regions(regions),
                max_price,
                show_savings,
                sort_by_price,
                history_hours,
                product_description,
                progress,
            )
        return self._results(listing)

    def plan(
        self,
        workload: str,
        instance_type: str,
        instance_count: int,
        days: float | None = None,
        regions: Sequence[str] | str | None = None,
        *,
        progress: Progress | None = None,
    ) -> PlanAnswer:
        """Capacity Blocks or ODCRs for this workload, why, and what is available now."""
        with _arguments():
            return self.discovery.plan(
                workload,
                instance_type,
                instance_count,
                days,
                self.resolve_regions(regions),
                progress=progress,
            )

    def validate_training_capacity(
        self, instance_type: str, count: int, duration_days: int
    ) -> bool:
        """The seeds' pre-training check: a block, else an ODCR, covers the run."""
        return self.plan("training", instance_type, count, duration_days).status == "ready"
