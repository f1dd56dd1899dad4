"""Grouped probes (contract v3): the engine of ``domain.group``.

Probes alike (``GroupKey``) that arrive while one alike is in flight are answered together. The
``Coalescer`` does the answering: the group's leader waits out the window, asks EC2 what the
plan (``GroupPlan``) asks, one reservation of the summed count per subnet tried, gives every
hold back and publishes each member's answer. Where probes meet is a ``Meeting``:

- ``LocalMeeting``: the probes of one process (the direct client's threads, the CLI's and the
  Slurm programs' parallel probes), in memory under one lock; what a root without a state table
  uses. A probe with nothing alike in flight takes the lock and nothing else.
- ``TableMeeting``: the probes of every container, through the state table's ``group#`` items
  (``adapters.dynamodb_group``). A Lambda container serves one invocation at a time, so the
  desktops of a class arrive in different containers; this is where they meet. A probe with
  nothing alike in flight pays one small ``UpdateItem`` as it arrives and one as it leaves.

Either way: a probe that arrives while another alike is in flight has seen a burst: it opens a
group and *leads* it, or *joins* the one taking members. The leader stops asking at the
earliest member's ``answer_by`` (half that member's budget); a member waits for its answer
until it gives up, and probes alone if the leader failed or never published. A leader left
alone by its window probes alone too: a group of one is a lone probe.

The group's reservations are the broker's like any other: owned and tagged on create (purpose
``probe``, the request-id tag the part's id ``<group id>:<first>-<last>``), targeted, limited,
and the ClientToken derived from that id and the subnet (so an SDK retry or a retry of an
unanswered create finds the same reservation, and two parts never share one).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from ..adapters.aws import AwsError
from ..adapters.dynamodb_group import (
    MAX_MEMBERS,
    GroupTable,
    Published,
    encode_answer,
    key_id,
    new_stamp,
)
from ..adapters.ec2 import Subnet
from ..domain.group import (
    POLL_FIRST_SECONDS,
    Arrival,
    Ask,
    Forming,
    GroupKey,
    GroupPlan,
    Lobby,
    MemberAnswer,
    Role,
    Said,
    asks_until,
    gives_up_at,
    group_id,
    held,
    members_wait_until,
    poll_pause,
)
from ..domain.tags import Purpose
from .reservations import Held, HoldSpec, NotOwnedError, ReservationCore

log = logging.getLogger(__name__)

# A real wait is cut in slices this long (seconds) so that a clock other than the machine's
# (the emulator's in tests) is read again; the verdicts follow that clock, never this.
_SLICE = 0.02


@dataclass(frozen=True)
class Seat:
    """One probe's place: its role, and its group (leader and members)."""

    key: GroupKey
    arrival: Arrival
    stamp: str = ""  # the table meeting's mark of this arrival (its ``leave`` removes it)
    took: float = 0.0  # seconds the arrival took (the table meeting's round trips)
    answer_by: float = math.inf  # when this probe wants its group's answer (root's clock)

    @property
    def role(self) -> Role:
        return self.arrival.role


@dataclass(frozen=True)
class Closed:
    """A group that takes no more members: their counts in joining order, when the earliest
    of them must have its answer, and (when the meeting knows it) the earliest moment a member
    may give up on the group (the root's monotonic clock)."""

    counts: tuple[int, ...]
    answer_by: float
    wait_until: float | None = None


@dataclass(frozen=True)
class Target:
    """What a group asks for: ``instance_type`` x the group's count in ``subnets`` (in order),
    of this platform and tenancy."""

    subnets: list[Subnet]
    instance_type: str
    platform: str
    tenancy: str


@dataclass(frozen=True)
class Grouped:
    """One member's answer from its group, and the subnets it indexes (the leader's look-up
    of the member's own list)."""

    group_id: str
    size: int
    answer: MemberAnswer
    subnets: list[Subnet]


class Meeting(Protocol):
    """Where probes alike meet (see the module)."""

    def arrive(self, key: GroupKey, count: int, request_id: str, answer_by: float) -> Seat:
        """This probe's seat. Every ``arrive`` is followed by one ``leave``."""
        ...

    def leave(self, seat: Seat) -> None: ...

    def close(self, seat: Seat, *, wait: bool = True) -> Closed:
        """The leader: wait out the window (unless not ``wait``), then take no more members."""
        ...

    def publish(
        self, seat: Seat, size: int, answers: list[MemberAnswer] | None, subnets: list[Subnet]
    ) -> None:
        """The leader: every member's answer (None: the members probe alone)."""
        ...

    def wait(
        self, seat: Seat, answer_by: float, deadline: float, subnet_ids: list[str]
    ) -> Grouped | None:
        """A member: its answer, or None (probe alone)."""
        ...


# Arrivals on their way at once in one process (``Coalescer.arrive_soon``).
ARRIVALS = 64
# Join-or-open rounds of one arrival in the state table before it goes alone (a round lost
# to another container's join or open is followed by one that knows who won).
ARRIVE_ROUNDS = 8


class Coalescer:
    """Answers groups of probes alike that meet in ``meeting`` (see the module)."""

    def __init__(
        self,
        core: ReservationCore,
        meeting: Meeting,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.core = core
        self.meeting = meeting
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def arrive_soon(
        self,
        key: GroupKey,
        count: int,
        request_id: str,
        answer_by: float,
        then: Callable[[Seat], None] | None = None,
    ) -> Future[Seat]:
        """This probe's seat, made on a thread of the coalescer's own (the meeting's
        ``arrive``), so the probe does something else while its arrival (a round trip to the
        table) is on its way; every arrival is followed by one ``leave``. ``answer_by``: when
        a group must have answered this probe (the leader stops asking then). Then ``then(seat)`` on
        that thread, before the seat is handed over (so nothing of it runs after the probe).
        ``then`` is a preparation: its failure is logged, never the probe's."""

        def arrived() -> Seat:
            seat = self.meeting.arrive(key, count, request_id, answer_by)
            if then is not None:
                try:
                    then(seat)
                except Exception:
                    log.warning("a probe's preparation after its arrival failed", exc_info=True)
            return seat

        with self._lock:
            if self._pool is None:
                # Threads are made as arrivals need them, up to as many as a process's probes
                # can be at once (a client's threads): an arrival never queues behind another.
                self._pool = ThreadPoolExecutor(max_workers=ARRIVALS, thread_name_prefix="arrive")
            pool = self._pool
        return pool.submit(arrived)

    def leave(self, seat: Seat) -> None:
        self.meeting.leave(seat)

    def wait(
        self, seat: Seat, answer_by: float, deadline: float, subnet_ids: list[str]
    ) -> Grouped | None:
        """A member's answer, or None: it probes alone."""
        return self.meeting.wait(seat, answer_by, deadline, subnet_ids)

    def abandon(self, seat: Seat) -> None:
        """A leader that cannot answer its group (its look-ups failed): it takes no more
        members, and those it has probe alone at once."""
        try:
            closed = self.meeting.close(seat, wait=False)
            self.meeting.publish(seat, len(closed.counts), None, [])
        except Exception:  # its members give up on their own clocks
            log.exception("a probe group could not be given up")

    # -- the leader ------------------------------------------------------------------------
    def lead(
        self,
        seat: Seat,
        target: Target,
        deadline: float,
        hard_deadline: float,
    ) -> Grouped | None:
        """Wait out the window, answer the group, publish. None: the leader probes alone
        (nobody joined, or the group could not be answered)."""
        forming = seat.arrival.group
        assert forming is not None
        assert seat.role is Role.LEADER
        answers: list[MemberAnswer] | None = None
        size = 1
        try:
            closed = self.meeting.close(seat)
            size = len(closed.counts)
            if size > 1:
                answers = self._answer(
                    forming.group_id,
                    closed.counts,
                    target,
                    min(deadline, self._asks_until(closed, forming)),
                    hard_deadline,
                )
        except Exception:  # the members must not wait for a leader that failed
            log.exception("a probe group failed; its members probe alone")
            answers = None
        try:
            self.meeting.publish(seat, size, answers, target.subnets)
        except Exception:  # its members give up on their own clocks
            log.exception("a probe group's answers could not be published")
        if answers is None:
            return None
        return Grouped(forming.group_id, size, answers[0], target.subnets)

    def _asks_until(self, closed: Closed, forming: Forming) -> float:
        """Until when this leader asks EC2 for its group, from now (``asks_until``): until
        its first member may give up, as the members said when they joined, or else as
        bounded from the group's close (``members_wait_until``: they joined before it)."""
        wait_until = closed.wait_until
        if wait_until is None:
            wait_until = members_wait_until(closed.answer_by, forming.closes_at)
        return asks_until(self.monotonic(), closed.answer_by, wait_until)

    def _answer(
        self,
        group_id: str,
        counts: tuple[int, ...],
        target: Target,
        deadline: float,
        hard_deadline: float,
    ) -> list[MemberAnswer]:
        plan = GroupPlan(counts, len(target.subnets), self.monotonic())
        holds: dict[str, Held] = {}
        try:
            self._ask(plan, group_id, target, deadline, holds)
        except BaseException:
            # The members probe alone: nothing of the group may stay held behind them.
            for made in holds.values():
                self._give_back(made, hard_deadline)
            raise
        for back in plan.to_give_back():
            confirmed = self._give_back(holds.pop(back.reservation_id), hard_deadline)
            plan.returned(back.reservation_id, confirmed, self.monotonic())
        return plan.answers()

    def _ask(
        self,
        plan: GroupPlan,
        group_id: str,
        target: Target,
        deadline: float,
        holds: dict[str, Held],
    ) -> None:
        """Ask EC2 what the plan asks, one create at a time, until every member is decided or
        the deadline comes."""
        while not plan.decided:
            moment = self.monotonic()
            if moment >= deadline:
                break
            ask = plan.next_ask(moment)
            if ask is None:
                wake = plan.wake_at
                if plan.decided or wake is None:
                    break
                self.core.sleep(max(0.0, min(wake, deadline) - moment))
                continue
            said = self._create(group_id, ask, target, deadline, holds)
            plan.answered(ask, said, self.monotonic())
        if not plan.decided:
            plan.expire()

    def _give_back(self, hold: Held, hard_deadline: float) -> bool:
        """True only when EC2 confirmed the cancel."""
        try:
            self.core.release(hold.reservation, hard_deadline)
        except (AwsError, NotOwnedError):
            return False
        return True

    def _create(
        self,
        group_id: str,
        ask: Ask,
        target: Target,
        deadline: float,
        holds: dict[str, Held],
    ) -> Said:
        spec = HoldSpec(
            purpose=Purpose.PROBE,
            # The part's own request id: its tag and the seed of its ClientToken.
            request_id=f"{group_id}:{ask.members[0]}-{ask.members[-1]}",
            instance_type=target.instance_type,
            subnet=target.subnets[ask.subnet],
            count=ask.count,
            platform=target.platform,
            tenancy=target.tenancy,
        )
        try:
            hold = self.core.hold(spec, deadline)
        except AwsError as error:
            return Said(error_class=error.error_class, error_code=error.code or "RequestTimeout")
        holds[hold.reservation.id] = hold
        return held(hold.reservation.id)


def _grouped(group_id: str, found: Published) -> Grouped | None:
    """A member's answer as its leader published it; None: "probe alone"."""
    if found.answer is None:
        return None
    return Grouped(group_id, found.size, found.answer, found.subnets)


# -- where probes meet ------------------------------------------------------------------------


@dataclass
class _Local:
    forming: Forming
    answer_by: list[float] = field(default_factory=list)
    published: bool = False
    answers: list[MemberAnswer] | None = None
    subnets: list[Subnet] = field(default_factory=list)
    size: int = 1
    unread: int = 0  # members still to take their answer (or give up)


class LocalMeeting:
    """The probes of one process meet in memory (see the module). ``Lobby.arrive`` is the
    whole decision, under one lock; a burst is another probe alike in flight now."""

    def __init__(
        self,
        *,
        window: float,
        max_window: float,
        max_count: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.monotonic = monotonic
        self._lobby = Lobby(window=window, max_window=max_window, max_count=max_count)
        self._changed = threading.Condition()
        self._in_flight: dict[GroupKey, int] = {}
        self._groups: dict[str, _Local] = {}

    def arrive(self, key: GroupKey, count: int, request_id: str, answer_by: float) -> Seat:
        with self._changed:
            moment = self.monotonic()
            burst = self._in_flight.get(key, 0) > 0
            self._in_flight[key] = self._in_flight.get(key, 0) + 1
            arrival = self._lobby.arrive(key, count, request_id, moment, burst=burst)
            if arrival.group is not None:
                group = self._groups.setdefault(arrival.group.group_id, _Local(arrival.group))
                group.answer_by.append(answer_by)
                if arrival.role is Role.MEMBER:
                    group.unread += 1
                self._changed.notify_all()
            return Seat(key, arrival)

    def leave(self, seat: Seat) -> None:
        with self._changed:
            self._in_flight[seat.key] -= 1
            if not self._in_flight[seat.key]:
                del self._in_flight[seat.key]

    def waiting(self, key: GroupKey) -> int:
        """How many probes alike are in a group that is still taking members."""
        with self._changed:
            forming = self._lobby.forming.get(key)
            return len(forming.counts) if forming is not None else 0

    def close(self, seat: Seat, *, wait: bool = True) -> Closed:
        forming = seat.arrival.group
        assert forming is not None
        with self._changed:
            idle = self._lobby.window
            while (
                wait
                and self.monotonic() < forming.closing_at(idle)
                and forming.total < self._lobby.max_count
            ):
                left = forming.closing_at(idle) - self.monotonic()
                self._changed.wait(min(_SLICE, max(0.0, left)))
            counts = self._lobby.close(forming)
            return Closed(counts, min(self._groups[forming.group_id].answer_by))

    def publish(
        self, seat: Seat, size: int, answers: list[MemberAnswer] | None, subnets: list[Subnet]
    ) -> None:
        assert seat.arrival.group is not None
        with self._changed:
            group = self._groups[seat.arrival.group.group_id]
            group.published, group.size, group.answers = True, size, answers
            group.subnets = subnets
            self._forget(group)
            self._changed.notify_all()

    def wait(
        self, seat: Seat, answer_by: float, deadline: float, subnet_ids: list[str]
    ) -> Grouped | None:
        """In one process the leader always publishes (by its members' ``answer_by`` and its
        give-backs), so a member waits for it until its own deadline."""
        assert seat.arrival.group is not None
        group_id = seat.arrival.group.group_id
        with self._changed:
            group = self._groups[group_id]
            while not group.published and self.monotonic() < deadline:
                self._changed.wait(_SLICE)
            answers, size, subnets = group.answers, group.size, group.subnets
            group.unread -= 1
            self._forget(group)
        if not answers:
            return None
        position = seat.arrival.position
        assert position is not None  # (one process: the lobby placed it)
        return Grouped(group_id, size, answers[position], subnets)

    def _forget(self, group: _Local) -> None:
        """Under the lock: a group answered and read by every member is dropped."""
        if group.published and group.unread <= 0:
            self._groups.pop(group.forming.group_id, None)


class TableMeeting:
    """The probes of every container meet in the state table (see the module and
    ``adapters.dynamodb_group``). Times in the table are epoch seconds on each process's wall
    clock (``wall``); deadlines stay on the root's monotonic clock.

    A burst is the last probe alike that arrived still in flight (its mark not yet removed by
    its ``leave``): a class's first desktop probes alone, the next opens a group, and the rest
    join it until its window closes, then open the next. The table failing is advice lost: the
    probe goes on alone, and it is logged once."""

    def __init__(
        self,
        table: GroupTable,
        *,
        window: float,
        max_window: float,
        max_count: int,
        max_members: int = MAX_MEMBERS,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        poll: float = POLL_FIRST_SECONDS,
        on_burst: Callable[[float], None] | None = None,
        on_calm: Callable[[], None] | None = None,
    ) -> None:
        self.table = table
        # Told when an arrival sees a burst, and for how many seconds its probe may still ask
        # EC2 (the root's shared EC2 budget: the others are drawing on the account's buckets
        # too, ``BudgetTable.crowd``).
        self.on_burst = on_burst
        # Told when a probe leaves: the notice its arrival gave ends (``BudgetTable.calm``).
        self.on_calm = on_calm
        self.window = window
        self.max_window = max(window, max_window)
        self.max_count = max_count
        self.max_members = max_members
        self.wall = wall
        self.monotonic = monotonic
        self.poll = poll
        self._said_down = False
        # The members' stamps of each group this process's leaders closed, in the order the
        # close put them (the leader's answers come in that order), until it publishes.
        self._closed: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def _epoch(self, moment: float) -> float:
        """A moment on the monotonic clock, in the table's epoch seconds."""
        return self.wall() + (moment - self.monotonic())

    def _moment(self, epoch: float) -> float:
        return self.monotonic() + (epoch - self.wall())

    def arrive(self, key: GroupKey, count: int, request_id: str, answer_by: float) -> Seat:
        stamp = new_stamp()
        alone = Seat(key, Arrival(Role.ALONE), stamp)
        where = key_id(key)
        by = self._epoch(answer_by)
        began = self.monotonic()
        # The earliest this probe, as a member, gives up on its group (``wait``): it computed
        # its answer-by before this moment, so this moment bounds it as the group's close
        # bounds every member's (``members_wait_until``). Its leader may ask EC2 until then.
        up = self._epoch(members_wait_until(answer_by, began))
        try:
            now = self.wall()
            lobby = self.table.arrive(where, stamp, now)
            burst = lobby.seen is not None
            if burst and self.on_burst is not None:
                # For as long as this probe may ask EC2 (its deadline: twice its answer-by's
                # distance), as a member gone alone or on its own: under load a probe's first
                # EC2 calls came seconds after its arrival, and a notice that had lapsed by
                # then left its leases guessing the account's ledgers idle, and losing.
                self.on_burst(2 * max(0.0, answer_by - self.monotonic()))
            # In a burst a probe joins a group or leads one; it goes alone only when its own
            # time to be answered as a member is up. A lost race is no reason to: the write
            # that lost says who won, and that group is joined next. Joins are lost too when
            # the group closes first (under load, between the read and the join), so a few
            # rounds may pass; each probe alone would cost the account 4 mutating calls where
            # its share of a group costs a fraction of one.
            for _ in range(ARRIVE_ROUNDS):
                if lobby.group_id is not None and lobby.closes > now:
                    joined = self.table.join(
                        lobby.group_id,
                        count,
                        by,
                        self.max_count,
                        self.max_members,
                        now,
                        stamp,
                        up,
                        lobby.leader_count,
                    )
                    if joined:
                        # (Its own join: the group's last, as far as this member knows.)
                        forming = Forming(
                            lobby.group_id,
                            key,
                            self._moment(lobby.closes),
                            last_join=self.monotonic(),
                        )
                        took = self.monotonic() - began
                        # (Its place in the group is the leader's to say: it finds its
                        # answer by its stamp.)
                        arrival = Arrival(Role.MEMBER, forming, None)
                        return Seat(key, arrival, stamp, took, answer_by)
                if not burst or count >= self.max_count or self.monotonic() >= answer_by:
                    return alone
                opened = group_id(request_id, key, now)
                closes = now + self.max_window
                lost = self.table.open(
                    where, opened, count, by, closes, now, lobby.group_id, stamp, up
                )
                if lost is None:
                    moment = self._moment(now)
                    forming = Forming(opened, key, self._moment(closes), [count], last_join=moment)
                    took = self.monotonic() - began
                    return Seat(key, Arrival(Role.LEADER, forming, 0), stamp, took, answer_by)
                if lost.group_id is None:
                    # The item names a group that is not one (the table is shared): no open
                    # can replace it without reading what it holds, and no join can find it.
                    break
                lobby, now = lost, self.wall()
        except AwsError as error:
            self._down(error)
        return alone

    def leave(self, seat: Seat) -> None:
        if self.on_calm is not None:
            self.on_calm()  # (this probe's burst notice ends with it)
        try:
            self.table.leave(key_id(seat.key), seat.stamp)
        except AwsError as error:
            self._down(error)

    def close(self, seat: Seat, *, wait: bool = True) -> Closed:
        forming = seat.arrival.group
        assert forming is not None
        # Until nobody has joined for the window, at most the maximum window, on the root's
        # clock; and never longer than the maximum in real time (a clock that does not move,
        # a test's frozen one, cannot keep a leader waiting). The idle window is at least
        # what the leader's own arrival took: when the table answers slowly (a class of
        # hundreds arriving at once), the next member's join is as slow, and a group closed
        # before it lands makes that member open another group (more creates for the class).
        idle = min(self.max_window, max(self.window, seat.took))
        real_end = time.monotonic() + self.max_window
        # But never past half the time left to the leader's own answer-by (its members,
        # starting with it, want theirs about then): a wait stretched by a slow table must
        # leave the group's asks their time. In a class of 200 the groups closed at their
        # answer-by, and every member was answered "alone" by a leader left no time to ask.
        start = self.monotonic()
        latest = start + max(0.0, seat.answer_by - start) / 2
        # The window counts from the group's opening (the leader's own joining), not from
        # when the leader is done looking its places up.
        opened = forming.last_join if math.isfinite(forming.last_join) else self.monotonic()
        last_join = self._epoch(opened)
        looked = -math.inf
        # How long a look at the table takes now: first a third of the leader's own arrival
        # (its mark, its pointer and its place: three calls), then what the last look took.
        look_takes = seat.took / 3
        while wait and time.monotonic() < real_end:
            # Who joined last is read before deciding: a member may have joined a moment ago.
            # Not when the look would answer after the group's last moment: the group then
            # stays open until that moment, as if a member had just joined (one may have).
            # In a class of 200 the leader's look took the busy table 3.5 s and the group
            # closed 3 s late, its 199 members looking for their answers all that time.
            may_look = forming.closes_at - self.monotonic() > look_takes
            if may_look and time.monotonic() - looked >= self.poll / 2:
                looked = time.monotonic()
                began = self.monotonic()
                try:
                    last_join = self.table.last_join(forming.group_id) or last_join
                except AwsError:
                    break  # close now: the members are better answered than kept waiting
                look_takes = self.monotonic() - began
            moment = self.monotonic()
            if moment >= forming.closes_at:
                break
            if may_look and moment >= self._moment(last_join) + idle:
                break
            if moment >= latest and moment >= self._moment(last_join) + self.window:
                break
            time.sleep(_SLICE)
        members = self.table.close(forming.group_id, seat.stamp)
        with self._lock:
            self._closed[forming.group_id] = members.stamps
        # (The kind's item still names the group: ``publish`` unpoints it.)
        # The members' give-ups, the leader's own (position 0) left out: it waits for nobody.
        ups = members.ups[1:]
        wait_until = self._moment(min(ups)) if ups else None
        return Closed(members.counts, self._moment(min(members.bys)), wait_until)

    def publish(
        self, seat: Seat, size: int, answers: list[MemberAnswer] | None, subnets: list[Subnet]
    ) -> None:
        assert seat.arrival.group is not None
        group_id = seat.arrival.group.group_id
        with self._lock:
            stamps = self._closed.pop(group_id, ())  # (what its close found)
        try:
            if size >= 2:
                texts: list[str | None] = (
                    [encode_answer(a) for a in answers] if answers is not None else [None] * size
                )
                self.table.publish(group_id, texts, stamps, subnets, self.wall())
        finally:
            # The kind's item stops naming the closed group once its members have their
            # answers, not before: that write sat between the close and the first ask (half a
            # second of a class of 200's critical path). Meanwhile an arrival that reads the
            # pointer and finds the group closed joins nothing and opens the next group (its
            # ``closes`` passed) or fails one join (the group closed early).
            try:
                self.table.unpoint(key_id(seat.key), group_id)
            except AwsError as error:
                self._down(error)

    def wait(
        self, seat: Seat, answer_by: float, deadline: float, subnet_ids: list[str]
    ) -> Grouped | None:
        """Until the group's answer or half the time left after ``answer_by`` (the leader
        stops asking then and gives back its holds; a leader that vanished leaves the member
        the rest of its budget to probe alone)."""
        forming = seat.arrival.group
        assert forming is not None
        give_up = gives_up_at(answer_by, deadline)
        real_end = time.monotonic() + max(0.0, give_up - self.monotonic())
        # The leader closes the group no sooner than the window after its last join (this
        # member's, at the earliest), then asks EC2 and publishes: a look before then finds
        # nothing, and a class's members each made one or two such looks as they joined,
        # when the table is busiest. (A leader that gives up, or whose read of the last join
        # failed, publishes sooner: its members then look at most this much later.)
        # (Pauses in real time, the moment on the root's clock, as the looks below; and never
        # longer in real time than on that clock: a clock that does not move, a test's frozen
        # one, cannot keep a member from looking.)
        first = min(forming.closing_at(self.window) + self.poll, give_up)
        real_first = min(real_end, time.monotonic() + max(0.0, first - self.monotonic()))
        while self.monotonic() < first and time.monotonic() < real_first:
            pause = min(self.poll, first - self.monotonic(), real_first - time.monotonic())
            time.sleep(max(0.0, pause))
        looks = 0
        found = None
        while self.monotonic() < give_up and time.monotonic() < real_end:
            found = self._look(seat, subnet_ids)
            if found is not None:
                break
            # Less often as the wait goes on, and less often when the table is slow
            # (``poll_pause``); never past the give-up.
            pause = min(poll_pause(looks, self.poll, seat.took), real_end - time.monotonic())
            looks += 1
            time.sleep(max(0.0, pause))
        else:
            # One last look at the give-up: the leader may have published during the last
            # pause (its give-back ends just before this moment when it started late,
            # ``asks_until``).
            found = self._look(seat, subnet_ids)
        grouped = None if found is None else _grouped(forming.group_id, found)
        if grouped is None and self.on_burst is not None:
            # This member probes alone, and so, as a rule, do the others of its group (their
            # group could not answer them in time): the account is crowded again, whatever
            # the arrival's notice said seconds ago. (Told late, the alone probes' first
            # leases guessed the ledgers idle and lost: 1,500 of a class of 200's updates.)
            self.on_burst(max(0.0, deadline - self.monotonic()))
        return grouped

    def _look(self, seat: Seat, subnet_ids: list[str]) -> Published | None:
        """A member's answer if its leader published it (None: not yet, or not readable)."""
        assert seat.arrival.group is not None
        try:
            return self.table.answer(seat.arrival.group.group_id, seat.stamp, subnet_ids)
        except AwsError as error:
            # Keep waiting: the group's holds count this member's share, so probing alone
            # now could meet the capacity its own group holds for it.
            self._down(error)
            return None

    def _down(self, error: AwsError) -> None:
        if self._said_down:
            log.debug("probe groups: the state table failed again: %s", error)
            return
        self._said_down = True
        log.warning(
            "probe groups: the state table %s failed (%s): a probe not yet in a group goes on "
            "alone; a member keeps looking for its group's answer until it must go alone",
            self.table.table,
            str(error)[:300],
        )
