"""The broker's discovery calls: the capacity listing (``capacity``), Capacity Block
offerings and buying one, instance type search, Availability Zones, Spot prices and the plan.

They read AWS with this broker's session (``Discovery``); ``capacity`` goes through the
broker's transport (``client.transport``): listed here, or by the ``<prefix>-capacity`` function.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..domain.discovery import Verdict
from ..logic.capacity import Progress
from ..models.capacity import CapacityRow
from ..models.discovery import (
    AheadAnswer,
    AzRow,
    BlockOffering,
    ExtendAnswer,
    InstanceTypeRow,
    PlanAnswer,
    PurchaseAnswer,
    SpotPriceRow,
)
from . import regions as where
from . import when
from .base import BrokerBase, _arguments
from .results import (
    InvalidArguments,
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
        with _arguments():
            response = self.transport.capacity(
                fields, regions, f"client-{uuid.uuid4().hex}", progress
            )
        return Results(
            response.reservations,
            response.errors,
            response.regions,
            response.summary,
            response.message,
            when_found=Verdict.READY,
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
        ultraservers: int | None = None,
        ultraserver_type: str | None = None,
    ) -> Results[BlockOffering]:
        """Capacity Blocks on sale, cheapest per instance-hour first, then soonest
        (``start_after``/``end_before``: ISO dates or times, ``+3d``, or datetimes).
        ``ultraservers``: blocks of that many UltraServers instead of ``instance_count``
        instances; ``ultraserver_type``: of that UltraServer type only.
        ``.verdict``: ``buy`` when something is on sale, ``unavailable`` when not."""
        now = self.discovery.clock()
        with _arguments():
            listing = self.discovery.offerings(
                instance_type,
                instance_count,
                duration_hours,
                when.optional_moment(start_after, "start_after", now),
                when.optional_moment(end_before, "end_before", now),
                self.resolve_regions(regions),
                progress,
                ultraservers=ultraservers,
                ultraserver_type=ultraserver_type,
            )
        return self._results(listing, when_found=Verdict.BUY)

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
        *,
        ultraservers: int | None = None,
        ultraserver_type: str | None = None,
    ) -> PurchaseAnswer:
        """Buy one Capacity Block, at most once per offering (see ``Discovery.purchase``;
        ``ultraservers``/``ultraserver_type``: the terms it was found by, as ``offerings``).
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
                ultraservers=ultraservers,
                ultraserver_type=ultraserver_type,
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
        instance_type: str | Sequence[str],
        instance_count: int,
        days: float | None = None,
        regions: Sequence[str] | str | None = None,
        start_after: datetime | str | None = None,
        end_before: datetime | str | None = None,
        *,
        progress: Progress | None = None,
        asking: Callable[[str], None] | None = None,
    ) -> PlanAnswer:
        """Can ``instance_count`` x ``instance_type`` (one type, or several in preference
        order) run for ``days`` between ``start_after`` and ``end_before`` (ISO dates or times,
        ``+3d``, datetimes: as ``offerings``)? ``status`` is the verdict: ``ready``, ``buy``,
        ``split``, ``extend`` or ``unavailable`` (contract v3, ``plan``); ``commands`` are the
        CLI commands that do what it asks. ``progress``: told as each Region's reservations are
        listed; ``asking``: told before each question to EC2 about offerings."""
        now = self.discovery.clock()
        with _arguments():
            return self.discovery.plan(
                workload,
                instance_type,
                instance_count,
                days,
                self.resolve_regions(regions),
                when.optional_moment(start_after, "start_after", now),
                when.optional_moment(end_before, "end_before", now),
                progress=progress,
                asking=asking,
            )

    def validate_training_capacity(
        self, instance_type: str, count: int, duration_days: int
    ) -> bool:
        """The seeds' pre-training check, answered truthfully: held capacity (a block with
        the run's hours left before EC2 stops it, else an ODCR) covers the run."""
        return self.plan("training", instance_type, count, duration_days).status == "ready"

    # -- Capacity Block life ----------------------------------------------------------------
    def extend(
        self,
        reservation_id: str,
        days: int,
        regions: Sequence[str] | str | None = None,
        *,
        again: bool = False,
    ) -> ExtendAnswer:
        """Buy a ``days``-day extension of the Capacity Block ``reservation_id``, at most once
        (``status`` ``already_extended`` when this request was bought; ``again`` buys another
        of the same length). ``extension_offer`` says what it costs first."""
        with _arguments():
            return self.discovery.extend(
                reservation_id, days * 24, self.resolve_regions(regions), again=again
            )

    def extension_offer(
        self, reservation_id: str, days: int, regions: Sequence[str] | str | None = None
    ) -> ExtendAnswer:
        """What extending the block by ``days`` would cost (``status`` ``offered``): nothing
        is bought."""
        with _arguments():
            return self.discovery.extend(
                reservation_id, days * 24, self.resolve_regions(regions), buy=False
            )

    # -- future-dated ODCRs -----------------------------------------------------------------
    def reserve_ahead(
        self,
        instance_type: str,
        count: int,
        availability_zone: str,
        start: datetime | str,
        commitment_days: float,
        *,
        instance_platform: str = "Linux/UNIX",
        tenancy: str = "default",
    ) -> AheadAnswer:
        """Request a future-dated ODCR (5 to 120 days ahead, committed for at least 14 days
        once delivered), at most once per request."""
        with _arguments():
            moment = when.moment(start, "start", self.discovery.clock())
            return self.discovery.reserve_ahead(
                instance_type,
                count,
                availability_zone,
                moment,
                commitment_days,
                instance_platform,
                tenancy,
            )

    def reserve_ahead_terms(
        self,
        instance_type: str,
        count: int,
        availability_zone: str,
        start: datetime | str,
        commitment_days: float,
    ) -> str:
        """What ``reserve_ahead`` with these terms would commit to, after checking them as EC2
        would (``InvalidArguments`` when it would refuse): nothing is requested."""
        with _arguments():
            moment = when.moment(start, "start", self.discovery.clock())
            return self.discovery.check_ahead(
                instance_type, count, availability_zone, moment, commitment_days
            )

    def change_start(
        self,
        reservation_id: str,
        new_start: datetime | str,
        regions: Sequence[str] | str | None = None,
        *,
        quote_id: str | None = None,
        confirm: bool = False,
    ) -> AheadAnswer:
        """Postpone a scheduled future-dated ODCR: EC2's date-change quote (``quoted``), then,
        with ``quote_id`` and ``confirm=True``, that quote accepted (``changed``)."""
        with _arguments():
            moment = when.moment(new_start, "new_start", self.discovery.clock())
            return self.discovery.change_start(
                reservation_id, moment, self.resolve_regions(regions), quote_id, confirm
            )

    def cancel_ahead(
        self,
        reservation_id: str,
        regions: Sequence[str] | str | None = None,
        *,
        quote_id: str | None = None,
        confirm: bool = False,
    ) -> AheadAnswer:
        """Cancel a future-dated ODCR: free before it is scheduled; inside its commitment only
        by accepting EC2's cancellation quote (``quote_id``, ``confirm=True``)."""
        with _arguments():
            return self.discovery.cancel_ahead(
                reservation_id, self.resolve_regions(regions), quote_id, confirm
            )
