"""``CapacityBroker``: one interface over the two transports (``in_process``, ``deployed``).

Discovery (``capacity``, ``offerings``, ``search``, ``az``, ``spot``, ``plan``) reads AWS with
this broker's session; a deployed broker's ``capacity`` asks the ``<prefix>-capacity``
function instead. The actions (``probe``, ``reserve``, ``release``, ``clean``) go through the
transport: the handlers in this process, or the deployed functions.
"""

from __future__ import annotations

from .actions import Actions
from .base import BrokerBase
from .discovery import DiscoveryCalls
from .history import History
from .pool import PoolCalls


class CapacityBroker(Actions, DiscoveryCalls, History, PoolCalls, BrokerBase):
    """One interface over the two transports; one mixin per concept (see the modules):
    ``base`` (construction, regions, transport), ``actions``, ``discovery``, ``history``,
    ``pool`` (the reserved pool's waste)."""


__all__ = ["BrokerBase", "CapacityBroker"]
