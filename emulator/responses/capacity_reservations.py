"""CreateCapacityReservation, Describe, GetCapacityReservationUsage, Cancel and Modify: the APIs
moto does not have."""

from __future__ import annotations

from moto.core.responses import ActionResult

from ..models.extensions import reservation_usage
from ._base import CapacityResponse


class CapacityReservations(CapacityResponse):
    def create_capacity_reservation(self) -> ActionResult:
        tags = self._tags_for("capacity-reservation")
        self.error_on_dryrun()
        params = {k: v for k, v in self.params.items() if k != "DryRun"}
        reservation = self.capacity.create_capacity_reservation(params, tags)
        # A new ODCR answers `pending`: its state takes a while to show `active` (EC2 User
        # Guide, "View the state of a Capacity Reservation"; emulator.models.consistency).
        return ActionResult({"CapacityReservation": self.capacity.shown(reservation).to_dict()})

    def describe_capacity_reservations(self) -> ActionResult:
        ids = self._get_param("CapacityReservationIds", [])
        filters = self._filters_from_querystring()
        self.error_on_dryrun()
        found = self.capacity.list_capacity_reservations(ids, filters)
        page, next_token = self._page(found)
        result: dict[str, object] = {"CapacityReservations": [r.to_dict() for r in page]}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def get_capacity_reservation_usage(self) -> ActionResult:
        reservation_id = self._get_param("CapacityReservationId")
        self.error_on_dryrun()
        # As this call sees it: one made a moment ago may be unknown yet, or still pending.
        reservation, seen = self.capacity.named(reservation_id)
        shown = self.capacity.shown(reservation, seen, tags=False)
        page, next_token = self._page(reservation_usage(reservation, shown.state)["InstanceUsages"])
        result: dict[str, object] = reservation_usage(reservation, shown.state)
        result["InstanceUsages"] = page
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def cancel_capacity_reservation(self) -> ActionResult:
        reservation_id = self._get_param("CapacityReservationId")
        self.error_on_dryrun()
        self.capacity.cancel_capacity_reservation(
            reservation_id,
            quote_id=self._get_param("QuoteId"),
            charges=self._get_param("ApplyCancellationCharges"),
        )
        return ActionResult({"Return": True})

    def modify_capacity_reservation(self) -> ActionResult:
        self.error_on_dryrun()
        params = {k: v for k, v in self.params.items() if k != "DryRun"}
        self.capacity.modify_capacity_reservation(params)
        return ActionResult({"Return": True})

    # -- interruptible Capacity Reservations (``models.interruptible``) ----------------------
    def create_interruptible_capacity_reservation_allocation(self) -> ActionResult:
        self._check_tag_specifications()
        tags = self._tags_for("capacity-reservation")
        self.error_on_dryrun()
        params = {k: v for k, v in self.params.items() if k not in ("DryRun", "TagSpecification")}
        source = self.capacity.create_interruptible_allocation(params, tags)
        allocation = source.allocation or {}
        return ActionResult(
            {
                "SourceCapacityReservationId": source.id,
                "TargetInstanceCount": allocation.get("TargetInstanceCount"),
                "Status": allocation.get("Status"),
                "InterruptionType": allocation.get("InterruptionType"),
            }
        )

    def update_interruptible_capacity_reservation_allocation(self) -> ActionResult:
        self.error_on_dryrun()
        params = {k: v for k, v in self.params.items() if k != "DryRun"}
        source = self.capacity.update_interruptible_allocation(params)
        allocation = source.allocation or {}
        return ActionResult(
            {
                "InterruptibleCapacityReservationId": allocation.get(
                    "InterruptibleCapacityReservationId"
                ),
                "SourceCapacityReservationId": source.id,
                "InstanceCount": allocation.get("InstanceCount"),
                "TargetInstanceCount": allocation.get("TargetInstanceCount"),
                "Status": allocation.get("Status"),
                "InterruptionType": allocation.get("InterruptionType"),
            }
        )
