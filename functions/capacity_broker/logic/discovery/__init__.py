"""Discovery around the capacity listing: Capacity Block offerings (and buying one), instance
type search, Availability Zone coverage, Spot prices, and the reservation-type plan.

Read-only except :meth:`Discovery.purchase`, which buys at most one Capacity Block per
purchase key (see there). Every multi-region look-up runs the regions at once
(``logic.capacity.fan_out``); within a region, independent look-ups run at once too.
"""

from __future__ import annotations

from .base import DEFAULT_PRODUCT, DiscoveryBase, OnDemandPrices, utcnow
from .blocks import TAG_PURCHASE_KEY, BlockOfferings, check_offering_terms, purchase_key
from .instance_types import InstanceTypes
from .plan import Planning
from .spot import SpotPrices


class Discovery(Planning, BlockOfferings, InstanceTypes, SpotPrices, DiscoveryBase):
    """Every discovery look-up; one mixin per AWS concept (see the modules)."""


__all__ = [
    "DEFAULT_PRODUCT",
    "TAG_PURCHASE_KEY",
    "Discovery",
    "OnDemandPrices",
    "check_offering_terms",
    "purchase_key",
    "utcnow",
]
