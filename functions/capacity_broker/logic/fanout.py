"""The fan-out engine: runs probe's and reserve's attempts under ``domain.fanout.Plan``.

It is generic over ordered candidates (probe: subnets; reserve: (type × subnet) pairs,
type-major), each with a memory key (region, AZ id, instance type). It is given
``try_one(item, round) -> Tried`` (one create: a live hold, or the error's class and code;
``round`` counts this candidate's earlier tries in the request) and ``give_back(hold) -> bool``
(True only when EC2 confirmed the cancel), and decides *when* each starts; the answer is the
sequential oracle's (see ``domain.fanout``). One coordinator (the caller's thread) owns the
plan; workers only run the calls and post what they answered, so the bookkeeping needs no
lock and a test can replace the workers with a simulated clock (``Runtime``).

Reservation-seconds of a hold: from the moment its create's answer reaches the coordinator to
the moment its give-back's confirmation does. EC2 bills from the reservation's creation, about
half a round trip before its answer arrives, to its cancellation, about half a round trip
before the confirmation arrives; the two halves cancel out in the sum, and a give-back that
EC2 took seconds to confirm (eventual consistency) is counted for all those seconds. A hold
kept for the job (reserve) is not counted here: it is not spent, it is used.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from ..domain.errors import ErrorClass
from ..domain.fanout import Decision, Plan, Report, Tried
from ..domain.memory import MemoryKey, MemoryView, Observation
from ..domain.outcomes import SEEN, Kind

C = TypeVar("C")
H = TypeVar("H")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate(Generic[C]):
    """One thing to try (a subnet, an (instance type, subnet) pair), and where its facts are
    remembered."""

    item: C
    key: MemoryKey


@dataclass(frozen=True)
class Task:
    """One call the coordinator runs: a try of candidate ``index`` (its ``round``-th), or
    the give-back of its hold."""

    action: Literal["try", "give_back"]
    index: int
    round: int = 0


class Runtime(Protocol):
    """Where the calls run and how the coordinator waits for them."""

    def now(self) -> float: ...

    def submit(self, task: Task, work: Callable[[], object]) -> None:
        """Run ``work`` (it never raises); its result comes back from ``wait`` with ``task``."""

    def wait(self, until: float | None) -> list[tuple[Task, object]]:
        """What finished, waiting for at least one result until ``until`` (None: as long as
        it takes; a time already past: not at all)."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class _Raised:
    """An exception a call raised, carried back to the coordinator as its result."""

    error: BaseException


class ThreadRuntime:
    """The real one: a thread pool and a queue of results. With nothing in flight, a wait is a
    ``sleep`` (an unanswered candidate's pause before its next try)."""

    def __init__(
        self,
        workers: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="fanout")
        self._done: queue.Queue[tuple[Task, object]] = queue.Queue()
        self._pending = 0  # submitted, not yet handed back by ``wait``

    def now(self) -> float:
        return self._clock()

    def submit(self, task: Task, work: Callable[[], object]) -> None:
        self._pending += 1

        def run() -> None:
            try:
                result = work()
            except BaseException as error:  # noqa: BLE001 - re-raised in the coordinator
                # ``work`` turns every Exception into a result; what is left (the runtime
                # ending the invocation, an interrupt) must end the coordinator too, never
                # leave it waiting for a result that will not come.
                self._done.put((task, _Raised(error)))
                return
            self._done.put((task, result))

        self._pool.submit(run)

    def wait(self, until: float | None) -> list[tuple[Task, object]]:
        timeout = None if until is None else until - self._clock()
        results: list[tuple[Task, object]] = []
        if self._pending == 0 and timeout is not None:
            # Nothing can come back before ``until``: wait with the clock's own sleep.
            if timeout > 0:
                self._sleep(timeout)
            return results
        try:
            if timeout is None:
                results.append(self._done.get())
            elif timeout > 0:
                results.append(self._done.get(timeout=timeout))
        except queue.Empty:
            return results
        while True:
            try:
                results.append(self._done.get_nowait())
            except queue.Empty:
                break
        self._pending -= len(results)
        for _, result in results:
            if isinstance(result, _Raised):
                raise result.error
        return results

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@dataclass
class FanoutResult(Generic[H]):
    """What one fan-out ended with: its decision, the answer's attempts, the hold kept, and
    what it learnt and spent."""

    decision: Decision
    reports: list[Report]
    kept: H | None  # keep mode: the live hold of ``kept_index`` (None when there is none)
    kept_index: int | None
    observations: list[Observation]
    reservation_seconds: float  # of the holds given back
    creates: int  # create calls made (tries)
    give_backs: int
    max_busy: int  # most creates in flight + holds not confirmed given back at once
    stalled: bool = False  # a bug guard: the plan waited on nothing (see ``run``)
    starts: list[tuple[int, int, int]] = field(default_factory=list)
    # How many of ``observations`` ``on_decided`` was given; the rest came after.
    decided_observations: int = 0

    @property
    def cleanup_pending(self) -> bool:
        return any(report.cleanup_pending for report in self.reports)


class Fanout(Generic[C, H]):
    def __init__(
        self,
        try_one: Callable[[C, int], Tried[H]],
        give_back: Callable[[H], bool],
        *,
        keep: bool,
        max_concurrency: int,
        runtime: Callable[[int], Runtime] | None = None,
        wall: Callable[[], float] = time.time,
        short: Callable[[], bool] | None = None,
    ) -> None:
        self.try_one = try_one
        self.give_back = give_back
        self.keep = keep
        self.max_concurrency = max(1, max_concurrency)
        self.runtime = runtime or ThreadRuntime
        self.wall = wall
        # Whether the account's budget for creates is short now (the pacer's word): the plan
        # is then frugal (``domain.fanout``). Asked before every step.
        self.short = short or (lambda: False)

    def run(
        self,
        candidates: Sequence[Candidate[C]],
        deadline: float,
        memory: MemoryView | None = None,
        earlier: tuple[int, H, str | None] | None = None,
        on_decided: Callable[[list[Observation]], None] | None = None,
    ) -> FanoutResult[H]:
        """Try ``candidates`` (in preference order) until the answer is known and every hold
        not kept is given back. ``deadline`` (the runtime's clock): no create starts after it.
        ``memory``: what decides the width, the hedge delay and the quota cap. ``earlier``:
        (index, hold, reservation id) of a live hold an earlier invocation of the request
        made, which enters as answered. ``on_decided``: called once, in this thread, with the
        observations so far, as soon as the answer is known and while the last give-backs run
        (e.g. to start the memory's write so it overlaps them)."""
        keys = [c.key for c in candidates]
        view = memory or MemoryView()
        rt = self.runtime(self.max_concurrency)
        plan = Plan(
            view.hints(keys),
            keep=self.keep,
            max_concurrency=self.max_concurrency,
            hedge=view.hedge_delay(),
            moment=rt.now(),
            quota_cap=view.quota_cap(keys),
            held=[(earlier[0], earlier[2])] if earlier else (),
            frugal=self.short(),
        )
        holds: dict[int, H] = {}
        if earlier is not None:
            holds[earlier[0]] = earlier[1]
        observations: list[Observation] = []
        in_flight = creates = give_backs = 0
        stalled = False
        decided_at: int | None = None
        try:
            while True:
                moment = rt.now()
                if moment >= deadline and not plan.expired:
                    plan.expire()
                plan.frugal = self.short()
                step = plan.step(moment)
                for index in step.give_back:
                    rt.submit(Task("give_back", index), self._giving(holds.pop(index)))
                    in_flight += 1
                    give_backs += 1
                for index in step.start:
                    slot = plan.slots[index]
                    task = Task("try", index, slot.tries - 1)
                    rt.submit(task, self._trying(candidates[index].item, task.round))
                    in_flight += 1
                    creates += 1
                if decided_at is None and plan.decision().final:
                    # After the give-backs are on their way: whatever the callback starts
                    # (the memory's write) runs beside them, never before them.
                    decided_at = len(observations)
                    if on_decided is not None:
                        on_decided(list(observations))
                if step.done:
                    break
                wake = step.wake_at
                if not plan.expired:
                    wake = deadline if wake is None else min(wake, deadline)
                if in_flight == 0 and wake is None:
                    # The plan waits on nothing: a bug in the policy. Never hang the
                    # invocation on it: stop starting, give back, answer what is known.
                    log.error("fan-out stalled: %s", [s.phase for s in plan.slots])
                    stalled = True
                    plan.expire()
                    continue
                for task, result in rt.wait(wake):
                    in_flight -= 1
                    moment = rt.now()
                    key = keys[task.index]
                    if task.action == "give_back":
                        ok = bool(result)
                        plan.returned(task.index, ok, moment)
                        seconds = plan.slots[task.index].holds[-1].seconds
                        observations.append(
                            Observation(key, self.wall(), reservation_seconds=seconds)
                        )
                        continue
                    assert isinstance(result, Tried)
                    slot = plan.slots[task.index]
                    latency = moment - slot.started_at
                    kind = result.kind
                    plan.answered(task.index, result, moment)
                    if kind is Kind.HELD:
                        holds[task.index] = result.hold  # type: ignore[assignment]
                    observations.append(
                        Observation(
                            key,
                            self.wall(),
                            SEEN[kind],
                            # An unanswered try lasted as long as its retries and the pacer
                            # made it: not how long EC2 takes to answer a create (the hedge).
                            latency=None if kind is Kind.UNANSWERED else latency,
                            carried=plan.live if kind is Kind.QUOTA else None,
                        )
                    )
        finally:
            rt.close()
        reports = plan.reports()
        kept_index = next((r.index for r in reports if r.kept), None)
        return FanoutResult(
            decision=plan.decision(),
            reports=reports,
            kept=holds.get(kept_index) if kept_index is not None else None,
            kept_index=kept_index,
            observations=observations,
            reservation_seconds=sum(r.reservation_seconds for r in reports),
            creates=creates,
            give_backs=give_backs,
            max_busy=plan.max_busy,
            stalled=stalled,
            starts=list(plan.starts),
            decided_observations=len(observations) if decided_at is None else decided_at,
        )

    def _trying(self, item: C, round_: int) -> Callable[[], object]:
        def work() -> object:
            try:
                return self.try_one(item, round_)
            except Exception as error:  # a bug in try_one must not hang the fan-out
                log.exception("try_one failed unexpectedly")
                return Tried[H](
                    error_class=ErrorClass.OTHER,
                    error_code="InternalError",
                    message=f"{type(error).__name__}: {error}"[:300],
                )

        return work

    def _giving(self, hold: H) -> Callable[[], object]:
        def work() -> object:
            try:
                return bool(self.give_back(hold))
            except Exception:  # unconfirmed: the answer says cleanup pending
                log.exception("give_back failed unexpectedly")
                return False

        return work
