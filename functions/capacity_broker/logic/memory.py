"""The capacity memory of one container, and of all of them through the state table.

- ``recall`` starts reading the table in the background and returns at once; ``Recall.view()``
  at the decision point uses whatever has arrived (the container's own memory always, the
  table's if its answer is in). Memory decides widths, never answers, so a late or failed read
  costs at most some reservation-seconds.
- ``remember`` adds observations to the container at once and writes them to the table in the
  background (one ``UpdateItem`` per (region, instance type, hour), ``ADD`` for counters);
  ``flush`` joins the writes: a handler calls it before it returns, because Lambda freezes a
  container's threads between invocations.
- ``history`` reads the table (or, without one, the container) for ``capacity-broker
  history``.

Without a table the memory is the container's alone, for its life (pruned after
``HISTORY_SECONDS``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from ..adapters.dynamodb_memory import MemoryTable
from ..domain import memory as rules
from ..domain.memory import HOUR, MemoryView, Observation, Tally
from ..models.history import HistoryRow

log = logging.getLogger(__name__)

# A table read in the background gets this long (monotonic) unless the caller says otherwise;
# the decision never waits for it.
READ_SECONDS = 2.0
WRITE_SECONDS = 5.0
# History of more (region, type) hours than this is read by a Scan instead of key by key.
MAX_KEYED_HOURS = 300


@dataclass
class Recall:
    """A memory read under way (see ``CapacityMemory.recall``)."""

    container: list[Tally]
    table: Future[list[Tally]] | None
    moment: float
    window: float

    def view(self, wait: float = 0.0) -> MemoryView:
        """What is known now: the container's tallies, plus the table's if they arrived
        (within ``wait`` seconds; 0: only if already there). Latencies come from the table when
        it answered (every container's), else from this container."""
        tallies = list(self.container)
        latency = None
        if self.table is not None:
            try:
                arrived = self.table.result(timeout=wait)
            except FutureTimeout:
                arrived = None
            except Exception:  # advice only: nothing about the memory may fail a request
                log.warning("capacity memory not read from the state table", exc_info=True)
                arrived = None
            if arrived is not None:
                tallies.extend(arrived)
                latency = MemoryView(arrived).latency
        return MemoryView(tallies, moment=self.moment, latency=latency, window=self.window)


class CapacityMemory:
    def __init__(
        self,
        table: MemoryTable | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        window: float = rules.DECISION_WINDOW,
        keep_seconds: int = rules.HISTORY_SECONDS,
    ) -> None:
        self.table = table
        self.wall = wall
        self.monotonic = monotonic
        self.window = window
        self.keep_seconds = keep_seconds
        self._lock = threading.Lock()
        self._tallies: dict[tuple[str, str, int], Tally] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._writes: list[Future[None]] = []

    def _background(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memory")
            return self._pool

    def _slots(
        self, region: str, instance_types: Iterable[str], moment: float
    ) -> list[tuple[str, str, int]]:
        """The hours a decision at ``moment`` can look into: this one, and the previous one
        while the window reaches back into it."""
        hours = sorted({rules.hour_of(moment), rules.hour_of(moment - self.window)})
        return [(region, t, hour) for t in dict.fromkeys(instance_types) for hour in hours]

    def recall(
        self, region: str, instance_types: Sequence[str], deadline: float | None = None
    ) -> Recall:
        """Start reading what the memory knows of these types in ``region``; never blocks."""
        moment = self.wall()
        slots = self._slots(region, instance_types, moment)
        with self._lock:
            container = [self._tallies[s].copy() for s in slots if s in self._tallies]
        table = None
        if self.table is not None:
            until = deadline if deadline is not None else self.monotonic() + READ_SECONDS
            table = self._background().submit(self.table.read, slots, until)
        return Recall(container, table, moment, self.window)

    def remember(self, observations: Iterable[Observation], deadline: float | None = None) -> None:
        """Keep ``observations`` in the container now, and write them to the table in the
        background (``flush`` waits for that)."""
        tallies = rules.fold(observations)
        if not tallies:
            return
        with self._lock:
            for tally in tallies:
                found = self._tallies.get(tally.slot)
                if found is None:
                    self._tallies[tally.slot] = tally.copy()
                else:
                    found.add(tally)
            oldest = rules.hour_of(self.wall()) - self.keep_seconds
            for slot in [s for s in self._tallies if s[2] < oldest]:
                del self._tallies[slot]
        if self.table is not None:
            until = deadline if deadline is not None else self.monotonic() + WRITE_SECONDS
            write = self._background().submit(self._write, tallies, until)
            with self._lock:
                self._writes.append(write)

    def _write(self, tallies: list[Tally], deadline: float) -> None:
        assert self.table is not None
        for tally in tallies:
            expiration = tally.hour + HOUR + self.keep_seconds
            try:
                self.table.add(tally, expiration, deadline)
            except Exception:
                # The memory is advice: a lost write costs a wider fan-out later, not an answer.
                log.warning("capacity memory not written to the state table", exc_info=True)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the background writes; False if some are still running at ``timeout``."""
        with self._lock:
            writes, self._writes = self._writes, []
        until = None if timeout is None else self.monotonic() + timeout
        for index, write in enumerate(writes):
            left = None if until is None else max(0.0, until - self.monotonic())
            try:
                write.result(timeout=left)
            except FutureTimeout:
                with self._lock:
                    self._writes = writes[index:] + self._writes
                return False
        return True

    def history(
        self,
        instance_types: Sequence[str] | None = None,
        regions: Sequence[str] | None = None,
        since: float | None = None,
        deadline: float | None = None,
    ) -> list[HistoryRow]:
        """One row per (region, AZ id, instance type), from the table when there is one
        (every container's memory), else from this container. ``since``: epoch seconds;
        default: all the table keeps."""
        if self.table is None:
            with self._lock:
                tallies = [t.copy() for t in self._tallies.values()]
        else:
            tallies = self._read_history(instance_types, regions, since, deadline)
        lines = rules.history(tallies, since, instance_types, regions)
        return [HistoryRow.of(line) for line in lines]

    def _read_history(
        self,
        instance_types: Sequence[str] | None,
        regions: Sequence[str] | None,
        since: float | None,
        deadline: float | None,
    ) -> list[Tally]:
        assert self.table is not None
        now = self.wall()
        first = rules.hour_of(now - self.keep_seconds if since is None else since)
        hours = range(first, rules.hour_of(now) + HOUR, HOUR)
        if (
            instance_types
            and regions
            and len(instance_types) * len(regions) * len(hours) <= (MAX_KEYED_HOURS)
        ):
            slots = [(r, t, h) for r in regions for t in instance_types for h in hours]
            return self.table.read(slots, deadline)
        return list(self.table.scan(first, deadline))

    def forget(self) -> None:
        """Drop the container's memory (tests switch worlds)."""
        self.flush()
        with self._lock:
            self._tallies.clear()
