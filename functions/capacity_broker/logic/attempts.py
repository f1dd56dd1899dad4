"""probe's and reserve's attempts on EC2: the fan-out engine (``logic.fanout``) run with the
reservation core's creates and cancels, and with the capacity memory.

One place turns a create into the engine's ``Tried`` and a give-back into its ``bool``, picks
each attempt's ClientToken generation, tells the memory what was learnt (when the answer is
decided, while the give-backs run; the rest with the container's next write), and turns the
engine's reports into the contract's ``attempts``. probe (keep nothing) and reserve (keep the
best hold) differ only in what they do with the decision.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..adapters.aws import AwsError
from ..adapters.ec2 import Subnet
from ..domain.errors import Outcome
from ..domain.fanout import Decision, DecisionKind, Report, Tried
from ..domain.memory import MemoryKey, Observation
from ..models import Attempt
from .fanout import Candidate, Fanout, FanoutResult, Runtime, ThreadRuntime
from .memory import CapacityMemory, Recall
from .reservations import Held, HoldSpec, NotOwnedError, ReservationCore

# Outcomes that say "no capacity here" (the others leave the question open).
NO_CAPACITY = frozenset({Outcome.INSUFFICIENT_CAPACITY, Outcome.UNSUPPORTED})


@dataclass(frozen=True)
class Place:
    """One candidate: an instance type in a subnet (probe: one type, every subnet)."""

    instance_type: str
    subnet: Subnet

    def key(self, region: str) -> MemoryKey:
        return MemoryKey(region, self.subnet.availability_zone_id, self.instance_type)


@dataclass
class Ran:
    """What the attempts ended in (see ``Attempts.run``)."""

    result: FanoutResult[Held]
    places: list[Place]
    attempts: list[Attempt]
    # Some attempt met a hold an earlier invocation of this request had given back.
    earlier_work: bool

    @property
    def decision(self) -> Decision:
        return self.result.decision

    @property
    def winner(self) -> int | None:
        """The candidate whose hold answers the request: won, or (deadline) the best hold."""
        decision = self.result.decision
        if decision.kind in (DecisionKind.WON, DecisionKind.TIMED_OUT):
            return decision.index
        return None

    def failure(self) -> Attempt | None:
        """The attempt that left the question open: the decisive stop, or the unanswered one
        that blocked the answer, else the first that failed for another reason than capacity."""
        decision = self.result.decision
        if (
            decision.kind in (DecisionKind.STOPPED, DecisionKind.BLOCKED)
            and decision.index is not None
        ):
            return self.attempts[decision.index]
        return next(
            (
                a
                for a in self.attempts
                if a.outcome not in NO_CAPACITY
                and a.outcome not in (Outcome.AVAILABLE, Outcome.NOT_TRIED)
            ),
            None,
        )

    @property
    def only_no_capacity(self) -> bool:
        """Every candidate was tried and EC2 said no capacity (or unsupported) everywhere."""
        return self.result.decision.kind is DecisionKind.NONE and all(
            a.outcome in NO_CAPACITY for a in self.attempts
        )


@dataclass
class Spending:
    """What a request spent, for the answer and the metrics: every create's answer and every
    give-back's reservation-seconds, per (region, AZ id, instance type), and the instance count
    that turns reservation-seconds into instance-seconds."""

    instance_count: int = 1
    observations: list[Observation] = field(default_factory=list)
    cancel_failures: int = 0
    # probe: answered by a group (contract v3), and the group's size when this request led it.
    grouped: bool = False
    led_group_of: int = 0

    @property
    def reservation_seconds(self) -> float:
        return sum(o.reservation_seconds for o in self.observations)

    @property
    def creates(self) -> int:
        return sum(1 for o in self.observations if o.seen is not None)


class Attempts:
    """Runs one request's attempts. ``keep``: reserve keeps the best hold; probe gives every
    hold back before it answers."""

    def __init__(
        self,
        core: ReservationCore,
        *,
        keep: bool,
        max_concurrency: int,
        monotonic: Callable[[], float] = time.monotonic,
        memory: CapacityMemory | None = None,
    ) -> None:
        self.core = core
        self.keep = keep
        self.max_concurrency = max_concurrency
        self.monotonic = monotonic
        self.memory = memory

    def run(
        self,
        places: Sequence[Place],
        spec_of: Callable[[Place], HoldSpec],
        recall: Recall | None,
        deadline: float,
        hard_deadline: float,
        spending: Spending,
        earlier: tuple[int, Held] | None = None,
    ) -> Ran:
        """Try ``places`` (in preference order) until the answer is known; every hold not kept
        is given back (EC2 confirmed, or the attempt says ``cancelled: false``)."""
        region = self.core.ec2.region
        lock = threading.Lock()
        # The next ClientToken generation per candidate: a hold given back and tried again
        # (reserve making room under the quota) needs a fresh token, since EC2 answers the
        # spent one with the cancelled reservation. A retry after a failed create (a quota
        # error, or a try left unanswered: throttled, a 5xx, no answer) reuses the same: EC2
        # keeps no token of a create that failed, and one whose answer was lost may have made
        # the reservation, which the same token finds again instead of making a second.
        generations: dict[int, int] = {}
        found_given_back = threading.Event()

        def try_one(index: int, _round: int) -> Tried[Held]:
            with lock:
                first = generations.get(index, 0)
            try:
                held = self.core.hold(
                    spec_of(places[index]),
                    deadline,
                    given_back=found_given_back.set,
                    first_generation=first,
                )
            except AwsError as error:
                return Tried(
                    error_class=error.error_class,
                    error_code=error.code or "RequestTimeout",
                    message=error.message[:300],
                )
            with lock:
                generations[index] = held.generation + 1
            return Tried(hold=held, reservation_id=held.reservation.id)

        def give_back(held: Held) -> bool:
            try:
                self.core.release(held.reservation, hard_deadline)
            except (AwsError, NotOwnedError):
                return False
            return True

        if earlier is not None:
            generations[earlier[0]] = earlier[1].generation + 1

        def runtime(workers: int) -> Runtime:
            return ThreadRuntime(workers, clock=self.monotonic, sleep=self.core.sleep)

        fanout = Fanout[int, Held](
            try_one,
            give_back,
            keep=self.keep,
            max_concurrency=self.max_concurrency,
            runtime=runtime,
            short=lambda: self.core.ec2.budget_short("CreateCapacityReservation"),
        )
        memory = self.memory
        result = fanout.run(
            [Candidate(index, place.key(region)) for index, place in enumerate(places)],
            deadline,
            memory=recall.view() if recall is not None else None,
            earlier=(earlier[0], earlier[1], earlier[1].reservation.id) if earlier else None,
            on_decided=(lambda seen: memory.remember(seen)) if memory is not None else None,
        )
        late = result.observations[result.decided_observations :]
        if memory is not None and late:
            # Learnt after the decision (mostly the give-backs' reservation-seconds): written
            # with the container's next write, never as one more round trip of this answer.
            memory.remember(late, write=False)
        spending.observations.extend(result.observations)
        spending.cancel_failures += sum(
            1 for report in result.reports for hold in report.holds if not hold.cancelled
        )
        return Ran(
            result=result,
            places=list(places),
            attempts=[
                _attempt(place, report, with_type=self.keep)
                for place, report in zip(places, result.reports, strict=True)
            ],
            earlier_work=found_given_back.is_set(),
        )


def _attempt(place: Place, report: Report, with_type: bool) -> Attempt:
    return Attempt(
        subnet_id=place.subnet.subnet_id,
        instance_type=place.instance_type if with_type else None,
        availability_zone=place.subnet.availability_zone,
        availability_zone_id=place.subnet.availability_zone_id,
        outcome=report.outcome,
        error_code=report.error_code if report.outcome is not Outcome.AVAILABLE else None,
        message=report.message if report.outcome is not Outcome.AVAILABLE else None,
        reservation_id=report.reservation_id if report.outcome is Outcome.AVAILABLE else None,
        cancelled=report.cancelled,
    )
