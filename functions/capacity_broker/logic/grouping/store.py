"""Where probes alike meet: the ``GroupStore`` interface, and the store of one process.

Each method is one conditional operation on one small item and decides nothing: the protocol
(``meeting.Meeting``) decides. Two implementations: ``MemoryStore`` (the probes of one
process: the direct client's threads, the CLI's and the Slurm programs' parallel probes, and
the protocol's own tests) and ``adapters.dynamodb_group.TableStore`` (the probes of every
container, in the state table). What they hold:

- the *kind's item*, one per kind of probe (``GroupKey``): ``seen`` (the stamp of the last
  arrival still in flight), the group it names (``group_id``), that group's state (OPEN or
  CLOSED), its ``slots`` taken (the leader's included) and its leader's ``patience`` (seconds);
- the *group's item*, written once when the group ends: PUBLISHED or ABANDONED, and ``given_back``
  once an abandoned group's holds are given back;
- one *answer item* per member (by slot), written by the leader.

No item grows with the size of a class, and nothing stored is an instant: ``patience`` is a
duration, and every window is read on the reader's own clock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from ...domain.group import Ending, GroupState, Joined, KindItem


class GroupStore(Protocol):
    def join(self, kind: str, stamp: str, patience: float, max_slots: int) -> Joined | KindItem:
        """Take the next slot of the OPEN group the kind's item names, if it has one free and
        its leader's promise is at most ``patience``, and mark ``stamp``: the slot (None: the
        join may have landed, its answer lost, and which slot is unknown); else the item as
        found (nothing written)."""
        ...

    def mark(self, kind: str, stamp: str) -> KindItem | None:
        """Mark ``stamp`` unless a group is OPEN or another arrival's mark is there (the two
        are a burst): None (marked), else the item as found."""
        ...

    def open(self, kind: str, group_id: str, stamp: str, patience: float) -> KindItem | None:
        """Name ``group_id`` OPEN with its leader's slot taken, unless a group is OPEN: None
        (opened), else the item as found."""
        ...

    def slots(self, kind: str, group_id: str) -> int | None:
        """The slots the OPEN group ``group_id`` has taken (a strong read); None when the
        kind's item no longer names it OPEN."""
        ...

    def close(self, kind: str, group_id: str, by: str) -> int | None:
        """CLOSE the OPEN group ``group_id`` (``by`` an arrival's stamp) and remove the mark
        (its members never leave): its slots; None when it was not OPEN (unless closed by
        this same ``by``: a close whose answer was lost is asked again)."""
        ...

    def leave(self, kind: str, stamp: str) -> None:
        """Remove the mark ``stamp`` if it is still the last arrival's."""
        ...

    def settle(self, group_id: str, state: GroupState, by: str) -> Ending | None:
        """End the group as ``state`` (PUBLISHED or ABANDONED), written ``by`` an arrival's
        stamp, unless it has ended: None (settled so, by this write), else its item as found."""
        ...

    def given_back(self, group_id: str) -> None:
        """An ABANDONED group's holds are given back."""
        ...

    def ending(self, group_id: str) -> Ending:
        """The group's own item (a read)."""
        ...

    def publish(self, group_id: str, answers: Mapping[int, str]) -> None:
        """Write each member's answer (text) under its slot."""
        ...

    def answer(self, group_id: str, slot: int) -> str | None:
        """The answer written under ``slot`` (a read: it may lag a little), or None."""
        ...


# What a ``MemoryStore`` keeps of ended groups and their answers (the oldest are dropped: a
# long-lived process, a CLI or a warm container, must not grow with every group it saw; a
# member reads its answer within seconds of its publishing).
MEMORY_KEEPS = 4096


class MemoryStore:
    """``GroupStore`` in this process's memory, under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kinds: dict[str, KindItem] = {}
        self._endings: OrderedDict[str, tuple[Ending, str]] = OrderedDict()  # and its writer
        self._answers: OrderedDict[tuple[str, int], str] = OrderedDict()

    def _bound(self) -> None:
        for kept in (self._endings, self._answers):
            while len(kept) > MEMORY_KEEPS:
                kept.popitem(last=False)

    def join(self, kind: str, stamp: str, patience: float, max_slots: int) -> Joined | KindItem:
        with self._lock:
            found = self._kinds.get(kind, KindItem())
            if (
                found.state is not GroupState.OPEN
                or found.group_id is None
                or found.slots >= max_slots
                or found.patience > patience
            ):
                return found
            self._kinds[kind] = replace(found, seen=stamp, slots=found.slots + 1)
            return Joined(found.group_id, found.slots)

    def mark(self, kind: str, stamp: str) -> KindItem | None:
        with self._lock:
            found = self._kinds.get(kind, KindItem())
            if found.state is GroupState.OPEN or found.seen is not None:
                return found
            self._kinds[kind] = replace(found, seen=stamp)
            return None

    def open(self, kind: str, group_id: str, stamp: str, patience: float) -> KindItem | None:
        with self._lock:
            found = self._kinds.get(kind, KindItem())
            if found.state is GroupState.OPEN:
                return found
            self._kinds[kind] = KindItem(stamp, group_id, GroupState.OPEN, 1, patience)
            return None

    def kind(self, kind: str) -> KindItem:
        """The kind's item as it is now (what a test reads to see a class meet)."""
        with self._lock:
            return self._kinds.get(kind, KindItem())

    def slots(self, kind: str, group_id: str) -> int | None:
        with self._lock:
            found = self._kinds.get(kind, KindItem())
            if found.group_id != group_id or found.state is not GroupState.OPEN:
                return None
            return found.slots

    def close(self, kind: str, group_id: str, by: str) -> int | None:
        with self._lock:
            found = self._kinds.get(kind, KindItem())
            if found.group_id != group_id or found.state is not GroupState.OPEN:
                return found.slots if found.group_id == group_id and found.closed_by == by else None
            self._kinds[kind] = replace(found, state=GroupState.CLOSED, seen=None, closed_by=by)
            return found.slots

    def leave(self, kind: str, stamp: str) -> None:
        with self._lock:
            found = self._kinds.get(kind)
            if found is not None and found.seen == stamp:
                self._kinds[kind] = replace(found, seen=None)

    def settle(self, group_id: str, state: GroupState, by: str) -> Ending | None:
        with self._lock:
            found = self._endings.get(group_id)
            if found is not None:
                return None if found[1] == by else found[0]
            self._endings[group_id] = (Ending(state), by)
            self._bound()
            return None

    def given_back(self, group_id: str) -> None:
        with self._lock:
            found = self._endings.get(group_id)
            if found is not None and found[0].state is GroupState.ABANDONED:
                self._endings[group_id] = (replace(found[0], given_back=True), found[1])

    def ending(self, group_id: str) -> Ending:
        with self._lock:
            found = self._endings.get(group_id)
            return found[0] if found is not None else Ending()

    def publish(self, group_id: str, answers: Mapping[int, str]) -> None:
        with self._lock:
            for slot, text in answers.items():
                self._answers[(group_id, slot)] = text
            self._bound()

    def answer(self, group_id: str, slot: int) -> str | None:
        with self._lock:
            return self._answers.get((group_id, slot))
