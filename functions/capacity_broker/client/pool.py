"""The reserved pool's waste (issue 43): ``pool(...)`` lists each reservation of a cluster's
reserved pool with its unused instances and their hourly cost now. It reads AWS with this
broker's session (EC2, Resource Groups, the Price List), in either transport."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from ..domain.pool_spec import PoolSpec, PoolSpecError
from ..logic.pool import ReservedPool, idle_rows
from ..models.discovery import PoolRow
from .base import BrokerBase
from .results import InvalidArguments

# A listing's patience per region (seconds).
POOL_SECONDS = 60.0


class PoolCalls(BrokerBase):
    """``pool``: the reserved pool's reservations, unused instances and their cost."""

    def pool(
        self,
        tag: str | None = None,
        groups: Sequence[str] | str | None = None,
        regions: Sequence[str] | str | None = None,
    ) -> list[PoolRow]:
        """The pool named by ``tag`` (``key=value``) and/or ``groups`` (resource group names
        or ARNs); neither given: the deployment's (``BROKER_POOL_TAG``, ``BROKER_POOL_GROUPS``).
        One row per reservation, in each region asked (default: the broker's)."""
        named = [groups] if isinstance(groups, str) else list(groups or [])
        if tag is None and not named:
            tag = os.environ.get("BROKER_POOL_TAG") or None
            named = [g for g in os.environ.get("BROKER_POOL_GROUPS", "").split(",") if g.strip()]
        try:
            spec = PoolSpec.parse(named, tag)
        except PoolSpecError as error:
            raise InvalidArguments([("pool", str(error))]) from None
        if spec.empty:
            raise InvalidArguments(
                [
                    (
                        "pool",
                        "name the pool: --pool-tag key=value and/or --pool-group NAME "
                        "(or BROKER_POOL_TAG / BROKER_POOL_GROUPS)",
                    )
                ]
            )
        rows: list[PoolRow] = []
        for region in self.resolve_regions(regions):
            reader = ReservedPool(
                spec,
                self.adapters.ec2(region),
                self.adapters.resource_groups(region),
            )
            rows += idle_rows(reader, self.adapters.pricing, time.monotonic() + POOL_SECONDS)
        return rows
