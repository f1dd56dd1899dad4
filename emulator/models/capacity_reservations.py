"""On-Demand Capacity Reservations: Create, Describe, Cancel and Modify (the APIs moto does
not have), with EC2's eventual consistency (``consistency``) and idempotency (``tokens``).

Every decision that reads and changes capacity runs under ``world.lock``: two concurrent
creates must not both win the last slot of a pool.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..exceptions import (
    client_error,
    insufficient_capacity,
    reservation_not_found,
)
from ..state import world
from .base import _utc_dates, new_reservation_id, platforms
from .consistency import Seen, answer_fault, filters_by_tag
from .expiry import Expiry
from .filters import matches
from .reservations import CapacityReservation, Shown, filter_value


class CapacityReservations(Expiry):
    """The Capacity Reservation calls (a Capacity Block is one too: described, not cancelled
    or modified here)."""

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
        if answer_fault("failed") is not None:
            # EC2 may answer a create with a reservation in state failed ("A request might
            # fail due to invalid request parameters, capacity constraints, or instance limit
            # constraints. Failed requests are retained for 60 minutes."): it holds nothing.
            reservation.state = "failed"
            self.reservations[reservation.id] = reservation
            if tags:
                self.ec2.create_tags([reservation.id], tags)
            return reservation.id
        if not self.offered(reservation.availability_zone, reservation.instance_type):
            raise client_error(
                "Unsupported",
                f"Your requested instance type ({reservation.instance_type}) is not "
                f"supported in your requested Availability Zone "
                f"({reservation.availability_zone}). Please retry your request by not "
                f"specifying an Availability Zone or choosing a different one.",
            )
        self.quotas.check(
            reservation.instance_type,
            reservation.total_instance_count,
            self.quota_usage(),
            reservation=True,
        )
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
                    self.quotas.check(
                        reservation.instance_type, delta, self.quota_usage(), reservation=True
                    )
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
    """Filters this model can apply. Which ones EC2 documents for the operation (and refuses
    otherwise) is ``emulator.documented``'s, ahead of this; with that off
    (``refuse_undocumented: false``) the few more applied here still work."""
    for name in filters:
        if not (name.startswith("tag:") or name in _APPLIED):
            raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")


_APPLIED = {
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
        if not any(matches(wanted, v) for v in values):
            return False
    return True
