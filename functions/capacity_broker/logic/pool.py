"""A cluster's reserved pool as EC2 shows it now (issue 43): the reservations its resource
groups list and its tag names, read with ``DescribeCapacityReservations``.

``DescribeCapacityReservations`` has no capacity-reservation-id filter: a group's members are
asked by ``CapacityReservationIds`` (at most 1000 per call, as EC2 pages), the tag by a
``tag:<key>`` filter. Shared by reserve (the ladder), the capacity listing (``--pool``), the
cleaner (the unused instance-hours) and every path that cancels (``spares``): the broker never
creates, modifies or cancels a pool reservation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2, Pricing, Reservation
from ..adapters.resource_groups import ResourceGroups
from ..domain.failures import BrokerFailure
from ..domain.pool import PoolReservation, kind_of
from ..domain.pool_spec import PoolSpec, Rung

if TYPE_CHECKING:
    from ..models.discovery import PoolRow

# How long a group's member list is believed (a member added to the group is seen after at
# most this; the guard that spares pool reservations reads it on every cancel).
MEMBERS_SECONDS = 60.0
# How long a failed read of the groups is believed by the cancel guard (``why_spared``).
FAILED_SECONDS = 10.0
# CapacityReservationIds per DescribeCapacityReservations call.
IDS_PER_CALL = 100


class PoolUnreadable(BrokerFailure):
    """The pool could not be read (a group or the reservations): nothing was launched."""

    def __init__(self, error: AwsError) -> None:
        super().__init__(f"Could not read the reserved pool: {error.code}: {error.message}"[:300])
        self.error = error

    @property
    def error_code(self) -> str:
        return self.error.error_code


def as_pool(reservation: Reservation) -> PoolReservation:
    return PoolReservation(
        id=reservation.id,
        kind=kind_of(reservation.reservation_type, reservation.interruptible),
        instance_type=reservation.instance_type,
        availability_zone=reservation.availability_zone,
        availability_zone_id=reservation.availability_zone_id,
        platform=reservation.platform,
        tenancy=reservation.tenancy,
        total=reservation.total_count,
        available=reservation.available_count,
        state=reservation.state,
        start_date=reservation.start_date,
        end_date=reservation.end_date,
        tags=dict(reservation.tags),
    )


@dataclass(frozen=True)
class Spared:
    """Why a cancel leaves a reservation alone: the pool names it, or (``error``) the pool
    could not be read to say whether it does."""

    reason: str
    error: AwsError | None = None


class ReservedPool:
    """One pool (``spec``) in one region: its reservations now, and whether one is in it."""

    def __init__(
        self,
        spec: PoolSpec,
        ec2: Ec2,
        groups: ResourceGroups,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.ec2 = ec2
        self.groups = groups
        self.monotonic = monotonic
        self._members: tuple[float, frozenset[str]] | None = None
        self._failed: tuple[float, AwsError] | None = None
        self._lock = threading.Lock()

    @property
    def region(self) -> str:
        return self.ec2.region

    def member_ids(self, deadline: float | None = None, fresh: bool = False) -> frozenset[str]:
        """The ids the pool's groups list (kept ``MEMBERS_SECONDS`` unless ``fresh``)."""
        if not self.spec.groups:
            return frozenset()
        with self._lock:
            kept, failed = self._members, self._failed
        if kept is not None and not fresh and self.monotonic() - kept[0] < MEMBERS_SECONDS:
            return kept[1]
        if failed is not None and not fresh and self.monotonic() - failed[0] < FAILED_SECONDS:
            # Each cancel guard asks; one that just failed (throttled, after its retries) is
            # not asked again at once for every reservation of a release or a sweep.
            raise failed[1]
        ids: list[str] = []
        try:
            for group in self.spec.groups:
                ids += self.groups.reservation_ids(group, deadline)
        except AwsError as error:
            with self._lock:
                self._failed = (self.monotonic(), error)
            raise
        members = frozenset(ids)
        with self._lock:
            self._members = (self.monotonic(), members)
        return members

    def reservations(self, deadline: float | None = None) -> list[Reservation]:
        """Every reservation of the pool as EC2 shows it now (``AwsError`` when it cannot)."""
        found: dict[str, Reservation] = {}
        ids = sorted(self.member_ids(deadline, fresh=True))
        for start in range(0, len(ids), IDS_PER_CALL):
            for r in self.ec2.reservations(
                ids=ids[start : start + IDS_PER_CALL], deadline=deadline
            ):
                found[r.id] = r
        if self.spec.tag_key is not None:
            tagged = self.ec2.reservations(
                filters={f"tag:{self.spec.tag_key}": [self.spec.tag_value or ""]},
                deadline=deadline,
            )
            for r in tagged:
                found.setdefault(r.id, r)
        return list(found.values())

    def read(self, deadline: float | None = None) -> list[PoolReservation]:
        """``reservations`` as the ladder reads them; ``PoolUnreadable`` when EC2 or Resource
        Groups could not answer."""
        try:
            return [as_pool(r) for r in self.reservations(deadline)]
        except AwsError as error:
            raise PoolUnreadable(error) from None

    def spares(self, reservation: Reservation, deadline: float | None = None) -> bool:
        """True when ``reservation`` is (or may be) the pool's (``why_spared``)."""
        return self.why_spared(reservation, deadline) is not None

    def why_spared(self, reservation: Reservation, deadline: float | None = None) -> Spared | None:
        """Why a cancel must leave ``reservation`` alone, or ``None``: it carries the pool's
        tag, is listed by one of its groups, or is an interruptible reservation (the broker
        never makes one). A group that cannot be read spares every reservation: erring on
        "not ours" can only keep one, never cancel an operator's; the answer carries EC2's
        error, so that a flow says the pool could not be read, not "not owned"."""
        if reservation.interruptible:
            return Spared("an interruptible reservation: never the broker's")
        key = self.spec.tag_key
        if key is not None and reservation.tags.get(key) == (self.spec.tag_value or ""):
            return Spared("the deployment's reserved pool names it (its tag)")
        if not self.spec.groups:
            return None
        try:
            named = reservation.id in self.member_ids(deadline)
        except AwsError as error:
            return Spared(
                "the deployment's reserved pool could not be read "
                f"({error.code}): it is left alone until it can be",
                error,
            )
        return Spared("a member of the deployment's reserved pool's group") if named else None


def idle_rows(pool: ReservedPool, pricing: Pricing | None, deadline: float | None) -> list[PoolRow]:
    """Each reservation of ``pool`` with its unused instances and their hourly cost now
    (``capacity --pool``); ``PoolUnreadable`` when the pool cannot be read. A price the Price
    List cannot give is ``None``, never a reason to fail the listing."""
    # Imported here: only the listing needs the discovery models (reserve's cold start does not).
    from ..models.discovery import PoolRow

    prices: dict[str, float | None] = {}

    def price(instance_type: str) -> float | None:
        if instance_type not in prices:
            try:
                found = pricing.on_demand_price(instance_type, pool.region) if pricing else None
            except AwsError:
                found = None
            prices[instance_type] = found
        return prices[instance_type]

    rows: list[PoolRow] = []
    for r in sorted(
        pool.read(deadline), key=lambda r: (r.availability_zone, r.instance_type, r.id)
    ):
        hourly = None if r.kind is Rung.CAPACITY_BLOCK else price(r.instance_type)
        unused = r.available if r.state == "active" else 0
        rows.append(
            PoolRow(
                reservation_id=r.id,
                kind=r.kind.value,
                region=pool.region,
                instance_type=r.instance_type,
                availability_zone=r.availability_zone,
                state=r.state,
                total_instances=r.total,
                unused_instances=unused,
                hourly_price_usd=hourly,
                unused_hourly_cost_usd=round(hourly * unused, 4) if hourly is not None else None,
            )
        )
    return rows
