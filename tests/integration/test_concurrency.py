"""Concurrency proofs: many ``reserve`` calls at once, against the emulator.

- 50 calls with the same ``request_id``: one reservation, with the state table (Powertools
  Idempotency: the first call runs, the others wait for its answer) and without it (what the
  request-id tag and the ClientToken alone guarantee);
- 50 different jobs against room for 10: exactly 10 ``reserved``, 40 truthful
  ``no_capacity`` with ``retry_after_seconds``, 10 active holds and no oversold pool.

The calls run in threads of one process, all released at once by a barrier. Lambda runs one
invocation per container; here they share what a container holds once:

- Powertools' Logger and Metrics are module-level: one thread's flush publishes (and clears)
  the metrics another added, so Powertools warns "No application metrics to publish". That
  warning is expected and left visible; no assertion depends on metrics or logs.
- the client-side EC2 pacer (``adapters.throttle``, EC2's published 5 mutating calls/s after a
  burst of 50) is per container too: 50 containers would each have their own. One shared pacer
  would serialize the burst, so it is scaled up (``BROKER_EC2_RATE_SCALE``), as the cleaner's
  tests do.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.handlers.reserve import handler as reserve

# Lambda never runs two invocations in one process; these tests do, in threads. Powertools'
# metric store is shared by the process, so one thread's flush can leave another's empty.
SHARED_METRICS = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

pytestmark = [pytest.mark.integration, SHARED_METRICS]

SCENARIO = Path(__file__).parent / "scenarios" / "concurrency_pool.yaml"
REGION = "us-east-1"
CLUSTER = "demo-cluster"
SUBNET_A, SUBNET_B = "subnet-0cc00000000000001", "subnet-0cc00000000000002"
TYPE = "c7i.large"
CALLERS = 50
SLOTS = 10
TAG_CLUSTER = "capacity-broker:cluster-id"
TAG_REQUEST = "capacity-broker:request-id"


class Context:
    function_name = "capacity-broker-concurrency"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:concurrency"
    log_group_name = "/aws/lambda/concurrency"
    log_stream_name = "concurrency"

    def __init__(self, n: int) -> None:
        self.aws_request_id = f"00000000-0000-0000-0000-{n:012d}"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


@pytest.fixture
def pool(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", "1000")
    container.fresh()
    broker.load_scenario(SCENARIO)
    # Time compressed on both sides: EC2's buckets refill as fast as the pacer expects.
    broker.throttle(time_scale=1000)
    # Every EC2 call takes a little while, so the 50 invocations really overlap.
    broker.latency(0.02)
    return broker


@pytest.fixture
def state_table(pool: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName="broker-state",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
    container.fresh()
    return "broker-state"


def job(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "request_id": f"job-{n:03d}",
        "job_id": f"j{n:03d}",
        "instance_types": [TYPE],
        "subnet_ids": [SUBNET_A],
        "instance_count": 1,
        **fields,
    }


def at_once(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every event through ``reserve`` in its own thread, all released together; the answers
    in the events' order. A handler that raises fails the test."""
    answers: list[dict[str, Any] | None] = [None] * len(events)
    failures: list[BaseException] = []
    barrier = threading.Barrier(len(events))

    def call(i: int) -> None:
        barrier.wait()
        try:
            answers[i] = reserve(events[i], Context(i))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(events))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    assert all(a is not None for a in answers)
    return [a for a in answers if a is not None]


def reservations(emu: Any) -> list[Any]:
    """Every reservation the emulator has (its model: no API call)."""
    model = emu.capacity(REGION)
    model.refresh()
    return list(model.reservations.values())


def tags(emu: Any, rid: str) -> dict[str, str]:
    return dict(emu.capacity(REGION).tags_of(rid))


def owned_by(emu: Any, request_id: str | None = None) -> list[Any]:
    return [
        r
        for r in reservations(emu)
        if tags(emu, r.id).get(TAG_CLUSTER) == CLUSTER
        and (request_id is None or tags(emu, r.id).get(TAG_REQUEST) == request_id)
    ]


def not_oversold(emu: Any, capacity: dict[str, int]) -> None:
    """Each pool: what active holds take equals what the pool counts as used, within its
    capacity."""
    for az, room in capacity.items():
        pool = emu.pool(REGION, az, TYPE)
        held = sum(
            r.total_instance_count
            for r in reservations(emu)
            if r.availability_zone == az and r.state in ("active", "pending")
        )
        assert pool["capacity"] == room
        assert pool["used"] == held <= room, (az, pool, held)


# -- one request id, 50 times at once -------------------------------------------------------


def test_fifty_duplicates_with_the_state_table_make_one_reservation(
    state_table: str, pool: Any
) -> None:
    answers = at_once([job(1) for _ in range(CALLERS)])
    made = owned_by(pool, "job-001")
    assert len(made) == 1, [(r.id, r.state) for r in made]
    (hold,) = made
    assert hold.state == "active"
    # One answer, given 50 times: the first call's, replayed from its record (contract v3: a
    # replay says so and gives the hold's state now, the rest of the answer unchanged).
    assert {a["status"] for a in answers} == {"reserved"}
    firsts = [a for a in answers if not a.get("replayed")]
    assert len(firsts) == 1
    replay_only = ("replayed", "message", "reservation_seconds", "reservation")

    def recorded(answer: dict[str, Any]) -> dict[str, Any]:
        held = {k: v for k, v in answer["reservation"].items() if k != "state"}
        return {**{k: v for k, v in answer.items() if k not in replay_only}, "reservation": held}

    assert all(recorded(a) == recorded(firsts[0]) for a in answers)
    assert all(
        a["reservation"]["state"] in ("pending", "active") for a in answers if a != firsts[0]
    )
    assert firsts[0]["reservation"]["id"] == hold.id
    # The record let one invocation through to EC2.
    creates = pool.calls("CreateCapacityReservation")
    assert len(creates) == 1, [c.outcome for c in creates]
    not_oversold(pool, {"us-east-1a": SLOTS})


def test_fifty_duplicates_without_the_state_table(pool: Any) -> None:
    """What the no-table path guarantees: one reservation per request and place (the same
    ClientToken, or the earlier hold found by its request-id tag), every answer naming it.
    It does not make the 50 invocations wait for one another: each runs the flow and calls
    EC2 (no record to find), so this is many API calls for one hold."""
    answers = at_once([job(1) for _ in range(CALLERS)])
    made = owned_by(pool, "job-001")
    assert len(made) == 1, [(r.id, r.state) for r in made]
    (hold,) = made
    assert hold.state == "active"
    assert {a["status"] for a in answers} == {"reserved"}
    assert {a["reservation"]["id"] for a in answers} == {hold.id}
    flows = len(pool.calls("DescribeCapacityReservations"))
    creates = len(pool.calls("CreateCapacityReservation"))
    print(f"no table: {flows} flows looked for earlier work, {creates} creates, 1 reservation")
    assert flows >= CALLERS  # every invocation looked (a token mismatch looks again)
    not_oversold(pool, {"us-east-1a": SLOTS})


def test_fifty_duplicates_racing_two_places_without_the_state_table(pool: Any) -> None:
    """Two places with room: an invocation races both, keeps the better, gives the other
    back. What the no-table path still guarantees: one hold at the end, in the preferred
    place; every answer ``reserved``; nothing oversold; at most one holding reservation per
    place at any time (ClientToken), the losing place's made at most once per token
    generation. What it does not: that every answer names the hold that survives (see
    ``test_a_duplicate_can_take_over_a_hold_that_is_then_given_back``)."""
    pool.set_pool(REGION, "us-east-1a", TYPE, 5)
    pool.set_pool(REGION, "us-east-1b", TYPE, 5)
    event = job(2, subnet_ids=[SUBNET_A, SUBNET_B])
    answers = at_once([event for _ in range(CALLERS)])
    made = {r.id: r for r in owned_by(pool, "job-002")}
    live = [r for r in made.values() if r.state == "active"]
    assert len(live) == 1, [(r.id, r.availability_zone, r.state) for r in made.values()]
    (survivor,) = live
    assert survivor.availability_zone == "us-east-1a"  # the preferred place
    assert {a["status"] for a in answers} == {"reserved"}
    named = Counter(a["reservation"]["id"] for a in answers)
    assert set(named) <= set(made)
    stale = sum(n for rid, n in named.items() if rid != survivor.id)
    for rid in set(named) - {survivor.id}:
        assert (made[rid].availability_zone, made[rid].state) == ("us-east-1b", "cancelled")
    per_place = Counter(r.availability_zone for r in made.values())
    assert per_place["us-east-1a"] == 1
    assert per_place["us-east-1b"] <= 3  # MAX_TOKEN_GENERATIONS
    print(
        f"no table, two places: {CALLERS - stale} answers name the surviving hold, {stale} a "
        f"losing hold given back meanwhile; reservations made per place: {dict(per_place)}"
    )
    not_oversold(pool, {"us-east-1a": 5, "us-east-1b": 5})


def test_a_duplicate_arriving_mid_race_answers_with_the_surviving_hold(
    pool: Any, container: Any
) -> None:
    """The interleaving behind stale answers, made certain: invocation A has won the worse
    place and waits for EC2's answer about the better one; a duplicate B arrives and finds A's
    hold by its tag. B enters its own race with that hold as the one to beat, so it tries the
    better place too (the same ClientToken: EC2 gives both the same reservation) and gives the
    worse hold back. Both answers name the same, live hold."""
    pool.set_pool(REGION, "us-east-1a", TYPE, 5)
    pool.set_pool(REGION, "us-east-1b", TYPE, 5)
    better = pool.capacity(REGION).zones["us-east-1a"]
    worse_held, go = threading.Event(), threading.Event()

    def before(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "CreateCapacityReservation" and params["AvailabilityZoneId"] == better:
            go.wait(5)

    def after(model: Any, context: Any, http_response: Any, **_: Any) -> None:
        if model.name == "CreateCapacityReservation" and http_response.status_code == 200:
            worse_held.set()

    events = container.root.clients.client("ec2", REGION).meta.events
    events.register("before-parameter-build.ec2.CreateCapacityReservation", before)
    events.register("after-call.ec2.CreateCapacityReservation", after)
    event = job(3, subnet_ids=[SUBNET_A, SUBNET_B])
    first: list[dict[str, Any]] = []
    a = threading.Thread(target=lambda: first.append(reserve(event, Context(1))))
    a.start()
    assert worse_held.wait(5)
    second = reserve(event, Context(2))
    go.set()
    a.join(10)
    (first_answer,) = first
    assert first_answer["status"] == second["status"] == "reserved"
    assert first_answer["reservation"]["id"] == second["reservation"]["id"]
    assert second["reservation"]["availability_zone"] == "us-east-1a"
    state = {r.id: r.state for r in owned_by(pool, "job-003")}
    assert state[second["reservation"]["id"]] == "active"
    assert sorted(state.values()) == ["active", "cancelled"]


# -- 50 jobs, room for 10 -------------------------------------------------------------------


def check_pool_answers(
    emu: Any, answers: list[dict[str, Any]], events: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    reserved = [a for a in answers if a["status"] == "reserved"]
    refused = [a for a in answers if a["status"] != "reserved"]
    for answer, event in zip(answers, events, strict=True):
        assert answer["request_id"] == event["request_id"]
    for answer in refused:
        assert answer["status"] == "no_capacity", answer
        assert answer["retry_after_seconds"] > 0
        assert answer["instance_types"] == [TYPE]
        assert "reservation" not in answer
        assert {a["outcome"] for a in answer["attempts"]} == {"insufficient_capacity"}
        assert {a["error_code"] for a in answer["attempts"]} == {"InsufficientInstanceCapacity"}
        assert [r.state for r in owned_by(emu, answer["request_id"]) if r.state == "active"] == []
    for answer in reserved:
        (hold,) = [r for r in owned_by(emu, answer["request_id"]) if r.state == "active"]
        assert answer["reservation"]["id"] == hold.id
    return reserved, refused


def test_fifty_jobs_for_ten_slots(pool: Any) -> None:
    events = [job(n) for n in range(CALLERS)]
    answers = at_once(events)
    reserved, refused = check_pool_answers(pool, answers, events)
    assert len(reserved) == SLOTS
    assert len(refused) == CALLERS - SLOTS
    active = [r for r in owned_by(pool) if r.state == "active"]
    assert len(active) == SLOTS
    assert {r.id for r in active} == {a["reservation"]["id"] for a in reserved}
    assert len({tags(pool, r.id)[TAG_REQUEST] for r in active}) == SLOTS
    not_oversold(pool, {"us-east-1a": SLOTS})
    assert pool.pool(REGION, "us-east-1a", TYPE)["available"] == 0


def test_fifty_jobs_for_ten_slots_in_two_places(pool: Any) -> None:
    """Each job may use either of two places (strict: hold or stay queued). A job that wins
    both holds one slot too many until it gives the worse back, so in a burst fewer than 10
    may be reserved and the others are truthfully told "no capacity right now". The jobs that
    ask again (as told by retry_after_seconds) fill exactly the 10 slots, never more."""
    pool.set_pool(REGION, "us-east-1a", TYPE, 5)
    pool.set_pool(REGION, "us-east-1b", TYPE, 5)
    events = [job(n, subnet_ids=[SUBNET_A, SUBNET_B], strict=True) for n in range(CALLERS)]
    total: list[dict[str, Any]] = []
    waiting = events
    rounds = 0
    while waiting and rounds < 5:
        rounds += 1
        answers = at_once(waiting)
        reserved, refused = check_pool_answers(pool, answers, waiting)
        total += reserved
        assert len(total) <= 2 * 5
        not_oversold(pool, {"us-east-1a": 5, "us-east-1b": 5})
        if not reserved:
            break
        asked_again = {a["request_id"] for a in refused}
        waiting = [e for e in waiting if e["request_id"] in asked_again]
    print(f"two places: {len(total)} reserved over {rounds} rounds")
    assert len(total) == 2 * 5
    active = [r for r in owned_by(pool) if r.state == "active"]
    assert {r.id for r in active} == {a["reservation"]["id"] for a in total}
    assert Counter(r.availability_zone for r in active) == {"us-east-1a": 5, "us-east-1b": 5}
