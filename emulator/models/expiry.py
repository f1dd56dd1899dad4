"""Time: the emulator clock moves reservations on (pending → active, limited → expired,
Capacity Blocks scheduled → active → reclaimed, their extensions paid or failed, future-dated
ODCRs assessed, delivered or delayed), and what stops holding gives capacity back."""

from __future__ import annotations

from datetime import datetime

from ..state import world
from .base import BackendBase
from .pools import Pool
from .reservations import CapacityReservation


class Expiry(BackendBase):
    """The clock applied to reservations and pools."""

    def pool(self, availability_zone: str, instance_type: str) -> Pool:
        """The pool as of the emulator clock (expired reservations have given back theirs)."""
        self.refresh()
        return self._pool(availability_zone, instance_type)

    def refresh(self, now: datetime | None = None) -> None:
        """Apply the clock: pending → active, limited → expired, blocks scheduled → active and
        their extensions settled, future-dated ODCRs assessed and delivered."""
        now = now or world.clock.now()
        with world.lock:
            settings = world.settings
            for reservation in self.reservations.values():
                if reservation.is_capacity_block:
                    self._settle_extensions(reservation, now)
                held = reservation.holding
                reservation.advance(
                    now, settings.expiry_lag_seconds, settings.payment_timeout_seconds
                )
                if reservation.is_future_dated:
                    self._deliver(reservation, now)
                if held and not reservation.holding:
                    self._release_hold(reservation)
                elif reservation.instances and reservation.reclaiming(now):
                    self._terminate_block_instances(reservation)

    def _settle_extensions(self, reservation: CapacityReservation, now: datetime) -> None:
        """Overridden by ``models.extensions``: a block's extensions paid or failed."""

    def _deliver(self, reservation: CapacityReservation, now: datetime) -> None:
        """Overridden by ``models.future``: a future-dated ODCR delivered at its start."""

    def _release_hold(self, reservation: CapacityReservation) -> None:
        """A reservation stopped holding: free slots go back, running instances stay."""
        if not reservation.is_capacity_block:
            free = reservation.total_instance_count - reservation.used_instance_count
            self._pool(reservation.availability_zone, reservation.instance_type).give(max(free, 0))
            # Back in the pool at once, but the account's limits count it a while longer.
            self.lingering.add(reservation.instance_type, max(free, 0), world.clock.now())
            for instance_id in reservation.instances:
                self.instance_sources[instance_id] = None
                self.pool_instances[(reservation.availability_zone, reservation.instance_type)] += 1
        else:
            self._terminate_block_instances(reservation)
        reservation.instances = set()
        reservation.cleaning = {}
        reservation.seeded_used = 0

    def _terminate_block_instances(self, reservation: CapacityReservation) -> None:
        """EC2 terminates what still runs in a Capacity Block from 30 minutes before its end."""
        for instance_id in reservation.instances:
            self.instance_sources.pop(instance_id, None)
        if reservation.instances:
            self.ec2.terminate_instances(sorted(reservation.instances))
        reservation.instances = set()
