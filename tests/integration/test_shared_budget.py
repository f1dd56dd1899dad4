"""One EC2 rate budget per account and region (contract v3, issue 23 item 2): with a state
table, every root's pacer takes its tokens from the table's ledgers, so several containers
that start together stay within EC2's buckets; without a table each paces alone, as before;
a table that fails is advice lost, never a request failed.

Everything runs on the emulator's clock (``EmulatedTime``): EC2's buckets refill by it at
their published sizes (mutating 50, 5 a second), the ledgers' leases and every pacer's waits
read and move it. Several roots ("containers") take turns on one thread, each probe run to
its end before the next starts, so a burst of them is as many calls as EC2 can see at one
instant. Counts of calls are asserted, never durations.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from capacity_broker.adapters.dynamodb_budget import (
    CROWDED_S,
    HORIZON_SECONDS,
    LAG_S,
    PREFIX,
    BudgetTable,
)
from capacity_broker.adapters.throttle import MUTATING, AdaptiveBucket, Pacer, Slot, Ticket
from capacity_broker.client.in_process import run_function
from capacity_broker.config import Settings
from capacity_broker.root import Adapters, Root

pytestmark = pytest.mark.integration

REGION = "us-east-1"
TABLE = "broker-state"
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]
SUBNETS = ["subnet-0a00000000000bd01", "subnet-0b00000000000bd02", "subnet-0c00000000000bd03"]
TYPE = "m7i.large"
CONTAINERS = 8
PROBES_EACH = 4


def world() -> dict[str, Any]:
    """Three subnets; the first two AZs empty, so every right answer is the third (each
    probe creates and cancels in all three: ≥ 6 mutating calls)."""
    return {
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "name": "budget",
                        "cidr": "10.24.0.0/16",
                        "subnets": [
                            {
                                "id": s,
                                "name": f"b{i}",
                                "availability_zone": az,
                                "cidr": f"10.24.{i}.0/24",
                            }
                            for i, (s, az) in enumerate(zip(SUBNETS, AZS, strict=True))
                        ],
                    }
                ],
                "pools": [
                    {"availability_zone": az, "instance_type": TYPE, "capacity": cap}
                    for az, cap in zip(AZS, (0, 0, 10_000), strict=True)
                ],
            }
        }
    }


@pytest.fixture
def burst(emulated_time: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The world with EC2's buckets on the emulator's clock, and a state table."""
    emu = emulated_time.emu
    emu.load_scenario(world())
    emu.freeze()
    emu.throttle(emulator_clock=True)
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    monkeypatch.setenv("BROKER_MAX_CONCURRENCY", "1")
    return emulated_time


def container(time: Any, table: str | None, budget_clock: Any = None) -> Root:
    """A new container's root on the emulator's clock: its own session, clients and pacer;
    with ``table``, its pacer draws from the table's ledgers (as ``Adapters`` builds it from
    the settings, on the emulator's clocks)."""
    settings = Settings.from_env({"BROKER_CLUSTER_ID": "demo-cluster", "AWS_REGION": REGION})
    adapters = Adapters(boto3.session.Session())
    if table is not None:
        adapters.budget = BudgetTable(
            table,
            REGION,
            adapters.clients,
            clock=budget_clock or time.monotonic,
            monotonic=time.monotonic,
        )
    # Leases ahead run in line: on the emulator's clock a daemon thread's lease would race
    # the probe's own sleeps, and the verdict would depend on the threads' scheduling.
    adapters.pacer = Pacer(
        clock=time.monotonic, sleep=time.sleep, shared=adapters.budget, ahead=lambda run: run()
    )
    return Root(
        settings,
        adapters=adapters,
        clock=time.utcnow,
        monotonic=time.monotonic,
        sleep=time.sleep,
    )


def probe(root: Root, n: int) -> dict[str, Any]:
    event = {
        "request_id": f"budget-{n:04d}",
        "instance_type": TYPE,
        "subnet_ids": SUBNETS,
    }
    return run_function("probe", event, root)


def class_at_nine(time: Any, table: str | None) -> tuple[list[dict[str, Any]], int, int]:
    """CONTAINERS new containers, each probing PROBES_EACH times, in turns: the answers,
    EC2's mutating calls and how many of those EC2 throttled."""
    emu = time.emu
    emu.clear_calls()
    roots = [container(time, table) for _ in range(CONTAINERS)]
    answers = [probe(roots[i % CONTAINERS], i) for i in range(CONTAINERS * PROBES_EACH)]
    mutating = [
        c
        for c in emu.calls()
        if c.action in ("CreateCapacityReservation", "CancelCapacityReservation")
    ]
    throttled = sum(1 for c in mutating if c.outcome == "RequestLimitExceeded")
    return answers, len(mutating), throttled


def test_containers_sharing_a_table_stay_within_the_bucket(burst: Any) -> None:
    answers, calls, throttled = class_at_nine(burst, TABLE)
    assert [a["status"] for a in answers] == ["available"] * len(answers)
    assert {a["subnet_id"] for a in answers} == {SUBNETS[2]}
    # More mutating calls than EC2's burst of 50, all made within it: none throttled.
    assert calls > 2 * 50
    assert throttled == 0
    ledger = boto3.client("dynamodb", region_name=REGION).get_item(
        TableName=TABLE, Key={"id": {"S": f"{PREFIX}{REGION}#CreateCapacityReservation"}}
    )
    assert "tat" in ledger["Item"]


def test_containers_without_a_table_each_spend_the_burst(burst: Any) -> None:
    """Without a table each pacer is alone and starts with EC2's whole burst, as before: the
    same class is throttled (and still answered right: throttling is not an answer)."""
    answers, _, throttled = class_at_nine(burst, None)
    assert {a["subnet_id"] for a in answers if a["status"] == "available"} <= {SUBNETS[2]}
    assert throttled > 0


def test_a_failing_table_falls_back_to_pacing_alone(
    burst: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The state table answers errors to every lease: the probes are still answered (the
    budget is advice), the container paces on its own, and says so once."""
    emu = burst.emu
    emu.fail("UpdateItem", "InternalServerError", service="dynamodb", times=10_000, status=500)
    root = container(burst, TABLE)
    with caplog.at_level("WARNING"):
        answers = [probe(root, 900 + i) for i in range(3)]
    assert [a["status"] for a in answers] == ["available"] * 3
    assert {a["subnet_id"] for a in answers} == {SUBNETS[2]}
    # (One record, which caplog may hold twice when a handler of an earlier test forwards.)
    said = {id(r) for r in caplog.records if "EC2 rate budget" in r.getMessage()}
    assert len(said) == 1
    assert root.adapters.budget is not None and root.adapters.budget.counts["down"] >= 1


def test_the_root_builds_the_budget_from_its_settings(burst: Any) -> None:
    """A root whose settings name a state table and turn the shared budget on hands its pacer
    the table's ledgers; one without (or with the budget off, the default) keeps its pacer
    alone; a pacer handed in is left as it is."""
    base = {"BROKER_CLUSTER_ID": "demo-cluster", "AWS_REGION": REGION, "BROKER_STATE_TABLE": TABLE}
    with_table = Settings.from_env(base | {"BROKER_SHARED_EC2_BUDGET": "true"})
    assert Root(Settings.from_env(base)).pacer.shared is None
    alone = Settings.from_env({"BROKER_CLUSTER_ID": "demo-cluster", "AWS_REGION": REGION})
    shared = Root(with_table)
    assert isinstance(shared.pacer.shared, BudgetTable)
    assert (shared.pacer.shared.table, shared.pacer.shared.region) == (TABLE, REGION)
    assert Root(alone).pacer.shared is None
    assert Root(with_table, pacer=Pacer()).pacer.shared is None


class Driven:
    """A wall clock the test moves."""

    def __init__(self, at: float) -> None:
        self.now = at

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("burst", "rate"), [(50, 5), (100, 20), (10, 0.15), (1, 2)])
def test_leases_of_many_processes_never_exceed_the_bucket(
    broker: Any, burst: float, rate: float
) -> None:
    """Processes leasing from one ledger, in turns, on one clock that moves a little between
    turns: what they were granted by any moment is at most the bucket's burst plus its refill
    since the first lease, and a process that waits is told how long."""
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    clock = Driven(1_800_000_000.0)
    processes = [
        BudgetTable(TABLE, REGION, Adapters(boto3.session.Session()).clients, clock=clock)
        for _ in range(6)
    ]
    start = clock.now
    granted = 0
    waits = 0
    for turn in range(180):
        grant = processes[turn % len(processes)].lease(f"{PREFIX}{REGION}#Create", burst, rate)
        assert grant is not None
        granted += grant.tokens
        assert granted <= burst + rate * (clock.now - start) + 1e-6
        if grant.tokens == 0:
            waits += 1
            assert 0 < grant.wait <= 1 / rate + 1e-6
        clock.now += 0.37 / rate  # a little more than a third of a token's time
    # The bucket was used, not merely refused: all but a token or two of what refilled, and
    # the lag's tokens the ledger keeps back (a ledger shifted from behind now forgets them).
    assert granted >= burst - LAG_S * rate + rate * (clock.now - start) - 2 * 5
    assert waits > 0


def _table() -> None:
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.mark.parametrize(("burst", "rate"), [(50, 5), (100, 20), (10, 0.15)])
def test_booked_slots_never_exceed_the_bucket_and_cost_one_update_each(
    broker: Any, burst: float, rate: float
) -> None:
    """Processes booking slots (a horizon of 30 s) from one ledger, in turns, on one clock:
    every token counted at the moment it may be spent, what was spendable by any moment is at
    most the burst plus the refill since the first lease; a booking in a busy bucket is one
    UpdateItem, never a race lost; and no two bookings share a moment."""
    _table()
    clock = Driven(1_800_000_000.0)
    processes = [
        BudgetTable(TABLE, REGION, Adapters(boto3.session.Session()).clients, clock=clock)
        for _ in range(6)
    ]
    start = clock.now
    spendable: list[tuple[float, int]] = []
    for turn in range(120):
        grant = processes[turn % len(processes)].lease(
            f"{PREFIX}{REGION}#Create", burst, rate, 30.0
        )
        assert grant is not None
        if grant.tokens:
            assert grant.wait <= 30.0 + 1e-6
            spendable.append((clock.now + grant.wait, grant.tokens))
        else:
            # Refused only when the next slot is further than the horizon.
            assert grant.wait > 0
            assert spendable[-1][0] - clock.now > 30.0 - 1 / rate
        clock.now += 0.1 / rate  # a tenth of a token's time: the bucket is soon busy
    assert len(spendable) > burst
    spendable.sort()
    total = 0
    for at, tokens in spendable:
        total += tokens
        # (Epoch seconds in a float carry ~2e-7 s: a thousandth of a token is rounding.)
        assert total <= burst + rate * (at - start) + 1e-3
    booked = [at for at, _ in spendable if at > start + 1e-9]
    assert len(set(booked)) == len(booked)
    updates = sum(p.counts["updates"] for p in processes)
    leases = sum(p.counts["leases"] for p in processes)
    # Idle at first (one process may guess the case wrong once per switch): then one each.
    assert updates <= leases + len(processes)


def test_a_process_that_met_a_crowd_guesses_the_next_ledgers_busy(broker: Any) -> None:
    """A new container's first lease of a bucket guesses the ledger's case; in a burst every
    ledger is booked ahead by the others, so the idle guess failed once per bucket per
    container (and again after each pause). Once one failed condition showed a ledger booked
    ahead by the others, the next leases, of any ledger, guess busy first and cost one update
    each; a lone process, which never meets that, guesses idle and is right."""
    _table()
    clock = Driven(1_800_000_000.0)
    tables = [
        BudgetTable(TABLE, REGION, Adapters(boto3.session.Session()).clients, clock=clock)
        for _ in range(3)
    ]
    crowd, newcomer, lone = tables
    keys = [f"{PREFIX}{REGION}#{action}" for action in ("DescribeVpcs", "DescribeSubnets")]
    for key in keys:  # the others book both ledgers well ahead
        for _ in range(40):
            assert crowd.lease(key, 100, 20, 30.0) is not None
    before = newcomer.counts["updates"]
    first = newcomer.lease(keys[0], 100, 20, 30.0)
    assert first is not None and first.tokens == 1
    assert newcomer.counts["updates"] - before == 2  # guessed idle, then knew
    before = newcomer.counts["updates"]
    second = newcomer.lease(keys[1], 100, 20, 30.0)
    assert second is not None and second.tokens == 1
    assert newcomer.counts["updates"] - before == 1  # never asked, guessed busy: right
    # A lone process on ledgers nobody else uses, a lease now and then: always one update.
    for turn in range(6):
        grant = lone.lease(f"{PREFIX}{REGION}#Lone{turn % 2}", 100, 20, 30.0)
        assert grant is not None and grant.tokens >= 1
        clock.now += 3.0
    assert lone.counts["updates"] == lone.counts["leases"] == 6


def test_a_crowded_process_leases_one_token_at_a_time(broker: Any) -> None:
    """An idle ledger grants a lone process a small batch (a create's bucket: two, so a
    lone probe's creates and cancels make one round trip per pair); while the process knows
    the others are drawing on the account's ledgers (a burst its probes' meeting saw), each
    lease takes one token, even of a ledger it finds idle: in a burst a batch is taken ahead
    of the others and, as a rule, left unspent."""
    _table()
    clock = Driven(1_800_000_000.0)
    lone, crowded = (
        BudgetTable(TABLE, REGION, Adapters(boto3.session.Session()).clients, clock=clock)
        for _ in range(2)
    )
    creates, describes = (f"{PREFIX}{REGION}#{a}" for a in ("Create", "DescribeVpcs"))
    first = lone.lease(creates + "#lone", 50, 5, 30.0, most=2)
    batch = lone.lease(describes + "#lone", 100, 20, 30.0)
    assert first is not None and first.tokens == 2
    assert batch is not None and batch.tokens == 5
    crowded.crowd()
    for key, burst, rate, most in ((creates, 50, 5, 2), (describes, 100, 20, None)):
        grant = crowded.lease(key, burst, rate, 30.0, most=most)
        assert grant is not None and (grant.tokens, grant.wait) == (1, 0.0)
    clock.now += CROWDED_S + 1.0  # the crowd is over: batches again
    again = crowded.lease(describes, 100, 20, 30.0)
    assert again is not None and again.tokens == 5


def test_a_process_is_not_a_crowd_to_itself(broker: Any) -> None:
    """A failed condition that finds the tat this process's own last write left (its probe's
    overdraw, its own threads racing) is not a crowd: the process's next lease of an idle
    ledger still guesses idle and costs one update, not two."""
    _table()
    clock = Driven(1_800_000_000.0)
    alone = BudgetTable(TABLE, REGION, Adapters(boto3.session.Session()).clients, clock=clock)
    mine, other = (f"{PREFIX}{REGION}#{action}" for action in ("DescribeVpcs", "DescribeSubnets"))
    first = alone.lease(mine, 100, 20, 30.0)
    assert first is not None and first.tokens == 5  # idle: a batch, tat 0.25 s ahead
    alone.overdraw(mine, 20)  # its probe: tat 0.30 s ahead, unseen by its next lease
    # Idle by what its last lease saw (further behind than the lag), not by its overdraw.
    clock.now += 0.275 + LAG_S
    before = alone.counts["updates"]
    again = alone.lease(mine, 100, 20, 30.0)
    assert again is not None and again.tokens >= 1
    assert alone.counts["updates"] - before == 2  # guessed idle, found its own overdraw
    clock.now += 3.0
    before = alone.counts["updates"]
    fresh = alone.lease(other, 100, 20, 30.0)
    assert fresh is not None and fresh.tokens >= 1
    assert alone.counts["updates"] - before == 1  # still guesses idle: no crowd was met


def test_waiting_pacers_book_their_slots_instead_of_racing(broker: Any) -> None:
    """Twelve processes' pacers (one bucket each, sharing one ledger) all want 30 calls at
    once, each call with a 30 s deadline, on one driven clock: what they are admitted stays
    within EC2's bucket (50 at once, then 5 a second) and uses it (all it holds by the
    deadline, less the room kept for tokens held in hand); each call costs about one
    UpdateItem (a waiter books its own slot and sends at it; a call whose slot would come
    after its deadline is refused at once), not one per waiter per token as when they all
    wake at the next token's time and race for it."""
    _table()
    clock = Driven(1_800_000_000.0)
    tables = [
        BudgetTable(TABLE, REGION, Adapters(boto3.session.Session()).clients, clock=clock)
        for _ in range(12)
    ]
    buckets = [
        AdaptiveBucket(
            MUTATING,
            clock=clock,
            sleep=lambda s: None,
            ledger=t.ledger(REGION, "CreateCapacityReservation"),
            ahead=lambda run: run(),
        )
        for t in tables
    ]
    start = clock.now
    deadline = start + 30.0
    due = [start] * len(buckets)  # when each process asks next
    left = [30] * len(buckets)
    admitted: list[float] = []
    refused = 0
    while any(left):
        i = min((j for j in range(len(buckets)) if left[j]), key=lambda j: due[j])
        clock.now = max(clock.now, due[i])
        got = buckets[i].try_take(clock.now, deadline)
        if isinstance(got, Ticket | Slot):
            # A ticket goes now; a slot (the caller's own, booked) when it comes.
            assert not isinstance(got, Ticket) or not got.probe  # (nothing answered: no probe)
            admitted.append(clock.now + (got if isinstance(got, Slot) else 0.0))
            left[i] -= 1
        elif clock.now + got >= deadline:
            refused += 1  # (acquire's NoToken: the pacer's RateBudgetExhausted)
            left[i] -= 1
        else:
            due[i] = clock.now + got
    for n, at in enumerate(sorted(admitted), start=1):
        assert n <= 50 + 5 * (at - start) + 1e-3
        assert at < deadline
    # All the bucket holds by the deadline but the room kept for tokens held in hand (the
    # refill of ``hold_s``, 2 s: 10 tokens; ``AdaptiveBucket._terms``) and the ledger's lag.
    assert len(admitted) >= (50 - 5 * 2 - 5 * LAG_S) + 5 * 30 - 5
    updates = sum(t.counts["updates"] for t in tables)
    assert updates <= 1.1 * (len(admitted) + refused)


def test_a_process_in_a_burst_leases_nothing_ahead_of_need(broker: Any) -> None:
    """Once the probes' meeting has seen a burst (``BudgetTable.crowd``), a lease of tokens
    free now only (a lease ahead of need, no horizon) is answered "none" without a call: the
    others book the ledgers ahead, and in a class of 200, 429 of the 681 leases ahead found
    nothing. A lease with a horizon (a call that waits for its slot) still books one, and
    once the burst is over the leases ahead ask again."""
    _table()
    clock = Driven(1_800_000_000.0)
    table = BudgetTable(TABLE, REGION, Adapters(boto3.session.Session()).clients, clock=clock)
    key = f"{PREFIX}{REGION}#DescribeVpcs"
    table.crowd()
    ahead = table.lease(key, 100, 20)
    assert ahead is not None and ahead.tokens == 0 and ahead.wait > 0
    assert table.counts["updates"] == 0
    booked = table.lease(key, 100, 20, 30.0)
    assert booked is not None and booked.tokens >= 1
    assert table.counts["updates"] >= 1
    clock.now += CROWDED_S + 1.0
    before = table.counts["updates"]
    later = table.lease(key, 100, 20)
    assert later is not None and later.tokens >= 1
    assert table.counts["updates"] - before == 1


def a_ledger_on_a_driven_clock() -> tuple[Driven, BudgetTable, str]:
    """The state table, a process's budget on a clock the test moves, and one ledger's key."""
    _table()
    clock = Driven(1_800_000_000.0)
    table = BudgetTable(TABLE, REGION, Adapters(boto3.session.Session()).clients, clock=clock)
    return clock, table, f"{PREFIX}{REGION}#DescribeVpcs"


def test_a_burst_notice_lasts_as_long_as_its_probe_may_ask_ec2(broker: Any) -> None:
    """``crowd(seconds)``: the meeting says how long its probe may still ask EC2; the notice
    lasts that long (at least ``CROWDED_S``, at most the booking horizon), so the probe's
    leases seconds after its arrival still guess the ledgers in use."""
    clock, table, key = a_ledger_on_a_driven_clock()
    table.crowd(20.0)
    clock.now += 19.0
    ahead = table.lease(key, 100, 20)
    assert ahead is not None and ahead.tokens == 0 and table.counts["updates"] == 0
    clock.now += 1.5
    ahead = table.lease(key, 100, 20)
    assert ahead is not None and ahead.tokens >= 1 and table.counts["updates"] == 1
    table.crowd(0.5)  # (never shorter than the fixed notice)
    clock.now += CROWDED_S - 0.1
    none = table.lease(key, 100, 20)
    assert none is not None and none.tokens == 0 and table.counts["updates"] == 1
    table.crowd(1e6)  # (never longer than the horizon)
    clock.now += HORIZON_SECONDS + 0.1
    before = table.counts["updates"]
    later = table.lease(key, 100, 20)
    assert later is not None and later.tokens >= 1 and table.counts["updates"] == before + 1


def test_a_burst_notice_ends_soon_after_its_probe_answers(broker: Any) -> None:
    """``calm``: the probe told of a burst has answered (its meeting's ``leave``); its notice
    ends ``CROWDED_S`` later at the latest, so the container's next request (a lone one, as a
    rule: Lambda reuses the container) is not paced as in a burst for the rest of 30 s."""
    clock, table, key = a_ledger_on_a_driven_clock()
    table.crowd(30.0)
    clock.now += 2.0
    table.calm()
    clock.now += CROWDED_S + 0.1
    ahead = table.lease(key, 100, 20)
    assert ahead is not None and ahead.tokens >= 1 and table.counts["updates"] == 1
    table.calm()  # (no notice: nothing to end, and nothing started)
    assert table.lease(key, 100, 20) is not None and table.counts["updates"] == 2


def test_an_arrival_that_sees_a_burst_tells_the_budget(broker: Any) -> None:
    """The probes' meeting knows of a burst before any EC2 call (an arrival that finds
    another alike in flight): it tells the shared budget, so a probe that goes on to ask EC2
    makes no lease ahead of need. A lone arrival tells it nothing. The root wires the two."""
    from capacity_broker.adapters.dynamodb_group import GroupTable
    from capacity_broker.domain.group import GroupKey
    from capacity_broker.logic.group import TableMeeting

    _table()
    clock = Driven(1_800_000_000.0)
    clients = Adapters(boto3.session.Session()).clients
    budget = BudgetTable(TABLE, REGION, clients, clock=clock)
    place = TableMeeting(
        GroupTable(TABLE, REGION, clients),
        window=0.25,
        max_window=2.0,
        max_count=1000,
        wall=clock,
        monotonic=clock,
        on_burst=budget.crowd,
    )
    key = GroupKey(REGION, TYPE, tuple(SUBNETS), "Linux/UNIX", "default")
    ledger = f"{PREFIX}{REGION}#DescribeVpcs"
    first = place.arrive(key, 1, "first", clock.now + 15)
    ahead = budget.lease(ledger, 100, 20)  # alone: a lease ahead asks the ledger
    assert ahead is not None and ahead.tokens >= 1 and budget.counts["updates"] == 1
    second = place.arrive(key, 1, "second", clock.now + 15)  # the first still in flight
    ahead = budget.lease(ledger, 100, 20)
    assert ahead is not None and ahead.tokens == 0 and budget.counts["updates"] == 1
    place.leave(first)
    place.leave(second)
    settings = Settings.from_env(
        {
            "BROKER_CLUSTER_ID": "demo-cluster",
            "AWS_REGION": REGION,
            "BROKER_STATE_TABLE": TABLE,
            "BROKER_SHARED_EC2_BUDGET": "true",
        }
    )
    root = Root(settings)
    meeting = root.probe.grouping.meeting  # type: ignore[union-attr]
    assert isinstance(meeting, TableMeeting) and root.adapters.budget is not None
    assert meeting.on_burst == root.adapters.budget.crowd


class Crowded:
    """The clock of one process of a crowd, as its update carries it to the table: the others
    write between the moment it reads its clock and the moment its update arrives (in a burst
    a request waits its turn on a busy container's CPU, then on the table), with clocks of
    their own up to ``spread`` seconds apart: the table meets the processes' ``now`` out of
    order, and what a process's last answer said is stale by its next try."""

    def __init__(self, clock: Driven, by: float, crowd: list[Any], key: str) -> None:
        self.clock = clock
        self.by = by
        self.crowd = crowd  # [the processes, the next to cut in, whether one is cutting in]
        self.key = key

    def __call__(self) -> float:
        now = self.clock.now - self.by
        processes, turn, cutting = self.crowd
        if not cutting:
            other = processes[turn % len(processes)]
            if other._clock is self:  # (another process: this one is between its read and write)
                turn += 1
                other = processes[turn % len(processes)]
            self.crowd[1:] = [turn + 1, True]
            try:
                grant = other.lease(self.key, 100, 20, 30.0, most=1)
                assert grant is not None and grant.tokens == 1
            finally:
                self.crowd[2] = False
        return now


@pytest.mark.parametrize("pace", [1.25, 1.5])
def test_a_crowd_s_ledger_costs_about_one_update_per_lease(broker: Any, pace: float) -> None:
    """A crowd drawing on one ledger at a little under its rate, each process's update reaching the
    table after another's that read its clock later (0 to 1.5 s apart: in a class of 200 a
    request waited that long on its container's CPU): the ledger hovers around every one's
    ``now``, ahead of one, behind another, and what a failed try returned is stale by the
    next. Every lease is granted, and each costs about one UpdateItem: an in-use ledger stays
    in its case while it is behind by less than the lag. Split at ``tat = now``, every guess
    and every retry was a coin toss (in a class of 200, half the leases lost all four tries,
    and the table served 3,000 updates for some 300 EC2 calls)."""
    _table()
    clock = Driven(1_800_000_000.0)
    key = f"{PREFIX}{REGION}#DescribeVpcs"
    crowd: list[Any] = [[], 0, False]
    processes = [
        BudgetTable(
            TABLE,
            REGION,
            Adapters(boto3.session.Session()).clients,
            clock=Crowded(clock, by, crowd, key),
        )
        for by in (0.0, 1.5, 0.4, 1.1, 0.2, 0.8)
    ]
    crowd[0] = processes
    most = 0  # the most updates one lease made
    for turn in range(120):
        process = processes[(turn * 5) % len(processes)]
        before = process.counts["updates"]
        grant = process.lease(key, 100, 20, 30.0, most=1)
        assert grant is not None and grant.tokens == 1
        most = max(most, process.counts["updates"] - before)
        clock.now += 2 * pace / 20  # two leases per turn: ``pace`` token times apart
    updates = sum(p.counts["updates"] for p in processes)
    leases = sum(p.counts["leases"] for p in processes)
    # About one update per lease (a process's first guesses without having seen the ledger),
    # and no lease that lost a try twice.
    assert updates <= 1.1 * leases
    assert most <= 2


def test_a_bucket_of_one_token_never_grants_more_at_once(broker: Any) -> None:
    """A ledger a little behind now, within the lag, is shifted rather than started afresh,
    which forgets that much refill; a bucket too small to keep the lag's tokens back (one
    token: ``RunInstances``'s after the pacer's margin) lags less, so processes leasing at one
    instant are granted its one token, not one per second of lag."""
    _table()
    clock = Driven(1_800_000_000.0)
    processes = [
        BudgetTable(TABLE, REGION, Adapters(boto3.session.Session()).clients, clock=clock)
        for _ in range(6)
    ]
    key = f"{PREFIX}{REGION}#RunInstances"
    first = processes[0].lease(key, 1, 2, 0.001)
    assert first is not None and first.tokens == 1  # tat half a second ahead
    clock.now += 1.5  # the ledger now a second behind: within the lag, full again
    now = 0
    for process in processes:
        process.crowd()  # (each guesses "in use" first)
        grant = process.lease(key, 1, 2, 0.001)
        assert grant is not None
        now += grant.tokens if grant.wait <= 0.001 else 0
    assert now == 1


class _Slow:
    """The state table answering each update in ``took`` seconds of the process's clock;
    ``stale``: as a crowd makes it, by the time an update lands the others have moved the
    ledger to the other case (an idle guess meets a ledger in use, an in-use guess one gone
    idle)."""

    def __init__(self, client: Any, moment: list[float], took: float, stale: bool) -> None:
        self.client = client
        self.moment = moment
        self.took = took
        self.stale = stale
        self.updates = 0

    def update_item(self, **params: Any) -> Any:
        self.updates += 1
        self.moment[0] += self.took
        key = params["Key"]
        if self.stale and params["UpdateExpression"].startswith("SET tat = :then"):
            self.client.put_item(
                TableName=TABLE, Item={**key, "tat": {"N": str(1_800_000_000.0 + 0.5)}}
            )
        elif self.stale:
            self.client.delete_item(TableName=TABLE, Key=key)
        return self.client.update_item(**params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def _slow_process(took: float, stale: bool) -> tuple[BudgetTable, _Slow, list[float]]:
    """A process leasing from a fresh table through ``_Slow``, its monotonic clock at 50 s
    and moved only by the table's answers: (the process, the table, that clock)."""
    _table()
    moment = [50.0]
    clients = Adapters(boto3.session.Session()).clients
    slow = _Slow(clients.client("dynamodb", REGION), moment, took, stale)
    clients._made[("dynamodb", REGION)] = slow
    process = BudgetTable(
        TABLE, REGION, clients, clock=Driven(1_800_000_000.0), monotonic=lambda: moment[0]
    )
    return process, slow, moment


def test_a_lease_stops_trying_when_its_time_is_up(broker: Any) -> None:
    """A lease's tries, retries included, end at ``LEASE_SECONDS``: against a table that
    answers in 0.7 s and whose every answer is stale by the next try, a lease makes two
    updates (at 0 and 0.7 s), not four, and asks again later; it never holds an EC2 call
    four slow round trips long."""
    process, stale, moment = _slow_process(0.7, stale=True)
    grant = process.lease(f"{PREFIX}{REGION}#DescribeVpcs", 100, 20, 30.0)
    assert grant is not None and grant.tokens == 0  # lost: the caller asks again later
    assert stale.updates == 2
    assert moment[0] - 50.0 <= 1.0 + 0.7  # the lease's time, and the try under way at its end


def test_a_crowded_lease_against_a_slow_table_still_gets_its_token(broker: Any) -> None:
    """A process that saw a burst guesses every ledger in use; a ledger with no item yet is
    not. Against a table that takes a whole lease's time to answer, the try that follows
    the first answer is still made: the lease is granted, and the ledger written (were it
    not, every crowded lease would lose, and nobody would ever write it)."""
    process, slow, _ = _slow_process(1.0, stale=False)
    process.crowd()
    grant = process.lease(f"{PREFIX}{REGION}#CreateCapacityReservation", 50, 5, 30.0, most=1)
    assert grant is not None and grant.tokens == 1
    assert slow.updates == 2  # the blind guess, then the informed try
