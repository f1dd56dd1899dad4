"""Where an instant fleet on reserved capacity launches: ``DefaultTargetCapacityType``
``reserved-capacity`` with ``ReservedCapacityOptions``, and ``use-capacity-reservations-first``
for an On-Demand fleet. Read-only, as ``launches.plan_launch`` is: the caller holds
``world.lock`` and commits what it launches.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..exceptions import client_error
from ..state import world
from . import groups
from .launches import Allocation, Launches, LaunchRequest, market_fits, matches_launch
from .reservations import CapacityReservation

# botocore's FleetReservationType, in the model's order (the emulator's order when a fleet
# names none: chosen).
RESERVATION_TYPES = (
    "on-demand-capacity-reservation",
    "capacity-block",
    "interruptible-capacity-reservation",
)
# CreateFleetInstance.Lifecycle (botocore's InstanceLifecycle: spot | on-demand |
# interruptible-capacity-reservation | capacity-block): an ODCR's instances are On-Demand.
LIFECYCLE = {
    "on-demand-capacity-reservation": "on-demand",
    "capacity-block": "capacity-block",
    "interruptible-capacity-reservation": "interruptible-capacity-reservation",
}
# Settings.reserved_fleet_order's readings of the two documents.
BY_TYPES = "reservation-types"
BY_PRIORITY = "override-priority"


@dataclass(frozen=True)
class Rung:
    """One launch template override of the fleet, as the planner sees it."""

    request: LaunchRequest
    weight: float
    rank: float  # its place in the fleet's order (its Priority when prioritized)


@dataclass(frozen=True)
class Placed:
    """``allocation`` launched by the rung at ``index``, from a reservation of ``kind``."""

    index: int
    allocation: Allocation
    kind: str

    @property
    def lifecycle(self) -> str:
        return LIFECYCLE[self.kind]


class ReservedCapacity(Launches):
    """The reservations a reserved-capacity fleet may use, in the order it uses them."""

    def resolve_fleet_target(
        self, ids: Sequence[str], group_arns: Sequence[str]
    ) -> list[str] | None:
        """The reservation ids ReservedCapacityOptions.CapacityReservationTarget names, in
        order (None: it names none). A group that is not a Capacity Reservation pool is
        refused as a launch into it is (``launches._plan_group``)."""
        if not ids and not group_arns:
            return None
        found = [self.get(i).id for i in ids]
        for arn in group_arns:
            members = groups.pool_reservation_ids(self.account_id, self.region, arn)
            if members is None:
                raise client_error(
                    "InvalidParameterValue",
                    f"The Capacity Reservation resource group {arn} does not exist or is not a "
                    "Capacity Reservation pool (AWS::EC2::CapacityReservationPool).",
                )
            found += [m for m in members if m not in found]
        return found

    def plan_reserved(
        self,
        rungs: Sequence[Rung],
        total: float,
        types: Sequence[str],
        fleet_target: list[str] | None,
        order: str,
    ) -> list[Placed]:
        """Fill ``total`` units from reserved capacity only: each rung's eligible
        reservations of ``types``, in ``order`` (``BY_TYPES``: the ReservationTypes list
        first, then the rungs' order; ``BY_PRIORITY``: the rungs' order first, then the
        types). A reservation serves only rungs whose type, platform, AZ and tenancy match."""
        if order not in (BY_TYPES, BY_PRIORITY):
            raise ValueError(f"reserved_fleet_order: {order!r} is not {BY_TYPES} or {BY_PRIORITY}")
        self.refresh()
        now = world.clock.now()
        slots = []
        for index, rung in enumerate(rungs):
            for position, reservation in enumerate(self._eligible(rung.request, fleet_target)):
                if reservation.kind not in types:
                    continue
                if not _usable(reservation, rung.request, now):
                    continue
                type_rank = types.index(reservation.kind)
                key = (
                    (type_rank, rung.rank, index, position)
                    if order == BY_TYPES
                    else (rung.rank, index, type_rank, position)
                )
                slots.append((key, index, rung, reservation))
        slots.sort(key=lambda slot: slot[0])
        planned: Counter[str] = Counter()
        placed: list[Placed] = []
        remaining = total
        for _, index, rung, reservation in slots:
            if remaining <= 0:
                break
            free = reservation.available_instance_count - planned[reservation.id]
            count = min(free, int(-(-remaining // rung.weight)))
            if count <= 0:
                continue
            planned[reservation.id] += count
            remaining -= count * rung.weight
            request = rung.request
            placed.append(
                Placed(
                    index,
                    Allocation(
                        request.instance_type, request.availability_zone, count, reservation.id
                    ),
                    reservation.kind,
                )
            )
        return placed

    def _eligible(
        self, request: LaunchRequest, fleet_target: list[str] | None
    ) -> Iterable[CapacityReservation]:
        """The reservations a rung may launch into: those the fleet's
        CapacityReservationTarget names, and the one (or the group) its launch template
        targets; when nothing names any, the account's open reservations (chosen: AWS's
        pages always name a target)."""
        ids: list[str] = list(fleet_target or [])
        if request.target_id and request.target_id not in ids:
            ids.append(request.target_id)
        if request.group_arn:
            members = groups.pool_reservation_ids(self.account_id, self.region, request.group_arn)
            ids += [m for m in members or [] if m not in ids]
        if fleet_target is None and not request.target_id and not request.group_arn:
            return [r for r in self.reservations.values() if r.instance_match_criteria == "open"]
        return [self.reservations[i] for i in ids if i in self.reservations]

    def plan_reservations_first(
        self, request: LaunchRequest, count: int, taken: Counter[str]
    ) -> list[Allocation]:
        """``use-capacity-reservations-first``: what of ``count`` this override's unused
        reservations cover (its group's, or the open ones that match), ``taken`` being what
        the fleet already planned of each; never On-Demand, never an error."""
        self.refresh()
        now = world.clock.now()
        if request.group_arn:
            ids = groups.pool_reservation_ids(self.account_id, self.region, request.group_arn)
            candidates = [self.reservations[i] for i in ids or [] if i in self.reservations]
        elif request.preference == "open":
            candidates = [
                r for r in self.reservations.values() if r.instance_match_criteria == "open"
            ]
        else:
            return []
        allocations = []
        remaining = count
        for reservation in candidates:
            if remaining <= 0:
                break
            if reservation.is_capacity_block or not _usable(reservation, request, now):
                continue
            take = min(reservation.available_instance_count - taken[reservation.id], remaining)
            if take <= 0:
                continue
            taken[reservation.id] += take
            remaining -= take
            allocations.append(
                Allocation(request.instance_type, request.availability_zone, take, reservation.id)
            )
        return allocations


def _usable(reservation: CapacityReservation, request: LaunchRequest, now: datetime) -> bool:
    """Active, not ending (a block's last 30 minutes), of the rung's market and attributes."""
    return (
        reservation.state == "active"
        and not reservation.reclaiming(now)
        and (request.market_type is None or market_fits(reservation, request.market_type))
        and matches_launch(reservation, request)
        and reservation.available_instance_count > 0
    )
