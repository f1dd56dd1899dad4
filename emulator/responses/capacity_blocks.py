"""DescribeCapacityBlockOfferings and PurchaseCapacityBlock from the scenario's catalogue,
DescribeCapacityBlocks, and DescribeCapacityReservationTopology."""

from __future__ import annotations

from collections.abc import Callable

from moto.core.responses import ActionResult

from ..exceptions import client_error
from ..models.backend import utc
from ..models.extensions import (
    INTERCONNECT_STATUSES,
    block_status,
    capacity_block,
    capacity_block_filter,
    capacity_blocks,
    interconnect_status,
)
from ..models.reservations import CapacityReservation
from ..state import world
from ._base import CapacityResponse, wildcard_matcher


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
        # botocore 1.44.5 requires only CapacityDurationHours: InstanceCount is optional, and
        # an UltraServer search names UltraserverCount (and UltraserverType) instead.
        count = self._get_param("InstanceCount")
        servers = self._get_param("UltraserverCount")
        self.error_on_dryrun()
        offers = self.capacity.catalogue.search(
            instance_types=types,
            instance_count=int(count) if count is not None else None,
            duration_hours=int(self._get_param("CapacityDurationHours")),
            now=world.clock.now(),
            start_range=utc(self._get_param("StartDateRange")),
            end_range=utc(self._get_param("EndDateRange")),
            ultraserver_type=self._get_param("UltraserverType"),
            ultraserver_count=int(servers) if servers is not None else None,
            same_day=world.settings.same_day_offerings,
        )
        page, next_token = self._page(offers)
        result: dict[str, object] = {"CapacityBlockOfferings": [o.to_dict() for o in page]}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def purchase_capacity_block(self) -> ActionResult:
        tags = self._tags_for("capacity-reservation")
        self.error_on_dryrun()
        made = self.capacity.purchase_capacity_block(
            self._get_param("CapacityBlockOfferingId"),
            self._get_param("InstancePlatform"),
            tags,
        )
        shown = [r.to_dict(self.capacity.tags_of(r.id)) for r in made]
        first = made[0]
        # botocore 1.44.5: CapacityReservation (the first), CapacityReservations (every
        # segment's) and CapacityBlocks (the block, naming every reservation).
        block = {
            "CapacityBlockId": first.capacity_block_id,
            "AvailabilityZone": first.availability_zone,
            "AvailabilityZoneId": first.availability_zone_id,
            "CapacityReservationIds": [r.id for r in made],
            "StartDate": min(r.start_date for r in made),
            "EndDate": max(r.end_date for r in made if r.end_date is not None),
            "CreateDate": first.create_date,
            "State": first.state,
            "Tags": shown[0]["Tags"],
        }
        if first.ultraserver_type:
            block["UltraserverType"] = first.ultraserver_type
        return ActionResult(
            {
                "CapacityReservation": shown[0],
                "CapacityReservations": shown,
                "CapacityBlocks": [block],
            }
        )

    def describe_capacity_block_extension_offerings(self) -> ActionResult:
        reservation_id = self._get_param("CapacityReservationId")
        hours = int(self._get_param("CapacityBlockExtensionDurationHours"))
        self.error_on_dryrun()
        offers = self.capacity.describe_capacity_block_extension_offerings(reservation_id, hours)
        page, next_token = self._page(offers)
        result: dict[str, object] = {
            "CapacityBlockExtensionOfferings": [self.capacity.offer_dict(o) for o in page]
        }
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def purchase_capacity_block_extension(self) -> ActionResult:
        self.error_on_dryrun()
        extension = self.capacity.purchase_capacity_block_extension(
            self._get_param("CapacityBlockExtensionOfferingId"),
            self._get_param("CapacityReservationId"),
        )
        return ActionResult({"CapacityBlockExtensions": [extension.to_dict()]})

    def describe_capacity_block_extension_history(self) -> ActionResult:
        """botocore's filters: availability-zone, availability-zone-id,
        capacity-block-extension-offering-id, capacity-block-extension-status,
        capacity-reservation-id, instance-type."""
        ids = self._get_param("CapacityReservationIds", []) or []
        filters = self._filters_from_querystring()
        for name in filters:
            if name not in _HISTORY_FILTERS:
                raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        self.error_on_dryrun()
        found = [
            item
            for item in (e.to_dict() for e in self.capacity.extension_history(ids))
            if all(wildcard_matcher(v)(str(item[_HISTORY_FILTERS[n]])) for n, v in filters.items())
        ]
        page, next_token = self._page(found)
        result: dict[str, object] = {"CapacityBlockExtensions": page}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def describe_capacity_blocks(self) -> ActionResult:
        """Every Capacity Block bought (or seeded), or those ``CapacityBlockIds`` names, with
        the filters botocore's model documents for it (any other is refused before this)."""
        ids = self._get_param("CapacityBlockIds", []) or []
        filters = self._filters_from_querystring()
        self.error_on_dryrun()
        items = [
            capacity_block(parts, self.capacity.tags_of(parts[0].id))
            for parts in capacity_blocks(self.capacity, ids)
        ]
        found = [
            item
            for item in items
            if all(
                any(wildcard_matcher(values)(text) for text in capacity_block_filter(item, name))
                for name, values in filters.items()
            )
        ]
        page, next_token = self._page(found)
        result: dict[str, object] = {"CapacityBlocks": page}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def describe_capacity_block_status(self) -> ActionResult:
        """botocore's model: CapacityBlockIds, the filter interconnect-status (ok | impaired |
        insufficient-data), MaxResults 1-1000."""
        ids = self._get_param("CapacityBlockIds", []) or []
        filters = self._filters_from_querystring()
        for name, values in filters.items():
            if name != STATUS_FILTER:
                raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")
            for value in values:
                if value not in INTERCONNECT_STATUSES:
                    raise client_error(
                        "InvalidParameterValue",
                        f"Value ({value}) for filter interconnect-status is invalid.",
                    )
        self.error_on_dryrun()
        found = [
            r
            for r in self.capacity.block_statuses(ids)
            if all(wildcard_matcher(v)(interconnect_status(r)) for v in filters.values())
        ]
        page, next_token = self._page(found)
        result: dict[str, object] = {"CapacityBlockStatuses": [block_status(r) for r in page]}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def describe_capacity_reservation_topology(self) -> ActionResult:
        """botocore's model (DescribeCapacityReservationTopology): at most 10 ids, MaxResults
        1-10 and "You can't specify this parameter and the Capacity Reservation IDs parameter
        in the same request"; filters availability-zone and instance-type. NetworkNodes "is
        null or empty if the instance type is not supported [or] the Capacity Reservation is
        in a state other than active or pending"."""
        ids = self._get_param("CapacityReservationIds", []) or []
        if ids and self._get_param("MaxResults") is not None:
            raise client_error(
                "InvalidParameterCombination",
                "The parameters CapacityReservationIds and MaxResults cannot be used together.",
            )
        if len(ids) > TOPOLOGY_MAX_IDS:
            raise client_error(
                "InvalidParameterValue",
                f"You can specify up to {TOPOLOGY_MAX_IDS} Capacity Reservation IDs.",
            )
        filters = self._filters_from_querystring()
        for name in filters:
            if name not in _TOPOLOGY_FILTERS:
                raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        self.error_on_dryrun()
        found = [
            r
            for r in self.capacity.describe_capacity_reservations(ids, {})
            if all(wildcard_matcher(v)(_TOPOLOGY_FILTERS[n](r)) for n, v in filters.items())
        ]
        page, next_token = self._page(found, default=TOPOLOGY_MAX_IDS, maximum=TOPOLOGY_MAX_IDS)
        result: dict[str, object] = {"CapacityReservations": [_topology(r) for r in page]}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)


TOPOLOGY_MAX_IDS = 10
# DescribeCapacityBlockStatus's one filter (botocore's model documents no other).
STATUS_FILTER = "interconnect-status"
_HISTORY_FILTERS = {
    "availability-zone": "AvailabilityZone",
    "availability-zone-id": "AvailabilityZoneId",
    "capacity-block-extension-offering-id": "CapacityBlockExtensionOfferingId",
    "capacity-block-extension-status": "CapacityBlockExtensionStatus",
    "capacity-reservation-id": "CapacityReservationId",
    "instance-type": "InstanceType",
}
_TOPOLOGY_FILTERS: dict[str, Callable[[CapacityReservation], str]] = {
    "availability-zone": lambda r: r.availability_zone,
    "instance-type": lambda r: r.instance_type,
}


def _topology(reservation: CapacityReservation) -> dict[str, object]:
    item: dict[str, object] = {
        "CapacityReservationId": reservation.id,
        "State": reservation.state,
        "InstanceType": reservation.instance_type,
        "AvailabilityZoneId": reservation.availability_zone_id,
        "AvailabilityZone": reservation.availability_zone,
    }
    # "only supported for UltraServer instances" (botocore: CapacityReservationTopology)
    if reservation.capacity_block_id and reservation.ultraserver_type:
        item["CapacityBlockId"] = reservation.capacity_block_id
    if reservation.placement_group_arn:
        item["GroupName"] = reservation.placement_group_arn.split(":placement-group/", 1)[-1]
    if reservation.network_nodes and reservation.state in ("active", "pending"):
        item["NetworkNodes"] = list(reservation.network_nodes)
    return item
