"""Interruptible Capacity Reservations: unused instances of a source ODCR lent as a reservation
of their own (CreateInterruptibleCapacityReservationAllocation), grown or reclaimed later
(UpdateInterruptibleCapacityReservationAllocation). moto has neither.

botocore 1.44.5's model: "Creates an interruptible Capacity Reservation by specifying the number
of unused instances you want to allocate from your source reservation"; the source "must be in
active state with no end date set and have available capacity for allocation"; the update
"Modifies the number of instances allocated to an interruptible reservation, allowing you to
add more capacity or reclaim capacity to your source Capacity Reservation".
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..exceptions import client_error
from ..state import world
from .base import new_reservation_id
from .capacity_reservations import CapacityReservations
from .reservations import CapacityReservation


class InterruptibleReservations(CapacityReservations):
    """The interruptible allocation of a source reservation, and its reservation."""

    def create_interruptible_allocation(
        self, params: dict[str, Any], tags: dict[str, str]
    ) -> CapacityReservation:
        """The source reservation after the allocation (its answer names the allocation)."""
        now = world.clock.now()
        with world.lock:
            self.refresh(now)
            source_id, _ = self.client_tokens.once(
                "CreateInterruptibleCapacityReservationAllocation",
                params.get("ClientToken"),
                params,
                lambda: self._allocate(params, tags, now),
            )
            return self.reservations[source_id]

    def seed_interruptible(
        self, source_id: str, count: int, preference: str | None, tags: dict[str, str]
    ) -> CapacityReservation:
        """A scenario's interruptible reservation: allocated as the API would, settled at
        once (seeded state already exists; the API's eventual consistency is for new ones)."""
        params = {
            "CapacityReservationId": source_id,
            "InstanceCount": count,
            "ZeroSizePreference": preference,
        }
        with world.lock:
            self.refresh()
            source = self.reservations[self._allocate(params, tags, world.clock.now(), False)]
            return self.reservations[
                str((source.allocation or {})["InterruptibleCapacityReservationId"])
            ]

    def _allocate(
        self, params: dict[str, Any], tags: dict[str, str], now: datetime, settling: bool = True
    ) -> str:
        source = (
            self.named(str(params["CapacityReservationId"]))[0]
            if settling
            else self.get(str(params["CapacityReservationId"]))
        )
        count = int(params["InstanceCount"])
        if (
            source.state != "active"
            or source.end_date_type != "unlimited"
            or source.is_capacity_block
            or source.interruptible
        ):
            raise client_error(
                "InvalidParameterValue",
                f"The Capacity Reservation {source.id} cannot be a source: it must be an "
                "active On-Demand Capacity Reservation with no end date.",
            )
        if source.allocation is not None and source.allocation["Status"] != "canceled":
            # The update names the allocation by its source (UpdateInterruptibleCapacity-
            # ReservationAllocation's CapacityReservationId): one allocation per source.
            raise client_error(
                "InvalidParameterValue",
                f"The Capacity Reservation {source.id} already has an interruptible allocation "
                f"({source.allocation['InterruptibleCapacityReservationId']}); update it instead.",
            )
        if not 1 <= count <= source.available_instance_count:
            raise client_error(
                "InvalidParameterValue",
                f"Value ({count}) for parameter instanceCount is invalid: the source Capacity "
                f"Reservation {source.id} has {source.available_instance_count} available "
                "instances (only unused capacity can be allocated).",
            )
        preference = params.get("ZeroSizePreference") or "default"
        lent = CapacityReservation(
            id=new_reservation_id(),
            owner_id=source.owner_id,
            region=source.region,
            availability_zone=source.availability_zone,
            availability_zone_id=source.availability_zone_id,
            instance_type=source.instance_type,
            instance_platform=source.instance_platform,
            tenancy=source.tenancy,
            total_instance_count=count,
            create_date=now,
            start_date=now,
            end_date=None,
            end_date_type="unlimited",
            # Used only by launches that name it (or its group): chosen, AWS's pages launch
            # into one with a template that targets it.
            instance_match_criteria="targeted",
            ebs_optimized=source.ebs_optimized,
            ephemeral_storage=source.ephemeral_storage,
            placement_group_arn=source.placement_group_arn,
            state="active",
            interruptible=True,
            source_id=source.id,
            zero_size_preference=preference,
        )
        self.reservations[lent.id] = lent
        if tags:
            self.ec2.create_tags([lent.id], tags)
        if settling:
            self.propagation.made(lent.id, now)
        source.lent = count
        source.allocation = {
            "InstanceCount": count,
            "TargetInstanceCount": count,
            "Status": "active",
            "InterruptibleCapacityReservationId": lent.id,
            "InterruptionType": "adhoc",
            "ZeroSizePreference": preference,
        }
        return source.id

    def update_interruptible_allocation(self, params: dict[str, Any]) -> CapacityReservation:
        """The source reservation after the update."""
        with world.lock:
            self.refresh()
            source, _ = self.named(str(params["CapacityReservationId"]))
            allocation = source.allocation
            if allocation is None or allocation["Status"] == "canceled":
                raise client_error(
                    "InvalidParameterValue",
                    f"The Capacity Reservation {source.id} has no interruptible allocation.",
                )
            lent = self.reservations[allocation["InterruptibleCapacityReservationId"]]
            if lent.reclaim_to is not None:
                # botocore's Status: "updating during reclamation, active when complete".
                raise client_error(
                    "IncorrectState",
                    f"The interruptible Capacity Reservation {lent.id} is being reclaimed "
                    "(updating); try again when it is active.",
                )
            if params.get("ZeroSizePreference"):
                lent.zero_size_preference = params["ZeroSizePreference"]
                allocation["ZeroSizePreference"] = params["ZeroSizePreference"]
            target = params.get("TargetInstanceCount")
            if target is None:
                return source
            target = int(target)
            delta = target - lent.total_instance_count
            if target < 0 or delta > source.available_instance_count:
                raise client_error(
                    "InvalidParameterValue",
                    f"Value ({target}) for parameter targetInstanceCount is invalid: the source "
                    f"Capacity Reservation {source.id} has {source.available_instance_count} "
                    "more available instances to allocate.",
                )
            allocation["TargetInstanceCount"] = target
            if delta < 0 and lent.used_instance_count > target:
                # Instances run beyond the new count: they get the interruption notice and
                # are terminated after it ("the capacity owner can reclaim the capacity at
                # any time with a 2-minute interruption notice, after which EC2 terminates
                # the instances"); until then the allocation is updating.
                notice = timedelta(seconds=world.settings.interruption_notice_seconds)
                lent.reclaim_to = target
                lent.reclaim_at = world.clock.now() + notice
                allocation["Status"] = "updating"
                self.refresh()  # a notice of 0 seconds ends now
                return source
            self._resize(source, lent, target)
            return source

    def _resize(self, source: CapacityReservation, lent: CapacityReservation, target: int) -> None:
        """The allocation at ``target`` instances (nothing runs beyond it)."""
        allocation = source.allocation or {}
        lent.total_instance_count = target
        lent.reclaim_to = lent.reclaim_at = None
        source.lent = target
        allocation["InstanceCount"] = target
        allocation["TargetInstanceCount"] = target
        allocation["Status"] = "active"
        if target == 0 and (lent.zero_size_preference or "default") == "default":
            # "Specify default to cancel the interruptible Capacity Reservation and return
            # the capacity to your source Capacity Reservation."
            lent.state = "cancelled"
            allocation["Status"] = "canceled"

    def refresh(self, now: datetime | None = None) -> None:
        """The clock, and the interruptible reservations whose interruption notice is over:
        what runs beyond the new count is terminated (the newest first), then the allocation
        is resized."""
        now = now or world.clock.now()
        with world.lock:
            super().refresh(now)
            for lent in list(self.reservations.values()):
                if lent.reclaim_at is None or now < lent.reclaim_at or lent.reclaim_to is None:
                    continue
                excess = lent.used_instance_count - lent.reclaim_to
                doomed = sorted(lent.instances)[-excess:] if excess > 0 else []
                if doomed:
                    where = {
                        i.id: (i.availability_zone, i.instance_type)
                        for i in self.ec2.get_multi_instances_by_id(doomed)
                    }
                    self.ec2.terminate_instances(doomed)
                    self.release_instances(doomed, where)  # type: ignore[attr-defined]
                source = self.reservations.get(str(lent.source_id))
                if source is not None:
                    self._resize(source, lent, lent.reclaim_to)

    def _release_hold(self, reservation: CapacityReservation) -> None:
        """An interruptible reservation that stops holding gives its capacity back to its
        source, not to the pool (it never took any from it)."""
        if not reservation.interruptible:
            super()._release_hold(reservation)
            return
        source = self.reservations.get(str(reservation.source_id))
        if source is not None and source.allocation is not None:
            source.lent = 0
            source.allocation["Status"] = "canceled"
            source.allocation["InstanceCount"] = 0
        for instance_id in reservation.instances:
            self.instance_sources[instance_id] = None
            key = (reservation.availability_zone, reservation.instance_type)
            self.pool_instances[key] += 1
        reservation.instances = set()
