"""The fault matrix: every EC2 call each entry point makes, under every kind of failure.

The calls are not listed here. Each entry point (probe, reserve, reserve with a launch
template and ``provision``, release, a cleaner sweep, the capacity listing) first runs once
against a clean emulator; the distinct EC2 actions of that run's call log are the call sites.
Into each call site goes each fault kind, twice:

- ``transient``: the fault fires once or twice (``times=2`` for what the broker retries:
  throttling, 5xx, timeouts; ``times=1`` for what it must not retry: capacity, quota,
  permission). A retried fault must end in the clean run's answer within the same
  invocation; one that is not retried must end in it when the caller asks again with the
  same request id (what a scheduler does).
- ``persistent``: the fault fires on every call (``times=1000``): the answer must be a
  truthful failure (or a truthful success when the call was not essential), and must show
  the injected failure.

After every scenario the holds a successful ``reserve`` legitimately keeps are given back by
the job's ``release`` (as the scheduler does when the job ends), the emulator clock moves
past every grace and EndDate, and one fault-free cleaner sweep (on the emulator's clock)
runs. Then no owned reservation may hold capacity. Throughout, no attempt may have made a
second reservation (grouped by ClientToken and by attempt), and every answer must agree with
what the emulator shows.

The broker's own backoff (``RetryPolicy``: 0.2 s base, 5 s cap) would make a persistent
throttle cost seconds per scenario, so the matrix builds the flows through their
constructors with a fast policy (``FAST``); ``test_the_default_retry_policy`` runs the real
one. Also here: "the Lambda dies right after a create" (``test_the_lambda_dies_right_after_*``),
a tiny time budget (``test_a_tiny_time_budget``), and the calls to SSM and CloudFormation
(``test_other_service_fault``). Known bugs stay as strict xfails (``KNOWN_BUGS`` and the
marks' reasons); docs/reliability.md has the counts and what was found.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.adapters.aws import RetryPolicy
from capacity_broker.config import Settings
from capacity_broker.handlers import capacity as capacity_handler
from capacity_broker.handlers import cleaner as cleaner_handler
from capacity_broker.handlers import probe as probe_handler
from capacity_broker.handlers import release as release_handler
from capacity_broker.handlers import reserve as reserve_handler
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.logic.reservations import Patience
from capacity_broker.root import Root

pytestmark = [
    pytest.mark.integration,
    # moto's serializer warns that CloudFormation's model has no AccessDenied shape.
    pytest.mark.filterwarnings("ignore:Exception\\(AnyServiceError\\):UserWarning"),
]

REGION = "us-east-1"
CLUSTER = "demo-cluster"
SCENARIOS = Path(__file__).parent / "scenarios"
HOLDING = ("active", "pending")

TAG_CLUSTER = "capacity-broker:cluster-id"
TAG_PURPOSE = "capacity-broker:purpose"
TAG_REQUEST = "capacity-broker:request-id"
TAG_SUBNET = "capacity-broker:subnet-id"
TAG_JOB = "capacity-broker:job-id"

# How long the us-east-1b hold of a reserve waits for the us-east-1c one (see Run.hook).
ORDER_WAIT_SECONDS = 0.3

# The broker's jittered backoff, shrunk: milliseconds apart, and 4 attempts instead of 10
# (a transient fault fires twice: the third attempt succeeds; a persistent one exhausts them
# the same way, sooner). ``test_the_default_retry_policy`` runs the real one.
FAST = RetryPolicy(base=0.002, cap=0.01, max_attempts=4)
# Likewise the pauses while EC2 does not show what was made a moment ago (same number of looks).
PATIENT_FAST = Patience(base=0.002, cap=0.01)

# After a scenario: past the probe grace (90 s), the stack grace (3 min) and every EndDate the
# broker sets (probe 2 min, hold 5 min), so the sweep condemns anything still held.
SWEEP_AFTER_SECONDS = 6 * 60 + 30
# After a lag scenario, before the job's own release: EC2 has caught up (the emulator's
# lag_seconds), as it has by the time a job ends.
LAG_SECONDS = 5
# The Lambda of a scenario whose fault lasts at CreateCapacityReservation and is one the broker
# retries (throttling, 5xx, a lost answer): such a create is retried for as long as the
# invocation's budget lasts (contract v3: throttling is not an answer about capacity; the answer
# is ``error`` when the budget runs out). 6 s (a 3 s budget) keeps each of those scenarios to
# seconds instead of the default 27; the flows stop at their race, right after the look-ups.
PERSISTENT_RETRIED_MS = 6000

PROBE_SUBNETS = ["subnet-0fa00000000000001", "subnet-0fa00000000000002", "subnet-0fa00000000000003"]
PROBE_IMAGE = "ami-0fa00000000000001"
HPC_SUBNETS = ["subnet-0fb00000000000001", "subnet-0fb00000000000002", "subnet-0fb00000000000003"]
HPC_TYPES = ["c7i.48xlarge", "hpc7a.96xlarge"]
TEMPLATE = "lt-0fb00000000000001"
DONE_STACK = "fm-job-done"


# -- fault kinds ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    code: str | None  # None: a timeout after the request took effect (or a lag)
    retried: bool  # the broker retries it (same call, same ClientToken) or waits it out
    lag: bool = False  # eventual consistency (below) instead of an error or a timeout

    @property
    def shown(self) -> str:
        """The error code an answer carries for this fault."""
        return self.code or "RequestTimeout"

    @property
    def mode(self) -> str:
        if self.lag:
            return "lag"
        return "timeout" if self.code is None else "error"

    def times(self, variant: str) -> int:
        if variant == "persistent":
            return 1000
        return 2 if self.retried else 1


# Eventual consistency ("Eventual consistency in the Amazon EC2 API"): the emulator's ``lag``
# fault at a call site. The next N calls of that action see what the scenario made as EC2 does
# a moment after: a reservation named by id is unknown (NotFound), a listing filtered by tag
# misses it; a create among them makes a reservation (a fleet: instances) that stays unknown for
# N more calls. Transient: N = 2; persistent: 1000, longer than the invocation. It reaches only
# what the flow made a moment ago, so it runs at the sites whose clean calls named, listed or
# made such a thing (``Clean.fresh``); the default lag (one NotFound, one pending, two listings)
# is on in every scenario besides.
LAG = Kind("eventual-consistency", None, True, lag=True)
# What a lag the broker could not wait out leaves in its answer.
NOT_YET = {"InvalidCapacityReservationId.NotFound", "IncorrectState", "IdempotentParameterMismatch"}

KINDS = (
    Kind("throttle", "RequestLimitExceeded", True),
    Kind("internal-error", "InternalError", True),
    Kind("unavailable", "ServiceUnavailable", True),
    Kind("timeout", None, True),
    Kind("no-capacity", "InsufficientInstanceCapacity", False),
    Kind("instance-limit", "InstanceLimitExceeded", False),
    Kind("vcpu-limit", "VcpuLimitExceeded", False),
    Kind("unauthorized", "UnauthorizedOperation", False),
    LAG,
)
KIND = {k.name: k for k in KINDS}
VARIANTS = ("transient", "persistent")


# -- the emulator's view (read from its model: no API call, nothing in the call log) --------


@dataclass(frozen=True)
class Seen:
    id: str
    state: str
    instance_type: str
    availability_zone: str
    count: int
    block: bool
    tags: dict[str, str]

    @property
    def holding(self) -> bool:
        return self.state in HOLDING

    @property
    def owned(self) -> bool:
        return self.tags.get(TAG_CLUSTER) == CLUSTER and TAG_PURPOSE in self.tags and not self.block


def reservations(emu: Any) -> dict[str, Seen]:
    model = emu.capacity(REGION)
    model.refresh()
    return {
        rid: Seen(
            rid,
            r.state,
            r.instance_type,
            r.availability_zone,
            r.total_instance_count,
            r.is_capacity_block,
            model.tags_of(rid),
        )
        for rid, r in model.reservations.items()
    }


def running_instances(emu: Any, request_id: str) -> set[str]:
    model = emu.capacity(REGION)
    return {
        i.id
        for i in model.ec2.all_instances()
        if i._state.name in ("pending", "running")
        and model.ec2.tags.get(i.id, {}).get(TAG_REQUEST) == request_id
    }


def lost_answers(emu: Any, action: str) -> set[str]:
    """Reservations that a call of ``action`` acted on while every such call's answer was lost
    (a timeout after the request reached EC2): EC2 made (or cancelled) them, the broker never
    heard. Read from the call log: creates grouped by ClientToken, cancels by reservation id."""
    key = "ClientToken" if action == "CreateCapacityReservation" else "CapacityReservationId"
    outcomes: dict[str, set[str]] = {}
    for call in emu.calls(action):
        outcomes.setdefault(call.params[key], set()).add(call.outcome)
    lost = {value for value, seen in outcomes.items() if seen == {"timeout"}}
    if action != "CreateCapacityReservation":
        return lost
    tokens = emu.capacity(REGION).client_tokens.made(action)
    return {tokens[token] for token in lost if token in tokens}


def cancelled_ids(emu: Any) -> set[str]:
    return {c.params["CapacityReservationId"] for c in emu.calls("CancelCapacityReservation")}


def error_codes(answer: Any) -> set[str]:
    """Every ``error_code`` anywhere in an answer."""
    found: set[str] = set()
    if isinstance(answer, dict):
        if isinstance(answer.get("error_code"), str):
            found.add(answer["error_code"])
        for value in answer.values():
            found |= error_codes(value)
    elif isinstance(answer, list):
        for value in answer:
            found |= error_codes(value)
    return found


# -- one scenario ---------------------------------------------------------------------------


@dataclass
class LambdaContext:
    function_name: str = "capacity-broker-fault-matrix"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:fm"
    aws_request_id: str = "00000000-0000-0000-0000-00000000f417"
    remaining_ms: int = 30_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class LambdaKilled(BaseException):
    """The invocation was killed (a BaseException: the handler's ``except Exception`` and the
    retry loops cannot catch it, just as nothing in a killed sandbox runs on)."""


@dataclass
class Run:
    """One scenario: the emulator, the broker's EC2 client hooks and what each invocation
    changed."""

    emu: Any
    entry: Entry
    context: LambdaContext = field(default_factory=LambdaContext)
    answers: list[dict[str, Any]] = field(default_factory=list)
    before: dict[str, Seen] = field(default_factory=dict)
    after: dict[str, Seen] = field(default_factory=dict)
    # Every reservation ever created in the scenario, by the invocation that made it.
    created_by: dict[str, int] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    kill_after: str | None = None
    killed: bool = False
    # EC2 lags at the scenario's call site (the eventual-consistency kind).
    lagging: bool = False
    invocations: int = 0
    order: threading.Event = field(default_factory=threading.Event)
    # The root the handlers run on in this scenario (``flows``).
    root: Any = None

    # -- the broker's EC2 client ---------------------------------------------------------
    def hook(self) -> None:
        """Hooks on the broker's own EC2 client (the checks read the emulator's model).

        - order: the us-east-1b hold of a reserve waits (up to ORDER_WAIT_SECONDS) until
          the us-east-1c one has been answered, so the better pair always wins second and
          the other hold is always a loser to cancel: EC2 answering one AZ a little later,
          made certain;
        - kill: see ``test_the_lambda_dies_right_after_*``.
        """
        # On the root's EC2 client, and on its session for the clients it makes later (a call
        # with less time left than the client's read timeout goes through a client of its own,
        # ``Clients.client(within=...)``).
        clients = self.root.clients
        for events in (
            clients.client("ec2", REGION).meta.events,
            getattr(clients.session, "_session", clients.session).get_component("event_emitter"),
        ):
            events.register("before-parameter-build.ec2", self._before)
            events.register("after-call.ec2", self._after)
            events.register("after-call-error.ec2", self._after_error)

    def _pair(self, params: dict[str, Any]) -> str | None:
        if params.get("InstanceType") != "hpc7a.96xlarge":
            return None
        return {self.ids.get("az-b"): "b", self.ids.get("az-c"): "c"}.get(
            params.get("AvailabilityZoneId")
        )

    def _before(self, params: dict[str, Any], model: Any, context: Any, **_: Any) -> None:
        if self.killed:
            raise LambdaKilled(f"{model.name} after the kill")
        if model.name == "CreateCapacityReservation" and self.entry.ordered:
            pair = self._pair(params)
            context["fm_pair"] = pair
            if pair == "b":
                self.order.wait(ORDER_WAIT_SECONDS)

    def _after(self, http_response: Any, model: Any, context: Any, **_: Any) -> None:
        if context.get("fm_pair") == "c":
            self.order.set()
        if self.killed:
            raise LambdaKilled(f"the answer to {model.name} after the kill")
        if model.name == self.kill_after and http_response.status_code < 300:
            self.killed = True
            raise LambdaKilled(f"right after {model.name} took effect")

    def _after_error(self, context: Any, **_: Any) -> None:
        if context.get("fm_pair") == "c":
            self.order.set()

    # -- invocations ---------------------------------------------------------------------
    def invoke(self) -> dict[str, Any]:
        self.before = reservations(self.emu)
        self.order.clear()
        self.invocations += 1
        try:
            answer = self.entry.invoke(self)
        finally:
            self.after = reservations(self.emu)
            for rid in set(self.after) - set(self.created_by):
                self.created_by[rid] = self.invocations
        self.answers.append(answer)
        return answer

    @property
    def new(self) -> dict[str, Seen]:
        """Reservations the last invocation created."""
        return {rid: s for rid, s in self.after.items() if rid not in self.before}


def flows(retry: RetryPolicy | None, budget_clock: Any = None) -> Root:
    """The handlers' root, every flow built with ``retry`` (None: the handlers' own policies)
    and a patient-but-fast reservation core, the cleaner on the emulator's clock.

    ``budget_clock`` (an ``EmulatedTime``): the invocation's deadlines, every pause (the
    retries', the reservation core's, the pacer's), the pacer's buckets and EC2's run on the
    emulator's frozen clock, which only the broker's own pauses move on. How much of a budget
    is left at a call then depends on what the broker did, not on how fast this machine ran
    the look-ups before it.

    Everything a handler does (parsing, request records, the answer's shape, metrics) is the
    real handler's.
    """
    from capacity_broker.adapters.throttle import Pacer

    import emulator

    knobs: dict[str, Any] = {"retry": retry, "patience": PATIENT_FAST} if retry else {}
    if budget_clock is not None:
        on = budget_clock
        on.emu.throttle(emulator_clock=True)  # EC2's buckets refill by the same clock
        knobs |= {
            "monotonic": on.monotonic,
            "sleep": on.sleep,
            "pacer": Pacer(clock=on.monotonic, sleep=on.sleep),
        }
        # The handlers' own policy (``retry`` None) too: on the machine's clock, its budget
        # check would compare the emulator's deadlines with the machine's time.
        knobs["retry"] = on.paused(retry or RetryPolicy())
    root = Root(
        Settings.from_env(os.environ), cleaner_clock=lambda: emulator.Emulator().now(), **knobs
    )
    CONTAINER.use(root)
    return root


def with_state_table(root: Root, table: str) -> Root:
    """The same container after ``BROKER_STATE_TABLE`` was set: a root with the state table,
    on the same adapters (its EC2 client keeps the run's hooks)."""
    settings = root.settings.model_copy(update={"state_table": table})
    fresh = Root(
        settings,
        adapters=root.adapters,
        patience=root.patience,
        cleaner_clock=root.cleaner_clock,
    )
    CONTAINER.use(fresh)
    return fresh


@pytest.fixture(scope="module")
def emulated() -> Iterator[Any]:
    """One in-process emulator for the module, reset before every scenario (starting moto's
    mock costs more than most scenarios)."""
    import emulator

    with emulator.mock() as emu:
        yield emu


@contextmanager
def scenario(
    entry: Entry,
    monkeypatch: pytest.MonkeyPatch,
    retry: RetryPolicy | None = FAST,
    emulated: Any = None,
    budget_clock: Any = None,
) -> Iterator[Run]:
    """A fresh emulator (``emulated``, reset; or a new one) with the entry's world, a cold
    broker container, the flows built with ``retry`` (None: the handlers' own), the client
    hooks, and an empty call log."""
    import emulator

    monkeypatch.setenv("BROKER_CLUSTER_ID", CLUSTER)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CapacityBroker")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    for name in ("BROKER_PARAMETER_PREFIX", "BROKER_REGIONS", "BROKER_STATE_TABLE"):
        monkeypatch.delenv(name, raising=False)
    with ExitStack() as stack:
        if emulated is None:
            emu = stack.enter_context(emulator.mock())
        else:
            emu = emulated
            emu.reset()
        emu.freeze()
        run = Run(emu, entry)
        run.root = flows(retry, budget_clock(emu) if budget_clock else None)
        run.ids = dict(emu.load_scenario(SCENARIOS / entry.scenario).reservations)
        zones = emu.capacity(REGION).zones
        run.ids["az-b"], run.ids["az-c"] = zones["us-east-1b"], zones["us-east-1c"]
        run.hook()
        entry.prepare(run)
        run.created_by = dict.fromkeys(reservations(emu), -1)
        emu.clear_calls()
        try:
            yield run
        finally:
            CONTAINER.use(None)
            run.root.close()


# -- the entry points -----------------------------------------------------------------------


def probe_event() -> dict[str, Any]:
    return {
        "request_id": "vdi-fm",
        "instance_type": "g6.xlarge",
        "subnet_ids": PROBE_SUBNETS,
        "image_id": PROBE_IMAGE,
    }


def job_event(**fields: Any) -> dict[str, Any]:
    return {
        "request_id": "job-fm",
        "job_id": "fm-1",
        "instance_types": HPC_TYPES,
        "subnet_ids": HPC_SUBNETS,
        "instance_count": 8,
        **fields,
    }


@dataclass(frozen=True)
class Entry:
    name: str
    scenario: str
    event: Callable[[], Any]
    handler: Callable[[], Callable[[Any, Any], dict[str, Any]]]
    check: Callable[[Run, dict[str, Any]], None]
    # What must be the same as in the clean run (no ids: those differ between runs) when a
    # fault the broker retries has passed.
    essence: Callable[[Run], Any]
    prepare: Callable[[Run], None] = lambda run: None
    # What the job's own lifecycle does after a successful answer (release a kept hold).
    settle: Callable[[Run, dict[str, Any]], None] = lambda run, answer: None
    ordered: bool = False
    # The reservation the clean answer won (its create is a call site of its own).
    winner: Callable[[dict[str, Any]], str | None] = lambda answer: None
    # The same, without where: after a fault it does not retry (capacity, quota, permission
    # on one place) the broker may rightly settle elsewhere.
    outcome: Callable[[Run], Any] | None = None
    # A lasting failure the answer may show by leaving out what it could not learn.
    degrades: Callable[[Run, dict[str, Any], str], bool] = lambda run, answer, action: False

    @property
    def request_id(self) -> str | None:
        event = self.event()
        return event.get("request_id") if isinstance(event, dict) else None

    def invoke(self, run: Run) -> dict[str, Any]:
        return self.handler()(self.event(), run.context)


def _probe_essence(run: Run) -> Any:
    answer = run.answers[-1]
    return answer["status"], answer.get("subnet_id")


def _reserve_essence(run: Run) -> Any:
    answer = run.answers[-1]
    return (
        answer["status"],
        answer.get("instance_types"),
        answer.get("subnet_ids"),
        len(answer.get("instances") or []),
        "launch_template" in answer,
    )


def _release_essence(run: Run) -> Any:
    answer = run.answers[-1]
    return answer["status"], len(answer.get("cancelled") or [])


def _cleaner_essence(run: Run) -> Any:
    """Over the sweeps so far: what was cancelled and why, by scenario name; the last status."""
    name = {rid: n for n, rid in run.ids.items()}
    cancelled = sorted(
        (name.get(c["id"], c["id"]), c["reason"]) for a in run.answers for c in a["cancelled"]
    )
    return run.answers[-1]["status"], cancelled


def _capacity_essence(run: Run) -> Any:
    answer = run.answers[-1]
    name = {rid: n for n, rid in run.ids.items()}
    return answer["status"], sorted(
        (name[r["reservation_id"]], r.get("ultra_cluster_placement"))
        for r in answer["reservations"]
    )


def _placement_unknown(run: Run, answer: dict[str, Any], action: str) -> bool:
    """Topology is detail: when EC2 will not give it, Capacity Block rows leave
    ``ultra_cluster_placement`` out (unknown) instead of claiming true or false."""
    blocks = [r for r in answer["reservations"] if r["reservation_type"] == "capacity-block"]
    return (
        action == "DescribeCapacityReservationTopology"
        and answer["status"] == "ok"
        and bool(blocks)
        and all("ultra_cluster_placement" not in r for r in blocks)
    )


def _interconnect_unknown(run: Run, answer: dict[str, Any], action: str) -> bool:
    """The interconnect status is detail too: when EC2 will not give it, Capacity Block rows
    say ``interconnect_status: null`` (unknown) instead of claiming ok or impaired."""
    blocks = [r for r in answer["reservations"] if r["reservation_type"] == "capacity-block"]
    return (
        action == "DescribeCapacityBlockStatus"
        and answer["status"] == "ok"
        and bool(blocks)
        and all(r.get("interconnect_status") is None for r in blocks)
    )


def _capacity_degrades(run: Run, answer: dict[str, Any], action: str) -> bool:
    return _placement_unknown(run, answer, action) or _interconnect_unknown(run, answer, action)


def caught_up(run: Run) -> None:
    """Time has passed in the job's life (it ran between its reserve and its release): EC2
    has caught up with what was made. On the default timings the few calls in between do
    that; on the slow preset (EC2's worst cases: a tag listing may miss a new hold for
    minutes) the emulator is settled, as it would be after a job's minutes. The invocation
    under test still meets every lag of its preset."""
    from emulator.state import world

    if world.preset != "default":
        run.emu.settle()


def _hold_for_release(run: Run) -> None:
    # With a launch template, so that the release deletes the job's version (a call site).
    answer = reserve_handler.handler(
        job_event(request_id="rel-hold", job_id="fm-rel", launch_template={"id": TEMPLATE}),
        LambdaContext(),
    )
    assert answer["status"] == "reserved", answer
    run.ids["hold"] = answer["reservation"]["id"]
    caught_up(run)  # the job ran before it is released


def _done_stack(run: Run) -> None:
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName=DONE_STACK,
        TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}),
    )


def _release_kept_hold(run: Run, answer: dict[str, Any]) -> None:
    """The job ran (or was cancelled): the scheduler releases its hold."""
    if answer["status"] == "reserved":
        caught_up(run)
        released = release_handler.handler(
            {"job_id": answer["job_id"], "request_id": f"end-{answer['request_id']}"},
            LambdaContext(),
        )
        assert released["status"] == "released", released
        assert answer["reservation"]["id"] in released["cancelled"]


def check_probe(run: Run, answer: dict[str, Any]) -> None:
    request_id = run.entry.request_id
    assert answer["request_id"] == request_id
    assert answer["status"] in ("available", "unavailable", "error"), answer
    assert answer["message"]
    ours = {rid: s for rid, s in run.after.items() if s.tags.get(TAG_REQUEST) == request_id}
    assert set(run.new) <= set(ours), "the probe created something that is not its own"
    for seen in ours.values():
        assert seen.tags[TAG_PURPOSE] == "probe" and seen.tags[TAG_CLUSTER] == CLUSTER
    attempts = answer.get("attempts") or []
    if not attempts:
        # Stopped before any attempt (subnets, image, VPC or flags could not be read).
        assert answer["status"] == "error" and answer["error_code"], answer
        assert run.new == {}
        return
    assert [a["subnet_id"] for a in attempts] == PROBE_SUBNETS
    by_subnet = {a["subnet_id"]: a for a in attempts}
    reported: set[str] = set()
    for a in attempts:
        if a["outcome"] == "available":
            rid = a["reservation_id"]
            seen = run.after[rid]
            reported.add(rid)
            assert seen.tags[TAG_SUBNET] == a["subnet_id"]
            # Made by this invocation, or a live one of an earlier invocation of this request.
            assert rid in run.new or run.before[rid].holding, f"{rid} is stale"
            assert_cancelled_flag(run, a["cancelled"], seen)
        else:
            assert "reservation_id" not in a and "cancelled" not in a, a
            if a["outcome"] != "not_tried":
                assert a["error_code"], a
    _only_known_or_lost(run, ours, reported, by_subnet)
    outcomes = [a["outcome"] for a in attempts]
    if answer["status"] == "available":
        first = next(a for a in attempts if a["outcome"] == "available")
        assert answer["subnet_id"] == first["subnet_id"]
        assert answer["availability_zone"] == first["availability_zone"]
    elif answer["status"] == "unavailable":
        assert set(outcomes) <= {"insufficient_capacity", "unsupported"}, outcomes
    else:
        failed = [
            a
            for a in attempts
            if a["outcome"] not in ("available", "insufficient_capacity", "unsupported")
            and a["outcome"] != "not_tried"
        ]
        if failed:
            assert answer["error_code"] == failed[0]["error_code"]
        else:
            # Nothing failed: what was not tried was not tried for want of time.
            assert "not_tried" in outcomes
            assert answer["error_code"] == "TimeBudgetExceeded", answer
    pending = any(a.get("cancelled") is False for a in attempts)
    assert (answer.get("cleanup") == "pending") is pending, answer


def assert_cancelled_flag(run: Run, cancelled: bool, seen: Seen) -> None:
    """``cancelled`` says what EC2 shows; ``false`` for a reservation EC2 did cancel only when
    every answer to its cancel was lost (the broker cannot know: it says the cautious thing)."""
    if cancelled is False and seen.state == "cancelled":
        assert seen.id in lost_answers(run.emu, "CancelCapacityReservation"), seen
    else:
        assert cancelled is (seen.state == "cancelled"), (cancelled, seen)


def _only_known_or_lost(
    run: Run, ours: dict[str, Seen], reported: set[str], by_key: dict[Any, dict[str, Any]]
) -> None:
    """A reservation this invocation made that still holds capacity is one the answer
    reports, or one whose create answer never arrived (its attempt says RequestTimeout): EC2
    made it, the broker could not know its id. Either way the sweep removes what is left.
    (What an earlier invocation left was checked against that invocation's answer.)"""
    lost = lost_answers(run.emu, "CreateCapacityReservation")
    for rid, seen in ours.items():
        if seen.holding and rid not in reported and rid in run.new:
            key = seen.tags[TAG_SUBNET]
            if key not in by_key:
                key = (seen.instance_type, seen.tags[TAG_SUBNET])
            attempt = by_key.get(key, {})
            assert rid in lost and attempt.get("error_code") == "RequestTimeout", (
                f"{rid} holds capacity and the answer does not say so: {attempt}"
            )


def check_reserve(run: Run, answer: dict[str, Any]) -> None:
    request_id = run.entry.request_id or ""
    event = run.entry.event()
    assert answer["request_id"] == request_id
    assert answer["message"]
    status = answer["status"]
    assert status in ("reserved", "provisioned", "no_capacity", "unreserved", "error"), answer
    ours = {rid: s for rid, s in run.after.items() if s.tags.get(TAG_REQUEST) == request_id}
    assert set(run.new) <= set(ours), "reserve created something that is not its own"
    for seen in ours.values():
        assert seen.tags[TAG_PURPOSE] == "hold" and seen.tags[TAG_JOB] == event["job_id"]
    attempts = answer.get("attempts") or []
    by_pair = {(a["instance_type"], a["subnet_id"]): a for a in attempts}
    hold = answer.get("reservation")
    reported = {hold["id"]} if hold else set()
    # What the flow gave back (or had to): every won hold but the chosen one, and the chosen
    # one too once the nodes run (provisioned) or a later step failed (error).
    to_cancel: set[str] = set()
    for a in attempts:
        if a["outcome"] == "available":
            rid = a["reservation_id"]
            seen = run.after[rid]
            reported.add(rid)
            assert (seen.instance_type, seen.tags[TAG_SUBNET]) == (
                a["instance_type"],
                a["subnet_id"],
            )
            assert rid in run.new or run.before[rid].holding, f"{rid} is stale"
            if hold is None or rid != hold["id"]:
                assert "cancelled" in a, a
                assert_cancelled_flag(run, a["cancelled"], seen)
                to_cancel.add(rid)
        else:
            assert "reservation_id" not in a, a
    instances = running_instances(run.emu, request_id)
    if hold is not None:
        seen = run.after[hold["id"]]
        assert hold["owned"] is True
        assert seen.instance_type == hold["instance_type"] == answer["instance_types"][0]
        assert seen.availability_zone == hold["availability_zone"]
        assert seen.count == hold["instance_count"] == event["instance_count"]
        assert answer["subnet_ids"] == [seen.tags[TAG_SUBNET]]
    if status == "reserved":
        assert hold is not None and run.after[hold["id"]].holding, answer
        assert instances == set()
        if event.get("launch_template"):
            assert answer["launch_template"]["id"] == TEMPLATE
    elif status == "provisioned":
        assert hold is not None
        assert sorted(answer["instances"]) == sorted(instances)
        assert len(instances) == event["instance_count"]
        to_cancel.add(hold["id"])
    elif status in ("no_capacity", "unreserved"):
        assert hold is None and instances == set()
        outcomes = {a["outcome"] for a in attempts}
        assert outcomes <= {"insufficient_capacity", "unsupported", "not_tried"}, attempts
        assert answer["instance_types"] == HPC_TYPES and answer["subnet_ids"] == HPC_SUBNETS
        if status == "no_capacity":
            assert answer["retry_after_seconds"] > 0
    else:
        assert answer["error_code"], answer
        # All or nothing: an error never leaves the job's nodes running.
        assert sorted(answer.get("instances") or []) == sorted(instances) == [], (
            f"{len(instances)} nodes of this job run, the answer says {answer}"
        )
        if hold is not None:
            to_cancel.add(hold["id"])
    _only_known_or_lost(run, ours, reported, by_pair)
    # Holding after the answer: the hold handed to the job, the ones whose cancel failed,
    # or a lost create.
    still = {rid for rid in to_cancel if run.after[rid].holding}
    handed = {hold["id"]} if status == "reserved" and hold else set()
    assert {rid for rid, s in ours.items() if s.holding and rid in reported} - handed == still
    lost = lost_answers(run.emu, "CancelCapacityReservation") & to_cancel
    pending = answer.get("cleanup") == "pending"
    assert pending is bool(still | lost) and (pending or not still), (
        f"cleanup flag {answer.get('cleanup')!r}; still held: {sorted(still)}; "
        f"cancels without an answer: {sorted(lost)}"
    )


def check_release(run: Run, answer: dict[str, Any]) -> None:
    hold = run.ids["hold"]
    status = answer["status"]
    assert status in ("released", "partial", "error"), answer
    assert run.before[hold].holding
    now = run.after[hold].state
    if status == "released" and not answer["cancelled"] and run.lagging:
        # EC2's listing never showed the hold made a moment ago (a lag longer than the looks):
        # the answer claims nothing, and the hold is left to the cleaner.
        assert run.after[hold].holding and "Nothing to release" in answer["message"], answer
    elif status == "released":
        assert answer["cancelled"] == [hold] and now == "cancelled", (answer, now)
    elif status == "partial":
        (error,) = answer["errors"]
        assert error["id"] == hold and error["error_code"]
        assert answer["cancelled"] == []
        assert_cancelled_flag(run, False, run.after[hold])
    else:
        assert answer["error_code"] and now == "active", answer
    assert not answer.get("skipped")


def check_cleaner(run: Run, answer: dict[str, Any]) -> None:
    status = answer["status"]
    assert status in ("ok", "partial", "error"), answer
    assert answer["dry_run"] is False and answer["regions"] == [REGION]
    in_scope = {rid for rid, s in run.before.items() if s.owned and s.holding}
    cancelled = {c["id"] for c in answer["cancelled"]}
    kept = {k["id"] for k in answer["kept"]}
    # What the launch template version sweep could not do is an error of the sweep too
    # (issue 21: it used to be left out of ``errors`` and of the status).
    version_errors = answer.get("template_version_errors") or []
    assert all(e in answer["errors"] for e in version_errors), answer
    # So is what the sweep of half-done reserved-first ladders could not do (issue 43).
    ladder_errors = answer.get("ladder_errors") or []
    assert all(e in answer["errors"] for e in ladder_errors), answer
    version_errors = version_errors + ladder_errors
    errors = [e for e in answer["errors"] if e not in version_errors]
    failed = {e["id"] for e in errors if e.get("id")}
    region_errors = [e for e in errors if not e.get("id")]
    for rid in cancelled:
        assert run.after[rid].state == "cancelled", rid
    for rid in kept:
        assert run.after[rid].state == run.before[rid].state, rid
    for rid in failed:
        assert_cancelled_flag(run, False, run.after[rid])
    for rid, seen in run.after.items():
        if not seen.owned:
            assert rid not in cancelled_ids(run.emu), f"{rid} is not the broker's to touch"
        if rid not in in_scope:
            assert seen.state == run.before[rid].state, f"{rid} is not the broker's to touch"
    if status == "ok":
        assert answer["errors"] == []
        assert cancelled | kept == in_scope and answer["examined"] == len(in_scope)
    elif status == "partial":
        assert (failed or version_errors) and not region_errors
        assert cancelled | kept | failed == in_scope
    else:
        (error,) = region_errors
        assert error["region"] == REGION and error["error_code"]
        assert cancelled == kept == failed == set() and answer["examined"] == 0


def check_capacity(run: Run, answer: dict[str, Any]) -> None:
    assert run.after == run.before, "listing changed something"
    status = answer["status"]
    assert status in ("ok", "error"), answer
    if status == "ok":
        listed = {r["reservation_id"]: r for r in answer["reservations"]}
        expected = {
            rid
            for rid, s in run.after.items()
            if (s.state == "active" or (s.block and s.state == "scheduled"))
        }
        assert set(listed) == expected
        for rid, row in listed.items():
            assert row["state"] == run.after[rid].state
            tags = run.after[rid].tags
            owned = tags.get(TAG_CLUSTER) == CLUSTER and TAG_PURPOSE in tags
            assert row["owned_by_broker"] is owned, row
        assert answer.get("errors", []) == []
    else:
        (error,) = answer["errors"]
        assert error["region"] == REGION and error["error_code"]
        assert answer["reservations"] == []


def _reserve_entry(name: str, event: Callable[[], Any]) -> Entry:
    """reserve on the hpc scenario: the two entries differ only in their event."""
    return Entry(
        name,
        "fault_hpc.yaml",
        event,
        lambda: reserve_handler.handler,
        check_reserve,
        _reserve_essence,
        outcome=lambda run: _reserve_essence(run)[::3],
        settle=_release_kept_hold,
        ordered=True,
        winner=lambda answer: answer["reservation"]["id"],
    )


ENTRIES = {
    e.name: e
    for e in (
        Entry(
            "probe",
            "fault_probe.yaml",
            probe_event,
            lambda: probe_handler.handler,
            check_probe,
            _probe_essence,
            outcome=lambda run: run.answers[-1]["status"],
            winner=lambda answer: next(
                a["reservation_id"]
                for a in answer["attempts"]
                if a["subnet_id"] == answer["subnet_id"]
            ),
        ),
        _reserve_entry("reserve", job_event),
        _reserve_entry(
            "reserve+provision",
            lambda: job_event(
                request_id="job-fm-prov", launch_template={"id": TEMPLATE}, provision=True
            ),
        ),
        Entry(
            "release",
            "fault_hpc.yaml",
            lambda: {"job_id": "fm-rel", "request_id": "rel-fm"},
            lambda: release_handler.handler,
            check_release,
            _release_essence,
            prepare=_hold_for_release,
        ),
        Entry(
            "cleaner",
            "fault_cleaner.yaml",
            lambda: {"action": "sweep", "dry_run": False},
            lambda: cleaner_handler.handler,
            check_cleaner,
            _cleaner_essence,
            prepare=_done_stack,
            degrades=lambda run, answer, action: (
                action == "DescribeStacks"
                and any(k["reason"] == "stack lookup failed" for k in answer["kept"])
            ),
        ),
        Entry(
            "capacity",
            "fault_cleaner.yaml",
            lambda: {"reservation_type": "all"},
            lambda: capacity_handler.handler,
            check_capacity,
            _capacity_essence,
            degrades=_capacity_degrades,
        ),
    )
}


# -- the invariants every scenario ends with ----------------------------------------------


def attempt_key(seen: Seen) -> tuple[Any, ...]:
    return (
        seen.tags.get(TAG_REQUEST),
        seen.tags[TAG_PURPOSE],
        seen.instance_type,
        seen.tags.get(TAG_SUBNET),
    )


def no_duplicates(run: Run) -> None:
    """One reservation per ClientToken, and per attempt (request, purpose, type, subnet) at
    most one made by any one invocation and at most one holding at the end."""
    tokens = run.emu.capacity(REGION).client_tokens.made("CreateCapacityReservation")
    made: dict[str, set[str]] = {}
    for call in run.emu.calls("CreateCapacityReservation"):
        token = call.params["ClientToken"]
        made.setdefault(token, set())
        if token in tokens:
            made[token].add(tokens[token])
    assert all(len(ids) <= 1 for ids in made.values()), made
    everything = reservations(run.emu)
    created = [
        everything[rid] for rid, n in run.created_by.items() if n >= 0 and everything[rid].owned
    ]
    per_invocation = Counter((run.created_by[s.id], attempt_key(s)) for s in created)
    assert max(per_invocation.values(), default=0) <= 1, per_invocation
    holding = Counter(attempt_key(s) for s in everything.values() if s.owned and s.holding)
    assert max(holding.values(), default=0) <= 1, holding


def sweep_clean(run: Run) -> dict[str, Any]:
    """Past every grace and EndDate, one fault-free sweep on the emulator's clock: nothing
    owned may hold capacity afterwards."""
    run.emu.clear_faults()
    run.killed = False
    run.kill_after = None
    run.emu.advance(SWEEP_AFTER_SECONDS)
    held = {rid for rid, s in reservations(run.emu).items() if s.owned and s.holding}
    answer = cleaner_handler.handler({"action": "sweep", "dry_run": False}, LambdaContext())
    assert answer["status"] == "ok", answer
    assert {c["id"] for c in answer["cancelled"]} == held
    left = {rid: s.state for rid, s in reservations(run.emu).items() if s.owned and s.holding}
    assert left == {}, f"owned reservations still holding after the sweep: {left}"
    return answer


# -- the clean runs: where the call sites come from ---------------------------------------

WINNER = "@winner"


@dataclass(frozen=True)
class Site:
    """A call site: an EC2 action, or (``@winner``) only the call that created the clean
    answer's reservation, matched by its ClientToken (deterministic: the same request, type
    and subnet give the same token)."""

    label: str
    action: str
    when: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Clean:
    sites: tuple[Site, ...]
    calls: int
    essence: Any
    outcome: Any
    others: tuple[str, ...]  # calls to other services (not in the matrix)
    # Sites whose calls named, listed or made what the flow made a moment ago (labels).
    fresh: tuple[str, ...] = ()

    def site(self, label: str) -> Site:
        return next(s for s in self.sites if s.label == label)


@functools.cache
def clean_run(name: str) -> Clean:
    """One fault-free run of the entry point; its EC2 call log names the call sites.

    Nothing is asserted here (this runs while the tests are collected):
    ``test_the_clean_runs_pass_every_check`` checks the clean runs."""
    entry = ENTRIES[name]
    with pytest.MonkeyPatch.context() as mp, scenario(entry, mp) as run:
        answer = run.invoke()
        calls = run.emu.calls()
        sites = [Site(action, action) for action in dict.fromkeys(c.action for c in calls)]
        won = _quietly(entry.winner, answer)
        made = run.emu.capacity(REGION).client_tokens.made("CreateCapacityReservation")
        tokens = [t for t, rid in made.items() if rid == won]
        if len(tokens) == 1:
            (token,) = tokens
            action = "CreateCapacityReservation"
            sites.insert(
                [s.label for s in sites].index(action) + 1,
                Site(action + WINNER, action, (("ClientToken", token),)),
            )
        others = [
            f"{service}:{c.action}"
            for service in ("ssm", "cloudformation", "dynamodb")
            for c in run.emu.calls(service=service)
        ]
        # Sorted: calls made side by side (the template look-up runs beside the flow) come in
        # either order, and every xdist worker must collect the same scenarios.
        sites.sort(key=lambda site: site.label)
        fresh = [
            site.label
            for site in sites
            if any(
                c.fresh and all(c.params.get(k) == v for k, v in site.when)
                for c in run.emu.calls(site.action)
            )
        ]
        return Clean(
            tuple(sites),
            len(calls),
            _quietly(entry.essence, run),
            _quietly(entry.outcome or entry.essence, run),
            tuple(dict.fromkeys(others)),
            tuple(fresh),
        )


def _quietly(function: Callable[[Any], Any], argument: Any) -> Any:
    """``function(argument)``, or None when the clean answer lacks what it reads (a broken
    broker: the baseline test says so; collection must not fail)."""
    try:
        return function(argument)
    except (KeyError, StopIteration, TypeError):
        return None


def matrix() -> list[tuple[str, str, str, str]]:
    return [
        (name, site.label, kind.name, variant)
        for name in ENTRIES
        for site in clean_run(name).sites
        for kind in KINDS
        if not kind.lag or site.label in clean_run(name).fresh
        for variant in VARIANTS
    ]


# Known bugs, kept failing on purpose (strict xfail: fixed, they fail until unmarked).
KNOWN_BUGS: dict[tuple[str, str, str, str], str] = {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "fault_case" in metafunc.fixturenames:
        metafunc.parametrize(
            "fault_case",
            [
                pytest.param(
                    case,
                    id="-".join(case),
                    marks=[pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[case])]
                    if case in KNOWN_BUGS
                    else [],
                )
                for case in matrix()
            ],
        )


def fault_hit(run: Run, site: Site, kind: Kind) -> int:
    outcome = kind.code or "timeout"
    when = dict(site.when)
    return sum(
        1
        for c in run.emu.calls(site.action)
        if (c.lagged if kind.lag else c.outcome == outcome)
        and all(c.params.get(k) == v for k, v in when.items())
    )


# -- the matrix ---------------------------------------------------------------------------


def test_fault(
    fault_case: tuple[str, str, str, str],
    monkeypatch: pytest.MonkeyPatch,
    emulated: Any,
    clock_of: Any,
) -> None:
    name, label, kind_name, variant = fault_case
    entry, kind, clean = ENTRIES[name], KIND[kind_name], clean_run(name)
    site = clean.site(label)
    retried_to_the_end = (
        variant == "persistent"
        and kind.retried
        and not kind.lag
        and site.action == "CreateCapacityReservation"
    )
    with scenario(
        entry, monkeypatch, emulated=emulated, budget_clock=clock_of if retried_to_the_end else None
    ) as run:
        run.lagging = kind.lag
        if retried_to_the_end:
            run.context = LambdaContext(remaining_ms=PERSISTENT_RETRIED_MS)
        run.emu.fail(
            site.action,
            kind.code,
            times=kind.times(variant),
            mode=kind.mode,
            when=dict(site.when),
        )
        answer = run.invoke()
        assert fault_hit(run, site, kind), f"the fault never fired: {label}"
        entry.check(run, answer)
        no_duplicates(run)
        if kind.lag and variant == "persistent":
            # EC2 stays behind for longer than the broker's looks: either the broker did not
            # need what it could not see (the clean answer), or the answer says what is not
            # confirmed (a pending cleanup, an error code of "not there yet") or claims
            # nothing (a release that found nothing; check_release ties it to the hold).
            got_past = entry.essence(run) == clean.essence
            shown = (
                answer.get("cleanup") == "pending"
                or bool(NOT_YET & error_codes(answer))
                or (name == "release" and answer["cancelled"] == [])
            )
            assert got_past or shown, f"a lag on {label} is not visible in {answer}"
        elif variant == "transient" and kind.retried:
            assert entry.essence(run) == clean.essence, (answer, clean.essence)
        elif variant == "transient":
            # Not retried by the broker: the caller asks again (same request), as a scheduler
            # does; that must succeed, though possibly in another place.
            outcome = entry.outcome or entry.essence
            if outcome(run) != clean.outcome:
                answer = run.invoke()
                entry.check(run, answer)
                no_duplicates(run)
            assert outcome(run) == clean.outcome, (answer, clean.outcome)
        elif kind.code is not None:
            # A failure that lasts must show in the answer: its code, a pending cleanup, or
            # (detail only) the absence of what could not be learnt.
            shown = (
                kind.code in error_codes(answer)
                or answer.get("cleanup") == "pending"
                or entry.degrades(run, answer, site.action)
            )
            assert shown, f"{kind.code} on {label} is not visible in {answer}"
        # The fault belonged to this invocation: the job's own lifecycle and the sweep after
        # it run against a healthy EC2 (which a lag has caught up with by then).
        run.emu.clear_faults()
        if kind.lag:
            run.emu.advance(LAG_SECONDS)
        entry.settle(run, answer)
        sweep_clean(run)
        no_duplicates(run)


def test_the_clean_runs_pass_every_check(monkeypatch: pytest.MonkeyPatch, emulated: Any) -> None:
    """The baseline: fault-free, each entry point passes the checks the matrix applies, and its
    call sites are what the matrix was built from (the clean runs are deterministic)."""
    for name, entry in ENTRIES.items():
        with scenario(entry, monkeypatch, emulated=emulated) as run:
            answer = run.invoke()
            entry.check(run, answer)
            no_duplicates(run)
            assert entry.essence(run) == clean_run(name).essence
            actions = {c.action for c in run.emu.calls()}
            assert actions == {s.action for s in clean_run(name).sites}
            entry.settle(run, answer)
            sweep_clean(run)
            no_duplicates(run)


def test_matrix_summary() -> None:
    """How many scenarios the matrix runs, per entry point and fault kind (shown with -rA or
    -s; docs/reliability.md quotes it)."""
    cases = matrix()
    per_entry = Counter(c[0] for c in cases)
    per_kind = Counter(c[2] for c in cases)
    lines = [f"fault matrix: {len(cases)} scenarios"]
    for name in ENTRIES:
        clean = clean_run(name)
        lines.append(
            f"  {name:18} {per_entry[name]:4}  {clean.calls:2} EC2 calls, sites: "
            + ", ".join(site.label for site in clean.sites)
            + (
                f"  (other services, see test_other_service_fault: {', '.join(clean.others)})"
                if clean.others
                else ""
            )
        )
    lines.append("  per kind: " + ", ".join(f"{k}={n}" for k, n in per_kind.items()))
    lines.append(
        "  eventual consistency at: "
        + "; ".join(f"{name}: {', '.join(clean_run(name).fresh) or '-'}" for name in ENTRIES)
    )
    print("\n".join(lines))
    sites = sum(len(clean_run(name).sites) for name in ENTRIES)
    assert {n for k, n in per_kind.items() if k != LAG.name} == {sites * len(VARIANTS)}
    fresh = sum(len(clean_run(name).fresh) for name in ENTRIES)
    assert per_kind[LAG.name] == fresh * len(VARIANTS)
    assert all(per_entry[name] >= (len(KINDS) - 1) * len(VARIANTS) for name in ENTRIES)
    # Where eventual consistency can reach: what the flows make, cancel and look up again.
    for name in ("probe", "reserve", "reserve+provision"):
        assert {
            "CreateCapacityReservation",
            "CreateCapacityReservation" + WINNER,
            "CancelCapacityReservation",
            "DescribeCapacityReservations",
        } <= set(clean_run(name).fresh), name
    assert "CreateFleet" in clean_run("reserve+provision").fresh
    assert set(clean_run("release").fresh) == {
        "DescribeCapacityReservations",
        "CancelCapacityReservation",
    }
    # Nothing the cleaner and the listing look at was made a moment ago.
    assert clean_run("cleaner").fresh == clean_run("capacity").fresh == ()
    # The sites a broker must have, whatever else it calls.
    labels = {name: {site.label for site in clean_run(name).sites} for name in ENTRIES}
    assert "CreateCapacityReservation" + WINNER in labels["probe"]
    assert "CancelCapacityReservation" in labels["reserve"]
    assert "CreateFleet" in labels["reserve+provision"]


# -- the calls to other services ----------------------------------------------------------

# Not EC2, so not the matrix; the same checks, with each service's own codes.
OTHER_KINDS = {
    "ssm": (
        Kind("throttle", "ThrottlingException", True),
        Kind("timeout", None, True),
        Kind("denied", "AccessDeniedException", False),
    ),
    "cloudformation": (
        Kind("throttle", "Throttling", True),
        Kind("timeout", None, True),
        Kind("denied", "AccessDenied", False),
    ),
}


def other_cases() -> list[Any]:
    cases = []
    for name in ENTRIES:
        for other in clean_run(name).others:
            service, action = other.split(":")
            for kind in OTHER_KINDS.get(service, ()):
                for variant in VARIANTS:
                    cases.append(
                        pytest.param(
                            (name, service, action, kind.name, variant),
                            id=f"{name}-{service}:{action}-{kind.name}-{variant}",
                        )
                    )
    return cases


@pytest.mark.parametrize("other_case", other_cases())
def test_other_service_fault(
    other_case: tuple[str, str, str, str, str], monkeypatch: pytest.MonkeyPatch, emulated: Any
) -> None:
    name, service, action, kind_name, variant = other_case
    entry, clean = ENTRIES[name], clean_run(name)
    kind = next(k for k in OTHER_KINDS[service] if k.name == kind_name)
    with scenario(entry, monkeypatch, emulated=emulated) as run:
        run.emu.fail(
            action,
            kind.code,
            times=kind.times(variant),
            mode="timeout" if kind.code is None else "error",
            service=service,
        )
        answer = run.invoke()
        outcome = kind.code or "timeout"
        assert any(c.outcome == outcome for c in run.emu.calls(action, service=service))
        entry.check(run, answer)
        no_duplicates(run)
        if variant == "transient" and kind.retried:
            assert entry.essence(run) == clean.essence, answer
        elif variant == "transient":
            if (entry.outcome or entry.essence)(run) != clean.outcome:
                answer = run.invoke()
                entry.check(run, answer)
                no_duplicates(run)
            assert (entry.outcome or entry.essence)(run) == clean.outcome, answer
        else:
            shown = kind.shown in error_codes(answer) or entry.degrades(run, answer, action)
            if kind.code is None and service == "ssm":
                # No answer, no code: the flows name what they could not read.
                shown = shown or "feature flags" in answer["message"]
            assert shown, f"{kind.shown} on {service}:{action} is not visible in {answer}"
        run.emu.clear_faults()
        entry.settle(run, answer)
        sweep_clean(run)
        no_duplicates(run)


# -- the Lambda dies right after a call took effect ----------------------------------------


def kill_cases() -> list[Any]:
    """Every mutating call of the entry points that create something (from their clean runs)."""
    return [
        pytest.param(
            (name, site.action),
            id=f"{name}-{site.action}",
            marks=[],
        )
        for name in ("probe", "reserve", "reserve+provision")
        for site in clean_run(name).sites
        if site.label == site.action and site.action.startswith(("Create", "Cancel"))
    ]


@pytest.mark.parametrize("kill_case", kill_cases())
def test_the_lambda_dies_right_after_a_call_took_effect(
    kill_case: tuple[str, str], monkeypatch: pytest.MonkeyPatch, emulated: Any
) -> None:
    """How the death is made: a hook on the broker's EC2 client raises ``LambdaKilled`` (a
    BaseException, which no ``except Exception`` in the broker catches) as soon as the first
    call of the action has been answered with success, so EC2 acted and the invocation never
    learns it; every later call of that invocation is refused before it leaves (a killed
    sandbox sends nothing), and nothing is written after (no request record, no cancel).

    Then the caller does what it does when a Lambda times out: asks again with the same
    request. That answer must be the clean one with no second reservation (the reserve retry
    takes over the hold the dead invocation left); the scheduler releases a kept hold, the
    sweep removes anything else, and nothing owned is held."""
    name, action = kill_case
    entry, clean = ENTRIES[name], clean_run(name)
    with scenario(entry, monkeypatch, emulated=emulated) as run:
        run.kill_after = action
        with pytest.raises(LambdaKilled):
            run.invoke()
        assert run.killed
        assert any(c.outcome == "ok" for c in run.emu.calls(action)), "it never took effect"
        left = {rid for rid, s in run.after.items() if s.owned and s.holding}
        if action == "CreateCapacityReservation":
            assert left, "the create took effect: something must hold capacity"
        run.killed, run.kill_after = False, None
        answer = run.invoke()
        entry.check(run, answer)
        no_duplicates(run)
        assert (entry.outcome or entry.essence)(run) == clean.outcome, answer
        if name.startswith("reserve"):
            # The retry answers as the dead invocation would have (the preferred place), from
            # the holds it left, and the request holds nothing else.
            assert entry.essence(run) == clean.essence, answer
            if left and answer["reservation"]["id"] not in left:
                # The dead invocation died holding a worse place: the retry raced only the
                # better ones, won one of them, and gave every hold it was left back.
                assert all(not run.after[rid].holding for rid in left), left
            held = {
                rid
                for rid, s in run.after.items()
                if s.holding and s.tags.get(TAG_REQUEST) == entry.request_id
            }
            assert held == (
                {answer["reservation"]["id"]} if answer["status"] == "reserved" else set()
            )
        if name == "reserve+provision":
            assert len(running_instances(run.emu, entry.request_id or "")) == 8
        entry.settle(run, answer)
        sweep_clean(run)
        no_duplicates(run)


def test_the_lambda_dies_right_after_a_create_with_the_state_table(
    monkeypatch: pytest.MonkeyPatch, emulated: Any
) -> None:
    """With the state table the dead invocation leaves its request record "in progress" until
    its time budget would have ended (Powertools: the context's remaining time). A retry
    inside that window waits, then answers ``RequestInProgress`` (truthful: nothing settled
    yet) without touching EC2; once the window has passed the next retry runs and takes over
    the hold. One hold throughout."""
    entry = ENTRIES["reserve"]
    with scenario(entry, monkeypatch, emulated=emulated) as run:
        boto3.client("dynamodb", region_name=REGION).create_table(
            TableName="broker-state",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
        run.root = with_state_table(run.root, "broker-state")
        # One place with room, so the dead invocation leaves exactly one hold.
        run.emu.set_pool(REGION, "us-east-1b", "hpc7a.96xlarge", 0)
        run.kill_after = "CreateCapacityReservation"
        # A window of 5 s, so a loaded machine still retries inside it (1.5 s was too short).
        run.context = LambdaContext(remaining_ms=5000)
        killed_at = time.monotonic()
        with pytest.raises(LambdaKilled):
            run.invoke()
        (left,) = [rid for rid, s in run.after.items() if s.owned and s.holding]
        run.killed, run.kill_after = False, None
        run.emu.clear_calls()
        run.context = LambdaContext(remaining_ms=3600)  # 0.6 s to wait for the record
        waiting = run.invoke()
        assert waiting["status"] == "error" and waiting["error_code"] == "RequestInProgress"
        assert run.emu.calls() == []
        time.sleep(max(0.0, killed_at + 5.1 - time.monotonic()))
        run.context = LambdaContext()
        answer = run.invoke()
        entry.check(run, answer)
        assert answer["status"] == "reserved"
        assert answer["reservation"]["id"] == left
        no_duplicates(run)
        entry.settle(run, answer)
        sweep_clean(run)
        no_duplicates(run)


@pytest.mark.parametrize("name", ["probe", "reserve", "reserve+provision"])
def test_a_tiny_time_budget(name: str, monkeypatch: pytest.MonkeyPatch, emulated: Any) -> None:
    """The invocation's budget ends while its creates are in flight (0.6 s left, creates take
    0.7 s): the broker never starts a step after its deadline, and still gives back what it
    made before it answers (probe: cancels; reserve with a template: the hold, instead of
    pointing a template at it). A Lambda killed at that moment is the test above."""
    entry = ENTRIES[name]
    with scenario(entry, monkeypatch, emulated=emulated) as run:
        run.emu.latency(0.0, {"CreateCapacityReservation": 0.7})
        run.context = LambdaContext(remaining_ms=600)
        answer = run.invoke()
        entry.check(run, answer)
        no_duplicates(run)
        # What the late creates made is given back if EC2 lets it before the deadline; a
        # reservation made a moment ago may not be known or cancellable yet, and then the
        # answer says so (the checks tie each flag to EC2's state).
        holding = [rid for rid, s in run.after.items() if s.owned and s.holding]
        assert not holding or answer["status"] == "reserved" or answer["cleanup"] == "pending"
        if name == "reserve+provision":
            assert answer["status"] == "error"
            assert answer["error_code"] == "TimeBudgetExceeded"
            assert run.emu.calls("CreateLaunchTemplateVersion") == []
        run.emu.latency(0.0)
        entry.settle(run, answer)
        sweep_clean(run)


@pytest.mark.parametrize("name", ["probe", "reserve"])
def test_a_budget_spent_before_any_attempt(
    name: str, monkeypatch: pytest.MonkeyPatch, emulated: Any
) -> None:
    """The lookups before the attempts take the whole budget: nothing is tried, nothing is
    made, and the answer says why (it said "No capacity ... in any of the 3 subnets")."""
    entry = ENTRIES[name]
    with scenario(entry, monkeypatch, emulated=emulated) as run:
        run.emu.latency(0.0, {"DescribeVpcs": 0.6})
        run.context = LambdaContext(remaining_ms=600)
        answer = run.invoke()
        entry.check(run, answer)
        assert answer["status"] == "error"
        assert answer["error_code"] == "TimeBudgetExceeded"
        assert {a["outcome"] for a in answer["attempts"]} == {"not_tried"}
        assert run.emu.calls("CreateCapacityReservation") == []


# -- the broker's own retry policy ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "label", "kind_name"),
    [
        ("probe", "CreateCapacityReservation@winner", "throttle"),
        ("reserve", "CreateCapacityReservation@winner", "internal-error"),
        ("reserve+provision", "CreateFleet", "timeout"),
        ("release", "CancelCapacityReservation", "unavailable"),
        ("cleaner", "CancelCapacityReservation", "throttle"),
        ("capacity", "DescribeCapacityReservations", "timeout"),
    ],
)
def test_the_default_retry_policy(
    name: str, label: str, kind_name: str, monkeypatch: pytest.MonkeyPatch, emulated: Any
) -> None:
    """The matrix's transient case through the handlers' own flows (RetryPolicy: 0.2 s base,
    jittered, 10 attempts): the retries end in the clean answer, with no duplicate."""
    entry, kind, clean = ENTRIES[name], KIND[kind_name], clean_run(name)
    site = clean.site(label)
    with scenario(entry, monkeypatch, retry=None, emulated=emulated) as run:
        run.emu.fail(
            site.action,
            kind.code,
            times=kind.times("transient"),
            mode="timeout" if kind.code is None else "error",
            when=dict(site.when),
        )
        answer = run.invoke()
        assert fault_hit(run, site, kind) == kind.times("transient")
        entry.check(run, answer)
        no_duplicates(run)
        assert entry.essence(run) == clean.essence, answer
        entry.settle(run, answer)
        sweep_clean(run)


def test_the_default_retry_policy_stops_within_the_time_budget(
    monkeypatch: pytest.MonkeyPatch, emulated: Any, clock_of: Any
) -> None:
    """A throttle that does not pass, with the real backoff and a 5 s Lambda: the broker stops
    retrying at its soft deadline (5 s less the 3 s safety margin) and answers truthfully
    before the Lambda would be killed. Time is the emulator's, which only the broker's own
    pauses move on: the verdict counts what the broker waited, not how fast this machine is."""
    entry = ENTRIES["probe"]
    with scenario(entry, monkeypatch, retry=None, emulated=emulated, budget_clock=clock_of) as run:
        run.emu.fail("CreateCapacityReservation", "RequestLimitExceeded", times=1000)
        run.context = LambdaContext(remaining_ms=5000)
        started = run.emu.now()
        answer = run.invoke()
        elapsed = (run.emu.now() - started).total_seconds()
        assert elapsed < 4.5, elapsed
        # It did retry: more tries than places.
        assert len(run.emu.calls("CreateCapacityReservation")) > len(PROBE_SUBNETS)
        entry.check(run, answer)
        assert answer["status"] == "error"
        assert answer["error_code"] == "RequestLimitExceeded"
        assert {a["outcome"] for a in answer["attempts"]} <= {
            "throttled",
            "insufficient_capacity",
            "not_tried",
        }
        sweep_clean(run)


def test_a_quick_retry_never_gets_a_cancelled_reservation_back(
    monkeypatch: pytest.MonkeyPatch, emulated: Any
) -> None:
    """The matrix's scheduler retries land in the same wall-clock second only by chance; here
    always: the broker's clock stands still, so the retry sends the same EndDate with the same
    ClientToken, and EC2 answers with the reservation the first invocation gave back. That
    must not count as a hold (it did: ``reserved``/``provisioned`` with a cancelled one)."""
    entry = ENTRIES["reserve+provision"]
    with scenario(entry, monkeypatch, emulated=emulated) as run:
        still = run.emu.now()
        # The broker's clock stands still (its reservation core's): a root on the run's
        # adapters (fast retries; the run's hooks stay on its EC2 client).
        run.root = Root(
            run.root.settings,
            adapters=run.root.adapters,
            clock=lambda: still,
            cleaner_clock=run.root.cleaner_clock,
        )
        CONTAINER.use(run.root)
        run.emu.fail("CreateLaunchTemplateVersion", "UnauthorizedOperation", times=1)
        first = run.invoke()
        assert first["status"] == "error"
        given_back = first["reservation"]["id"]
        assert run.after[given_back].state == "cancelled"
        second = run.invoke()
        entry.check(run, second)
        no_duplicates(run)
        assert second["status"] == "provisioned"
        assert second["reservation"]["id"] != given_back
        # EC2 did answer a create of the retry with the given-back reservation (same token).
        answered = Counter(
            c.params["ClientToken"]
            for c in run.emu.calls("CreateCapacityReservation")
            if c.outcome == "ok"
        )
        assert max(answered.values()) >= 2, answered
        sweep_clean(run)
