"""DescribeCapacityBlockOfferings and PurchaseCapacityBlock from the scenario's catalogue."""

from __future__ import annotations

from moto.core.responses import ActionResult

from ..exceptions import client_error
from ..models.backend import utc
from ..state import world
from ._base import CapacityResponse


class CapacityBlocks(CapacityResponse):
    def describe_capacity_block_offerings(self) -> ActionResult:
        preferences = self._get_param("InstanceTypePreferences", []) or []
        types = [p["InstanceType"] for p in preferences if p.get("InstanceType")]
        if self._get_param("InstanceType"):
            types.append(self._get_param("InstanceType"))
        if not types:
            raise client_error(
                "MissingParameter",
                "The request must contain the parameter InstanceType or InstanceTypePreferences",
            )
        count = self._get_param("InstanceCount")
        if count is None:
            raise client_error(
                "MissingParameter", "The request must contain the parameter InstanceCount"
            )
        self.error_on_dryrun()
        offers = self.capacity.catalogue.search(
            instance_types=types,
            instance_count=int(count),
            duration_hours=int(self._get_param("CapacityDurationHours")),
            now=world.clock.now(),
            start_range=utc(self._get_param("StartDateRange")),
            end_range=utc(self._get_param("EndDateRange")),
        )
        page, next_token = self._page(offers)
        result: dict[str, object] = {"CapacityBlockOfferings": [o.to_dict() for o in page]}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def purchase_capacity_block(self) -> ActionResult:
        tags = self._tags_for("capacity-reservation")
        self.error_on_dryrun()
        reservation = self.capacity.purchase_capacity_block(
            self._get_param("CapacityBlockOfferingId"),
            self._get_param("InstancePlatform"),
            tags,
        )
        return ActionResult(
            {"CapacityReservation": reservation.to_dict(self.capacity.tags_of(reservation.id))}
        )

    def describe_capacity_reservation_topology(self) -> ActionResult:
        ids = self._get_param("CapacityReservationIds", [])
        self.error_on_dryrun()
        found = [
            r for r in self.capacity.describe_capacity_reservations(ids, {}) if r.network_nodes
        ]
        page, next_token = self._page(found, default=10, maximum=10)
        result: dict[str, object] = {
            "CapacityReservations": [
                {
                    "CapacityReservationId": r.id,
                    "CapacityBlockId": r.capacity_block_id,
                    "State": r.state,
                    "InstanceType": r.instance_type,
                    "NetworkNodes": r.network_nodes,
                    "AvailabilityZoneId": r.availability_zone_id,
                    "AvailabilityZone": r.availability_zone,
                }
                for r in page
            ]
        }
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)
