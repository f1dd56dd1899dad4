"""The capacity memory's items come from a shared table (issue 19): read defensively, every value
bounded, and the rules that decide on them total, whatever reaches them."""

from __future__ import annotations

import math
from typing import Any

import boto3
import pytest
from capacity_broker.adapters.aws import Clients
from capacity_broker.adapters.dynamodb_memory import MemoryTable, decode, encode, item_id
from capacity_broker.domain.memory import (
    CLOCK_SKEW,
    DECISION_WINDOW,
    HEDGE_CEILING,
    HEDGE_FLOOR,
    HOUR,
    LATENCY_BOUNDS,
    MAX_COUNT,
    MAX_SECONDS,
    Hint,
    MemoryKey,
    MemoryView,
    Observation,
    Seen,
    Tally,
    fold,
    hedge_delay,
    hour_of,
)
from capacity_broker.logic.memory import CapacityMemory
from hypothesis import given
from hypothesis import strategies as st

REGION = "us-east-1"
TYPE = "g6.xlarge"
NOW = 1_763_719_200.0 + 600  # ten minutes into an hour
HOUR_NOW = hour_of(NOW)
AZ1 = MemoryKey(REGION, "use1-az1", TYPE)


def item(**facts: Any) -> dict[str, Any]:
    return {
        "id": {"S": item_id(REGION, TYPE, HOUR_NOW)},
        "region": {"S": REGION},
        "instance_type": {"S": TYPE},
        "hour": {"N": str(HOUR_NOW)},
        **facts,
    }


# -- the rules, total ---------------------------------------------------------------------------
@given(st.dictionaries(st.integers(), st.integers()))
def test_the_hedge_delay_is_total(latency: dict[int, int]) -> None:
    assert HEDGE_FLOOR <= hedge_delay(latency) <= HEDGE_CEILING


def test_a_bucket_outside_the_histogram_says_nothing() -> None:
    assert hedge_delay({-100: 5}) == HEDGE_CEILING
    assert hedge_delay({len(LATENCY_BOUNDS): 5, 0: 1}) == HEDGE_FLOOR


_ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)


@given(
    last=st.dictionaries(
        st.tuples(st.sampled_from(["use1-az1"]), st.sampled_from(list(Seen))), _ANY_FLOAT
    ),
    latency=st.dictionaries(st.integers(), st.integers()),
    quota_at=st.one_of(st.none(), _ANY_FLOAT),
    carried=st.one_of(st.none(), st.integers()),
)
def test_a_view_decides_on_anything_without_failing(
    last: dict[tuple[str, Seen], float],
    latency: dict[int, int],
    quota_at: float | None,
    carried: int | None,
) -> None:
    tally = Tally(REGION, TYPE, HOUR_NOW, last=last, latency=latency)
    tally.quota_at, tally.quota_carried = quota_at, carried
    view = MemoryView([tally], moment=NOW)
    assert view.hint(AZ1) in set(Hint)
    assert HEDGE_FLOOR <= view.hedge_delay() <= HEDGE_CEILING
    cap = view.quota_cap([AZ1])
    assert cap is None or cap >= 1


def test_a_time_far_in_the_future_is_not_fresh() -> None:
    def hint(at: float) -> Hint:
        tally = Tally(REGION, TYPE, HOUR_NOW, last={("use1-az1", Seen.AVAILABLE): at})
        return MemoryView([tally], moment=NOW).hint(AZ1)

    assert hint(NOW - 5) is Hint.AVAILABLE
    assert hint(NOW + CLOCK_SKEW) is Hint.AVAILABLE  # another container's clock, a bit ahead
    assert hint(NOW + CLOCK_SKEW + 1) is Hint.UNKNOWN
    assert hint(NOW + 10 * 365 * 86_400) is Hint.UNKNOWN
    assert hint(NOW - DECISION_WINDOW - 1) is Hint.UNKNOWN


# -- the reader -----------------------------------------------------------------------------------
def test_a_far_future_time_in_the_table_is_not_fresh(table: str) -> None:
    far = NOW + 10 * 365 * 86_400
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=table,
        Item=item(**{"t#available#use1-az1": {"N": str(far)}, "n#available#use1-az1": {"N": "1"}}),
    )
    memory = CapacityMemory(MemoryTable(table, REGION, Clients()), wall=lambda: NOW)
    view = memory.recall(REGION, [TYPE]).view(wait=10.0)
    assert view.hint(AZ1) is Hint.UNKNOWN
    (row,) = memory.history()
    assert (row.available, row.last_available) == (1, None)


def test_what_is_not_sound_is_left_out_and_said() -> None:
    problems: list[str] = []
    tally = decode(
        item(
            **{
                "lat#-100": {"N": "5"},
                "lat#2": {"N": "3"},
                "n#available#use1-az1": {"N": "2"},
                "n#insufficient#use1-az1": {"N": "-1"},
                "n#quota#use1-az1": {"N": "1e20"},
                "n#bogus#use1-az1": {"N": "1"},
                "rs#use1-az1": {"S": "12"},
                "t#available#use1-az1": {"N": "1e20"},
                "t#insufficient#use1-az1": {"N": str(NOW - 5)},
                "quota_at": {"N": str(HOUR_NOW - 1)},  # not within its hour
                "quota_carried": {"N": "0.5"},
            }
        ),
        NOW,
        problems,
    )
    assert tally is not None
    assert tally.latency == {2: 3}
    assert tally.counts == {("use1-az1", Seen.AVAILABLE): 2}
    assert tally.last == {("use1-az1", Seen.INSUFFICIENT): NOW - 5}
    assert (tally.reservation_seconds, tally.quota_at, tally.quota_carried) == ({}, None, None)
    left_out = " ".join(problems)
    for name in ("lat#-100", "n#insufficient", "n#quota", "n#bogus", "rs#", "t#available"):
        assert name in left_out, (name, problems)
    assert len(problems) == 8


@pytest.mark.parametrize(
    "envelope",
    [
        {"region": {"N": "1"}},
        {"region": {"S": "us-west-2"}},  # not what the id says
        {"instance_type": {"S": "g6.xlarge*"}},
        {"hour": {"N": str(HOUR_NOW + 1)}},  # not the id's hour
        {"hour": {"N": str(HOUR_NOW + 1800)}},
        {"hour": {"N": "1e20"}},
        {"hour": {"S": str(HOUR_NOW)}},
        {"hour": {"NULL": True}},
        {"id": {"S": item_id(REGION, TYPE, HOUR_NOW + 100 * HOUR)}, "hour": {"N": "0"}},
    ],
)
def test_an_item_whose_slot_is_not_sound_is_skipped(envelope: dict[str, Any]) -> None:
    problems: list[str] = []
    assert (
        decode({**item(**{"n#available#use1-az1": {"N": "2"}}), **envelope}, NOW, problems) is None
    )
    assert len(problems) == 1 and problems[0].startswith("skipped")


def test_every_time_a_broker_writes_reads_back() -> None:
    # The table keeps microseconds: a time at the very end of its hour rounds to the next.
    last = math.nextafter(HOUR_NOW + HOUR, 0)
    assert hour_of(last) == HOUR_NOW
    tally = fold([Observation(AZ1, last, Seen.AVAILABLE), Observation(AZ1, HOUR_NOW, Seen.QUOTA)])
    [written] = tally
    problems: list[str] = []
    read = decode(
        {"id": {"S": item_id(REGION, TYPE, HOUR_NOW)}, **_attributes(written)}, NOW + HOUR, problems
    )
    assert problems == []
    assert read is not None and read.last[("use1-az1", Seen.AVAILABLE)] == HOUR_NOW + HOUR


def _attributes(tally: Tally) -> dict[str, Any]:
    """The item ``encode`` makes of ``tally`` (what ``UpdateItem`` would leave)."""
    update = encode(tally, expiration=0)
    names, values = update["ExpressionAttributeNames"], update["ExpressionAttributeValues"]
    return {names[f"#a{i}"]: values[f":v{i}"] for i in range(len(names))}


def test_an_item_of_the_future_is_skipped() -> None:
    future = HOUR_NOW + 2 * HOUR
    found = item(**{"n#available#use1-az1": {"N": "2"}})
    found.update(id={"S": item_id(REGION, TYPE, future)}, hour={"N": str(future)})
    assert decode(found, NOW) is None
    assert decode(found, future + 10) is not None


def test_an_item_missing_its_slot_is_skipped() -> None:
    for key in ("region", "instance_type", "hour"):
        broken = item()
        del broken[key]
        assert decode(broken, NOW) is None


_NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers().map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "", "x", "1_0", "0x10", " 5", "1" * 500]),
)
_VALUES = st.one_of(
    _NUMBERS.map(lambda n: {"N": n}),
    _NUMBERS.map(lambda n: {"S": n}),
    st.sampled_from([{"BOOL": True}, {"NULL": True}, {"L": []}, {"M": {}}, {}, None, 5, "N"]),
)
_NAMES = st.one_of(
    st.builds(
        lambda head, seen, az: f"{head}#{seen}#{az}",
        st.sampled_from(["n", "t"]),
        st.sampled_from([*(s.value for s in Seen), "x", ""]),
        st.sampled_from(["use1-az1", "", "a b", "é", "x" * 100]),
    ),
    st.text(max_size=8).map(lambda b: f"lat#{b}"),
    st.integers().map(lambda b: f"lat#{b}"),
    st.sampled_from(["rs#use1-az1", "rs#", "quota_at", "quota_carried", "expiration", "zz"]),
    st.text(max_size=10),
)


@given(
    facts=st.dictionaries(_NAMES, _VALUES, max_size=15),
    envelope=st.dictionaries(st.sampled_from(["region", "instance_type", "hour"]), _VALUES),
)
def test_any_item_decodes_within_bounds_or_not_at_all(
    facts: dict[str, Any], envelope: dict[str, Any]
) -> None:
    tally = decode({**facts, **item(), **envelope}, NOW)
    if tally is None:
        return
    assert tally.hour <= NOW + CLOCK_SKEW
    assert all(0 <= n <= MAX_COUNT for n in [*tally.counts.values(), *tally.latency.values()])
    assert all(0 <= b < len(LATENCY_BOUNDS) for b in tally.latency)
    assert all(0 <= s <= MAX_SECONDS for s in tally.reservation_seconds.values())
    moments = [*tally.last.values(), *([tally.quota_at] if tally.quota_at is not None else [])]
    assert all(tally.hour <= at <= NOW + CLOCK_SKEW and math.isfinite(at) for at in moments)
    assert tally.quota_carried is None or 0 <= tally.quota_carried <= MAX_COUNT
