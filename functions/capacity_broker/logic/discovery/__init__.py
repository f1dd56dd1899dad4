"""Discovery around the capacity listing: Capacity Block offerings (and buying one), instance
type search, Availability Zone coverage, Spot prices, and the reservation-type plan.

Read-only except :meth:`Discovery.purchase`, which buys at most one Capacity Block per
purchase key (see there). Every multi-region look-up runs the regions at once
(``logic.capacity.fan_out``); within a region, independent look-ups run at once too.
"""

from __future__ import annotations

from .ahead import TAG_AHEAD_KEY, ReserveAhead, ahead_key
from .base import DEFAULT_PRODUCT, DiscoveryBase, OnDemandPrices, utcnow
from .blocks import TAG_PURCHASE_KEY, BlockOfferings, check_offering_terms, purchase_key
from .extend import BlockExtensions, extension_key
from .instance_types import InstanceTypes
from .plan import Planning
from .spot import SpotPrices


class Discovery(
    Planning,
    BlockExtensions,
    BlockOfferings,
    ReserveAhead,
    InstanceTypes,
    SpotPrices,
    DiscoveryBase,
):
    """Every discovery look-up; one mixin per AWS concept (see the modules)."""


__all__ = [
    "DEFAULT_PRODUCT",
    "TAG_AHEAD_KEY",
    "TAG_PURCHASE_KEY",
    "Discovery",
    "OnDemandPrices",
    "ahead_key",
    "check_offering_terms",
    "extension_key",
    "purchase_key",
    "utcnow",
]
