"""The grouped probes' stores (``logic.grouping.store``): the state table's (``TableStore``,
against the emulator) answers every operation as the in-memory one does, so the protocol's
tests over the in-memory store speak for both; and the table is advice (contract v4): a table
that hangs or refuses is asked once, then not for a while, and a probe answers as a lone probe.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.adapters.aws import Clients
from capacity_broker.adapters.dynamodb_group import TableStore
from capacity_broker.domain.group import Ending, GroupState, Joined, StoreDown
from capacity_broker.logic.grouping.store import GroupStore, MemoryStore

pytestmark = pytest.mark.integration

# The bench's hung socket (one home for it): the repository root on the path, as the bench's
# own unit tests put it (the bench is not an installed package).
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))
from bench.hung import Hung  # noqa: E402 - the repository root is put on sys.path first

REGION = "us-east-1"
TABLE = "broker-state"
KIND = "us-east-1#" + "a" * 40
GID = "group-" + "1" * 32


def _table() -> None:
    boto3.client("dynamodb", region_name=REGION).create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.fixture(params=["memory", "table"])
def store(request: pytest.FixtureRequest, emu: Any) -> Iterator[GroupStore]:
    if request.param == "memory":
        yield MemoryStore()
        return
    _table()
    yield TableStore(TABLE, REGION, Clients(boto3.session.Session()))


def test_an_arrival_finds_no_group_then_marks_then_opens(store: GroupStore) -> None:
    found = store.join(KIND, "s1", 10.0, 200)
    assert not isinstance(found, Joined) and found.state is None and found.seen is None
    assert store.mark(KIND, "s1") is None
    found = store.join(KIND, "s2", 10.0, 200)
    assert not isinstance(found, Joined) and found.seen == "s1"  # a burst: one in flight
    assert store.open(KIND, GID, "s2", 10.0) is None
    # Another open while this one is OPEN is refused and says which group is.
    other = store.open(KIND, "group-" + "2" * 32, "s3", 10.0)
    assert other is not None and other.group_id == GID and other.state is GroupState.OPEN
    assert store.mark(KIND, "s3") is not None  # no mark while a group takes members


def test_joins_take_slots_in_order_within_the_group_s_limits(store: GroupStore) -> None:
    store.open(KIND, GID, "lead", 10.0)
    assert store.join(KIND, "m1", 10.0, 3) == Joined(GID, 1)
    assert store.join(KIND, "m2", 12.0, 3) == Joined(GID, 2)
    full = store.join(KIND, "m3", 12.0, 3)
    assert not isinstance(full, Joined) and full.slots == 3
    impatient = store.join(KIND, "m4", 9.0, 200)  # its leader waits longer than it may
    assert not isinstance(impatient, Joined) and impatient.patience == 10.0
    assert store.slots(KIND, GID) == 3
    assert store.slots(KIND, "group-" + "2" * 32) is None


def test_a_close_is_the_closer_s_own(store: GroupStore) -> None:
    store.mark(KIND, "first")
    store.open(KIND, GID, "lead", 10.0)
    store.join(KIND, "m1", 10.0, 200)
    assert store.close(KIND, GID, "lead") == 2
    assert store.close(KIND, GID, "lead") == 2  # asked again (its answer lost): the same
    assert store.close(KIND, GID, "m1") is None  # another's: it was not open
    assert store.slots(KIND, GID) is None
    found = store.join(KIND, "late", 10.0, 200)
    assert not isinstance(found, Joined) and found.seen is None  # the marks went
    assert store.mark(KIND, "late") is None
    store.leave(KIND, "someone else")  # not the last mark: nothing
    assert not isinstance(f := store.join(KIND, "x", 1.0, 200), Joined) and f.seen == "late"
    store.leave(KIND, "late")
    assert not isinstance(f := store.join(KIND, "y", 1.0, 200), Joined) and f.seen is None


def test_a_group_ends_once_published_or_abandoned(store: GroupStore) -> None:
    assert store.ending(GID) == Ending()
    assert store.settle(GID, GroupState.ABANDONED, "m1") is None
    assert store.settle(GID, GroupState.ABANDONED, "m1") is None  # its own, asked again
    assert store.settle(GID, GroupState.PUBLISHED, "lead") == Ending(GroupState.ABANDONED)
    assert store.settle(GID, GroupState.ABANDONED, "m2") == Ending(GroupState.ABANDONED)
    store.given_back(GID)
    assert store.ending(GID) == Ending(GroupState.ABANDONED, given_back=True)
    other = "group-" + "3" * 32
    assert store.settle(other, GroupState.PUBLISHED, "lead") is None
    store.given_back(other)  # not abandoned: nothing to say
    assert store.ending(other) == Ending(GroupState.PUBLISHED)


def test_answers_are_read_by_slot(store: GroupStore) -> None:
    store.publish(GID, {slot: f"answer {slot}" for slot in range(1, 60)})  # three batches
    assert store.answer(GID, 1) == "answer 1" and store.answer(GID, 59) == "answer 59"
    assert store.answer(GID, 60) is None and store.answer(GID, 0) is None


# -- a table that hangs or refuses -------------------------------------------------------------


def _refusing_endpoint() -> str:
    """An address where nothing listens: every connection is refused at once."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture(params=["hung", "refusing"])
def dead_table(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    hung = Hung() if request.param == "hung" else None
    endpoint = hung.endpoint if hung is not None else _refusing_endpoint()
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    yield {"accepted": hung.accepted if hung is not None else None}
    if hung is not None:
        hung.close()


def test_a_dead_table_is_asked_once_and_then_not_for_a_while(dead_table: dict[str, Any]) -> None:
    """An arrival's call: one (botocore's one attempt, its timeouts about a second), then
    ``StoreDown`` at once for every arrival's call, without a connection (the hung socket
    accepts no second one), until the table is asked again a while later. A group's own calls
    (a member's look for its answer) are still asked, each bounded by its second: the group's
    leader may be answering through a table that only this container found failing."""
    later = [0.0]  # (real time: a call's retries end with its second; moved on by the test)
    table = TableStore(
        TABLE,
        REGION,
        Clients(boto3.session.Session()),
        monotonic=lambda: time.monotonic() + later[0],
    )
    with pytest.raises(StoreDown):
        table.join(KIND, "s1", 10.0, 200)
    calls = table.counts["calls"]
    for ask in (
        lambda: table.mark(KIND, "s1"),
        lambda: table.open(KIND, GID, "s1", 10.0),
        lambda: table.leave(KIND, "s1"),
    ):
        with pytest.raises(StoreDown):
            ask()
    assert table.counts["calls"] == calls  # none of them asked the table
    if dead_table["accepted"] is not None:
        assert len(dead_table["accepted"]) == 1
    with pytest.raises(StoreDown):
        table.answer(GID, 1)  # asked, and bounded
    assert table.counts["calls"] == calls + 1
    later[0] += 31  # the table is asked again after a while
    with pytest.raises(StoreDown):
        table.join(KIND, "s2", 10.0, 200)
    assert table.counts["calls"] == calls + 2


def test_the_state_table_s_client_answers_within_about_a_second() -> None:
    client = Clients(boto3.session.Session()).client("dynamodb", REGION)
    assert client.meta.config.connect_timeout == 1
    assert client.meta.config.read_timeout == 1
    ec2 = Clients(boto3.session.Session()).client("ec2", REGION)
    assert ec2.meta.config.read_timeout == 15  # EC2's own (its creates may take seconds)


def test_a_probe_with_a_dead_table_answers_as_a_lone_probe(
    dead_table: dict[str, Any], emulated_time: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table hangs or refuses: every probe answers what it would without one, the first
    after one bounded call to the table, the next ones without asking it."""
    from capacity_broker.client.in_process import run_function

    emu = emulated_time.emu
    emu.reset()
    emu.load_scenario(_world())
    monkeypatch.setenv("BROKER_STATE_TABLE", TABLE)
    root = emulated_time.install(monkeypatch)
    store = root.probe.grouping.meeting.store  # type: ignore[union-attr]
    assert isinstance(store, TableStore)
    event = {"instance_type": "g6.xlarge", "subnet_ids": ["subnet-0a00000000000e401"]}
    answers = [run_function("probe", {**event, "request_id": f"dead-{n}"}, root) for n in range(3)]
    assert [a["status"] for a in answers] == ["available"] * 3
    assert all("group" not in a for a in answers)
    assert store.counts["calls"] == 1  # the first arrival's join; then the table is down


def _world() -> dict[str, Any]:
    return {
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "name": "dead",
                        "cidr": "10.35.0.0/16",
                        "subnets": [
                            {
                                "id": "subnet-0a00000000000e401",
                                "name": "d0",
                                "availability_zone": "us-east-1a",
                                "cidr": "10.35.0.0/24",
                            }
                        ],
                    }
                ],
                "pools": [
                    {"availability_zone": "us-east-1a", "instance_type": "g6.xlarge", "capacity": 9}
                ],
            }
        }
    }


# -- a join whose answer is lost -----------------------------------------------------------------


@pytest.fixture
def table(emu: Any) -> TableStore:
    _table()
    return TableStore(TABLE, REGION, Clients(boto3.session.Session()))


def _lose_the_answer_of_the_next_join(table: TableStore, then: Any = None) -> None:
    """The next UpdateItem lands in the table, and DynamoDB answers it with a server error
    ("the request may or may not have been processed"; ``then`` runs in between: another
    container's join)."""
    from botocore.exceptions import ClientError

    client = table.clients.client("dynamodb", REGION)
    real = client.update_item

    def landed_then_lost(**params: Any) -> Any:
        client.update_item = real
        real(**params)
        if then is not None:
            then()
        raise ClientError(
            {
                "Error": {"Code": "InternalServerError", "Message": "Internal server error"},
                "ResponseMetadata": {"HTTPStatusCode": 500},
            },
            "UpdateItem",
        )

    client.update_item = landed_then_lost


def test_a_join_whose_answer_was_lost_takes_one_slot_and_knows_it(table: TableStore) -> None:
    """Never asked again blindly (a second slot would be a member nobody is): the kind's item
    says the join landed (its mark, and the slot it took)."""
    table.open(KIND, GID, "lead", 10.0)
    _lose_the_answer_of_the_next_join(table)
    assert table.join(KIND, "m1", 10.0, 200) == Joined(GID, 1)
    assert table.slots(KIND, GID) == 2  # the leader and m1, nobody else


def test_a_join_whose_answer_was_lost_behind_another_knows_it_cannot_name_its_slot(
    table: TableStore,
) -> None:
    other = TableStore(TABLE, REGION, Clients(boto3.session.Session()))
    table.open(KIND, GID, "lead", 10.0)
    _lose_the_answer_of_the_next_join(table, then=lambda: other.join(KIND, "m2", 10.0, 200))
    assert table.join(KIND, "m1", 10.0, 200) == Joined(GID, None)
    assert table.slots(KIND, GID) == 3
