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


class Regions(CapacityResponse):
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
