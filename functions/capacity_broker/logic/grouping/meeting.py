"""The meeting protocol of grouped probes: one for the probes of one process and for those of every
container, over a ``GroupStore`` (``store``), on one injected clock.

An arrival (``ArrivalState``) tries to take a slot in the OPEN group its kind's item names
(JOINED); failing that, with no arrival alike in flight it marks itself and probes at once
(ALONE); with one in flight (a burst) it opens a group and leads it (LEADING). A lone probe
leaves (its mark is removed) when it has answered. A group (``GroupState``) is OPEN from its
opening (the kind's item points at it), CLOSED by its leader when ``domain.group.closes_now``
says so (durations on the leader's clock), then PUBLISHED by its leader (every hold given back,
each member's answer written under its slot) or ABANDONED by a member that stopped waiting
(which gives the group's holds back, found by their exact group-id tag, then probes alone). The
two ends are one conditional write on the group's item: whoever gets there first decides, so a
leader never publishes answers beside a member that is cancelling the group's holds.

Patience is a duration: a member joins only a group whose leader's promise (how long after its
own arrival it answers at the latest: its patience less ``PROMISE_SECONDS``) is at most its own
patience. It arrived later, so it waits at least as long as the leader promised, in real time,
whatever either host's clock says.

The store is advice: ``StoreDown`` from any call ends this probe's part in grouping (an arrival
goes alone; a member stops waiting and gives its group's holds back), never the probe.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ...domain.group import (
    GRACE_SECONDS,
    MAX_MEMBERS,
    ArrivalState,
    GroupKey,
    GroupState,
    Joined,
    StoreDown,
    closes_now,
    group_id,
    look_pause,
    max_slots,
    promise,
)
from .answers import ALONE
from .store import GroupStore

log = logging.getLogger(__name__)
T = TypeVar("T")

# Join-or-open rounds of one arrival before it goes alone (a round lost to another arrival's
# open is followed by a join of the group that won).
ARRIVE_ROUNDS = 4


def kind_id(key: GroupKey) -> str:
    """The kind's item of ``key``: the region in the clear, the rest as a digest (subnet lists
    are long, and ids are ids: nothing of the caller's becomes part of a pattern)."""
    canonical = json.dumps(
        [
            key.instance_type,
            list(key.subnet_ids),
            key.platform,
            key.tenancy,
            key.count,
            [list(t) for t in key.tags],
        ],
        ensure_ascii=True,
    )
    return f"{key.region}#{hashlib.sha256(canonical.encode()).hexdigest()[:40]}"


@dataclass(frozen=True)
class Seat:
    """One probe's arrival: its state, its kind, its mark, and its group and slot."""

    state: ArrivalState
    key: GroupKey
    stamp: str
    marked: bool = False  # its mark is in the store until it leaves
    group_id: str | None = None
    slot: int | None = 0  # its place in its group (None: a member that cannot know it)
    since: float = 0.0  # its clock when it opened its group (a leader) or joined (a member)
    most_slots: int = 1  # the most slots its group may take (``KindItem.slots``: those taken)

    @property
    def kind(self) -> str:
        return kind_id(self.key)


@dataclass(frozen=True)
class Waited:
    """What a member's wait ends with: its answer's text, or none; and whether it must give the
    group's holds back before it probes alone (it abandoned the group, or nobody it can hear
    from has given them back)."""

    text: str | None
    give_back: bool = False


class Meeting:
    """The protocol (see the module). ``now`` and ``pause`` are its one clock."""

    def __init__(
        self,
        store: GroupStore,
        *,
        window: float,
        max_window: float,
        max_members: int = MAX_MEMBERS,
        now: Callable[[], float] = time.monotonic,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.window = window
        self.max_window = max(window, max_window)
        self.max_members = max_members
        self.now = now
        self.pause = pause
        self._said_down = False

    # -- arriving and leaving -----------------------------------------------------------------
    def arrive(self, key: GroupKey, request_id: str, patience: float) -> Seat:
        """This probe's seat: JOINED, LEADING or ALONE (``patience``: seconds it would wait
        for a group's answer at most)."""
        stamp = uuid.uuid4().hex
        alone = Seat(ArrivalState.ALONE, key, stamp)
        kind = kind_id(key)
        most = max_slots(key.count, self.max_members)
        try:
            for _ in range(ARRIVE_ROUNDS):
                got = self.store.join(kind, stamp, patience, most)
                if isinstance(got, Joined):
                    # (Its mark goes when its group closes: a member never leaves.)
                    return Seat(
                        ArrivalState.JOINED, key, stamp, False, got.group_id, got.slot, self.now()
                    )
                if got.state is GroupState.OPEN:
                    # A group takes members but not this one (full, or its leader waits longer
                    # than this probe may): a burst is plain, no mark is needed.
                    return alone
                if got.seen is None or most < 2:
                    if self.store.mark(kind, stamp) is None:
                        return Seat(ArrivalState.ALONE, key, stamp, marked=True)
                    continue  # a group opened meanwhile: join it
                opened = group_id(request_id, key, stamp)
                # It promises less than its own patience (``PROMISE_SECONDS``), so members
                # whose patience is a moment shorter than its own still join.
                if self.store.open(kind, opened, stamp, promise(patience)) is None:
                    return Seat(
                        ArrivalState.LEADING, key, stamp, False, opened, 0, self.now(), most
                    )
        except StoreDown as error:
            self._down(error)
        return alone

    def leave(self, seat: Seat) -> None:
        """Its mark goes (best effort: a mark left behind costs the next probe alike one empty
        window, never an answer)."""
        if not seat.marked:
            return
        try:
            self.store.leave(seat.kind, seat.stamp)
        except StoreDown as error:
            self._down(error)

    # -- the leader -----------------------------------------------------------------------------
    def close(self, seat: Seat, latest: float) -> int | None:
        """Wait until ``closes_now`` (or ``latest``, on this clock), then close: the group's
        slots, or None when it cannot be closed (a member abandoned it, the store is down)."""
        assert seat.state is ArrivalState.LEADING
        assert seat.group_id is not None
        slots, changed = 1, seat.since
        try:
            while True:
                moment = self.now()
                if moment >= latest or closes_now(
                    moment - seat.since,
                    moment - changed,
                    slots,
                    window=self.window,
                    max_window=self.max_window,
                    max_slots=seat.most_slots,
                ):
                    break
                self.pause(max(0.0, min(self.window, latest - moment)))
                seen = self.store.slots(seat.kind, seat.group_id)
                # (None: a member gave the group up; the close below says so.)
                if seen is not None and seen != slots:
                    slots, changed = seen, self.now()
            return self.store.close(seat.kind, seat.group_id, seat.stamp)
        except StoreDown as error:
            self._down(error)
            return None

    def publish(self, seat: Seat, answers: Mapping[int, str]) -> bool:
        """The group PUBLISHED and each member's answer written (by slot); False when a member
        abandoned it first (or the store is down): the members then probe alone."""
        assert seat.group_id is not None
        try:
            if self.store.settle(seat.group_id, GroupState.PUBLISHED, seat.stamp) is not None:
                return False
            self.store.publish(seat.group_id, answers)
        except StoreDown as error:
            self._down(error)
            return False
        return True

    def give_up(self, seat: Seat, slots: int | None = None) -> None:
        """A leader that will not answer its group (its look-ups failed; its flags say no probe;
        it holds nothing of the group): the group takes nobody more, ends ABANDONED with
        nothing to give back, and its members are told to probe alone at once."""
        assert seat.group_id is not None
        try:
            closed = self.store.close(seat.kind, seat.group_id, seat.stamp)
            taken = closed if closed is not None else slots or 0
            if self.store.settle(seat.group_id, GroupState.ABANDONED, seat.stamp) is None:
                self.store.given_back(seat.group_id)
            if taken > 1:
                self.store.publish(seat.group_id, dict.fromkeys(range(1, taken), ALONE))
        except StoreDown as error:
            self._down(error)

    # -- a member -------------------------------------------------------------------------------
    def wait(self, seat: Seat, give_up_at: float, deadline: float) -> Waited:
        """A member's answer, looked for until ``give_up_at``; then the group is ABANDONED (by
        this member, or already by another), or found PUBLISHED and its answer read."""
        assert seat.state is ArrivalState.JOINED
        assert seat.group_id is not None
        if seat.slot is None:
            return self._unplaced(seat, give_up_at)
        # The leader closes no sooner than the window after this join: a look before then
        # finds nothing.
        self._pause_until(min(give_up_at, self.now() + self.window))
        looks = 0
        while True:
            text = self._answer(seat)
            if text is not None:
                return Waited(text)
            moment = self.now()
            if moment >= give_up_at:
                break
            self._pause_until(min(give_up_at, moment + look_pause(looks)))
            looks += 1
        group_id = seat.group_id
        try:
            ended = self.store.settle(group_id, GroupState.ABANDONED, seat.stamp)
            if ended is None:
                # This member abandoned the group: nobody joins it any more, and this member
                # gives its holds back (the leader may be gone with them).
                self.store.close(seat.kind, group_id, seat.stamp)
                return Waited(None, give_back=True)
            grace = min(deadline, self.now() + GRACE_SECONDS)
            if ended.state is GroupState.PUBLISHED:
                # The leader gave every hold back and is writing the answers.
                return Waited(self._look_until(grace, lambda: self._answer(seat)))
            given_back = self._look_until(
                grace, lambda: self.store.ending(group_id).given_back or None
            )
            return Waited(None, give_back=not given_back)
        except StoreDown as error:
            self._down(error)
            return Waited(None, give_back=True)

    def _unplaced(self, seat: Seat, give_up_at: float) -> Waited:
        """A member whose join may have landed, its slot unknown: its group would count a
        member nobody is, and answer the members after it from a hold too large. So it gives
        the group up at once (unless published already), then waits until its give-up, by
        when the group's leader has given its holds back, and probes alone (giving back
        whatever the group still holds: its leader may be gone)."""
        assert seat.group_id is not None
        try:
            if self.store.settle(seat.group_id, GroupState.ABANDONED, seat.stamp) is None:
                self.store.close(seat.kind, seat.group_id, seat.stamp)
        except StoreDown as error:
            self._down(error)
        self._pause_until(give_up_at)
        return Waited(None, give_back=True)

    def given_back(self, seat: Seat) -> None:
        """This member gave the abandoned group's holds back."""
        assert seat.group_id is not None
        try:
            self.store.given_back(seat.group_id)
        except StoreDown as error:
            self._down(error)

    # -- helpers --------------------------------------------------------------------------------
    def _answer(self, seat: Seat) -> str | None:
        assert seat.group_id is not None
        assert seat.slot is not None
        try:
            return self.store.answer(seat.group_id, seat.slot)
        except StoreDown as error:
            self._down(error)
            return None

    def _look_until(self, until: float, look: Callable[[], T | None]) -> T | None:
        looks = 0
        while True:
            found = look()
            moment = self.now()
            if found is not None or moment >= until:
                return found
            self._pause_until(min(until, moment + look_pause(looks) / 2))
            looks += 1

    def _pause_until(self, moment: float) -> None:
        left = moment - self.now()
        if left > 0:
            self.pause(left)

    def _down(self, error: Exception) -> None:
        if self._said_down:
            log.debug("probe groups: the store failed again: %s", error)
            return
        self._said_down = True
        log.warning(
            "probe groups: the store failed (%s): a probe not yet in a group goes on alone; "
            "a member stops waiting and gives its group's holds back",
            str(error)[:300],
        )
