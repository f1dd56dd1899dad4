"""Capacity for one account and region: pools, reservations, Capacity Blocks, launches.

``CapacityBackend`` lives beside moto's EC2 backend (``capacity_backend``); one mixin per
concept (see the modules): ``base`` (zones, pools, quotas, tags), ``expiry`` (the clock),
``capacity_reservations``, ``future`` (future-dated ODCRs and their quotes),
``capacity_blocks``, ``extensions`` (block extensions and status), ``interruptible``
(interruptible reservations lent from a source ODCR), ``launches`` and ``reserved``
(fleets on reserved capacity).
"""

from __future__ import annotations

from moto.ec2.models import EC2Backend

from ..state import world
from .base import DEFAULT_PAGE, BackendBase, new_block_id, new_reservation_id, platforms, utc
from .capacity_blocks import CapacityBlocks
from .capacity_reservations import CapacityReservations
from .expiry import Expiry
from .extensions import Extensions
from .future import FutureReservations
from .interruptible import InterruptibleReservations
from .launches import Allocation, LaunchRequest
from .reserved import ReservedCapacity


class CapacityBackend(
    ReservedCapacity,
    CapacityBlocks,
    Extensions,
    FutureReservations,
    InterruptibleReservations,
    CapacityReservations,
    Expiry,
    BackendBase,
):
    """Every capacity call of one account and region; one mixin per concept."""


def capacity_backend(ec2: EC2Backend) -> CapacityBackend:
    """The capacity state that lives beside moto's EC2 backend for one account and region."""
    backend = ec2.__dict__.get("_capacity")
    if backend is None:
        with world.lock:
            backend = ec2.__dict__.get("_capacity")
            if backend is None:
                backend = CapacityBackend(ec2)
                ec2.__dict__["_capacity"] = backend
    return backend


__all__ = [
    "DEFAULT_PAGE",
    "Allocation",
    "CapacityBackend",
    "LaunchRequest",
    "capacity_backend",
    "new_block_id",
    "new_reservation_id",
    "platforms",
    "utc",
]
