"""Capacity for one account and region: pools, reservations, Capacity Blocks, launches.

Every decision that reads and changes capacity runs under ``world.lock``: two concurrent
creates must not both win the last slot of a pool.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from moto.core.utils import get_service_model
from moto.ec2.models import EC2Backend
from moto.ec2.utils import random_id, simple_aws_filter_to_re

from ..exceptions import (
    client_error,
    insufficient_capacity,
    reservation_malformed,
    reservation_not_found,
)
from ..state import world
from .consistency import Propagation, Seen, filters_by_tag
from .offerings import Catalogue
from .pools import Pool, Quotas
from .reservations import HOLDING_STATES, CapacityReservation, Shown, filter_value
from .tokens import ClientTokens


@functools.cache
def platforms() -> frozenset[str]:
    """EC2's CapacityReservationInstancePlatform values, from botocore's model (one source)."""
    model = get_service_model("ec2")
    return frozenset(model.shape_for("CapacityReservationInstancePlatform").enum)


DEFAULT_PAGE = 1000


def new_reservation_id() -> str:
    return random_id(prefix="cr", size=17)


def new_block_id() -> str:
    return random_id(prefix="cb", size=17)


@dataclass
class Allocation:
    """Where ``count`` launched instances take their capacity from."""

    instance_type: str
    availability_zone: str
    count: int
    reservation_id: str | None = None  # None: the On-Demand pool


@dataclass
class LaunchRequest:
    instance_type: str
    availability_zone: str
    platform: str = "Linux/UNIX"
    tenancy: str = "default"
    preference: str = "open"  # CapacityReservationPreference
    target_id: str | None = None  # CapacityReservationTarget.CapacityReservationId
    market_type: str | None = None  # InstanceMarketOptions.MarketType


class CapacityBackend:
    def __init__(self, ec2: EC2Backend) -> None:
        self.ec2 = ec2
        self.account_id: str = ec2.account_id
        self.region: str = ec2.region_name
        self.reservations: dict[str, CapacityReservation] = {}
        self.client_tokens = ClientTokens()
        self.pools: dict[tuple[str, str], Pool] = {}
        self.unsupported: set[tuple[str, str]] = set()
        self.quotas = Quotas()
        self.catalogue = Catalogue(self.region)
        # instance id -> reservation id, or None when it runs on pool capacity
        self.instance_sources: dict[str, str | None] = {}
        self.pool_instances: Counter[tuple[str, str]] = Counter()
        # What was made a moment ago and is still settling (EC2's eventual consistency).
        self.propagation = Propagation()
        self._zones: dict[str, str] | None = None

    # -- geography ----------------------------------------------------------------------
    @property
    def zones(self) -> dict[str, str]:
        """AZ name -> AZ id for this region (moto's real mapping)."""
        if self._zones is None:
            self._zones = {z.name: z.zone_id for z in self.ec2.describe_availability_zones()}
        return self._zones

    def resolve_az(self, name: str | None, zone_id: str | None) -> tuple[str, str]:
        if name and zone_id:
            raise client_error(
                "InvalidParameterCombination",
                "You can specify either AvailabilityZone or AvailabilityZoneId, not both.",
            )
        if not name and not zone_id:
            raise client_error(
                "MissingParameter",
                "The request must contain the parameter AvailabilityZone or AvailabilityZoneId",
            )
        if name:
            if name not in self.zones:
                raise client_error(
                    "InvalidParameterValue",
                    f"Invalid availability zone: [{name}]",
                )
            return name, self.zones[name]
        by_id = {v: k for k, v in self.zones.items()}
        if zone_id not in by_id:
            raise client_error(
                "InvalidParameterValue", f"Invalid availability zone ID: [{zone_id}]"
            )
        return by_id[zone_id], str(zone_id)

    def offered(self, availability_zone: str, instance_type: str) -> bool:
        if (availability_zone, instance_type) in self.unsupported:
            return False
        if (availability_zone, instance_type) in self.pools:
            return True
        from moto.ec2.models.instance_types import INSTANCE_TYPES

        return instance_type in INSTANCE_TYPES

    def pool(self, availability_zone: str, instance_type: str) -> Pool:
        """The pool as of the emulator clock (expired reservations have given back theirs)."""
        self.refresh()
        return self._pool(availability_zone, instance_type)

    def _pool(self, availability_zone: str, instance_type: str) -> Pool:
        key = (availability_zone, instance_type)
        if key not in self.pools:
            self.pools[key] = Pool(
                self.region, availability_zone, instance_type, world.settings.default_capacity
            )
        return self.pools[key]

    def set_pool(self, availability_zone: str, instance_type: str, capacity: int | None) -> Pool:
        with world.lock:
            pool = self._pool(availability_zone, instance_type)
            pool.capacity = capacity
            return pool

    # -- time ---------------------------------------------------------------------------
    def refresh(self, now: datetime | None = None) -> None:
        """Apply the clock: pending → active, limited → expired, blocks scheduled → active."""
        now = now or world.clock.now()
        with world.lock:
            for reservation in self.reservations.values():
                old = reservation.advance(now, world.settings.expiry_lag_seconds)
                if old in HOLDING_STATES and reservation.state not in HOLDING_STATES:
                    self._release_hold(reservation)
                elif reservation.instances and reservation.reclaiming(now):
                    self._terminate_block_instances(reservation)

    def _release_hold(self, reservation: CapacityReservation) -> None:
        """A reservation stopped holding: free slots go back, running instances stay."""
        if not reservation.is_capacity_block:
            free = reservation.total_instance_count - reservation.used_instance_count
            self._pool(reservation.availability_zone, reservation.instance_type).give(max(free, 0))
            for instance_id in reservation.instances:
                self.instance_sources[instance_id] = None
                self.pool_instances[(reservation.availability_zone, reservation.instance_type)] += 1
        else:
            self._terminate_block_instances(reservation)
        reservation.instances = set()
        reservation.seeded_used = 0

    def _terminate_block_instances(self, reservation: CapacityReservation) -> None:
        """EC2 terminates what still runs in a Capacity Block from 30 minutes before its end."""
        for instance_id in reservation.instances:
            self.instance_sources.pop(instance_id, None)
        if reservation.instances:
            self.ec2.terminate_instances(sorted(reservation.instances))
        reservation.instances = set()

    def usage(self) -> dict[str, int]:
        """On-Demand instances held per type, as EC2 counts them against quotas."""
        held: Counter[str] = Counter()
        for reservation in self.reservations.values():
            if reservation.holds_pool_capacity:
                held[reservation.instance_type] += reservation.total_instance_count
        for (_, instance_type), count in self.pool_instances.items():
            held[instance_type] += count
        return dict(held)

    # -- reservations -------------------------------------------------------------------
    def tags_of(self, resource_id: str) -> dict[str, str]:
        return dict(self.ec2.tags.get(resource_id, {}))

    def get(self, reservation_id: str) -> CapacityReservation:
        if not reservation_id.startswith("cr-") or len(reservation_id) < 11:
            raise reservation_malformed(reservation_id)
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            raise reservation_not_found(reservation_id)
        return reservation

    def named(self, reservation_id: str) -> tuple[CapacityReservation, Seen]:
        """The reservation an API call names by id, and what that call sees of it: a
        reservation made a moment ago may be unknown to it (NotFound) or still pending."""
        with world.lock:
            reservation = self.get(reservation_id)
            seen = self.propagation.name(reservation.id, world.clock.now())
        if seen is Seen.UNKNOWN:
            raise reservation_not_found(reservation_id)
        return reservation, seen

    def shown(
        self, reservation: CapacityReservation, seen: Seen | None = None, tags: bool = True
    ) -> Shown:
        """``reservation`` as a call sees it (``seen``: what it was told; else a look that
        does not count, as for a ClientToken replay)."""
        if seen is None:
            seen = self.propagation.peek(reservation.id, world.clock.now())
        # Settling shows only on a live reservation: its cancel or expiry is the truth at once.
        state = "pending" if seen is not Seen.SETTLED and reservation.state == "active" else None
        return Shown(
            reservation,
            state or reservation.state,
            self.tags_of(reservation.id) if tags else {},
        )

    def create_capacity_reservation(
        self,
        params: dict[str, Any],
        tags: dict[str, str],
    ) -> CapacityReservation:
        now = world.clock.now()
        params = _utc_dates(params)
        with world.lock:
            self.refresh(now)
            reservation_id, _ = self.client_tokens.once(
                "CreateCapacityReservation",
                params.get("ClientToken"),
                params,
                lambda: self._create(params, tags, now),
            )
            return self.reservations[reservation_id]

    def _create(self, params: dict[str, Any], tags: dict[str, str], now: datetime) -> str:
        reservation = self._validate_new(params, now)
        if not self.offered(reservation.availability_zone, reservation.instance_type):
            raise client_error(
                "Unsupported",
                f"Your requested instance type ({reservation.instance_type}) is not "
                f"supported in your requested Availability Zone "
                f"({reservation.availability_zone}). Please retry your request by not "
                f"specifying an Availability Zone or choosing a different one.",
            )
        self.quotas.check(reservation.instance_type, reservation.total_instance_count, self.usage())
        pool = self._pool(reservation.availability_zone, reservation.instance_type)
        if not pool.can_take(reservation.total_instance_count):
            raise insufficient_capacity(reservation.instance_type, reservation.availability_zone)
        pool.take(reservation.total_instance_count)
        self.reservations[reservation.id] = reservation
        if tags:
            self.ec2.create_tags([reservation.id], tags)
        self.propagation.made(reservation.id, now)
        return reservation.id

    def _validate_new(self, params: dict[str, Any], now: datetime) -> CapacityReservation:
        instance_type = params["InstanceType"]
        count = int(params["InstanceCount"])
        if not 1 <= count <= 1000:
            raise client_error(
                "InvalidParameterValue",
                f"Value ({count}) for parameter instanceCount is invalid. Valid range: 1 - 1000",
            )
        platform = params["InstancePlatform"]
        if platform not in platforms():
            raise client_error(
                "InvalidParameterValue",
                f"Value ({platform}) for parameter instancePlatform is invalid.",
            )
        tenancy = params.get("Tenancy") or "default"
        end_type = params.get("EndDateType") or "unlimited"
        end_date: datetime | None = params.get("EndDate")
        if end_type == "limited" and end_date is None:
            raise client_error(
                "InvalidParameterCombination",
                "EndDate must be specified when EndDateType is limited.",
            )
        if end_type == "unlimited" and end_date is not None:
            raise client_error(
                "InvalidParameterCombination",
                "EndDate cannot be specified when EndDateType is unlimited.",
            )
        start = params.get("StartDate")
        if start is not None and start > now + timedelta(minutes=5):
            raise client_error(
                "InvalidParameterValue",
                "Future-dated Capacity Reservations are not supported by this emulator.",
            )
        if end_date is not None and end_date <= now:
            raise client_error(
                "InvalidParameterValue",
                f"The end date ({end_date.isoformat()}) must be in the future.",
            )
        match = params.get("InstanceMatchCriteria") or "open"
        az, az_id = self.resolve_az(
            params.get("AvailabilityZone"), params.get("AvailabilityZoneId")
        )
        pending = world.settings.pending_seconds
        return CapacityReservation(
            id=new_reservation_id(),
            owner_id=self.account_id,
            region=self.region,
            availability_zone=az,
            availability_zone_id=az_id,
            instance_type=instance_type,
            instance_platform=platform,
            tenancy=tenancy,
            total_instance_count=count,
            create_date=now,
            start_date=now,
            end_date=end_date,
            end_date_type=end_type,
            instance_match_criteria=match,
            ebs_optimized=bool(params.get("EbsOptimized")),
            ephemeral_storage=bool(params.get("EphemeralStorage")),
            placement_group_arn=params.get("PlacementGroupArn"),
            state="pending" if pending > 0 else "active",
            active_at=now + timedelta(seconds=pending) if pending > 0 else None,
        )

    def add_existing(self, reservation: CapacityReservation, tags: dict[str, str]) -> None:
        """Seed a reservation that already exists (scenarios): held capacity included."""
        with world.lock:
            if reservation.holds_pool_capacity:
                self._pool(reservation.availability_zone, reservation.instance_type).take(
                    reservation.total_instance_count
                )
            self.reservations[reservation.id] = reservation
            self._tag(reservation, tags)

    def _tag(self, reservation: CapacityReservation, tags: dict[str, str]) -> None:
        """The caller's tags plus those EC2 sets itself (a block's size and type)."""
        everything = {**tags, **reservation.system_tags()}
        if everything:
            self.ec2.create_tags([reservation.id], everything)

    def describe_capacity_reservations(
        self, ids: list[str], filters: dict[str, list[str]]
    ) -> list[CapacityReservation]:
        """The reservations as they are (no settling): the emulator's own look."""
        with world.lock:
            self.refresh()
            _check_filters(filters)
            found = [self.get(i) for i in ids] if ids else list(self.reservations.values())
            return [r for r in found if _matches(r, filters, self.tags_of(r.id))]

    def list_capacity_reservations(
        self, ids: list[str], filters: dict[str, list[str]]
    ) -> list[Shown]:
        """DescribeCapacityReservations as a call sees it: by id, a reservation made a moment
        ago may be unknown (the whole call fails, as EC2 does for any unknown id) or pending;
        a listing may miss it (a tag filter) or show it without its tags."""
        with world.lock:
            self.refresh()
            _check_filters(filters)
            if ids:
                shown = [self.shown(*self.named(i)) for i in ids]
                return [s for s in shown if _matches(s.reservation, filters, s.tags, s.state)]
            every = [self.shown(r) for r in self.reservations.values()]
            found = [s for s in every if _matches(s.reservation, filters, s.tags, s.state)]
            # Each listing that would show a settling reservation counts toward its settling.
            lagging = self.propagation.listing([s.reservation.id for s in found], world.clock.now())
            if filters_by_tag(filters):
                return [s for s in found if s.reservation.id not in lagging]
            return [replace(s, tags={}) if s.reservation.id in lagging else s for s in found]

    def cancel_capacity_reservation(self, reservation_id: str) -> None:
        with world.lock:
            self.refresh()
            reservation, seen = self.named(reservation_id)
            if seen is Seen.PENDING and reservation.state == "active":
                # CancelCapacityReservation: only `assessing` or `active` can be cancelled.
                raise _not_cancellable(reservation_id, "pending")
            if reservation.is_capacity_block:
                raise client_error(
                    "UnsupportedOperation",
                    f"You can't cancel Capacity Block {reservation_id}.",
                )
            if reservation.state not in ("active",):
                raise _not_cancellable(reservation_id, reservation.state)
            reservation.state = "cancelled"
            self._release_hold(reservation)

    def modify_capacity_reservation(self, params: dict[str, Any]) -> None:
        now = world.clock.now()
        params = _utc_dates(params)
        with world.lock:
            self.refresh(now)
            reservation, seen = self.named(params["CapacityReservationId"])
            if reservation.is_capacity_block:
                raise client_error(
                    "UnsupportedOperation",
                    f"You can't modify Capacity Block {reservation.id}.",
                )
            state = self.shown(reservation, seen, tags=False).state
            if state != "active":  # AWS: "pending: can't modify in any way"
                raise client_error(
                    "IncorrectState",
                    f"The Capacity Reservation {reservation.id} is in the "
                    f"'{state}' state and cannot be modified.",
                )
            end_type = params.get("EndDateType")
            end_date = params.get("EndDate")
            effective_type = end_type or reservation.end_date_type
            if effective_type == "unlimited" and end_date is not None:
                raise client_error(
                    "InvalidParameterCombination",
                    "EndDate cannot be specified when EndDateType is unlimited.",
                )
            if end_type == "limited" and end_date is None and reservation.end_date is None:
                raise client_error(
                    "InvalidParameterCombination",
                    "EndDate must be specified when EndDateType is limited.",
                )
            if end_date is not None and end_date <= now:
                raise client_error(
                    "InvalidParameterValue",
                    f"The end date ({end_date.isoformat()}) must be in the future.",
                )
            count = params.get("InstanceCount")
            if count is not None:
                count = int(count)
                if count < 0 or abs(count - reservation.total_instance_count) > 1000:
                    raise client_error(
                        "InvalidParameterValue",
                        f"Value ({count}) for parameter instanceCount is invalid.",
                    )
                if count < reservation.used_instance_count:
                    raise client_error(
                        "InvalidParameterValue",
                        f"The instance count ({count}) cannot be lower than the number of "
                        f"instances running in the Capacity Reservation "
                        f"({reservation.used_instance_count}).",
                    )
                delta = count - reservation.total_instance_count
                pool = self._pool(reservation.availability_zone, reservation.instance_type)
                if delta > 0:
                    self.quotas.check(reservation.instance_type, delta, self.usage())
                    if not pool.can_take(delta):
                        raise insufficient_capacity(
                            reservation.instance_type, reservation.availability_zone
                        )
                    pool.take(delta)
                elif delta < 0:
                    pool.give(-delta)
                reservation.total_instance_count = count
            if end_type:
                reservation.end_date_type = end_type
                if end_type == "unlimited":
                    reservation.end_date = None
            if end_date is not None:
                reservation.end_date = end_date
            if params.get("InstanceMatchCriteria"):
                reservation.instance_match_criteria = params["InstanceMatchCriteria"]

    # -- Capacity Blocks ----------------------------------------------------------------
    def purchase_capacity_block(
        self, offering_id: str, platform: str, tags: dict[str, str]
    ) -> CapacityReservation:
        now = world.clock.now()
        if platform not in platforms():
            raise client_error(
                "InvalidParameterValue",
                f"Value ({platform}) for parameter instancePlatform is invalid.",
            )
        with world.lock:
            offer = self.catalogue.take(offering_id, now)
            supply = self.catalogue.supply[offer.supply_index]
            reservation = self.new_block(
                instance_type=offer.instance_type,
                availability_zone=offer.availability_zone,
                count=offer.instance_count,
                start=offer.start,
                end=offer.end,
                platform=platform,
                tenancy=offer.tenancy,
                ultraserver_type=supply.ultraserver_type,
            )
            self.reservations[reservation.id] = reservation
            self._tag(reservation, tags)
            return reservation

    def new_block(
        self,
        *,
        instance_type: str,
        availability_zone: str,
        count: int,
        start: datetime,
        end: datetime,
        platform: str = "Linux/UNIX",
        tenancy: str = "default",
        ultraserver_type: str | None = None,
        network_nodes: list[str] | None = None,
        payment_pending: bool = False,
        paid_at: datetime | None = None,
    ) -> CapacityReservation:
        """A bought block: ``scheduled`` until its start (``payment-pending`` first when asked,
        until ``paid_at``), then ``active`` until its end."""
        now = world.clock.now()
        reservation = CapacityReservation(
            id=new_reservation_id(),
            owner_id=self.account_id,
            region=self.region,
            availability_zone=availability_zone,
            availability_zone_id=self.zones[availability_zone],
            instance_type=instance_type,
            instance_platform=platform,
            tenancy=tenancy,
            total_instance_count=count,
            create_date=now,
            start_date=start,
            end_date=end,
            end_date_type="limited",
            instance_match_criteria="targeted",
            reservation_type="capacity-block",
            capacity_block_id=new_block_id(),
            ultraserver_type=ultraserver_type,
            network_nodes=list(network_nodes or []),
            state="payment-pending" if payment_pending else "scheduled",
            paid_at=paid_at,
        )
        reservation.advance(now)
        return reservation

    # -- launches -----------------------------------------------------------------------
    def plan_launch(self, request: LaunchRequest, count: int) -> list[Allocation]:
        """Decide where ``count`` instances would run, or raise EC2's launch error.

        Read-only: ``commit`` takes the capacity. Callers hold ``world.lock`` across both.
        """
        self.refresh()
        if request.target_id:
            return [self._plan_targeted(request, count)]
        if request.market_type == "capacity-block":
            raise client_error(
                "InvalidParameterCombination",
                "A launch with MarketType capacity-block must target a Capacity Block "
                "(CapacityReservationTarget).",
            )
        allocations: list[Allocation] = []
        remaining = count
        if request.preference in ("open", "capacity-reservations-only"):
            for reservation in self.reservations.values():
                if remaining == 0:
                    break
                if (
                    reservation.state == "active"
                    and not reservation.is_capacity_block
                    and reservation.instance_match_criteria == "open"
                    and reservation.instance_type == request.instance_type
                    and reservation.availability_zone == request.availability_zone
                    and reservation.tenancy == request.tenancy
                    and reservation.instance_platform == request.platform
                    and reservation.available_instance_count > 0
                ):
                    take = min(reservation.available_instance_count, remaining)
                    allocations.append(
                        Allocation(
                            request.instance_type, request.availability_zone, take, reservation.id
                        )
                    )
                    remaining -= take
        if remaining and request.preference == "capacity-reservations-only":
            raise client_error(
                "ReservationCapacityExceeded",
                "There is not enough capacity in open Capacity Reservations that match the "
                "launch request.",
            )
        if remaining:
            if not self.offered(request.availability_zone, request.instance_type):
                raise client_error(
                    "Unsupported",
                    f"Your requested instance type ({request.instance_type}) is not supported "
                    f"in your requested Availability Zone ({request.availability_zone}).",
                )
            self.quotas.check(request.instance_type, remaining, self.usage())
            pool = self._pool(request.availability_zone, request.instance_type)
            if not pool.can_take(remaining):
                raise insufficient_capacity(request.instance_type, request.availability_zone)
            allocations.append(
                Allocation(request.instance_type, request.availability_zone, remaining)
            )
        return allocations

    def _plan_targeted(self, request: LaunchRequest, count: int) -> Allocation:
        reservation = self.get(str(request.target_id))
        if reservation.is_capacity_block != (request.market_type == "capacity-block") or (
            request.market_type not in (None, "on-demand", "capacity-block")
        ):
            # A Capacity Block takes capacity-block launches only; an On-Demand Capacity
            # Reservation On-Demand ones only (a spot market type cannot use it).
            raise client_error(
                "InvalidParameterCombination",
                "Launches into a Capacity Block need MarketType capacity-block, and only they "
                "may use it; a Capacity Reservation takes On-Demand launches only.",
            )
        if reservation.waiting_to_start:
            # AWS: launching into a Capacity Block that has not started yet answers
            # "Insufficient Capacity" (EC2 Fleet and Capacity Blocks tutorial).
            raise insufficient_capacity(request.instance_type, request.availability_zone)
        if reservation.state != "active":
            raise client_error(
                "IncorrectState",
                f"The Capacity Reservation {reservation.id} is {reservation.state}, not active.",
            )
        if (
            reservation.instance_type != request.instance_type
            or reservation.availability_zone != request.availability_zone
            or reservation.tenancy != request.tenancy
        ):
            raise client_error(
                "InvalidParameterCombination",
                f"The instance type, Availability Zone or tenancy of the launch does not match "
                f"Capacity Reservation {reservation.id}.",
            )
        if reservation.available_instance_count < count:
            raise client_error(
                "ReservationCapacityExceeded",
                f"The requested number of instances exceeds the available capacity of the "
                f"Capacity Reservation {reservation.id} "
                f"({reservation.available_instance_count} available).",
            )
        return Allocation(request.instance_type, request.availability_zone, count, reservation.id)

    def commit(self, allocations: list[Allocation], instance_ids: list[str]) -> None:
        """Bind launched instances to the capacity they were planned on."""
        now = world.clock.now()
        for instance_id in instance_ids:
            self.propagation.made(instance_id, now)
        ids = iter(instance_ids)
        for allocation in allocations:
            for _ in range(allocation.count):
                instance_id = next(ids)
                self.instance_sources[instance_id] = allocation.reservation_id
                if allocation.reservation_id:
                    self.reservations[allocation.reservation_id].instances.add(instance_id)
                else:
                    key = (allocation.availability_zone, allocation.instance_type)
                    self._pool(*key).take(1)
                    self.pool_instances[key] += 1

    def release_instances(self, instance_ids: list[str], types: dict[str, tuple[str, str]]) -> None:
        """Terminated instances give their slot back (to the reservation or the pool)."""
        with world.lock:
            for instance_id in instance_ids:
                if instance_id not in self.instance_sources:
                    continue
                source = self.instance_sources.pop(instance_id)
                if source and source in self.reservations:
                    self.reservations[source].instances.discard(instance_id)
                elif instance_id in types:
                    key = types[instance_id]
                    self._pool(*key).give(1)
                    self.pool_instances[key] = max(self.pool_instances[key] - 1, 0)


def utc(value: datetime | None) -> datetime | None:
    """moto's request parser yields naive datetimes; EC2 means UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _utc_dates(params: dict[str, Any]) -> dict[str, Any]:
    return {k: utc(v) if isinstance(v, datetime) else v for k, v in params.items()}


def _not_cancellable(reservation_id: str, state: str) -> Exception:
    """CancelCapacityReservation: "You can cancel a Capacity Reservation that is in the
    following states: assessing; active …". EC2 does not document the code for other states;
    IncorrectState is its generic "the resource is in an incorrect state for the request"."""
    return client_error(
        "IncorrectState",
        f"The Capacity Reservation {reservation_id} is in the '{state}' state and cannot be "
        "cancelled.",
    )


def _check_filters(filters: dict[str, list[str]]) -> None:
    for name in filters:
        if not (name.startswith("tag:") or name in _FILTERS):
            raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")


_FILTERS = {
    "instance-type",
    "owner-id",
    "instance-platform",
    "availability-zone",
    "availability-zone-id",
    "tenancy",
    "outpost-arn",
    "state",
    "start-date",
    "end-date",
    "end-date-type",
    "instance-match-criteria",
    "placement-group-arn",
    "reservation-type",
    "capacity-reservation-id",
    "tag-key",
    "tag-value",
}


def _matches(
    reservation: CapacityReservation,
    filters: dict[str, list[str]],
    tags: dict[str, str],
    state: str | None = None,
) -> bool:
    for name, wanted in filters.items():
        if name == "outpost-arn":
            return False
        value = filter_value(reservation, name, tags, state)
        values = value if isinstance(value, list) else [value]
        values = [v.isoformat() if isinstance(v, datetime) else v for v in values if v is not None]
        patterns = [re.compile(simple_aws_filter_to_re(str(w))) for w in wanted]
        if not any(p.match(str(v)) for p in patterns for v in values):
            return False
    return True


def capacity_backend(ec2: EC2Backend) -> CapacityBackend:
    """The capacity state that lives beside moto's EC2 backend for one account and region."""
    backend = ec2.__dict__.get("_capacity")
    if backend is None:
        with world.lock:
            backend = ec2.__dict__.get("_capacity")
            if backend is None:
                backend = CapacityBackend(ec2)
                ec2.__dict__["_capacity"] = backend
    return backend
