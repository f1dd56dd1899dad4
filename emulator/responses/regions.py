"""DescribeRegions as EC2 answers it: the regions of the caller's partition only, without
``AllRegions`` only those enabled for the account (moto lists every region of every partition,
opted in or not), ``RegionNames`` any region of the partition, and the ``region-name``,
``endpoint`` and ``opt-in-status`` filters."""

from __future__ import annotations

from typing import Any

from moto.core.responses import ActionResult
from moto.utilities.utils import get_partition

from ..exceptions import client_error
from ..models.filters import matches
from ..models.regions import opt_in_status
from ._base import CapacityResponse

_FILTERS = ("region-name", "endpoint", "opt-in-status")


# DescribeAvailabilityZones' filters moto ignores (it applies zone-id, zone-type, zone-name,
# region-name and state), each read as botocore's model documents it for an Availability Zone
# (the emulator has no Local or Wavelength Zones): "group-name - For Availability Zones, use the
# Region name"; "opt-in-status - ... For Availability Zones, this parameter always has the value
# of opt-in-not-required"; "message"; "parent-zone-id", "parent-zone-name": a Local or
# Wavelength Zone's parent, none for an Availability Zone.
_ZONE_FILTERS: dict[str, Any] = {
    "group-name": lambda zone: [zone.region_name],
    "opt-in-status": lambda _zone: ["opt-in-not-required"],
    "message": lambda zone: [m.get("Message") for m in zone.messages if m.get("Message")],
    "parent-zone-id": lambda _zone: [],
    "parent-zone-name": lambda _zone: [],
}
# Documented, and not known to the emulator: refused rather than ignored.
_UNKNOWN_ZONE_FILTERS = {"group-long-name": "a zone group's long name (e.g. its city)"}


class Regions(CapacityResponse):
    def describe_availability_zones(self) -> ActionResult:
        self.error_on_dryrun()
        filters = self._filters_from_querystring()
        for name in filters:
            if name in _UNKNOWN_ZONE_FILTERS:
                raise client_error(
                    "UnsupportedOperation",
                    f"The emulator does not support the filter '{name}': it does not know "
                    f"{_UNKNOWN_ZONE_FILTERS[name]}",
                )
        ours = {k: v for k, v in filters.items() if k in _ZONE_FILTERS}
        theirs = {k: v for k, v in filters.items() if k not in _ZONE_FILTERS}
        zones = self.ec2_backend.describe_availability_zones(
            theirs,
            zone_names=self._get_param("ZoneNames", []),
            zone_ids=self._get_param("ZoneIds", []),
        )
        found = [
            zone
            for zone in zones
            if all(
                any(matches([str(v) for v in values], text) for text in _ZONE_FILTERS[k](zone))
                for k, values in ours.items()
            )
        ]
        return ActionResult({"AvailabilityZones": found})

    def describe_regions(self) -> ActionResult:
        self.error_on_dryrun()
        every = str(self._get_param("AllRegions", False)).lower() == "true"
        names = self._get_param("RegionNames", []) or []
        filters = self._filters_from_querystring()
        for name in filters:
            if name not in _FILTERS:
                raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        partition = get_partition(self.region)
        found: list[dict[str, Any]] = []
        for region in self.ec2_backend.regions:
            if get_partition(region.name) != partition:
                continue
            status = opt_in_status(self.current_account, region.name)
            if names:
                if region.name not in names:
                    continue
            elif not every and status == "not-opted-in":
                continue
            item = {"RegionName": region.name, "Endpoint": region.endpoint, "OptInStatus": status}
            values = {"region-name": region.name, "endpoint": region.endpoint}
            values["opt-in-status"] = status
            if all(matches([str(v) for v in wanted], values[k]) for k, wanted in filters.items()):
                found.append(item)
        return ActionResult({"Regions": found})
