"""The state table is written by others too: every container of the cluster, anyone with access
to the table, a bug. What the broker reads from it never fails a request (issue 19):

- the capacity memory is advice: an item, however corrupt, changes no answer of ``probe`` and
  ``reserve`` (status and winner are those of a broker with no memory at all) and never breaks
  ``history``; what is not sound is left out and logged once;
- a request record that does not parse is answered as a clear error (see ``logic.remember``),
  never ``InternalError``, and never a second hold.

Everything runs through the real handlers (and the client, for ``history``) against the
emulator's EC2 and DynamoDB.
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Any

import boto3
import pytest
from capacity_broker import CapacityBroker
from capacity_broker.adapters.dynamodb_memory import item_id
from capacity_broker.cli import EXIT_OK, app
from capacity_broker.domain.memory import HOUR, LATENCY_BOUNDS, Seen, hour_of
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.handlers.probe import handler as probe
from capacity_broker.handlers.reserve import handler as reserve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

REGION = "us-east-1"
TABLE = "broker-state-hostile"
TYPE = "g6.xlarge"
# The discovery scenario: A has g6.xlarge capacity, B has none.
SUBNET_A = "subnet-0d1a0000000000e1a"
SUBNET_B = "subnet-0d1b0000000000e1b"
CLUSTER = "demo-cluster"  # the broker fixture's


def _fresh_world(emu: Any, container: Any) -> dict[str, str]:
    """The discovery scenario, an empty state table, a fresh container (its root built from the
    environment on first use); the subnets' AZ ids."""
    emu.reset()
    container.fresh()
    emu.load_scenario("discovery")
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    subnets = boto3.client("ec2", region_name=REGION).describe_subnets(
        SubnetIds=[SUBNET_A, SUBNET_B]
    )["Subnets"]
    return {s["SubnetId"]: s["AvailabilityZoneId"] for s in subnets}


@pytest.fixture
def world(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("BROKER_STATE_TABLE", TABLE)
    return _fresh_world(broker, container)


def _put(*items: dict[str, Any]) -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    for item in items:
        dynamodb.put_item(TableName=TABLE, Item=item)


def _memory_item(hour: int, **facts: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": {"S": item_id(REGION, TYPE, hour)},
        "region": {"S": REGION},
        "instance_type": {"S": TYPE},
        "hour": {"N": str(hour)},
        **facts,
    }


def _read_by_the_container() -> None:
    """The handlers' memory reads the table before the next request decides (a request does not
    wait for its own read; it uses the previous one until its own is in)."""
    memory = CONTAINER.root().memory
    assert memory.table is not None and memory.table.table == TABLE
    memory.recall(REGION, [TYPE]).view(wait=10.0)


def _ask(context: Any, subnets: list[str], tag: str) -> tuple[Any, Any]:
    """(status, winner) of a probe and of a strict reserve of ``TYPE`` over ``subnets``."""
    found = probe(
        {"request_id": f"probe-{tag}", "instance_type": TYPE, "subnet_ids": subnets}, context
    )
    held = reserve(
        {
            "request_id": f"reserve-{tag}",
            "job_id": f"job-{tag}",
            "instance_types": [TYPE],
            "subnet_ids": subnets,
            "instance_count": 1,
            "strict": True,
        },
        context,
    )
    return (
        (found["status"], found.get("subnet_id")),
        (held["status"], held["subnet_ids"] if held["status"] == "reserved" else None),
    )


def _without_memory(subnets: list[str]) -> tuple[Any, Any]:
    """What a broker with no memory answers in the discovery scenario: the first subnet in
    order with capacity (only A has some)."""
    if SUBNET_A in subnets:
        return ("available", SUBNET_A), ("reserved", [SUBNET_A])
    return ("unavailable", None), ("no_capacity", None)


# -- the reported cases ---------------------------------------------------------------------------
def test_a_negative_latency_bucket_leaves_probe_and_reserve_answering(
    world: dict[str, str], context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    hour = hour_of(time.time())
    # Most latencies in the bad bucket: it holds the 95th percentile, the hedge delay's.
    bad = _memory_item(hour, **{"lat#-100": {"N": "100"}, "lat#3": {"N": "1"}})
    _put(bad)
    _read_by_the_container()
    with caplog.at_level(logging.WARNING):
        assert _ask(context, [SUBNET_B, SUBNET_A], "1") == _without_memory([SUBNET_B, SUBNET_A])
        assert _ask(context, [SUBNET_B, SUBNET_A], "2") == _without_memory([SUBNET_B, SUBNET_A])
    # Each record once: pytest's capture handler sits on the root logger and on the
    # non-propagating "capacity_broker" one, and a record logged outside an invocation (this
    # test's own read) goes on to "capacity-broker", so reaches it by both (handlers._runtime).
    warnings = list({id(r): r for r in caplog.records if bad["id"]["S"] in r.getMessage()}.values())
    # Logged once, naming the item and what was left out; the sound bucket was still read.
    assert len(warnings) == 1 and "lat#-100" in warnings[0].getMessage(), warnings


def test_a_huge_time_leaves_history_working(world: dict[str, str]) -> None:
    az = world[SUBNET_A]
    hour = hour_of(time.time())
    _put(
        _memory_item(
            hour,
            **{f"t#available#{az}": {"N": "1e20"}, f"n#available#{az}": {"N": "3"}},
        )
    )
    client = CapacityBroker(regions=[REGION], cluster_id=CLUSTER, state_table=TABLE)
    (row,) = client.history()
    assert (row.availability_zone_id, row.available, row.last_available) == (az, 3, None)
    runner = CliRunner()
    out = runner.invoke(app, ["--no-progress", "history", "--state-table", TABLE, "-o", "json"])
    assert out.exit_code == EXIT_OK, out.stderr
    assert [r["available"] for r in json.loads(out.stdout)] == [3]


# -- any item -------------------------------------------------------------------------------------
def _numbers(now: float) -> st.SearchStrategy[str]:
    """DynamoDB numbers (what the table accepts: up to 38 digits, magnitude 1e-130 to 1e125)
    that the memory might meet: sound ones, negative, huge, fractional, times anywhere."""
    offsets = st.sampled_from([0, -5, -600, 30, 3_600, 86_400 * 365 * 100])
    return st.one_of(
        st.integers(-3, 20).map(str),
        st.integers(-(10**37), 10**37).map(str),
        offsets.map(lambda offset: repr(float(now + offset))),
        st.just("1e20"),
        st.floats(-1e120, 1e120, allow_nan=False)
        .filter(lambda x: x == 0 or abs(x) > 1e-120)
        .map(repr),
        st.sampled_from(["1e20", "-1e20", "9.99e125", "-0", "0.5", "1e-5"]),
    )


def _values(now: float) -> st.SearchStrategy[dict[str, Any]]:
    """Attribute values: mostly numbers, else whatever other type DynamoDB holds."""
    return st.one_of(
        _numbers(now).map(lambda n: {"N": n}),
        _numbers(now).map(lambda n: {"S": n}),
        st.sampled_from(
            [
                {"S": ""},
                {"S": "x" * 500},
                {"BOOL": True},
                {"NULL": True},
                {"L": [{"N": "1"}]},
                {"M": {"N": {"N": "1"}}},
                {"SS": ["a", "b"]},
                {"NS": ["1", "2"]},
                {"B": b"\x00\xff"},
            ]
        ),
    )


def _names(zones: list[str]) -> st.SearchStrategy[str]:
    seen = st.sampled_from([*(s.value for s in Seen), "bogus", ""])
    zone = st.sampled_from([*zones, "use1-az9", "", "*", "a" * 100, "use1 az1"])
    bucket = st.one_of(
        st.integers(-(10**6), 10**6).map(str),
        st.sampled_from([str(len(LATENCY_BOUNDS)), "-1", "x", "1.5", "nan", "1e3", ""]),
    )
    return st.one_of(
        st.builds(lambda h, s, z: f"{h}#{s}#{z}", st.sampled_from(["n", "t"]), seen, zone),
        zone.map(lambda z: f"rs#{z}"),
        bucket.map(lambda b: f"lat#{b}"),
        st.sampled_from(["quota_at", "quota_carried", "expiration", "other", "n", "t#", "#"]),
    )


def _sound_facts(zones: list[str], hour: int, now: float) -> st.SearchStrategy[Any]:
    """(name, value) of facts a broker writes, with values it could have written."""
    seen = st.sampled_from(list(Seen))
    zone = st.sampled_from(zones)
    # (Drawn as offsets: what Hypothesis draws may not depend on the clock.)
    within = st.integers(0, HOUR - 1).map(lambda offset: str(min(hour + offset, int(now))))
    count = st.integers(0, 50).map(str)
    return st.one_of(
        st.tuples(st.builds(lambda s, z: f"n#{s}#{z}", seen, zone), count),
        st.tuples(st.builds(lambda s, z: f"t#{s}#{z}", seen, zone), within),
        st.tuples(zone.map(lambda z: f"rs#{z}"), st.integers(0, 10**6).map(lambda n: str(n / 8))),
        st.tuples(st.integers(0, len(LATENCY_BOUNDS) - 1).map(lambda b: f"lat#{b}"), count),
        st.tuples(st.just("quota_at"), within),
        st.tuples(st.just("quota_carried"), st.integers(0, 5).map(str)),
    ).map(lambda fact: (fact[0], {"N": fact[1]}))


def _forged_facts(zones: list[str], now: float) -> st.SearchStrategy[Any]:
    """(name, value) of facts shaped like a broker's, with values no broker writes: negative
    or huge counts, buckets outside the histogram, times far ahead or outside their hour."""
    seen = st.sampled_from(list(Seen))
    zone = st.sampled_from(zones)
    count = st.sampled_from(["-1", "-1000", "1000000000", "1e20", "2.5", "100"])
    moment = st.sampled_from([86_400 * 365 * 100, 3_600 * 2, 600, -7_200, -(10**9)]).map(
        lambda offset: repr(float(now + offset))
    )
    return st.one_of(
        st.tuples(st.builds(lambda s, z: f"n#{s}#{z}", seen, zone), count),
        st.tuples(st.builds(lambda s, z: f"t#{s}#{z}", seen, zone), st.one_of(moment, count)),
        st.tuples(zone.map(lambda z: f"rs#{z}"), st.sampled_from(["-5", "1e100", "9.99e125"])),
        st.tuples(
            st.sampled_from([-1, -100, len(LATENCY_BOUNDS), 10**6]).map(lambda b: f"lat#{b}"),
            st.sampled_from(["100", "1", "1000000"]),
        ),
        st.tuples(st.just("quota_at"), moment),
        st.tuples(st.just("quota_carried"), count),
    ).map(lambda fact: (fact[0], {"N": fact[1]}))


@st.composite
def memory_items(draw: st.DrawFn, zones: list[str], now: float) -> list[dict[str, Any]]:
    """Items under the ids a request of ``TYPE`` reads (this hour's and the last), each with a
    sound or corrupt envelope, and facts a broker could have written mixed with hostile ones."""
    hours = [hour_of(now), hour_of(now) - HOUR]
    found = []
    for hour in draw(st.lists(st.sampled_from(hours), min_size=1, max_size=2, unique=True)):
        item: dict[str, Any] = _memory_item(hour)
        envelope = draw(
            st.sampled_from(
                ["sound", "sound", "sound", "region", "type", "hour", "missing", "types"]
            )
        )
        if envelope == "region":
            item["region"] = {"S": draw(st.sampled_from(["us-west-2", "", "us-east-1*"]))}
        elif envelope == "type":
            item["instance_type"] = {"S": draw(st.sampled_from(["c5.large", "g6.xlarge "]))}
        elif envelope == "hour":
            item["hour"] = {"N": draw(_numbers(now))}
        elif envelope == "missing":
            del item[draw(st.sampled_from(["region", "instance_type", "hour"]))]
        elif envelope == "types":
            item[draw(st.sampled_from(["region", "instance_type", "hour"]))] = draw(_values(now))
        facts = draw(
            st.lists(
                st.one_of(
                    _sound_facts(zones, hour, now),
                    _forged_facts(zones, now),
                    st.tuples(_names(zones), _values(now)),
                ),
                max_size=14,
            )
        )
        found.append({**dict(facts), **item})
    return found


PROPERTY = settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(data=st.data())
def test_no_memory_item_fails_or_changes_an_answer(
    broker: Any,
    container: Any,
    monkeypatch: pytest.MonkeyPatch,
    context: Any,
    data: st.DataObject,
) -> None:
    monkeypatch.setenv("BROKER_STATE_TABLE", TABLE)
    zones = _fresh_world(broker, container)
    now = time.time()
    items = data.draw(memory_items(sorted(zones.values()), now), label="items")
    subnets = data.draw(
        st.sampled_from([[SUBNET_B, SUBNET_A], [SUBNET_A, SUBNET_B], [SUBNET_B]]), label="subnets"
    )
    _put(*items)
    _read_by_the_container()
    tag = f"{time.monotonic_ns()}"
    assert _ask(context, subnets, tag) == _without_memory(subnets)
    rows = CapacityBroker(regions=[REGION], cluster_id=CLUSTER, state_table=TABLE).history()
    for row in rows:
        assert row.attempts >= 0 and math.isfinite(row.reservation_seconds)
        for at in (row.last_available, row.last_insufficient):
            assert at is None or at.timestamp() <= time.time() + 300


# -- request records ------------------------------------------------------------------------------
def _reserve_event(request_id: str) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "job_id": "job-rec",
        "instance_types": [TYPE],
        "subnet_ids": [SUBNET_B, SUBNET_A],
        "instance_count": 1,
    }


def _records() -> list[dict[str, Any]]:
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=TABLE)["Items"]
    return [i for i in items if i["id"]["S"].startswith("capacity-broker.reserve#")]


def _holds(emu: Any, request_id: str) -> list[str]:
    capacity = emu.capacity(REGION)
    return [
        r.id
        for r in capacity.reservations.values()
        if r.state in ("active", "pending")
        and capacity.tags_of(r.id).get("capacity-broker:request-id") == request_id
    ]


RECORD_CORRUPTIONS: dict[str, tuple[dict[str, Any], list[str]]] = {
    # name: (attributes set, attributes removed)
    "a status Powertools does not know": ({"status": {"S": "DONE"}}, []),
    "a status of the wrong type": ({"status": {"N": "1"}}, []),
    "no status": ({}, ["status"]),
    "no expiration": ({}, ["expiration"]),
    "an expiration that is not a number": ({"expiration": {"S": "soon"}}, []),
    "an answer that is not JSON": ({"data": {"S": "{not json"}}, []),
    "an answer of the wrong type": ({"data": {"N": "5"}}, []),
    "an answer that is not an object": ({"data": {"S": "[1, 2]"}}, []),
    "an empty answer": ({"data": {"S": "{}"}}, []),
    "an answer never recorded (an error)": (
        {"data": {"S": json.dumps({"status": "error", "request_id": "rec-1"})}},
        [],
    ),
    "another request's answer": (
        {"data": {"S": json.dumps({"status": "reserved", "request_id": "someone-else"})}},
        [],
    ),
    "in progress, with an expiry that is not a number": (
        {"status": {"S": "INPROGRESS"}, "in_progress_expiration": {"S": "later"}},
        [],
    ),
}


def _corrupt(record: dict[str, Any], updates: dict[str, Any], removals: list[str]) -> None:
    sets = [f"#s{i} = :s{i}" for i in range(len(updates))]
    removes = [f"#r{i}" for i in range(len(removals))]
    clauses = ([f"SET {', '.join(sets)}"] if sets else []) + (
        [f"REMOVE {', '.join(removes)}"] if removes else []
    )
    names = {f"#s{i}": name for i, name in enumerate(updates)}
    names.update({f"#r{i}": name for i, name in enumerate(removals)})
    values = {f":s{i}": value for i, value in enumerate(updates.values())}
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=TABLE,
        Key={"id": record["id"]},
        UpdateExpression=" ".join(clauses),
        ExpressionAttributeNames=names,
        **({"ExpressionAttributeValues": values} if values else {}),
    )


@pytest.mark.parametrize("corruption", sorted(RECORD_CORRUPTIONS))
def test_a_corrupt_request_record_is_a_clear_error_and_never_a_second_hold(
    world: dict[str, str], broker: Any, context: Any, corruption: str
) -> None:
    first = reserve(_reserve_event("rec-1"), context)
    assert first["status"] == "reserved", first
    held = _holds(broker, "rec-1")
    assert len(held) == 1
    (record,) = _records()
    _corrupt(record, *RECORD_CORRUPTIONS[corruption])
    for _ in range(2):  # the scheduler retries: the same answer, still nothing more held
        again = reserve(_reserve_event("rec-1"), context)
        assert (again["status"], again.get("error_code"), again["request_id"]) == (
            "error",
            "RequestRecordUnreadable",
            "rec-1",
        ), again
        assert "rec-1" in again["message"] and "new request id" in again["message"]
        assert _holds(broker, "rec-1") == held
    # A new request id is the way out.
    assert reserve(_reserve_event("rec-2"), context)["status"] == "reserved"


def test_a_sound_record_is_still_replayed(world: dict[str, str], broker: Any, context: Any) -> None:
    first = reserve(_reserve_event("rec-1"), context)
    again = reserve(_reserve_event("rec-1"), context)
    assert again["status"] == "reserved"
    assert again["reservation"]["id"] == first["reservation"]["id"]
    assert len(_holds(broker, "rec-1")) == 1
