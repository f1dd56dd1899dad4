"""The grouped probes' meeting in the state table when DynamoDB's answers are lost
(``adapters.dynamodb_group``): a write whose answer is lost is retried by the adapter's
RetryPolicy, and a retry must neither leave a group without its leader nor add a member twice;
a group once answered stops being named, so a lone probe after it pays its two calls only."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from capacity_broker.adapters.aws import RetryPolicy
from capacity_broker.adapters.dynamodb_group import GroupTable, Published, key_id
from capacity_broker.domain.group import GroupKey, MemberAnswer, Role, Verdict
from capacity_broker.logic import group as group_logic
from capacity_broker.logic.group import Closed, Coalescer, TableMeeting

pytestmark = pytest.mark.integration

TABLE = "group-retries"
SUBNET = "subnet-0a00000000000e501"
KEY = GroupKey("us-east-1", "m7i.large", (SUBNET,), "Linux/UNIX", "default")
FAST = RetryPolicy(base=0.001, cap=0.001, max_attempts=3)


class Lossy:
    """A DynamoDB client whose answer to the first call ``lose`` picks is lost after the call
    took effect (a timeout on the way back)."""

    def __init__(self, real: Any, lose: Callable[[str, dict[str, Any]], bool]) -> None:
        self.real, self.lose, self.lost = real, lose, 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.real, name)

        def call(**params: Any) -> Any:
            answer = method(**params)
            if not self.lost and self.lose(name, params):
                self.lost += 1
                raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
            return answer

        return call


class Clients:
    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self, service: str, region: str) -> Any:
        return self._client


@pytest.fixture
def table(broker: Any) -> Any:
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return client


def meeting(client: Any, **table: Any) -> TableMeeting:
    """A meeting on ``client``, its table with the adapter's knobs ``table`` (``sleep``)."""
    return TableMeeting(
        GroupTable(TABLE, "us-east-1", Clients(client), retry=FAST, **table),  # type: ignore[arg-type]
        window=0.25,
        max_window=2.0,
        max_count=1000,
    )


def _pointer_write(name: str, p: dict[str, Any]) -> bool:
    return name == "update_item" and ":gid" in p.get("ExpressionAttributeValues", {})


def _group_item_write(name: str, p: dict[str, Any]) -> bool:
    return name == "update_item" and "#member" in p.get("UpdateExpression", "")


@pytest.mark.parametrize("lose", [_pointer_write, _group_item_write], ids=["pointer", "item"])
def test_a_leader_whose_write_answer_was_lost_still_leads(
    table: Any, lose: Callable[[str, dict[str, Any]], bool]
) -> None:
    """A leader's write took effect and its answer was lost: the adapter's retry fails its
    condition, and what the failed write hands back says it was this probe's own (the pointer
    names its group; the group item holds its place, named by its stamp), so it still leads,
    and the next arrival joins it. (Before stop 33 a lost group item's answer sent the leader
    alone: 4 mutating calls where its share of a group costs a fraction of one.)"""
    lossy = Lossy(table, lose)
    place = meeting(lossy)
    assert place.arrive(KEY, 1, "first", 1e12).role is Role.ALONE  # in flight: a burst
    second = place.arrive(KEY, 1, "second", 1e12)
    assert lossy.lost == 1
    assert second.role is Role.LEADER and second.arrival.position == 0
    third = place.arrive(KEY, 2, "third", 1e12)
    assert third.role is Role.MEMBER
    assert second.arrival.group is not None and third.arrival.group is not None
    assert third.arrival.group.group_id == second.arrival.group.group_id
    members = place.table.close(second.arrival.group.group_id, second.stamp)
    assert members.counts == (1, 2) and members.stamps == (second.stamp, third.stamp)


def test_a_member_whose_join_answer_was_lost_joins_once(table: Any) -> None:
    lossy = Lossy(table, lambda name, p: "#member" in p.get("UpdateExpression", ""))
    place = meeting(lossy)
    place.arrive(KEY, 1, "a", 1e12)
    leader = place.arrive(KEY, 1, "b", 1e12)
    member = place.arrive(KEY, 3, "c", 1e12)
    assert lossy.lost == 1
    assert leader.role is Role.LEADER
    assert member.role is Role.MEMBER
    members = place.table.close(leader.arrival.group.group_id, leader.stamp)  # type: ignore[union-attr]
    assert members.counts == (1, 3) and members.stamps == (leader.stamp, member.stamp)


def test_a_lone_probe_after_a_group_pays_two_calls(table: Any) -> None:
    place = meeting(table)
    first = place.arrive(KEY, 1, "a", 1e12)
    leader = place.arrive(KEY, 1, "b", 1e12)
    member = place.arrive(KEY, 1, "c", 1e12)
    assert (leader.role, member.role) == (Role.LEADER, Role.MEMBER)
    place.close(leader, wait=False)
    place.publish(leader, 2, None, [])  # (the kind's item stops naming the group)
    for seat in (first, leader, member):
        place.leave(seat)
    before = place.table.counts["calls"]
    lone = place.arrive(KEY, 1, "d", 1e12)
    place.leave(lone)
    assert lone.role is Role.ALONE
    assert place.table.counts["calls"] - before == 2


class HandsBack:
    """A DynamoDB client whose BatchWriteItem takes ``take`` items per call and hands the
    rest back (``UnprocessedItems``), as a throttled table does; ``times`` such answers at
    most."""

    def __init__(self, real: Any, times: int, take: int = 1) -> None:
        self.real, self.times, self.take, self.batches = real, times, take, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def batch_write_item(self, RequestItems: dict[str, Any]) -> Any:
        self.batches += 1
        ((table, writes),) = RequestItems.items()
        if self.times <= 0:
            return self.real.batch_write_item(RequestItems=RequestItems)
        self.times -= 1
        if writes[: self.take]:
            self.real.batch_write_item(RequestItems={table: writes[: self.take]})
        rest = writes[self.take :]
        return {"UnprocessedItems": {table: rest} if rest else {}}


def _group_of_five(place: TableMeeting) -> Any:
    seats = [place.arrive(KEY, 1, f"p{i}", 1e12) for i in range(6)]
    leader = seats[1]
    assert leader.role is Role.LEADER
    assert [s.role for s in seats[2:]] == [Role.MEMBER] * 4
    place.close(leader, wait=False)
    return leader, seats[2:]


def test_answers_dynamodb_hands_back_are_sent_again_after_growing_pauses(table: Any) -> None:
    slow = HandsBack(table, times=3)
    pauses: list[float] = []
    place = meeting(slow, sleep=pauses.append)
    leader, members = _group_of_five(place)
    place.publish(leader, 5, None, [])
    assert slow.batches == 4  # three answers handed back, the fourth took the rest
    assert len(pauses) == 3 and all(p >= 0 for p in pauses)
    # Full jitter under a ceiling that doubles: 0.05, 0.1, 0.2 s.
    assert all(p <= 0.05 * 2**i for i, p in enumerate(pauses))
    for member in members:
        found = place.table.answer(member.arrival.group.group_id, member.stamp, [])
        assert found is not None and found.answer is None  # every member told to go alone


def test_a_table_that_keeps_handing_answers_back_is_an_error(table: Any) -> None:
    from capacity_broker.adapters.aws import AwsError
    from capacity_broker.adapters.dynamodb_group import UNPROCESSED_TRIES

    slow = HandsBack(table, times=1000, take=0)
    pauses: list[float] = []
    place = meeting(slow, sleep=pauses.append)
    leader, _ = _group_of_five(place)
    with pytest.raises(AwsError, match="kept back"):
        place.publish(leader, 5, None, [])
    assert slow.batches == UNPROCESSED_TRIES
    assert len(pauses) == UNPROCESSED_TRIES - 1


def on_a_still_clock(client: Any, now: list[float]) -> TableMeeting:
    """A meeting whose clocks (wall and monotonic) are ``now[0]``, moved by the test only."""
    return TableMeeting(
        GroupTable(TABLE, "us-east-1", Clients(client), retry=FAST),  # type: ignore[arg-type]
        window=0.25,
        max_window=5.0,
        max_count=1000,
        monotonic=lambda: now[0],
        wall=lambda: now[0],
    )


def test_the_window_counts_from_the_group_s_opening(table: Any) -> None:
    """A leader whose look-ups took longer than the idle window, with nobody joined since
    it opened the group, closes it at once: one look for late joiners, no wait (the clock is
    the test's and stands still)."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    place.arrive(KEY, 1, "first", 1e12)
    leader = place.arrive(KEY, 1, "leader", 1e12)
    assert leader.role is Role.LEADER
    now[0] += 1.0  # its look-ups: past the idle window, inside the maximum
    before = place.table.counts["calls"]
    closed = place.close(leader)
    assert closed.counts == (1,)
    # One look at who joined last, and the close; nothing else (the kind's item is unpointed
    # with the answers: ``publish``).
    assert place.table.counts["calls"] - before == 2


def _a_slow_leader_closing_at(
    table: Any, monkeypatch: pytest.MonkeyPatch, moment: float
) -> tuple[TableMeeting, Any, list[float], list[float]]:
    """``_a_slow_leader`` (its group takes members until 105.0) whose close starts at
    ``moment``, with the meeting's real time the test's (its pauses move the clock): the
    meeting, the leader's seat, the clock, and the moments it looked at who joined last."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    leader = _a_slow_leader(place, now, 1e12)
    still = types.SimpleNamespace(
        monotonic=lambda: now[0], sleep=lambda pause: now.__setitem__(0, now[0] + pause)
    )
    monkeypatch.setattr(group_logic, "time", still)
    now[0] = moment
    looks: list[float] = []
    real_last_join = place.table.last_join

    def last_join(group_id: str) -> Any:
        looks.append(now[0])
        return real_last_join(group_id)

    place.table.last_join = last_join  # type: ignore[method-assign]
    return place, leader, now, looks


def test_a_leader_whose_look_would_land_past_the_last_moment_waits_it_out(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader whose own arrival took the table a second (three calls: a third of a second
    each) and that starts its close 0.2 s before the group's last moment reads nothing: the
    group stays open until that moment (a member may have joined since its opening, 4 s
    ago), and a look would answer after it. It waits that moment out on its clock, in
    slices, and closes: one call."""
    place, leader, now, looks = _a_slow_leader_closing_at(table, monkeypatch, 104.8)
    before = place.table.counts["calls"]
    closed = place.close(leader)
    assert closed.counts == (1,)
    assert looks == []
    assert now[0] == pytest.approx(105.0, abs=0.03)  # at the group's last moment, not before
    assert place.table.counts["calls"] - before == 1


def test_a_leader_with_time_for_a_look_still_reads_who_joined_last(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same slow leader starting its close 0.5 s before the last moment (more than a
    third of its arrival) reads who joined last, as any leader: a member's join may close the
    group later than the idle window from the opening."""
    place, leader, _, looks = _a_slow_leader_closing_at(table, monkeypatch, 104.5)
    place.close(leader)
    assert looks and looks[0] == pytest.approx(104.5)


def test_the_kind_s_item_names_a_closed_group_until_its_answers_are_out(table: Any) -> None:
    """The close writes one item (the group's); the kind's item stops naming the group when
    the leader publishes, its answers first: that write used to sit between the close and
    the leader's first ask. A publish that fails still unpoints."""
    for fails in (False, True):
        table.delete_item(TableName=TABLE, Key={"id": {"S": key_id(KEY)}})
        place = meeting(table)
        place.arrive(KEY, 1, "first", 1e12)
        leader = place.arrive(KEY, 1, "leader", 1e12)
        member = place.arrive(KEY, 1, "member", 1e12)
        assert (leader.role, member.role) == (Role.LEADER, Role.MEMBER)
        gid = leader.arrival.group.group_id  # type: ignore[union-attr]

        def pointer() -> Any:
            item = table.get_item(
                TableName=TABLE, Key={"id": {"S": key_id(KEY)}}, ConsistentRead=True
            )
            return item["Item"].get("gid", {}).get("S")

        place.close(leader, wait=False)
        assert pointer() == gid
        if fails:

            def refuse(*args: Any, **kwargs: Any) -> None:
                raise group_logic.AwsError("BatchWriteItem", "InternalServerError", "no")

            place.table.publish = refuse  # type: ignore[method-assign]
            with pytest.raises(group_logic.AwsError):
                place.publish(leader, 2, None, [])
        else:
            place.publish(leader, 2, None, [])
            found = place.table.answer(gid, member.stamp, [SUBNET])
            assert found is not None and found.answer is None
        assert pointer() is None


def test_a_member_who_joined_a_moment_ago_is_waited_for(table: Any) -> None:
    """Past the idle window counted from the opening, but a member joined a moment ago: the
    leader reads that before it decides, and keeps the group open for the window after that
    join (here until the test's clock passes it)."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    place.arrive(KEY, 1, "first", 1e12)
    leader = place.arrive(KEY, 1, "leader", 1e12)
    now[0] += 1.0
    member = place.arrive(KEY, 2, "member", 1e12)  # joins at 101.0
    assert member.role is Role.MEMBER
    looks: list[float] = []
    real_last_join = place.table.last_join

    def last_join(group_id: str) -> Any:
        looks.append(now[0])
        if len(looks) == 2:
            now[0] += 0.3  # the window after the member's join passes
        return real_last_join(group_id)

    place.table.last_join = last_join  # type: ignore[method-assign]
    closed = place.close(leader)
    assert closed.counts == (1, 2)
    assert len(looks) >= 2  # it waited past its first look: the member's join kept it open


def _a_slow_leader(place: TableMeeting, now: list[float], answer_by: float) -> Any:
    """A first probe in flight at 100.0, then a leader whose arrival took the table a
    second (it leads from 101.0), wanting its answer by ``answer_by``."""
    place.arrive(KEY, 1, "first", 1e12)
    real_arrive = place.table.arrive

    def slow_arrive(key: str, stamp: str, now_: float) -> Any:
        now[0] += 1.0  # the table took a second to answer
        return real_arrive(key, stamp, now_)

    place.table.arrive = slow_arrive  # type: ignore[method-assign,assignment]
    leader = place.arrive(KEY, 1, "leader", answer_by)
    place.table.arrive = real_arrive  # type: ignore[method-assign]
    assert leader.role is Role.LEADER and leader.took == pytest.approx(1.0)
    return leader


def test_the_idle_window_is_as_long_as_the_leader_s_own_arrival_took(table: Any) -> None:
    """When the table answers slowly (a class of hundreds arriving at once), a member's join
    is as slow as the leader's own arrival was: the leader waits that long after the last
    join, not the configured 0.25 s, so the next member lands in this group instead of
    opening another."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    leader = _a_slow_leader(place, now, 1e12)
    now[0] = 101.5
    assert place.arrive(KEY, 2, "second", 1e12).role is Role.MEMBER  # joins at 101.5
    now[0] = 101.9  # 0.4 s after that join: past 0.25 s, inside the leader's 1 s
    looks: list[float] = []
    real_last_join = place.table.last_join

    def last_join(group_id: str) -> Any:
        looks.append(now[0])
        if len(looks) == 1:
            now[0] = 102.2
            third = place.arrive(KEY, 3, "third", 1e12)  # a slow join lands meanwhile
            assert third.role is Role.MEMBER
        elif len(looks) == 2:
            now[0] = 103.3  # a second after the third's join
        return real_last_join(group_id)

    place.table.last_join = last_join  # type: ignore[method-assign]
    closed = place.close(leader)
    assert closed.counts == (1, 2, 3)
    # Kept open at 101.9 (0.4 s after the second's join) and at 102.2 (the third's join);
    # closed once the clock passed a whole second after that join.
    assert looks == [101.9, 102.2]


class Racing:
    """A meeting's table where other containers win the first ``losses`` races: each
    ``open`` of ours is preceded by a competitor's, and each ``join`` of ours finds the group
    closed (its leader closed it between our read and our join)."""

    def __init__(self, table: GroupTable, losses: int) -> None:
        self.table, self.losses = table, losses
        self.opened: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)

    def join(self, *args: Any, **kwargs: Any) -> bool:
        if self.losses > 0:
            return False
        return self.table.join(*args, **kwargs)

    def open(self, key: str, group_id: str, count: int, *when: Any) -> Any:
        """``when``: answer-by, closes, now, the group replaced, the stamp (the meeting's)."""
        if self.losses > 0:
            self.losses -= 1
            rival = f"group-{len(self.opened):032x}"
            self.opened.append(rival)
            # A rival opens first, at the same moment, with a stamp of its own.
            assert self.table.open(key, rival, 1, *when[:4], f"{len(self.opened):032x}") is None
        return self.table.open(key, group_id, count, *when)


@pytest.mark.parametrize("losses", [1, 4])
def test_a_probe_that_loses_races_joins_the_winner_and_never_goes_alone(
    table: Any, losses: int
) -> None:
    """In a burst, a probe whose open lost to another container's joins the winner's group,
    told by the write that lost (no read of the table in between); a join that lost to a
    close is followed by another round. Four lost rounds in a row (a class of hundreds
    arriving at once) still end in a group, where three used to end alone (4 mutating
    calls of the account's 5 a second for that one desktop)."""
    place = meeting(table)
    place.arrive(KEY, 1, "first", 1e12)
    racing = Racing(place.table, losses)
    place.table = racing  # type: ignore[assignment]
    reads: list[str] = []
    table_get = racing.table._call

    def counted(operation: str, **params: Any) -> Any:
        if operation == "GetItem":
            reads.append(operation)
        return table_get(operation, **params)

    racing.table._call = counted  # type: ignore[method-assign]
    seat = place.arrive(KEY, 2, "late", 1e12)
    if losses == 1:
        # Its open lost once; the write that lost named the winner, which it joined.
        assert seat.role is Role.MEMBER and seat.arrival.group is not None
        assert seat.arrival.group.group_id == racing.opened[0]
        members = racing.table.close(racing.opened[0], f"{1:032x}")
        assert members.counts == (1, 2) and members.stamps[1] == seat.stamp
    else:
        assert seat.role in (Role.MEMBER, Role.LEADER)
    assert reads == []


def test_the_leader_knows_when_its_first_member_gives_up(table: Any) -> None:
    """Each member says, as it joins, the earliest it may give up on the group (bounded from
    its own arrival, as the group's close bounds them all): the leader asks EC2 until then,
    not until the looser bound from the close (a class whose arrivals took seconds had its
    leaders stop before their first create)."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    place.arrive(KEY, 1, "first", 1e12)
    leader = place.arrive(KEY, 1, "leader", 130.0)
    now[0] = 101.0
    # Both started at 100 with 30 s; m1 wants its answer by 115 (half its budget), m2 by 120.
    assert place.arrive(KEY, 1, "m1", 115.0).role is Role.MEMBER
    assert place.arrive(KEY, 1, "m2", 120.0).role is Role.MEMBER
    closed = place.close(leader, wait=False)
    assert closed.answer_by == pytest.approx(115.0)
    # m1 arrived at 101: it waits at least half of 115 - 101 after its answer-by (122); m2
    # later still; the leader's own is not counted (it waits for nobody).
    assert closed.wait_until == pytest.approx(122.0)
    forming = leader.arrival.group
    assert forming is not None and forming.closes_at == pytest.approx(105.0)
    coalescer = Coalescer(None, place, monotonic=lambda: 116.0)  # type: ignore[arg-type]
    # Until 119 (half of what is left to 122), where the bound from the close (105) said 120
    # for the first member and so 118.
    assert coalescer._asks_until(closed, forming) == pytest.approx(119.0)
    assert coalescer._asks_until(Closed(closed.counts, 115.0), forming) == pytest.approx(118.0)


@pytest.mark.parametrize(
    "members",
    [
        # Two versions back: the members in lists.
        {
            "counts": {"L": [{"N": "1"}]},
            "bys": {"L": [{"N": "130"}]},
            "stamps": {"L": [{"S": "a" * 32}]},
        },
        # One version back: each member an attribute of its own (``m<stamp>``), counted in n.
        {"n": {"N": "1"}, "m" + "a" * 32: {"L": [{"N": "1"}, {"N": "130"}, {"N": "130"}]}},
    ],
    ids=["lists", "attributes"],
)
def test_a_group_opened_by_an_older_version_is_not_joined(
    table: Any, members: dict[str, Any]
) -> None:
    """A group whose item an older version wrote (its members in lists, or each in an
    attribute of its own: members counted and no set of them) cannot be joined by this one,
    nor this one's by it: an arrival that finds one opens a group of its own in its place,
    and no member of either waits for a leader that cannot see it."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    place.arrive(KEY, 1, "first", 1e12)
    old = "group-" + "0" * 32
    written = {
        "id": {"S": f"group#{old}"},
        **members,
        "total": {"N": "1"},
        "last": {"N": "100"},
    }
    table.put_item(TableName=TABLE, Item=written)
    table.update_item(
        TableName=TABLE,
        Key={"id": {"S": key_id(KEY)}},
        UpdateExpression="SET gid = :g, closes = :c",
        ExpressionAttributeValues={":g": {"S": old}, ":c": {"N": "105"}},
    )
    seat = place.arrive(KEY, 1, "new", 130.0)
    assert seat.role is Role.LEADER
    assert seat.arrival.group is not None and seat.arrival.group.group_id != old
    item = table.get_item(TableName=TABLE, Key={"id": {"S": f"group#{old}"}})["Item"]
    assert item == written  # nothing of the new one was written in it


def test_an_older_version_s_join_is_refused_by_this_version_s_group(table: Any) -> None:
    """The version before this one joined on the condition that its own attribute and
    ``counts`` were absent; this version's group items carry ``counts`` (their format), so
    such a join fails and its member opens a group of its own, instead of adding a member
    this version's leader cannot read (its close would find the count wrong and answer no
    member). And this version's pointer says its format, which the older one ignores."""
    place = meeting(table)
    place.arrive(KEY, 1, "first", 1e12)
    leader = place.arrive(KEY, 1, "leader", 1e12)
    assert leader.arrival.group is not None
    gid = leader.arrival.group.group_id
    with pytest.raises(table.exceptions.ConditionalCheckFailedException):
        table.update_item(
            TableName=TABLE,
            Key={"id": {"S": f"group#{gid}"}},
            UpdateExpression="SET #n = #n + :one, #member = :entry",
            ConditionExpression=(
                "attribute_not_exists(#closed) AND attribute_not_exists(#member) "
                "AND attribute_not_exists(#counts)"
            ),
            ExpressionAttributeNames={
                "#n": "n",
                "#member": "m" + "b" * 32,
                "#closed": "closed",
                "#counts": "counts",
            },
            ExpressionAttributeValues={":one": {"N": "1"}, ":entry": {"L": [{"N": "1"}]}},
        )
    kind = table.get_item(TableName=TABLE, Key={"id": {"S": key_id(KEY)}})["Item"]
    assert kind["format"] == {"S": "members-set"} and kind["gid"] == {"S": gid}
    assert place.table.close(gid, leader.stamp).stamps == (leader.stamp,)


def test_a_member_looks_once_more_when_it_gives_up(table: Any) -> None:
    """The leader may publish during a member's last pause (a late leader's give-back ends
    just before its first member gives up): the member looks once more at its give-up and
    takes the answer instead of probing alone."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    place.arrive(KEY, 1, "first", 1e12)
    place.arrive(KEY, 1, "leader", 115.0)
    member = place.arrive(KEY, 1, "member", 115.0)
    assert member.role is Role.MEMBER
    won = MemberAnswer(Verdict.WON, 0, (), None, "cr-0123456789abcdef0", True, 1.0)
    looks: list[float] = []

    def answer(group_id: str, stamp: str, subnet_ids: Any) -> Published | None:
        looks.append(now[0])
        if len(looks) == 1:
            now[0] = 123.0  # the last pause ends at the give-up (115 + 15 / 2 = 122.5) ...
            return None
        return Published(won, 2, [])  # ... and the leader published meanwhile

    place.table.answer = answer  # type: ignore[method-assign,assignment]
    grouped = place.wait(member, 115.0, 130.0, [SUBNET])
    assert grouped is not None and grouped.answer == won
    assert looks == [100.0, 123.0]


def test_a_member_first_looks_when_its_leader_could_have_answered(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader closes the group no sooner than the window after the last join (this
    member's at the earliest): the member's first look for its answer comes then and a first
    pause later, not as it joins (each such look was a read of the table for nothing, made
    when a class's arrivals keep it busiest)."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    place.arrive(KEY, 1, "first", 1e12)
    place.arrive(KEY, 1, "leader", 1e12)
    now[0] = 100.1
    member = place.arrive(KEY, 1, "member", 130.0)  # joins at 100.1
    assert member.role is Role.MEMBER
    # The meeting's real time is the test's too: its pauses move the clock, and nothing of
    # this machine's speed bounds them.
    still = types.SimpleNamespace(
        monotonic=lambda: now[0], sleep=lambda pause: now.__setitem__(0, now[0] + pause)
    )
    monkeypatch.setattr(group_logic, "time", still)
    won = MemberAnswer(Verdict.WON, 0, (), None, "cr-0123456789abcdef0", True, 1.0)
    looks: list[float] = []

    def answer(group_id: str, stamp: str, subnet_ids: Any) -> Published | None:
        looks.append(now[0])
        return Published(won, 2, []) if len(looks) == 3 else None

    place.table.answer = answer  # type: ignore[method-assign,assignment]
    grouped = place.wait(member, 130.0, 160.0, [SUBNET])
    assert grouped is not None and grouped.answer == won
    # Join 100.1 + window 0.25 + first pause 0.2; then the pauses grow as before.
    assert looks == pytest.approx([100.55, 100.75, 101.05])


def test_a_pointer_to_no_group_sends_a_burst_alone_at_once(table: Any) -> None:
    """The kind's item names something that is not a group (the table is shared): no open can
    replace it without reading it, so an arrival in a burst goes alone after one try (it
    took 8 rounds of two writes each, and left 8 group items behind); it writes no group."""
    place = meeting(table)
    place.arrive(KEY, 1, "first", 1e12)
    table.update_item(
        TableName=TABLE,
        Key={"id": {"S": key_id(KEY)}},
        UpdateExpression="SET gid = :g, closes = :c",
        ExpressionAttributeValues={":g": {"S": "not-a-group"}, ":c": {"N": "99999999999"}},
    )
    before = place.table.counts["calls"]
    assert place.arrive(KEY, 1, "second", 1e12).role is Role.ALONE
    assert place.table.counts["calls"] - before == 2  # the arrival, the pointer


def test_a_stretched_window_leaves_the_leader_half_its_time_to_ask(table: Any) -> None:
    """The idle window stretched to the leader's slow arrival never runs past half the time
    left to the leader's answer-by when it starts to wait: in a class of 200 the groups
    closed at their answer-by, and the leaders, left no time to ask EC2, answered every
    member "alone". The configured window after the last join is still kept."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    leader = _a_slow_leader(place, now, 102.3)  # its answer-by: 102.3
    now[0] = 101.5
    assert place.arrive(KEY, 2, "second", 1e12).role is Role.MEMBER  # joins at 101.5
    now[0] = 101.9  # it starts to wait: half of what is left to 102.3 ends at 102.1
    looks: list[float] = []
    real_last_join = place.table.last_join

    def last_join(group_id: str) -> Any:
        looks.append(now[0])
        if len(looks) == 1:
            now[0] = 102.2  # past 102.1, inside the stretched window (until 102.5)
        elif len(looks) == 2:
            now[0] = 103.0
        return real_last_join(group_id)

    place.table.last_join = last_join  # type: ignore[method-assign]
    closed = place.close(leader)
    assert closed.counts == (1, 2)
    # Closed at 102.2, right after its first look: not kept open (and looked at again) until
    # the stretched window's end at 102.5.
    assert looks == [101.9]


def test_the_budget_is_told_of_a_burst_for_as_long_as_its_probes_may_ask_ec2(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An arrival that sees a burst tells the shared budget for as long as its probe may still
    ask EC2 (its deadline, twice its answer-by's distance), not for a fixed few seconds: under
    load a probe's first EC2 calls came seconds after its arrival, and a notice lapsed by then
    left its leases guessing the account's ledgers idle, and losing. A member whose group
    cannot answer it tells it again as it goes alone, for the rest of its deadline."""
    now = [100.0]
    place = on_a_still_clock(table, now)
    told: list[float] = []
    place.on_burst = told.append
    place.arrive(KEY, 1, "first", 115.0)
    assert told == []  # alone: nothing else alike in flight
    place.arrive(KEY, 1, "leader", 115.0)
    member = place.arrive(KEY, 1, "member", 115.0)
    assert member.role is Role.MEMBER
    assert told == [30.0, 30.0]  # (answer-by 15 s away: a deadline 30 s away)
    still = types.SimpleNamespace(
        monotonic=lambda: now[0], sleep=lambda pause: now.__setitem__(0, now[0] + pause)
    )
    monkeypatch.setattr(group_logic, "time", still)
    place.table.answer = lambda group_id, stamp, subnet_ids: None  # type: ignore[method-assign,assignment]
    assert place.wait(member, 115.0, 130.0, [SUBNET]) is None  # gives up at 122.5
    assert len(told) == 3 and told[2] == pytest.approx(130.0 - now[0]) and told[2] > 0
    # A member answered by its group tells nothing more.
    won = MemberAnswer(Verdict.WON, 0, (), None, "cr-0123456789abcdef0", True, 1.0)
    place.table.answer = lambda group_id, stamp, subnet_ids: Published(won, 2, [])  # type: ignore[method-assign,assignment]
    assert place.wait(member, 140.0, 160.0, [SUBNET]) is not None
    assert len(told) == 3
    # Each probe's leave ends its notice (``BudgetTable.calm``).
    calmed: list[str] = []
    place.on_calm = lambda: calmed.append("calm")
    place.leave(member)
    assert calmed == ["calm"]


class Recording:
    """A DynamoDB client that keeps every ``update_item`` it was asked and what it answered."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.updates: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def update_item(self, **params: Any) -> Any:
        answer = self.real.update_item(**params)
        self.updates.append((params, answer))
        return answer


def test_a_join_answers_nothing_back_however_big_the_group(table: Any) -> None:
    """A join adds the member's own attribute and reads nothing back: a join that answered
    the group's member lists (to learn its place) cost as much as the group was big, and a
    class of 200's joins took seconds each. The leader learns the order as it closes: itself,
    then the members as they joined."""
    recording = Recording(table)
    now = [100.0]
    place = on_a_still_clock(recording, now)
    place.arrive(KEY, 1, "first", 1e12)
    leader = place.arrive(KEY, 1, "leader", 1e12)
    members = []
    for n in range(30):
        now[0] += 0.01
        members.append(place.arrive(KEY, 1 + n % 3, f"m{n}", 1e12))
    assert [m.role for m in members] == [Role.MEMBER] * 30
    joins = [(p, a) for p, a in recording.updates if "#member" in p["UpdateExpression"]]
    assert len(joins) == 31  # the leader's own place, then its 30 members'
    assert all(p.get("ReturnValues", "NONE") == "NONE" and "Attributes" not in a for p, a in joins)
    closed = place.table.close(leader.arrival.group.group_id, leader.stamp)  # type: ignore[union-attr]
    assert closed.stamps == (leader.stamp, *(m.stamp for m in members))
    assert closed.counts == (1, *(1 + n % 3 for n in range(30)))


@pytest.mark.parametrize(
    "spoil",
    [
        "SET n = :two",  # a member counted that has no attribute
        "ADD members :bad SET n = :two",  # a member of no sound count
        "ADD members :junk SET n = :two",  # an entry that is not one
        "ADD members :text SET n = :two",  # a time written as text
        "ADD members :twice SET n = :three",  # a stamp twice
        "REMOVE n",
    ],
)
def test_a_group_item_that_is_not_sound_fails_its_close(table: Any, spoil: str) -> None:
    """The table is shared: a group item whose members do not add up is an error for its
    leader (its members then probe alone), never a group answered with made-up members."""
    from capacity_broker.adapters.aws import AwsError

    place = meeting(table)
    place.arrive(KEY, 1, "first", 1e12)
    leader = place.arrive(KEY, 1, "leader", 1e12)
    assert leader.arrival.group is not None
    stamp = "0" * 32
    # (Each spoiled set counted in ``n`` as its members would be: only the entries are wrong.)
    values = {
        ":two": {"N": "2"},
        ":three": {"N": "3"},
        ":bad": {"SS": [f'["{stamp}",0.5,1,1,1]']},
        ":junk": {"SS": ["not an entry"]},
        ":text": {"SS": [f'["{stamp}",1,"130",1,1]']},
        ":twice": {"SS": [f'["{stamp}",1,1,1,1]', f'["{stamp}",2,1,1,1]']},
    }
    table.update_item(
        TableName=TABLE,
        Key={"id": {"S": f"group#{leader.arrival.group.group_id}"}},
        UpdateExpression=spoil,
        **(
            {"ExpressionAttributeValues": {k: v for k, v in values.items() if k in spoil}}
            if ":" in spoil
            else {}
        ),
    )
    with pytest.raises(AwsError, match="not sound"):
        place.table.close(leader.arrival.group.group_id, leader.stamp)


@pytest.mark.parametrize("stamp", ["", "*", "A" * 32, "0" * 31, "0" * 32 + "#1"])
def test_a_stamp_that_is_not_one_is_refused(table: Any, stamp: str) -> None:
    """A member's stamp names its attribute and its answer's item: only an arrival's own
    stamp (32 hex digits) is taken, never a caller's value or a pattern."""
    group = GroupTable(TABLE, "us-east-1", Clients(table), retry=FAST)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stamp"):
        group.join("group-" + "0" * 32, 1, 1e12, 1000, 200, 100.0, stamp)
    with pytest.raises(ValueError, match="stamp"):
        group.answer("group-" + "0" * 32, stamp, [])


def test_members_that_join_before_their_leader_leave_it_its_place(table: Any) -> None:
    """The group's item is made by whichever of the leader and a member writes first, with the
    leader's place and instance count already counted: members who land before the leader's
    own place never take the room it needs, so the group holds at most its most members and
    instances (a member's answer from a group of more than the most is not believed, and every
    member would then probe alone)."""
    group = GroupTable(TABLE, "us-east-1", Clients(table), retry=FAST)  # type: ignore[arg-type]
    gid, leader = "group-" + "1" * 32, "a" * 32
    joins = {
        stamp: group.join(gid, count, 1e12, 5, 3, 100.0 + i, stamp, leader_count=3)
        for i, (stamp, count) in enumerate(
            [("b" * 32, 1), ("c" * 32, 1), ("d" * 32, 1), ("e" * 32, 3)]
        )
    }
    # 3 + 1 + 1 = 5 instances in 3 places: the fourth member finds no place, the fifth no room.
    assert joins == {"b" * 32: True, "c" * 32: True, "d" * 32: False, "e" * 32: False}
    assert group.open(key_id(KEY), gid, 3, 1e12, 1e12, 100.0, None, leader) is None
    members = group.close(gid, leader)
    assert members.stamps == (leader, "b" * 32, "c" * 32)
    assert members.counts == (3, 1, 1)
    group.unpoint(key_id(KEY), gid)
    kind = table.get_item(TableName=TABLE, Key={"id": {"S": key_id(KEY)}}).get("Item", {})
    assert not {"gid", "closes", "lead"} & set(kind)  # nothing names the closed group


class RefusesLeadersPlace:
    """A DynamoDB client that refuses, as throttled, every write of a leader's own place in
    its group (the join that keeps the place counted for it: ``if_not_exists`` and no ``+``)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def update_item(self, **params: Any) -> Any:
        expression = params.get("UpdateExpression", "")
        if "#member" in expression and "+ :one" not in expression:
            from botocore.exceptions import ClientError

            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "UpdateItem"
            )
        return self.real.update_item(**params)


def test_members_of_a_group_whose_leader_cannot_take_its_place_go_alone_at_once(
    table: Any,
) -> None:
    """The pointer is written before the leader's own place, so a member may join in between.
    When the leader's place cannot be written, the group is given up: closed (nobody joins
    it), each member that joined told to probe alone at once (it would otherwise wait for a
    leader that is not there, until three quarters of its budget are gone), and no longer
    named."""
    from capacity_broker.adapters.aws import AwsError

    group = GroupTable(TABLE, "us-east-1", Clients(RefusesLeadersPlace(table)), retry=FAST)  # type: ignore[arg-type]
    gid, leader, member = "group-" + "2" * 32, "a" * 32, "b" * 32
    assert group.join(gid, 1, 1e12, 1000, 200, 100.0, member)  # lands before the leader's
    with pytest.raises(AwsError, match="ThrottlingException"):
        group.open(key_id(KEY), gid, 1, 1e12, 1e12, 100.0, None, leader)
    told = group.answer(gid, member, [SUBNET])
    assert told is not None and told.answer is None  # "probe alone", published
    assert not group.join(gid, 1, 1e12, 1000, 200, 101.0, "c" * 32)  # closed
    kind = table.get_item(TableName=TABLE, Key={"id": {"S": key_id(KEY)}}).get("Item", {})
    assert "gid" not in kind
