"""Capacity broker for Amazon EC2: probe, hold and clean up On-Demand Capacity Reservations,
and list ODCRs, Capacity Blocks, offerings and prices.

``from capacity_broker import CapacityBroker, ReservationType`` gives the Python client. It is
imported lazily (module ``__getattr__``), so the Lambda handlers, which import this package
first, never load the client, the CLI or their dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import CapacityBroker, ReservationType

__all__ = ["CapacityBroker", "ReservationType"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
