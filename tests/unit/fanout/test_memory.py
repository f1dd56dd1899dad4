"""The capacity memory: in the container (expiry, pruning, history) and in the state table of
the emulator's DynamoDB (item design, merging with the container, concurrent containers)."""

from __future__ import annotations

import threading
from typing import Any

import boto3
from capacity_broker.adapters.aws import Clients
from capacity_broker.adapters.dynamodb_memory import PREFIX, MemoryTable, decode, encode, item_id
from capacity_broker.domain.memory import (
    DECISION_WINDOW,
    HISTORY_SECONDS,
    HOUR,
    Hint,
    MemoryKey,
    Observation,
    Seen,
    Tally,
    hour_of,
)
from capacity_broker.logic.memory import CapacityMemory

REGION = "us-east-1"
T0 = 1_763_719_200.0 + 600  # ten minutes into an hour
AZ1 = MemoryKey(REGION, "use1-az1", "g6.xlarge")
AZ2 = MemoryKey(REGION, "use1-az2", "g6.xlarge")


class Clock:
    def __init__(self, at: float = T0) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def memory_with(table: str | None, clock: Clock) -> CapacityMemory:
    return CapacityMemory(MemoryTable(table, REGION, Clients()) if table else None, wall=clock)


# -- the container --------------------------------------------------------------------------
def test_a_container_remembers_and_forgets_for_decisions_after_the_window() -> None:
    clock = Clock()
    memory = memory_with(None, clock)
    memory.remember(
        [Observation(AZ1, T0 - 5, Seen.AVAILABLE), Observation(AZ2, T0 - 5, Seen.INSUFFICIENT)]
    )
    view = memory.recall(REGION, ["g6.xlarge"]).view()
    assert view.hints([AZ1, AZ2]) == [Hint.AVAILABLE, Hint.OUT]
    clock.at = T0 + DECISION_WINDOW
    assert memory.recall(REGION, ["g6.xlarge"]).view().hints([AZ1, AZ2]) == [Hint.UNKNOWN] * 2
    # ... while history keeps it.
    assert [row.available for row in memory.history()] == [1, 0]


def test_a_decision_early_in_an_hour_sees_the_end_of_the_last_one() -> None:
    clock = Clock(hour_of(T0) + 30)
    memory = memory_with(None, clock)
    memory.remember([Observation(AZ1, hour_of(T0) - 60, Seen.INSUFFICIENT)])
    assert memory.recall(REGION, ["g6.xlarge"]).view().hint(AZ1) is Hint.OUT


def test_a_container_prunes_what_history_no_longer_keeps() -> None:
    clock = Clock()
    memory = memory_with(None, clock)
    memory.remember([Observation(AZ1, T0, Seen.AVAILABLE)])
    clock.at = T0 + HISTORY_SECONDS + 2 * HOUR
    memory.remember([Observation(AZ2, clock.at, Seen.AVAILABLE)])
    assert [row.availability_zone_id for row in memory.history()] == ["use1-az2"]


def test_history_rows_carry_every_contract_field() -> None:
    clock = Clock()
    memory = memory_with(None, clock)
    memory.remember(
        [
            Observation(AZ1, T0 - 20, Seen.INSUFFICIENT, latency=0.1),
            Observation(AZ1, T0 - 10, Seen.AVAILABLE, latency=0.1),
            Observation(AZ1, T0 - 9, reservation_seconds=0.25),
        ]
    )
    (row,) = memory.history(instance_types=["g6.xlarge"], regions=[REGION], since=T0 - 3600)
    as_json = row.to_json_dict()
    assert {
        "region",
        "availability_zone_id",
        "instance_type",
        "attempts",
        "available",
        "insufficient",
        "success_rate",
        "last_available",
        "last_insufficient",
        "reservation_seconds",
    } <= set(as_json)
    assert (as_json["attempts"], as_json["success_rate"]) == (2, 0.5)
    assert as_json["last_available"] == "2025-11-21T10:09:50Z"
    assert as_json["reservation_seconds"] == 0.25


# -- the state table ------------------------------------------------------------------------
def test_items_are_the_memorys_own_in_the_powertools_schema(table: str) -> None:
    clock = Clock()
    memory = memory_with(table, clock)
    memory.remember(
        [
            Observation(AZ1, T0, Seen.AVAILABLE, latency=0.12),
            Observation(AZ1, T0, reservation_seconds=0.2),
            Observation(AZ2, T0, Seen.QUOTA, latency=0.1, carried=2),
        ]
    )
    assert memory.flush(timeout=10)
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=table)["Items"]
    (item,) = items
    assert item["id"]["S"] == item_id(REGION, "g6.xlarge", hour_of(T0))
    assert item["id"]["S"].startswith(PREFIX)
    assert not item["id"]["S"].startswith("capacity-broker.")  # Powertools' record ids
    assert int(item["expiration"]["N"]) == hour_of(T0) + HOUR + HISTORY_SECONDS
    assert item["n#available#use1-az1"]["N"] == "1"
    assert item["rs#use1-az1"]["N"] == "0.2"
    assert (item["quota_carried"]["N"], item["quota_at"]["N"]) == ("2", str(int(T0)))


def test_another_container_reads_what_this_one_wrote(table: str) -> None:
    clock = Clock()
    writer = memory_with(table, clock)
    writer.remember([Observation(AZ1, T0 - 5, Seen.INSUFFICIENT, latency=0.8)] * 20)
    writer.flush(timeout=10)
    reader = memory_with(table, clock)  # a fresh container: nothing of its own
    view = reader.recall(REGION, ["g6.xlarge"]).view(wait=10)
    assert view.hint(AZ1) is Hint.OUT
    assert view.hedge_delay() == 1.0  # every container's latencies, from the table


def test_the_container_and_the_table_merge_by_the_latest_answer(table: str) -> None:
    clock = Clock()
    other = memory_with(table, clock)
    other.remember([Observation(AZ1, T0 - 5, Seen.AVAILABLE)])
    other.flush(timeout=10)
    this = memory_with(None, clock)
    this.remember([Observation(AZ1, T0 - 50, Seen.INSUFFICIENT)])
    this.table = MemoryTable(table, REGION, Clients())  # its own fact never reached the table
    # Before the table ever answered, the container's own memory decides alone.
    first = this.recall(REGION, ["g6.xlarge"])
    first.table = None
    assert first.view().hint(AZ1) is Hint.OUT
    recall = this.recall(REGION, ["g6.xlarge"])
    assert recall.view(wait=10).hint(AZ1) is Hint.AVAILABLE  # the table's is later
    # Its next request decides before that request's read arrives (a warm container makes no
    # look-up the read could overlap): with the table's previous answer, not the container's
    # alone.
    pending = this.recall(REGION, ["g6.xlarge"])
    pending.table = None
    assert pending.view().hint(AZ1) is Hint.AVAILABLE


def test_facts_learnt_after_the_decision_ride_with_the_next_write(table: str) -> None:
    clock = Clock()
    memory = memory_with(table, clock)
    memory.remember([Observation(AZ1, T0, Seen.AVAILABLE)])  # at the decision: written now
    memory.remember([Observation(AZ1, T0, reservation_seconds=0.1)], write=False)
    assert memory.flush(timeout=10)
    assert memory.unwritten
    reader = memory_with(table, clock)
    assert [r.reservation_seconds for r in reader.history()] == [0.0]
    # The container's next request: its recall sends them, beside its read.
    memory.recall(REGION, ["g6.xlarge"])
    assert memory.flush(timeout=10)
    assert not memory.unwritten
    assert [(r.available, r.reservation_seconds) for r in reader.history()] == [(1, 0.1)]
    # A process about to end writes them at once.
    memory.remember([Observation(AZ2, T0, reservation_seconds=0.2)], write=False)
    assert memory.flush(timeout=10, everything=True)
    assert [r.reservation_seconds for r in reader.history()] == [0.1, 0.2]


def test_a_table_that_cannot_be_read_leaves_the_container_memory(emu: Any) -> None:
    clock = Clock()
    memory = memory_with("no-such-table", clock)
    memory.remember([Observation(AZ1, T0 - 5, Seen.AVAILABLE)])
    assert memory.flush(timeout=10)  # the write failed, logged; nothing raised
    assert memory.recall(REGION, ["g6.xlarge"]).view(wait=10).hint(AZ1) is Hint.AVAILABLE


def test_history_reads_every_containers_memory_by_key_or_by_scan(table: str) -> None:
    clock = Clock()
    for at, key in ((T0 - 2 * HOUR, AZ1), (T0, AZ1), (T0, AZ2)):
        memory = memory_with(table, clock)
        memory.remember([Observation(key, at, Seen.AVAILABLE), Observation(key, at, Seen.QUOTA)])
        memory.flush(timeout=10)
    reader = memory_with(table, clock)
    keyed = reader.history(instance_types=["g6.xlarge"], regions=[REGION])
    scanned = reader.history()
    assert keyed == scanned
    assert [(r.availability_zone_id, r.attempts, r.available) for r in scanned] == [
        ("use1-az1", 4, 2),
        ("use1-az2", 2, 1),
    ]
    recent = reader.history(since=T0 - HOUR)
    assert [(r.availability_zone_id, r.available) for r in recent] == [
        ("use1-az1", 1),
        ("use1-az2", 1),
    ]


def test_items_round_trip_through_their_encoding() -> None:
    tally = Tally(REGION, "p5.48xlarge", hour_of(T0))
    tally.counts = {("use1-az1", Seen.AVAILABLE): 3, ("use1-az4", Seen.UNSUPPORTED): 1}
    tally.last = {("use1-az1", Seen.AVAILABLE): T0 + 0.123456}
    tally.reservation_seconds = {"use1-az1": 1.5}
    tally.latency = {3: 7}
    tally.quota_at, tally.quota_carried = T0, 1
    update = encode(tally, 42)
    item = {"id": update["Key"]["id"]}
    for placeholder, name in update["ExpressionAttributeNames"].items():
        item[name] = update["ExpressionAttributeValues"][":v" + placeholder[2:]]
    decoded = decode(item)
    assert decoded is not None
    assert (decoded.counts, decoded.last, decoded.reservation_seconds) == (
        tally.counts,
        tally.last,
        tally.reservation_seconds,
    )
    assert (decoded.latency, decoded.quota_at, decoded.quota_carried) == ({3: 7}, T0, 1)
    assert decode({"id": {"S": "capacity-broker.reserve#abc"}, "status": {"S": "x"}}) is None


def test_concurrent_containers_lose_no_update(table: str) -> None:
    clock = Clock()
    containers, rounds = 6, 15

    def container(number: int) -> None:
        memory = memory_with(table, clock)
        key = AZ1 if number % 2 else AZ2
        for _ in range(rounds):
            memory.remember(
                [
                    Observation(key, T0, Seen.AVAILABLE),
                    Observation(key, T0, reservation_seconds=0.5),
                ]
            )
        assert memory.flush(timeout=30)

    threads = [threading.Thread(target=container, args=(n,)) for n in range(containers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = memory_with(table, clock).history()
    assert [(r.available, r.reservation_seconds) for r in rows] == [
        (containers // 2 * rounds, containers // 2 * rounds * 0.5)
    ] * 2
