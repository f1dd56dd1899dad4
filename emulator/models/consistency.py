"""EC2's eventual consistency, made deterministic: what a call sees of what was made a moment ago.

EC2 API reference, "Eventual consistency in the Amazon EC2 API": "if you run a command to modify
or describe the resource that you just created, its ID might not have propagated throughout the
system, and you will get an error responding that the resource does not exist". EC2 User Guide,
"View the state of a Capacity Reservation": "it can take up to 5 minutes for the state of the
Capacity Reservation to reflect that it is active. During this time, the Capacity Reservation
might remain in the pending state. However, it might already be available for use".
CancelCapacityReservation cancels only `assessing` or `active` reservations.

The model keeps the truth (a new ODCR holds its capacity and can be launched into at once);
this module decides what an API call *sees* of a resource that is still settling:

- a call naming it by id: first ``lag_unknown_calls`` calls "unknown" (NotFound), then
  ``lag_pending_calls`` calls "pending", then the truth;
- a listing describe (no ids): the first ``lag_listing_calls`` ones miss it when they filter by
  tag, and show it without its tags otherwise.

Calls are counted, not timed: tests freeze the emulator clock, and a count keeps them fast and
deterministic (the same calls in the same order see the same thing). A resource also settles
once it is ``lag_seconds`` old on the emulator clock, so a server on the real clock settles in
seconds, as EC2 does.

A ``lag`` fault (``emu.fail(action, mode="lag", times=N)``) makes EC2 lag at one call site: the
next N calls of that action see everything made in this world as not there yet, and what a
create among them makes stays unknown for N more calls of each kind (the fault matrix's
eventual-consistency kind).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from ..faults import Call, Fault
from ..state import world

_current = threading.local()


@contextmanager
def serving(call: Call) -> Iterator[None]:
    """While the emulator answers ``call`` (in this thread), what it sees is recorded on it."""
    _current.call = call
    try:
        yield
    finally:
        _current.call = None


def _call() -> Call | None:
    return getattr(_current, "call", None)


def answer_fault(mode: str) -> Fault | None:
    """The fault of that mode shaping the answer of the call being served, if any
    (``emu.fail(action, code, mode="failed"|"errors"|"partial")``)."""
    call = _call()
    fault = call.answer_fault if call is not None else None
    return fault if fault is not None and fault.mode == mode else None


class Seen(StrEnum):
    UNKNOWN = "unknown"  # its id has not reached this call: NotFound
    PENDING = "pending"  # known, but its state still shows pending
    SETTLED = "settled"  # the truth


@dataclass
class Settling:
    made: datetime
    named: int = 0  # calls that named it by id
    listed: int = 0  # listing describes of its kind in its region


class Propagation:
    """The resources of one account and region that are still settling."""

    def __init__(self) -> None:
        self._settling: dict[str, Settling] = {}
        # Everything made through the API in this world (what eventual consistency can reach).
        self._made: set[str] = set()

    def made(self, resource_id: str, now: datetime) -> None:
        self._made.add(resource_id)
        call = _call()
        if call is not None:
            call.fresh = True
            if call.lag:
                # A lag fault on the create: N more calls of each kind before it is seen.
                call.lagged = True
                self._settling[resource_id] = Settling(now, -call.lag, -call.lag)
                return
        if world.settings.eventual_consistency:
            self._settling[resource_id] = Settling(now)

    def _forced(self, resource_id: str) -> bool:
        """A lag fault on this call hides ``resource_id`` (made in this world)."""
        if resource_id not in self._made:
            return False
        call = _call()
        if call is None:
            return False
        call.fresh = True
        if call.lag:
            call.lagged = True
            return True
        return False

    def _record(self, resource_id: str, now: datetime) -> Settling | None:
        record = self._settling.get(resource_id)
        if record is None:
            return None
        settings = world.settings
        old = now - record.made >= timedelta(seconds=settings.lag_seconds)
        counted_out = (
            record.named >= settings.lag_unknown_calls + settings.lag_pending_calls
            and record.listed >= settings.lag_listing_calls
        )
        if not settings.eventual_consistency or old or counted_out:
            del self._settling[resource_id]
            return None
        return record

    def _by_id(self, record: Settling | None, calls: int) -> Seen:
        settings = world.settings
        if record is None:
            return Seen.SETTLED
        if calls < settings.lag_unknown_calls:
            return Seen.UNKNOWN
        if calls < settings.lag_unknown_calls + settings.lag_pending_calls:
            return Seen.PENDING
        return Seen.SETTLED

    def name(self, resource_id: str, now: datetime) -> Seen:
        """What a call naming ``resource_id`` sees; the call counts (a lagging one too)."""
        record = self._record(resource_id, now)
        seen = Seen.SETTLED
        if record is not None:
            seen = self._by_id(record, record.named)
            record.named += 1
        return Seen.UNKNOWN if self._forced(resource_id) else seen

    def peek(self, resource_id: str, now: datetime) -> Seen:
        """What the next call naming it would see, without counting (a ClientToken replay
        or a listing shows the same state)."""
        record = self._record(resource_id, now)
        return self._by_id(record, record.named if record else 0)

    def listing(self, resource_ids: list[str], now: datetime) -> set[str]:
        """A listing describe over these resources: the ones it sees without their tags
        (missing altogether when it filters by tag). Every settling one counts the call."""
        lagging = set()
        for resource_id in resource_ids:
            record = self._record(resource_id, now)
            if record is not None:
                if record.listed < world.settings.lag_listing_calls:
                    lagging.add(resource_id)
                record.listed += 1
            if self._forced(resource_id):
                lagging.add(resource_id)
        return lagging

    def settle(self, resource_id: str | None = None) -> None:
        """Forget what is settling (one resource, or all): tests and demos that need it now."""
        if resource_id is None:
            self._settling.clear()
        else:
            self._settling.pop(resource_id, None)


def filters_by_tag(filters: dict[str, list[str]] | None) -> bool:
    """Whether a describe filters on tags (``tag:<key>``, ``tag-key``, ``tag-value``)."""
    return any(
        name.startswith("tag:") or name in ("tag-key", "tag-value") for name in filters or {}
    )
