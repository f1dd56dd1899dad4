"""Read-only discovery calls (topology, instance types, offerings, Spot prices, Capacity Block
offerings), the one Capacity Block purchase, and the On-Demand price from the AWS Price List.

Every list is read to its last page. Nothing here is cached: callers decide what may be
reused and for how long.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..aws import AwsError, Clients, call
from .base import Ec2Base
from .filters import Filters, Wanted
from .reservations import RESOURCE_TYPE, Reservation

if TYPE_CHECKING:
    from .zones import Zone

# API limits (botocore's EC2 model): ids per topology call, names per DescribeInstanceTypes.
TOPOLOGY_IDS_PER_CALL = 10
INSTANCE_TYPES_PER_CALL = 100
SPOT_TYPES_PER_CALL = 100
# Ids per DescribeCapacityBlockStatus call (botocore gives no limit; EC2's describe calls take
# up to 1000 results a page, and a listing names far fewer blocks).
BLOCK_STATUS_IDS_PER_CALL = 100


class TopologyUnreadable(ValueError):
    """DescribeCapacityReservationTopology answered in a shape the broker cannot read."""


def _topology_item(item: Any) -> tuple[str, list[str]]:
    """(reservation id, network nodes) of one CapacityReservationTopology; NetworkNodes is
    absent or empty when EC2 has no placement for it (botocore's model)."""
    if not isinstance(item, Mapping) or not isinstance(item.get("CapacityReservationId"), str):
        raise TopologyUnreadable(f"a topology item without a reservation id: {item!r:.200}")
    nodes = item.get("NetworkNodes") or []
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise TopologyUnreadable(f"NetworkNodes of {item['CapacityReservationId']}: {nodes!r:.200}")
    return item["CapacityReservationId"], list(nodes)


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


class DiscoveryMixin(Ec2Base):
    def describe_reservations(
        self, filters: Mapping[str, Iterable[Wanted]] | None = None, deadline: float | None = None
    ) -> list[dict[str, Any]]:
        """Every Capacity Reservation (ODCRs and Capacity Blocks) as EC2 describes it, all
        pages (the listing needs fields the ``Reservation`` view leaves out); ``filters``
        match exactly, as in ``reservations``."""
        params: dict[str, Any] = {"MaxResults": 1000}
        wanted = Filters(filters)
        if wanted:
            params["Filters"] = wanted.params()
        return [
            item
            for item in self._pages(
                "DescribeCapacityReservations", "CapacityReservations", deadline, **params
            )
            for seen in [Reservation.from_api(self.region, item)]
            if wanted.admit(seen.tags, seen.filter_fields())
        ]

    def topology(
        self, reservation_ids: Iterable[str], deadline: float | None = None
    ) -> dict[str, list[str]]:
        """Reservation id → its network nodes (empty when EC2 places it on none), for the
        reservations EC2 answered about. Ids go ten a call, EC2's limit, and without
        MaxResults: botocore's model, DescribeCapacityReservationTopology.MaxResults, "You
        can't specify this parameter and the Capacity Reservation IDs parameter in the same
        request". An answer of another shape raises ``TopologyUnreadable``."""
        ids = list(dict.fromkeys(reservation_ids))
        nodes: dict[str, list[str]] = {}
        for chunk in _chunks(ids, TOPOLOGY_IDS_PER_CALL):
            try:
                for item in self._pages(
                    "DescribeCapacityReservationTopology",
                    "CapacityReservations",
                    deadline,
                    CapacityReservationIds=chunk,
                ):
                    reservation_id, found = _topology_item(item)
                    nodes[reservation_id] = found
            except (AttributeError, TypeError) as error:  # a page that is not a mapping
                raise TopologyUnreadable(f"unexpected topology answer: {error}") from error
        return nodes

    def instance_types(
        self,
        names: Sequence[str] | None = None,
        patterns: Sequence[str] | None = None,
        filters: Mapping[str, Sequence[str]] | None = None,
        deadline: float | None = None,
    ) -> list[dict[str, Any]]:
        """DescribeInstanceTypes by exact names (100 per call) or by EC2 wildcard patterns."""
        base: dict[str, Any] = {}
        all_filters = dict(filters or {})
        if patterns:
            all_filters["instance-type"] = list(patterns)
        if all_filters:
            base["Filters"] = [{"Name": k, "Values": list(v)} for k, v in all_filters.items()]
        if names:
            found: list[dict[str, Any]] = []
            for chunk in _chunks(list(dict.fromkeys(names)), INSTANCE_TYPES_PER_CALL):
                found.extend(
                    self._pages(
                        "DescribeInstanceTypes",
                        "InstanceTypes",
                        deadline,
                        InstanceTypes=chunk,
                        **base,
                    )
                )
            return found
        return list(
            self._pages(
                "DescribeInstanceTypes",
                "InstanceTypes",
                deadline,
                MaxResults=INSTANCE_TYPES_PER_CALL,
                **base,
            )
        )

    def instance_type_offerings(
        self,
        patterns: Sequence[str] | None = None,
        locations: Sequence[str] | None = None,
        location_type: str = "availability-zone",
        deadline: float | None = None,
    ) -> list[tuple[str, str]]:
        """(instance type, location) pairs EC2 offers."""
        filters = []
        if patterns:
            filters.append({"Name": "instance-type", "Values": list(patterns)})
        if locations:
            filters.append({"Name": "location", "Values": list(locations)})
        params: dict[str, Any] = {"LocationType": location_type, "MaxResults": 1000}
        if filters:
            params["Filters"] = filters
        return [
            (item["InstanceType"], item["Location"])
            for item in self._pages(
                "DescribeInstanceTypeOfferings", "InstanceTypeOfferings", deadline, **params
            )
        ]

    def zones(self, deadline: float | None = None) -> list[Zone]:
        # Imported here: only the client's ``az`` look-up lists zones; no handler does.
        from .zones import Zone

        answer = self._call("DescribeAvailabilityZones", deadline)
        return [
            Zone(
                name=z["ZoneName"],
                zone_id=z.get("ZoneId", ""),
                zone_type=z.get("ZoneType", "availability-zone"),
                state=z.get("State", "available"),
            )
            for z in answer.get("AvailabilityZones", [])
        ]

    def spot_price_history(
        self,
        instance_types: Sequence[str],
        product_descriptions: Sequence[str],
        start: datetime | None = None,
        end: datetime | None = None,
        availability_zone: str | None = None,
        deadline: float | None = None,
    ) -> list[dict[str, Any]]:
        """Every page of DescribeSpotPriceHistory. With ``start`` EC2 also returns the last
        price change before it, i.e. the price in effect at ``start``."""
        found: list[dict[str, Any]] = []
        base: dict[str, Any] = {"ProductDescriptions": list(product_descriptions)}
        if start is not None:
            base["StartTime"] = start
        if end is not None:
            base["EndTime"] = end
        if availability_zone:
            base["AvailabilityZone"] = availability_zone
        for chunk in _chunks(list(dict.fromkeys(instance_types)), SPOT_TYPES_PER_CALL):
            found.extend(
                self._pages(
                    "DescribeSpotPriceHistory",
                    "SpotPriceHistory",
                    deadline,
                    InstanceTypes=chunk,
                    MaxResults=1000,
                    **base,
                )
            )
        return found

    def block_offerings(
        self,
        instance_types: str | Sequence[str],
        instance_count: int,
        duration_hours: int,
        start_after: datetime | None = None,
        end_before: datetime | None = None,
        deadline: float | None = None,
        *,
        ultraservers: int | None = None,
        ultraserver_type: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every page of DescribeCapacityBlockOfferings. Several types go in one call as
        ``InstanceTypePreferences`` (botocore: "Either this or the legacy InstanceType
        parameter is required"); one type as ``InstanceType``. ``ultraservers``: a search by
        "The number of EC2 UltraServers in the offerings" (``UltraserverCount``) instead of
        by instances; ``ultraserver_type``: "The EC2 UltraServer type of the Capacity Block
        offerings" (``UltraserverType``; botocore 1.44.5 requires only
        ``CapacityDurationHours``)."""
        types = [instance_types] if isinstance(instance_types, str) else list(instance_types)
        params: dict[str, Any] = {"CapacityDurationHours": duration_hours, "MaxResults": 1000}
        if ultraservers is not None:
            params["UltraserverCount"] = ultraservers
        else:
            params["InstanceCount"] = instance_count
        if ultraserver_type is not None:
            params["UltraserverType"] = ultraserver_type
        if len(types) == 1:
            params["InstanceType"] = types[0]
        else:
            params["InstanceTypePreferences"] = [{"InstanceType": t} for t in types]
        if start_after is not None:
            params["StartDateRange"] = start_after
        if end_before is not None:
            params["EndDateRange"] = end_before
        return list(
            self._pages(
                "DescribeCapacityBlockOfferings", "CapacityBlockOfferings", deadline, **params
            )
        )

    def block_extension_offerings(
        self, reservation_id: str, hours: int, deadline: float | None = None
    ) -> list[dict[str, Any]]:
        """DescribeCapacityBlockExtensionOfferings: what extending the block by ``hours``
        would cost (none when EC2 has not the capacity)."""
        return list(
            self._pages(
                "DescribeCapacityBlockExtensionOfferings",
                "CapacityBlockExtensionOfferings",
                deadline,
                CapacityReservationId=reservation_id,
                CapacityBlockExtensionDurationHours=hours,
                MaxResults=1000,
            )
        )

    def block_extensions(
        self, reservation_ids: Sequence[str], deadline: float | None = None
    ) -> list[dict[str, Any]]:
        """DescribeCapacityBlockExtensionHistory of these blocks: every extension bought for
        them, with its status (payment-pending | payment-failed | payment-succeeded)."""
        return list(
            self._pages(
                "DescribeCapacityBlockExtensionHistory",
                "CapacityBlockExtensions",
                deadline,
                CapacityReservationIds=list(reservation_ids),
                MaxResults=1000,
            )
        )

    def purchase_block_extension(self, offering_id: str, reservation_id: str) -> dict[str, Any]:
        """Buy one extension. Called once, like a block purchase: the call has no ClientToken
        and an extension cannot be undone; an unclear failure is resolved by reading the
        block's extension history, never by buying again."""
        data = self._call_once(
            "PurchaseCapacityBlockExtension",
            CapacityBlockExtensionOfferingId=offering_id,
            CapacityReservationId=reservation_id,
        )
        extensions = data.get("CapacityBlockExtensions") or []
        return dict(extensions[0]) if extensions else {}

    def block_statuses(
        self, block_ids: Sequence[str], deadline: float | None = None
    ) -> dict[str, str]:
        """Capacity Block id → its interconnect status (DescribeCapacityBlockStatus:
        ok | impaired | insufficient-data), for the blocks EC2 answered about."""
        found: dict[str, str] = {}
        for chunk in _chunks(list(dict.fromkeys(block_ids)), BLOCK_STATUS_IDS_PER_CALL):
            for item in self._pages(
                "DescribeCapacityBlockStatus",
                "CapacityBlockStatuses",
                deadline,
                CapacityBlockIds=chunk,
            ):
                if isinstance(item, Mapping) and isinstance(item.get("CapacityBlockId"), str):
                    found[item["CapacityBlockId"]] = str(item.get("InterconnectStatus") or "")
        return found

    def purchase_capacity_block(
        self, offering_id: str, platform: str, tags: Mapping[str, str]
    ) -> list[Reservation]:
        """Buy one Capacity Block, tagged on create: the reservations it made, every segment's
        (botocore 1.44.5 PurchaseCapacityBlockResult: "When a Capacity Block offering contains
        multiple segments, a separate Capacity Reservation is created for each segment", in
        ``CapacityReservations``; ``CapacityReservation`` alone names one). Called once: an
        error is the caller's to resolve (look the block up by its tags) rather than a reason
        to buy again."""
        data = self._call_once(
            "PurchaseCapacityBlock",
            CapacityBlockOfferingId=offering_id,
            InstancePlatform=platform,
            TagSpecifications=[
                {
                    "ResourceType": RESOURCE_TYPE,
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ],
        )
        items = list(data.get("CapacityReservations") or [])
        single = data.get("CapacityReservation")
        if single and all(
            i.get("CapacityReservationId") != single.get("CapacityReservationId") for i in items
        ):
            items.insert(0, single)
        return [Reservation.from_api(self.region, item) for item in items]

    def tag_reservations(
        self, reservation_ids: Iterable[str], tags: Mapping[str, str], deadline: float | None = None
    ) -> None:
        self._call(
            "CreateTags",
            deadline,
            Resources=list(reservation_ids),
            Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
        )


# -- the AWS Price List (On-Demand prices) ----------------------------------------------------

# The Price List query API answers in these regions only; us-east-1 serves the aws partition.
PRICING_REGION = "us-east-1"
# The plain Linux On-Demand product of an instance type in a region.
_LINUX_ON_DEMAND = {
    "operatingSystem": "Linux",
    "preInstalledSw": "NA",
    "licenseModel": "No License required",
    "tenancy": "Shared",
    "capacitystatus": "Used",
}


class Pricing:
    """On-Demand prices from the AWS Price List query API (``pricing:GetProducts``)."""

    def __init__(self, clients: Clients, region: str = PRICING_REGION) -> None:
        self.clients = clients
        self.region = region

    def on_demand_price(self, instance_type: str, region: str) -> float | None:
        """USD per hour for Linux On-Demand, or ``None`` when the Price List has no such
        product. Raises ``AwsError`` when the Price List cannot be asked."""
        filters = [
            {"Type": "TERM_MATCH", "Field": field, "Value": value}
            for field, value in {
                "instanceType": instance_type,
                "regionCode": region,
                **_LINUX_ON_DEMAND,
            }.items()
        ]
        pricing = self.clients.client("pricing", self.region)
        prices: list[float] = []
        token: str | None = None
        while True:
            page = call(
                "GetProducts",
                pricing.get_products,
                ServiceCode="AmazonEC2",
                Filters=filters,
                FormatVersion="aws_v1",
                MaxResults=100,
                **({"NextToken": token} if token else {}),
            )
            for item in page.get("PriceList", []):
                prices.extend(_hourly_usd(item))
            token = page.get("NextToken")
            if not token:
                break
        return min(prices) if prices else None


def _hourly_usd(item: object) -> list[float]:
    try:
        product = json.loads(item) if isinstance(item, str) else item
    except ValueError:
        return []
    if not isinstance(product, dict):
        return []
    found: list[float] = []
    for term in (product.get("terms", {}).get("OnDemand") or {}).values():
        for dimension in (term.get("priceDimensions") or {}).values():
            if str(dimension.get("unit", "")).lower() not in ("hrs", "hours"):
                continue
            try:
                value = float(dimension.get("pricePerUnit", {}).get("USD"))
            except (TypeError, ValueError):
                continue
            if value > 0:
                found.append(value)
    return found


__all__ = ["AwsError", "DiscoveryMixin", "Pricing", "TopologyUnreadable"]
