"""EC2, the service the broker lives on (one adapter, split by concern; launch templates and
launches are an adapter of their own, ``launches.Launches``, imported only where used).

Owns what talking to EC2 takes: the ClientToken on every create, retries of throttling and
5xx under the caller's deadline (reusing the same parameters, so a retry can never create a
second reservation), pacing at EC2's request rates, pagination, and per-adapter caches of
facts that do not change (a subnet's AZ, an AMI's platform, the region's instance types).
"""

from __future__ import annotations

from .base import Ec2Base
from .catalog import CatalogMixin
from .discovery import DiscoveryMixin, Pricing, TopologyUnreadable
from .filters import Filters, Prefix
from .instances import Instance, InstancesMixin
from .network import Image, NetworkMixin, Subnet
from .reservations import NewReservation, Reservation, ReservationsMixin


class Ec2(
    DiscoveryMixin,
    ReservationsMixin,
    InstancesMixin,
    NetworkMixin,
    CatalogMixin,
    Ec2Base,
):
    """Everything the broker asks of EC2 in one region but its launches (``Launches``)."""


__all__ = [
    "CatalogMixin",
    "DiscoveryMixin",
    "Ec2",
    "Ec2Base",
    "Filters",
    "Image",
    "Instance",
    "NewReservation",
    "Prefix",
    "Pricing",
    "Reservation",
    "Subnet",
    "TopologyUnreadable",
]
