"""Grouped probes (contract v3, v4): probes alike that arrive together are answered together.

- ``store``: the ``GroupStore`` interface (one conditional operation a method) and the store
  of one process; the state table's is ``adapters.dynamodb_group.TableStore``.
- ``meeting``: the protocol, its named states (``domain.group.ArrivalState``, ``GroupState``).
- ``coalescer``: what a group asks EC2: a leader's answering, a member's give-back of the
  group's holds.
- ``answers``: a member's answer as written for it, and checked as read.
"""

from ...domain.group import StoreDown
from .coalescer import Coalescer, Grouped, Target
from .meeting import Meeting, Seat
from .store import GroupStore, MemoryStore

__all__ = [
    "Coalescer",
    "GroupStore",
    "Grouped",
    "Meeting",
    "MemoryStore",
    "Seat",
    "StoreDown",
    "Target",
]
