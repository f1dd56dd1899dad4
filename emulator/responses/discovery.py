"""Discovery actions moto answers too loosely for the broker's ``search``/``az``/``spot``:

- DescribeSpotPriceHistory: the scenario's prices (``spot_prices``) with EC2's time window
  and real MaxResults/NextToken pages (moto: one fixed price per offering, no pages);
- DescribeInstanceTypeOfferings: moto's offerings minus the scenario's ``unsupported`` pairs,
  plus every pool the scenario declares, with ``*``/``?`` filters and pages;
- DescribeInstanceTypes: moto's data in pages of at most 100, as EC2 serves it.
"""

from __future__ import annotations

import functools

from moto.core.responses import ActionResult
from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS, INSTANCE_TYPES

from ..exceptions import client_error
from ..models.backend import utc
from ..models.spot import spot_market
from ..state import world
from ._base import CapacityResponse, wildcard_matcher

# botocore's model (DescribeInstanceTypeOfferings.LocationType); the emulator has no Outposts.
_LOCATION_TYPES = ("region", "availability-zone", "availability-zone-id", "outpost")


@functools.cache
def _catalogue(region: str) -> frozenset[tuple[str, str]]:
    """moto's (instance type, AZ) offerings of ``region``: its static catalogue, read once
    (made into dicts and matched on every call, it was most of the emulator's CPU in a class
    of 200's look-ups)."""
    return frozenset(
        (offer["InstanceType"], offer["Location"])
        for offer in INSTANCE_TYPE_OFFERINGS["availability-zone"].get(region, [])
    )


class Discovery(CapacityResponse):
    def describe_spot_price_history(self) -> ActionResult:
        filters = self._filters_from_querystring()
        zone = self._get_param("AvailabilityZone")
        zone_id = self._get_param("AvailabilityZoneId")
        zones = []
        if zone or zone_id:
            zones.append(self.capacity.resolve_az(zone, zone_id)[0])
        self.error_on_dryrun()
        prices = spot_market(self.ec2_backend).history(
            now=world.clock.now(),
            instance_types=self._get_param("InstanceTypes", []) or [],
            products=self._get_param("ProductDescriptions", []) or [],
            availability_zones=zones,
            start=utc(self._get_param("StartTime")),
            end=utc(self._get_param("EndTime")),
            filters=filters,
        )
        page, next_token = self._page(prices)
        result: dict[str, object] = {"SpotPriceHistory": [p.to_dict() for p in page]}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def describe_instance_type_offerings(self) -> ActionResult:
        location_type = self._get_param("LocationType") or "region"
        if location_type not in _LOCATION_TYPES:
            raise client_error(
                "InvalidParameterValue",
                f"Value ({location_type}) for parameter locationType is invalid.",
            )
        filters = self._filters_from_querystring()
        for name in filters:
            if name not in ("instance-type", "location"):
                raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        self.error_on_dryrun()
        located = self._offerings(location_type)
        for name, values in filters.items():
            match = wildcard_matcher(values)
            at = 0 if name == "instance-type" else 1
            located = [pair for pair in located if match(pair[at])]
        offers = [
            {"InstanceType": t, "LocationType": location_type, "Location": loc}
            for t, loc in located
        ]
        page, next_token = self._page(offers)
        result: dict[str, object] = {"InstanceTypeOfferings": page}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)

    def _offerings(self, location_type: str) -> list[tuple[str, str]]:
        """The (instance type, location) pairs offered, sorted."""
        if location_type == "outpost":
            return []  # no Outposts here: nothing is offered on one
        capacity = self.capacity
        zones = capacity.zones
        # AZ-level truth: moto's offerings, less what the scenario says is not offered there,
        # plus what the scenario gives capacity for, plus a type some reservation or Capacity
        # Block of the world holds in an AZ (even where moto's catalogue is older than EC2's:
        # p5en, P6e-GB200 UltraServers).
        pairs = set(_catalogue(self.region)) | capacity.held_or_pooled(INSTANCE_TYPES)
        pairs = {(t, z) for t, z in pairs if (z, t) not in capacity.unsupported}
        if location_type == "availability-zone":
            located = pairs
        elif location_type == "availability-zone-id":
            located = {(t, zones[z]) for t, z in pairs if z in zones}
        else:
            located = {(t, self.region) for t, _ in pairs}
        return sorted(located)

    def describe_instance_types(self) -> ActionResult:
        names = self._get_param("InstanceTypes", []) or []
        filters = self._filters_from_querystring()
        self.error_on_dryrun()
        found = list(self.ec2_backend.describe_instance_types(names, filters))
        if names:
            result: dict[str, object] = {"InstanceTypes": found}
            return ActionResult(result)
        page, next_token = self._page(found, default=100, maximum=100)
        result = {"InstanceTypes": page}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)
