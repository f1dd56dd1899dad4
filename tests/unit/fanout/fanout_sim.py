"""A discrete-event EC2 for the fan-out engine, and the sequential oracle it must agree with.

``SimRuntime`` replaces the engine's thread pool and clock: a call submitted at ``t`` takes
effect in EC2 at ``t + effect`` (when its create is counted against the quota, or its cancel
frees it) and its answer reaches the coordinator at ``t + latency``. Nothing sleeps and the
order of events is fixed by their times (ties by submission order), so every run is
reproducible and Hypothesis can shrink a failure to its smallest world.

``SimEc2`` answers creates the way EC2 does for one account: a permission error, an error
that no retry changes (an invalid request), "unsupported" for the type in that AZ, the account
quota (the request's own live holds count, with a weight per candidate, e.g. its vCPUs), or the
candidate's capacity; and before any of those, a candidate's first tries may end unanswered
(throttled by EC2 or by the broker's own rate budget, a server error, a lost answer), or all of
them may (``forever``: past any budget). The oracle asks the same function with nothing held:
that is "trying the candidates one at a time", asking an unanswered one again until it answers.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from capacity_broker.domain.errors import (
    RATE_BUDGET_EXHAUSTED,
    ErrorClass,
    Outcome,
    keeps_earlier,
)
from capacity_broker.domain.fanout import DecisionKind, Tried
from capacity_broker.domain.memory import MemoryKey
from capacity_broker.domain.outcomes import attempt_outcome
from capacity_broker.logic.fanout import Candidate, Fanout, FanoutResult, Task

REGION = "us-east-1"
TYPE = "g6.xlarge"

_ERRORS = {
    "permission": (ErrorClass.PERMISSION, "UnauthorizedOperation"),
    "error": (ErrorClass.INVALID, "InvalidParameterValue"),
    "unsupported": (ErrorClass.UNSUPPORTED, "Unsupported"),
    "quota": (ErrorClass.QUOTA, "VcpuLimitExceeded"),
    "insufficient": (ErrorClass.CAPACITY, "InsufficientInstanceCapacity"),
}
# A try that ends without an answer about capacity, after the adapters' own retries.
UNANSWERED = {
    "throttled": (ErrorClass.THROTTLE, "RequestLimitExceeded"),
    "budget": (ErrorClass.RATE_BUDGET, RATE_BUDGET_EXHAUSTED),
    "server": (ErrorClass.TRANSIENT, "InternalError"),
    "lost": (ErrorClass.TRANSIENT, "RequestTimeout"),
}


@dataclass(frozen=True)
class Spec:
    """One candidate's world: what EC2 answers there, and how slowly."""

    kind: str  # available | insufficient | unsupported | permission | error
    weight: int = 1  # what one hold there counts against the quota
    latency: float = 0.1  # create: seconds until the answer arrives
    effect: float = 1.0  # fraction of ``latency`` after which the create takes effect
    # How its first tries end, before EC2 answers with ``kind`` (``UNANSWERED``'s keys) ...
    unanswered: tuple[str, ...] = ()
    # ... or: never answered, the last of those (or a throttle) repeating past any budget.
    forever: bool = False

    def asked(self, tries: int) -> str | None:
        """The unanswered key of its try number ``tries`` (0 first), None once EC2 answers."""
        if tries < len(self.unanswered):
            return self.unanswered[tries]
        if self.forever:
            return self.unanswered[-1] if self.unanswered else "throttled"
        return None

    def code_when_blocked(self) -> tuple[Outcome, str]:
        """What the attempt says when the budget runs out on it (``forever``): what EC2 said
        last; the broker's own ``RateBudgetExhausted`` only if EC2 never said anything."""
        said: ErrorClass | None = None
        code = ""
        for key in (*self.unanswered, self.asked(len(self.unanswered))):
            assert key is not None
            error_class, new = UNANSWERED[key]
            if not keeps_earlier(said, error_class):
                said, code = error_class, new
        assert said is not None
        return attempt_outcome(said), code


def answer(spec: Spec, occupied: int, limit: int, quota_first: bool) -> str:
    """EC2's answer to one create, with ``occupied`` quota units held by the request."""
    if spec.kind in ("permission", "error", "unsupported"):
        return spec.kind
    over = spec.weight + occupied > limit
    if over and quota_first:
        return "quota"
    if spec.kind == "insufficient":
        return "insufficient"
    return "quota" if over else "available"


OUTCOME = {
    "available": Outcome.AVAILABLE,
    "insufficient": Outcome.INSUFFICIENT_CAPACITY,
    "unsupported": Outcome.UNSUPPORTED,
    "quota": Outcome.LIMIT_EXCEEDED,
    "permission": Outcome.ERROR,
    "error": Outcome.ERROR,
}


@dataclass(frozen=True)
class Oracle:
    decision: DecisionKind
    index: int | None
    outcomes: tuple[Outcome, ...]  # up to and including the decisive candidate
    code: str | None = None  # the decisive candidate's error code (BLOCKED, STOPPED)


def oracle(specs: Sequence[Spec], limit: int, quota_first: bool) -> Oracle:
    """Try the candidates in order, one at a time, each hold given back before the next; a
    candidate whose try ended unanswered is asked again until it answers, and one that never
    does (``forever``) ends the request when the budget runs out: ``BLOCKED``, with its code.
    Throttling is not an answer about capacity (contract v3)."""
    outcomes: list[Outcome] = []
    for index, spec in enumerate(specs):
        if spec.forever:
            outcome, code = spec.code_when_blocked()
            outcomes.append(outcome)
            return Oracle(DecisionKind.BLOCKED, index, tuple(outcomes), code)
        said = answer(spec, 0, limit, quota_first)
        outcomes.append(OUTCOME[said])
        if said == "available":
            return Oracle(DecisionKind.WON, index, tuple(outcomes))
        if said in ("quota", "permission"):
            return Oracle(DecisionKind.STOPPED, index, tuple(outcomes), _ERRORS[said][1])
    return Oracle(DecisionKind.NONE, None, tuple(outcomes))


@dataclass
class SimEc2:
    specs: Sequence[Spec]
    limit: int = 1000
    quota_first: bool = True
    give_back_latency: float = 0.1
    give_back_effect: float = 1.0
    give_back_ok: Callable[[int], bool] = lambda index: True
    clock: float = 0.0
    live: dict[str, tuple[int, int]] = field(default_factory=dict)  # hold -> (index, weight)
    created: list[int] = field(default_factory=list)  # index per create call
    holds_made: dict[str, int] = field(default_factory=dict)
    given_back: list[str] = field(default_factory=list)
    max_live: int = 0
    max_live_weight: int = 0
    stuck: dict[str, int] = field(default_factory=dict)  # give-backs that failed: still held
    tries: dict[int, int] = field(default_factory=dict)  # create calls per candidate
    _ids: Any = field(default_factory=itertools.count)

    def occupied(self) -> int:
        return sum(weight for _, weight in self.live.values()) + sum(self.stuck.values())

    def try_one(self, index: int, round_: int) -> Tried[str]:
        self.created.append(index)
        spec = self.specs[index]
        tries = self.tries.get(index, 0)
        self.tries[index] = tries + 1
        unanswered = spec.asked(tries)
        if unanswered is not None:
            error_class, code = UNANSWERED[unanswered]
            return Tried(error_class=error_class, error_code=code, message=f"{code} at {index}")
        said = answer(spec, self.occupied(), self.limit, self.quota_first)
        if said != "available":
            error_class, code = _ERRORS[said]
            return Tried(error_class=error_class, error_code=code, message=f"{said} at {index}")
        hold = f"cr-{index}-{next(self._ids)}"
        self.live[hold] = (index, spec.weight)
        self.holds_made[hold] = index
        self.max_live = max(self.max_live, len(self.live) + len(self.stuck))
        self.max_live_weight = max(self.max_live_weight, self.occupied())
        return Tried(hold=hold, reservation_id=hold)

    def give_back(self, hold: str) -> bool:
        self.given_back.append(hold)
        index, weight = self.live.pop(hold)
        if self.give_back_ok(index):
            return True
        self.stuck[hold] = weight  # EC2 did not confirm: it may well still count it
        return False

    def timing(self, task: Task) -> tuple[float, float]:
        """(latency, effect offset) of one call."""
        if task.action == "give_back":
            return self.give_back_latency, self.give_back_latency * self.give_back_effect
        spec = self.specs[task.index]
        return spec.latency, spec.latency * spec.effect


class SimRuntime:
    """The engine's runtime on a simulated clock (see the module docstring)."""

    def __init__(self, ec2: SimEc2, workers: int) -> None:
        self.ec2 = ec2
        self.workers = workers
        self.clock = 0.0
        self._heap: list[tuple[float, int, str, Task, Any]] = []
        self._seq = itertools.count()
        self.in_flight: dict[str, int] = {"try": 0, "give_back": 0}
        self.max_in_flight: dict[str, int] = {"try": 0, "give_back": 0}
        self.submitted: list[tuple[float, Task]] = []
        self.waits = 0
        # When each hold's create answer and give-back confirmation reached the coordinator.
        self.held_at: dict[str, float] = {}
        self.returned_at: dict[str, float] = {}

    def now(self) -> float:
        return self.clock

    def submit(self, task: Task, work: Callable[[], object]) -> None:
        latency, effect = self.ec2.timing(task)
        start = self.clock
        self.submitted.append((start, task))
        self.in_flight[task.action] += 1
        self.max_in_flight[task.action] = max(
            self.max_in_flight[task.action], self.in_flight[task.action]
        )
        heapq.heappush(
            self._heap, (start + effect, next(self._seq), "effect", task, (work, start + latency))
        )

    def wait(self, until: float | None) -> list[tuple[Task, object]]:
        # A livelocked engine would loop on the simulated clock forever: fail instead.
        self.waits += 1
        if self.waits > 10_000:
            raise RuntimeError(f"the engine keeps waiting: until={until!r}, t={self.clock!r}")
        results: list[tuple[Task, object]] = []
        while self._heap:
            at, _, what, task, payload = self._heap[0]
            if results and at > self.clock:
                break
            if until is not None and at > until and not results:
                self.clock = max(self.clock, until)
                return results
            heapq.heappop(self._heap)
            self.clock = max(self.clock, at)
            self.ec2.clock = self.clock
            if what == "effect":
                work, deliver_at = payload
                done = work()
                hold = self.ec2.given_back[-1] if task.action == "give_back" else None
                heapq.heappush(
                    self._heap, (deliver_at, next(self._seq), "deliver", task, (done, hold))
                )
            else:
                done, hold = payload
                self.in_flight[task.action] -= 1
                if isinstance(done, Tried) and done.hold is not None:
                    self.held_at[done.hold] = self.clock
                if hold is not None:
                    self.returned_at[hold] = self.clock
                results.append((task, done))
        if not results and until is not None:
            self.clock = max(self.clock, until)
        return results

    def reservation_seconds(self) -> float:
        """Seconds from each create's answer to its give-back's confirmation, summed."""
        return sum(self.returned_at[h] - self.held_at.get(h, 0.0) for h in self.returned_at)

    def close(self) -> None:
        assert not self._heap, "the engine returned with calls still in flight"


def candidates(n: int) -> list[Candidate[int]]:
    return [Candidate(i, MemoryKey(REGION, f"use1-az{i + 1}", TYPE)) for i in range(n)]


@dataclass
class Run:
    result: FanoutResult[str]
    ec2: SimEc2
    runtime: SimRuntime


def run(
    ec2: SimEc2,
    *,
    keep: bool = False,
    max_concurrency: int = 32,
    memory: Any = None,
    deadline: float = 1e9,
    earlier: tuple[int, str, str | None] | None = None,
    n: int | None = None,
    short: Callable[[float], bool] | None = None,
) -> Run:
    """``short(t)``: whether the pacer has no token to spare at the sim's time ``t``."""
    runtimes: list[SimRuntime] = []

    def runtime(workers: int) -> SimRuntime:
        made = SimRuntime(ec2, workers)
        runtimes.append(made)
        return made

    engine: Fanout[int, str] = Fanout(
        ec2.try_one,
        ec2.give_back,
        keep=keep,
        max_concurrency=max_concurrency,
        runtime=runtime,
        wall=lambda: 1_000_000.0 + (runtimes[0].clock if runtimes else 0.0),
        short=(lambda: short(runtimes[0].clock if runtimes else 0.0)) if short else None,
    )
    result = engine.run(
        candidates(len(ec2.specs) if n is None else n), deadline, memory=memory, earlier=earlier
    )
    return Run(result, ec2, runtimes[0])
