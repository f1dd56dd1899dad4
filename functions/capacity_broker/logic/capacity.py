"""capacity: which ODCRs and Capacity Blocks exist, where, and how much of them is free.

Regions are listed at the same time (one thread each, bounded), so eight regions take about
as long as the slowest one. A region that fails is reported in ``errors`` and the others are
still answered. ODCRs and Capacity Blocks are told apart by EC2's own ``ReservationType``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2, Reservation, TopologyUnreadable
from ..domain import blocks as block_rules
from ..domain import discovery as rules
from ..domain.catalog import unknown_types
from ..domain.tags import is_owned
from ..models.capacity import (
    CapacityRequest,
    CapacityResponse,
    CapacityRow,
    CapacitySummary,
    DurationRange,
)
from ..models.item_error import ItemError
from . import InvalidInput

T = TypeVar("T")
# Called once per region as it finishes: (region, succeeded).
Progress = Callable[[str, bool], None]
Ec2Factory = Callable[[str], Ec2]
Status = Literal["ok", "partial", "error"]
log = logging.getLogger(__name__)


@dataclass
class Listing(Generic[T]):
    """Rows gathered across regions, and the regions that could not be asked."""

    items: list[T] = field(default_factory=list)
    errors: list[ItemError] = field(default_factory=list)
    regions: list[str] = field(default_factory=list)

    @property
    def status(self) -> Status:
        return status_of(self.regions, self.errors)


def status_of(regions: Sequence[str], errors: Sequence[ItemError]) -> Status:
    failed = {e.region for e in errors if e.region}
    if not failed:
        return "ok"
    return "error" if regions and failed >= set(regions) else "partial"


def region_error(region: str, error: AwsError) -> ItemError:
    return ItemError(
        region=region,
        error_code=error.code or "RequestFailed",
        message=f"{error.operation}: {error.message}"[:500],
    )


def fan_out(
    regions: Sequence[str],
    work: Callable[[str], T],
    max_workers: int = 16,
    progress: Progress | None = None,
) -> tuple[dict[str, T], list[ItemError]]:
    """Run ``work`` for every region at once; a failure (an ``AwsError``, or anything
    unexpected, reported as ``InternalError``) fails that region only."""
    results: dict[str, T] = {}
    errors: list[ItemError] = []
    lock = threading.Lock()

    def one(region: str) -> None:
        try:
            value = work(region)
        except AwsError as error:
            failure = region_error(region, error)
        except Exception as error:  # noqa: BLE001 - one region's surprise must not sink the rest
            failure = ItemError(
                region=region,
                error_code="InternalError",
                message=f"{type(error).__name__}: {error}"[:500],
            )
        else:
            with lock:
                results[region] = value
            if progress:
                progress(region, True)
            return
        with lock:
            errors.append(failure)
        if progress:
            progress(region, False)

    unique = list(dict.fromkeys(regions))
    if len(unique) == 1:
        one(unique[0])
    elif unique:
        with ThreadPoolExecutor(
            max_workers=max(1, min(len(unique), max_workers)), thread_name_prefix="region"
        ) as pool:
            list(pool.map(one, unique))
    order = {region: i for i, region in enumerate(unique)}
    errors.sort(key=lambda e: order.get(e.region or "", 0))
    return results, errors


class AcceleratorFacts:
    """Per (region, instance type): what EC2 says the type carries. Kept for the life of the
    object (instance types do not change)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], rules.Accelerators | None] = {}
        self._lock = threading.Lock()

    def of(
        self, ec2: Ec2, instance_types: Sequence[str], deadline: float | None = None
    ) -> dict[str, rules.Accelerators | None]:
        wanted = list(dict.fromkeys(instance_types))
        with self._lock:
            missing = [t for t in wanted if (ec2.region, t) not in self._known]
        if missing:
            found = {
                item["InstanceType"]: rules.accelerators_of(item)
                for item in ec2.instance_types(names=missing, deadline=deadline)
            }
            with self._lock:
                for name in missing:
                    # Not described in this region: unknown, never assumed to be a GPU type.
                    self._known[(ec2.region, name)] = found.get(name)
        with self._lock:
            return {t: self._known.get((ec2.region, t)) for t in wanted}


def used_count(item: Mapping[str, Any], total: int, available: int) -> int:
    """EC2's own "used" allocation when it reports one (a cancelled reservation has nothing
    available yet nothing used either), else total minus available."""
    for allocation in item.get("CapacityAllocations") or []:
        if allocation.get("AllocationType") == "used":
            return int(allocation.get("Count") or 0)
    return max(total - available, 0)


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_row(
    reservation: Reservation,
    raw: Mapping[str, Any],
    cluster_id: str | None,
    network_nodes: Mapping[str, list[str]] | None,
    *,
    statuses: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> CapacityRow:
    """One listing row. ``statuses``: Capacity Block id → interconnect status (unknown when
    absent); ``now``: when the block's ``hours_left`` is counted from (none without it)."""
    kind = rules.kind_of(reservation.reservation_type)
    placement: bool | None = None
    nodes: list[str] | None = None
    if (
        network_nodes is not None
        and kind is rules.ReservationKind.CAPACITY_BLOCK
        and reservation.state in rules.TOPOLOGY_STATES
        and reservation.id in network_nodes  # EC2 said nothing of it: unknown, not "no"
    ):
        nodes = network_nodes[reservation.id] or None
        placement = bool(nodes)
    return CapacityRow(
        reservation_id=reservation.id,
        reservation_type=kind.value,
        capacity_block_id=reservation.capacity_block_id,
        instance_type=reservation.instance_type,
        region=reservation.region,
        availability_zone=reservation.availability_zone or None,
        availability_zone_id=reservation.availability_zone_id or None,
        # A block that has not started: its size (EC2 tags it so), none of it available or used.
        total_capacity=reservation.size,
        available_capacity=reservation.available_count,
        used_capacity=used_count(raw, reservation.total_count, reservation.available_count),
        state=reservation.state,
        start_date=reservation.start_date,
        end_date=reservation.end_date,
        end_date_type=reservation.end_date_type or None,
        duration_hours=rules.duration_hours(reservation.start_date, reservation.end_date),
        instance_match_criteria=reservation.match_criteria or None,
        platform=reservation.platform or None,
        tenancy=reservation.tenancy or None,
        owner_id=reservation.owner_id,
        # Owned = this cluster's tags; never claimed when no cluster id is configured.
        owned_by_broker=bool(cluster_id) and is_owned(reservation.tags, cluster_id or ""),
        tags=dict(reservation.tags),
        interconnect_status=(statuses or {}).get(reservation.capacity_block_id or "") or None
        if kind is rules.ReservationKind.CAPACITY_BLOCK
        else None,
        hours_left=block_rules.hours_left(
            reservation.start_date, reservation.end_date, reservation.instance_type, now
        )
        if kind is rules.ReservationKind.CAPACITY_BLOCK and now is not None
        else None,
        commitment_end_date=reservation.commitment_end,
        ultra_cluster_placement=placement,
        network_nodes=nodes,
    )


def summary_of(rows: Sequence[CapacityRow]) -> CapacitySummary:
    facts = rules.summarize(rows)
    return CapacitySummary(
        reservations=facts.reservations,
        by_type=dict(facts.by_type),
        instance_types=list(facts.instance_types),
        by_instance_type=dict(facts.by_instance_type),
        regions=list(facts.regions),
        total_capacity=facts.total_capacity,
        available_capacity=facts.available_capacity,
        used_capacity=facts.used_capacity,
        free_percent=facts.free_percent,
        block_duration_hours=DurationRange(
            min_hours=facts.block_hours[0], max_hours=facts.block_hours[1]
        )
        if facts.block_hours
        else None,
        ultra_cluster_placement=facts.ultra_cluster_placement,
    )


def check_types(
    ec2_for: Ec2Factory,
    named: Sequence[tuple[str, str]],
    regions: Sequence[str],
    max_workers: int = 16,
    deadline: float | None = None,
) -> None:
    """``InvalidInput`` naming each ``(field, name)`` that no region asked offers: a typo is
    refused by name, never listed as "nothing there" (contract v3). A pattern is a search,
    not a name: never refused. Each region's list is asked once per EC2 adapter
    (``Ec2.offered_types``); when one cannot be asked, nothing is refused: that region's own
    look-up answers for it, and a name it may offer is never called a typo."""
    plain = [(field, name) for field, name in named if not rules.has_wildcard(name)]
    if not plain:
        return
    offered, errors = fan_out(
        regions, lambda region: ec2_for(region).offered_types(deadline), max_workers
    )
    if errors:
        return
    problems = unknown_types(plain, frozenset().union(*offered.values()), list(regions))
    if problems:
        raise InvalidInput(problems)


class CapacityLister:
    def __init__(
        self,
        cluster_id: str | None,
        default_regions: Sequence[str],
        max_workers: int = 16,
        *,
        ec2_for: Ec2Factory,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.cluster_id = cluster_id or None
        self.default_regions = list(default_regions)
        self.max_workers = max_workers
        # The EC2 adapter of a region: the root's, one per region (its pacer and caches).
        self.ec2 = ec2_for
        self.accelerators = AcceleratorFacts()
        # What a block's hours_left counts from.
        self.clock = clock

    def rows(
        self,
        request: CapacityRequest,
        deadline: float | None = None,
        progress: Progress | None = None,
    ) -> Listing[CapacityRow]:
        """The rows of every region asked; ``InvalidInput`` for an instance type none offers."""
        regions = list(request.regions or self.default_regions)
        check_types(
            self.ec2,
            [
                (f"instance_types.{i}", name)
                for i, name in enumerate(rules.expand_patterns(request.instance_types))
            ],
            regions,
            self.max_workers,
            deadline,
        )
        found, errors = fan_out(
            regions,
            lambda region: self._region(region, request, deadline),
            self.max_workers,
            progress,
        )
        rows = [row for region in regions for row in found.get(region, [])]
        rows.sort(
            key=lambda r: rules.row_order(
                r.region,
                r.reservation_type,
                r.instance_type,
                r.availability_zone,
                r.start_date,
                r.reservation_id,
            )
        )
        return Listing(rows, errors, regions)

    def answer(
        self,
        request: CapacityRequest,
        request_id: str,
        deadline: float | None = None,
        progress: Progress | None = None,
    ) -> CapacityResponse:
        listing = self.rows(request, deadline, progress)
        summary = summary_of(listing.items)
        return CapacityResponse(
            status=listing.status,
            request_id=request_id,
            regions=listing.regions,
            summary=summary,
            reservations=listing.items,
            errors=listing.errors,
            message=_message(request, listing, summary),
        )

    def _region(
        self, region: str, request: CapacityRequest, deadline: float | None
    ) -> list[CapacityRow]:
        ec2 = self.ec2(region)
        kinds = rules.kinds_for(request.reservation_type)
        filters: dict[str, list[str]] = {}
        if not request.include_inactive:
            filters["state"] = sorted({s for k in kinds for s in rules.USABLE_STATES[k]})
        exact = rules.exact_types(request.instance_types)
        if exact:
            filters["instance-type"] = exact
        # ReservationType is not a DescribeCapacityReservations filter: it is read per item.
        candidates: list[tuple[Reservation, Mapping[str, Any]]] = []
        for raw in ec2.describe_reservations(filters, deadline):
            reservation = Reservation.from_api(region, raw)
            kind = rules.kind_of(reservation.reservation_type)
            if kind not in kinds:
                continue
            if not request.include_inactive and not rules.is_usable(kind, reservation.state):
                continue
            if not rules.matches_any(reservation.instance_type, request.instance_types):
                continue
            if request.available_only and reservation.available_count <= 0:
                continue
            if reservation.available_count < request.min_capacity:
                continue
            candidates.append((reservation, raw))
        if request.gpu_only and candidates:
            facts = self.accelerators.of(ec2, [r.instance_type for r, _ in candidates], deadline)
            candidates = [
                (r, raw)
                for r, raw in candidates
                if (found := facts.get(r.instance_type)) is not None and found.accelerated
            ]
        nodes = self._topology(ec2, [r for r, _ in candidates], deadline)
        statuses = self._statuses(ec2, [r for r, _ in candidates], deadline)
        now = self.clock()
        return [
            to_row(r, raw, self.cluster_id, nodes, statuses=statuses, now=now)
            for r, raw in candidates
        ]

    def _statuses(
        self, ec2: Ec2, reservations: Sequence[Reservation], deadline: float | None
    ) -> dict[str, str]:
        """Interconnect status per Capacity Block (DescribeCapacityBlockStatus), or nothing
        when EC2 would not say: like the topology, the listing stands without it (null)."""
        # Each block once: the segments of one purchase share their CapacityBlockId.
        ids = list(
            dict.fromkeys(
                r.capacity_block_id
                for r in reservations
                if r.capacity_block_id
                and rules.kind_of(r.reservation_type) is rules.ReservationKind.CAPACITY_BLOCK
            )
        )
        if not ids:
            return {}
        try:
            return ec2.block_statuses(ids, deadline)
        except AwsError as error:
            log.warning(
                "no interconnect status for %d Capacity Block(s) in %s: %s",
                len(ids),
                ec2.region,
                error,
            )
            return {}

    def _topology(
        self, ec2: Ec2, reservations: Sequence[Reservation], deadline: float | None
    ) -> dict[str, list[str]] | None:
        """Network nodes per Capacity Block, or ``None`` when EC2 would not say (the listing
        does not fail for want of placement details). Only blocks are asked: UltraCluster
        placement is what a block promises, and the API answers ten reservations a call."""
        ids = [
            r.id
            for r in reservations
            if r.state in rules.TOPOLOGY_STATES
            and rules.kind_of(r.reservation_type) is rules.ReservationKind.CAPACITY_BLOCK
        ]
        if not ids:
            return {}
        try:
            return ec2.topology(ids, deadline)
        except (AwsError, TopologyUnreadable) as error:
            # The listing stands without it: these blocks' placement is unknown (null).
            log.warning(
                "no topology for %d Capacity Block(s) in %s: %s: %s",
                len(ids),
                ec2.region,
                type(error).__name__,
                error,
            )
            return None


def _message(request: CapacityRequest, listing: Listing[CapacityRow], s: CapacitySummary) -> str:
    what = {
        "odcr": "ODCR",
        "capacity-block": "Capacity Block",
        "all": "reservation",
    }[request.reservation_type]
    answered = len(listing.regions) - len({e.region for e in listing.errors})
    text = (
        f"{s.reservations} {what}{'s' if s.reservations != 1 else ''} in {answered} of "
        f"{len(listing.regions)} region{'s' if len(listing.regions) != 1 else ''}"
    )
    if s.reservations:
        text += (
            f": {s.available_capacity} of {s.total_capacity} instances available "
            f"({s.free_percent:g}% free)"
        )
    if listing.errors:
        failed = ", ".join(f"{e.region} ({e.error_code})" for e in listing.errors)
        text += f"; could not list {failed}"
    return text
