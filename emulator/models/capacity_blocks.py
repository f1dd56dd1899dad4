"""Capacity Blocks: buying an offering from the catalogue, and the block that makes."""

from __future__ import annotations

from datetime import datetime

from ..exceptions import client_error
from ..state import world
from .base import new_block_id, new_reservation_id, platforms
from .expiry import Expiry
from .reservations import CapacityReservation


class CapacityBlocks(Expiry):
    """PurchaseCapacityBlock, and the blocks scenarios seed."""

    def purchase_capacity_block(
        self, offering_id: str, platform: str, tags: dict[str, str]
    ) -> list[CapacityReservation]:
        """The reservations a purchase makes: one, or one per segment of the offering ("When
        a Capacity Block offering contains multiple segments, a separate Capacity Reservation
        is created for each segment", botocore 1.44.5 PurchaseCapacityBlockResult), each with
        the zone, instance type and schedule its offering's segment names
        (CapacityBlockOfferingSegments: "each with its own Availability Zone, instance type,
        schedule, and pricing")."""
        now = world.clock.now()
        if platform not in platforms():
            raise client_error(
                "InvalidParameterValue",
                f"Value ({platform}) for parameter instancePlatform is invalid.",
            )
        with world.lock:
            offer = self.catalogue.take(offering_id, now)
            supply = self.catalogue.supply[offer.supply_index]
            made = []
            block_id = new_block_id()
            for segment in offer.segments:
                reservation = self.new_block(
                    instance_type=segment.instance_type,
                    availability_zone=segment.availability_zone,
                    count=segment.instance_count,
                    start=segment.start,
                    end=segment.end,
                    platform=platform,
                    tenancy=offer.tenancy,
                    ultraserver_type=supply.ultraserver_type,
                )
                reservation.capacity_block_id = block_id  # one block, several reservations
                self.reservations[reservation.id] = reservation
                self._tag(reservation, tags)
                made.append(reservation)
            return made

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
