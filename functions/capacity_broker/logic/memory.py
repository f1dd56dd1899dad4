"""The capacity memory of one container, and of all of them through the state table.

- ``recall`` starts reading the table in the background and returns at once; ``Recall.view()``
  at the decision point uses whatever has arrived (the container's own memory always; the
  table's answer if it is in, else the table's answer to this container's previous request).
  Memory decides widths, never answers, so a late or failed read costs at most some
  reservation-seconds, never a round trip.
- ``remember`` adds observations to the container at once and writes them to the table in the
  background (one ``UpdateItem`` per (region, instance type, hour), ``ADD`` for counters);
  with ``write=False`` the table write waits for the container's next one (the next
  ``remember`` or ``recall``). ``flush`` joins the writes under way: a handler calls it before
  it returns, because Lambda freezes a container's threads between invocations.
- ``history`` reads the table (or, without one, the container) for ``capacity-broker
  history``.

Why the facts learnt after the decision wait: the give-backs' reservation-seconds are known
only once EC2 confirmed the give-back, which is the answer's last round trip; writing them
then would add one DynamoDB round trip to every answer. They ride with the container's next
write instead (its next request's recall, in the background). A container Lambda retires takes
its last request's late facts with it (CloudWatch still has its reservation-seconds: the
handlers' metrics); ``flush(everything=True)`` writes them for a process that is about to end
(the CLI, a script).

Without a table the memory is the container's alone, for its life (pruned after
``HISTORY_SECONDS``). A root (``root.Root``) holds one, shared by its probe and reserve; a
direct ``CapacityBroker`` gives its root its own, which ``history`` reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..adapters.dynamodb_memory import MemoryTable
from ..domain import memory as rules
from ..domain.memory import HOUR, MemoryView, Observation, Tally

if TYPE_CHECKING:
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
    # The table's answer to this container's previous read: what to use while this one is
    # on its way (facts older than the window say nothing anyway).
    earlier: list[Tally] | None = None

    def view(self, wait: float = 0.0) -> MemoryView:
        """What is known now: the container's tallies, plus the table's if they arrived
        (within ``wait`` seconds; 0: only if already there), else the table's previous answer.
        Latencies come from the table when it answered (every container's), else from this
        container."""
        tallies = list(self.container)
        latency = None
        arrived = None
        if self.table is not None:
            try:
                arrived = self.table.result(timeout=wait)
            except FutureTimeout:
                arrived = None
            except Exception:  # advice only: nothing about the memory may fail a request
                log.warning("capacity memory not read from the state table", exc_info=True)
                arrived = None
        if arrived is None:
            arrived = self.earlier
        if arrived is not None:
            tallies.extend(arrived)
            latency = MemoryView(arrived).latency or None
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
        self._unwritten: list[Tally] = []  # in the container, not yet in the table
        self._table_seen: list[Tally] | None = None  # the table's last answer to a recall

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
        """Start reading what the memory knows of these types in ``region``; never blocks.
        Facts waiting for the table (``remember(write=False)``) go out now, beside the read."""
        moment = self.wall()
        slots = self._slots(region, instance_types, moment)
        with self._lock:
            container = [self._tallies[s].copy() for s in slots if s in self._tallies]
            earlier = self._table_seen
        table = None
        if self.table is not None:
            until = deadline if deadline is not None else self.monotonic() + READ_SECONDS
            self._write_unwritten(until)
            table = self._background().submit(self._read, slots, until, moment)
        return Recall(container, table, moment, self.window, earlier)

    def _read(
        self, slots: list[tuple[str, str, int]], deadline: float, moment: float
    ) -> list[Tally]:
        """The table's answer, kept for the next recall before this one sees it."""
        assert self.table is not None
        found = self.table.read(slots, deadline, now=moment)
        with self._lock:
            self._table_seen = found
        return found

    def remember(
        self,
        observations: Iterable[Observation],
        deadline: float | None = None,
        write: bool = True,
    ) -> None:
        """Keep ``observations`` in the container now, and write them to the table in the
        background (``flush`` waits for that); with ``write=False``, with the container's next
        write instead (see the module's docstring)."""
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
            if self.table is not None and not write:
                self._unwritten.extend(tallies)
                return
        if self.table is not None:
            until = deadline if deadline is not None else self.monotonic() + WRITE_SECONDS
            self._write_unwritten(until, tallies)

    def _write_unwritten(self, deadline: float, tallies: Sequence[Tally] = ()) -> None:
        """Start one background write of ``tallies`` and of what waited for the table."""
        with self._lock:
            waiting, self._unwritten = self._unwritten, []
        merged = list(rules.merge([*waiting, *tallies]).values())
        if not merged:
            return
        write = self._background().submit(self._write, merged, deadline)
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

    def flush(self, timeout: float | None = None, everything: bool = False) -> bool:
        """Wait for the background writes; False if some are still running at ``timeout``.
        ``everything``: first write what waits for the container's next write too (a process
        about to end)."""
        if everything and self.table is not None:
            self._write_unwritten(
                self.monotonic() + (WRITE_SECONDS if timeout is None else timeout)
            )
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

    @property
    def unwritten(self) -> bool:
        """Some facts wait for the container's next write to reach the table."""
        with self._lock:
            return bool(self._unwritten)

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
        # Imported here: only ``capacity-broker history`` and the client read the history; no
        # entry point does, so no handler's cold import builds its lines or model (issue 44).
        from ..domain.history import history
        from ..models.history import HistoryRow

        if self.table is None:
            with self._lock:
                tallies = [t.copy() for t in self._tallies.values()]
        else:
            tallies = self._read_history(instance_types, regions, since, deadline)
        lines = history(tallies, since, instance_types, regions)
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
            return self.table.read(slots, deadline, now=now)
        return list(self.table.scan(first, deadline, now=now))

    def forget(self) -> None:
        """Drop the container's memory (tests switch worlds)."""
        self.flush()
        with self._lock:
            self._tallies.clear()
            self._unwritten.clear()
            self._table_seen = None
