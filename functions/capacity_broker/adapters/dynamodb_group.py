"""DynamoDB: where probes alike from different containers meet (grouped probes, contract v3).

A Lambda container serves one invocation at a time, so the desktops of a class that start
together arrive in different containers; they meet here, in the state table, under this
module's own prefix of the table's ids (``logic.group.TableMeeting`` runs the protocol)::

    group#<region>#<digest of the key>     one per kind of probe (``domain.group.GroupKey``)
        seen        the last arrival's stamp (a random token), removed when that probe leaves
        gid         the group taking members now (its id),
        closes      when it stops taking them (epoch seconds, the processes' wall clocks), and
        lead        its leader's instance count (its place is kept for it: see below)
        format      "members-set": the group's item is this version's (a pointer without it
                    names a group of an older version: not joined, replaced)
    group#<group id>                       one per group
        n           how many members it has, the leader counted from the start
        total       their instance counts summed, the leader's counted from the start
        members     a string set, one entry per member: a JSON list of its arrival's stamp,
                    its instance count, when it must have its answer, the earliest it may
                    give up on the group (how long its leader may ask EC2 for it,
                    ``domain.group.asks_until``) and when it joined (times in epoch seconds)
        counts      "members-set": this version's item. Older versions' joins require no
                    ``counts`` (two versions back it held the members' counts), so they never
                    add a member this version's leader cannot read, nor this one to theirs
        last        when the last member joined (the leader closes when nobody has for a while)
        closed      set by the leader when it starts asking EC2: nobody joins after
    group#<group id>#<stamp>               one per member but the leader: its answer
        answer      the member's answer (JSON, ``encode_answer``), or
        alone       true: the group could not answer; the member probes alone
    expiration  TTL on every item: an hour after it was written

Each step is one call on one small item: an arrival is one ``UpdateItem`` (and one more when
it leaves); joining, opening and closing a group are conditional ``UpdateItem`` calls, so two
containers never both lead one group and nobody joins a closed one; answers are written in
batches of 25 (``BatchWriteItem``) to one item per member, so a class of 200 does
not read one hot item. A join adds one string of its own to the group's set and answers
nothing back: the group's item grows with its members, and a join that answered the members'
lists (to learn its place) made each join cost as much as the group was big (a class of 200's
joins took seconds each). So the leader orders its members only when it closes the group,
and each member finds its answer under its own stamp. (A member was an attribute of its own,
four numbers in a list, before: a write to an item is checked and copied whole, attribute by
attribute, and moto's joins cost 16 ms of the table's CPU at 50 members and 29 ms at 200; one
set of strings is one attribute.) A group is opened by pointing its kind's
item at it first: of the arrivals that race to open one, the losers write nothing else (each
used to write a group item first, for nothing: 180 of them in a class of 200), and the group's
item is made by whichever of its leader and its members writes first, with the leader's place
and count already in its counters (so no member takes room the leader needs: a group never
holds more than its most members or instances). Every call is retried by the adapter's
``RetryPolicy`` within a short deadline; a table that fails raises ``AwsError`` and the caller
probes alone (advice, never a failure).

The table is shared, so what is read is checked (``decode_answer``): a member's answer that is
not sound (an unknown verdict or outcome, a subnet outside the member's list, a reservation id
that is not one) is dropped and the member probes alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domain import backoff
from ..domain.errors import Outcome
from ..domain.group import GroupKey, MemberAnswer, Seen, Verdict
from .aws import AwsError, Clients, RetryPolicy, call, failed_item
from .dynamodb_memory import _n
from .ec2 import Subnet

PREFIX = "group#"
EXPIRATION_SECONDS = 60 * 60
CALL_SECONDS = 1.0  # how long one step may take, its retries included
BATCH_WRITE = 25  # BatchWriteItem's limit per call
# A batch DynamoDB handed back (UnprocessedItems) is sent this many times at most, with
# jittered pauses under a ceiling from 50 ms doubling to 0.4 s (at most 1.15 s in all: the
# members are waiting for these answers).
UNPROCESSED_TRIES = 6
UNPROCESSED_PAUSE = (0.05, 0.4)
MAX_MEMBERS = 200  # probes in one group (its items stay small: a few KB)
_RESERVATION = re.compile(r"cr-[0-9a-f]{8,32}")
_GROUP_ID = re.compile(r"group-[0-9a-f]{32}")
_STAMP = re.compile(r"[0-9a-f]{32}")  # an arrival's stamp (``uuid4().hex``)
_CODE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
# The format of this version's group items, on them (``counts``) and on the pointers to them
# (``format``): a group is joined only by the version that can read its members.
FORMAT = "members-set"
_MAX_SECONDS = 24 * 60 * 60.0


def key_id(key: GroupKey) -> str:
    """The item of one kind of probe: the region in the clear, the rest as a digest (subnet
    lists are long, and ids are ids: nothing of the caller's becomes part of a pattern)."""
    canonical = json.dumps(
        [key.instance_type, list(key.subnet_ids), key.platform, key.tenancy], ensure_ascii=True
    )
    return f"{PREFIX}{key.region}#{hashlib.sha256(canonical.encode()).hexdigest()[:40]}"


def group_item(group_id: str) -> str:
    return f"{PREFIX}{group_id}"


def answer_item(group_id: str, stamp: str) -> str:
    return f"{PREFIX}{group_id}#{stamp}"


def new_stamp() -> str:
    """An arrival's stamp: its mark on its kind's item, its name in its group."""
    return uuid.uuid4().hex


def _stamp(stamp: str) -> str:
    if not _STAMP.fullmatch(stamp):
        raise ValueError(f"not an arrival's stamp: {stamp!r:.60}")
    return stamp


@dataclass(frozen=True)
class Lobby:
    """A kind of probe's item as an arrival found it."""

    seen: str | None  # the stamp of the last arrival still in flight (None: none)
    group_id: str | None  # the group taking members, if ``closes`` is still ahead
    closes: float
    leader_count: int = 1  # that group's leader's instance count


@dataclass(frozen=True)
class Members:
    """A closed group: its members' counts, answer-by and give-up times and stamps, the leader
    first, then the others in the order they joined."""

    counts: tuple[int, ...]
    bys: tuple[float, ...]
    ups: tuple[float, ...]
    stamps: tuple[str, ...]


@dataclass(frozen=True)
class Published:
    """What a member found: its answer (None when the group could not answer it), and how
    many probes the group answered."""

    answer: MemberAnswer | None
    size: int
    subnets: list[Subnet] = field(default_factory=list)


class GroupTable:
    """The meeting items of one state table (``table`` in ``region``); thread-safe."""

    def __init__(
        self,
        table: str,
        region: str,
        clients: Clients,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.table = table
        self.region = region
        self.clients = clients
        self.retry = retry or RetryPolicy(base=0.05, cap=0.25, max_attempts=3)
        self._monotonic = monotonic
        self._sleep = sleep
        self._rng = random.Random()
        self.counts = {"calls": 0}

    # -- arriving and leaving ---------------------------------------------------------------
    def arrive(self, key: str, stamp: str, now: float) -> Lobby:
        """Mark an arrival (``stamp``): what the item held before it."""
        answer = self._call(
            "UpdateItem",
            Key={"id": {"S": key}},
            UpdateExpression="SET #seen = :stamp, #exp = :exp",
            ExpressionAttributeNames=_names("seen", "exp"),
            ExpressionAttributeValues={":stamp": {"S": stamp}, ":exp": _expiration(now)},
            ReturnValues="ALL_OLD",
        )
        return _lobby(answer.get("Attributes"))

    def leave(self, key: str, stamp: str) -> None:
        """This probe is answered: the next one alike is alone, unless another arrived since."""
        try:
            self._call(
                "UpdateItem",
                Key={"id": {"S": key}},
                UpdateExpression="REMOVE #seen",
                ConditionExpression="#seen = :stamp",
                ExpressionAttributeNames=_names("seen"),
                ExpressionAttributeValues={":stamp": {"S": stamp}},
            )
        except AwsError as error:
            if error.code != "ConditionalCheckFailedException":
                raise

    # -- groups -----------------------------------------------------------------------------
    def open(
        self,
        key: str,
        group_id: str,
        count: int,
        answer_by: float,
        closes: float,
        now: float,
        replacing: str | None,
        stamp: str,
        up: float | None = None,
    ) -> Lobby | None:
        """Open a group led by this probe (``stamp``): point the kind's item at it, unless
        another container opened one since ``replacing`` was read, then join it first. None:
        opened; else the kind's item as the failed write found it (who opened the group that
        won: the probe joins it without reading the item again). A pointer write whose answer
        was lost and whose retry then failed its condition is told apart by the item it
        returns (this group's id: it was this write). A group this probe cannot lead after
        its pointer may have been written is given up (``_give_up``) before the error is
        raised: members may have joined it meanwhile."""
        _stamp(stamp)
        values: dict[str, Any] = {
            ":gid": {"S": group_id},
            ":closes": _n(closes),
            ":lead": _n(count),
            ":format": {"S": FORMAT},
            ":exp": _expiration(now),
        }
        if replacing is None:
            condition = "attribute_not_exists(#gid)"
        else:
            condition = "attribute_not_exists(#gid) OR #gid = :was"
            values[":was"] = {"S": replacing}
        try:
            self._call(
                "UpdateItem",
                Key={"id": {"S": key}},
                UpdateExpression=(
                    "SET #gid = :gid, #closes = :closes, #lead = :lead, #format = :format, "
                    "#exp = :exp"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames=_names("gid", "closes", "lead", "format", "exp"),
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except AwsError as error:
            if error.code != "ConditionalCheckFailedException":
                self._give_up(key, group_id, stamp, now)  # (the write may have landed)
                raise
            found = failed_item(error) or {}
            if _text(found, "gid") != group_id:
                return _lobby(found)
        try:
            # The leader's own place: no room to check (a group is opened for its leader).
            if not self._join(group_id, count, answer_by, up, now, stamp, count, room=None):
                raise AwsError("UpdateItem", "GroupClosed", "the new group was closed at once")
        except AwsError:
            self._give_up(key, group_id, stamp, now)
            raise
        return None

    def _give_up(self, key: str, group_id: str, leader: str, now: float) -> None:
        """A group its opener cannot lead (its own place could not be written, or its
        pointer's write failed after it may have landed): closed, so nobody joins it; every
        member that joined meanwhile told to probe alone at once (it would otherwise wait
        for a leader that is not there, until three quarters of its budget are gone); and no
        longer named. Each step as far as the table lets it (what fails is left to the
        members' own clocks and the items' expiry)."""
        found: dict[str, Any] = {}
        with contextlib.suppress(AwsError):
            found = (
                self._call(
                    "UpdateItem",
                    Key={"id": {"S": group_item(group_id)}},
                    UpdateExpression="SET #closed = :yes, #exp = :exp",
                    ExpressionAttributeNames=_names("closed", "exp"),
                    ExpressionAttributeValues={":yes": {"BOOL": True}, ":exp": _expiration(now)},
                    ReturnValues="ALL_NEW",
                ).get("Attributes")
                or {}
            )
        joined = [stamp for stamp in _entries(found, strict=False) if stamp != leader]
        if joined:
            with contextlib.suppress(AwsError):
                self.publish(group_id, [None] * (1 + len(joined)), (leader, *joined), [], now)
        with contextlib.suppress(AwsError):
            self.unpoint(key, group_id)

    def join(
        self,
        group_id: str,
        count: int,
        answer_by: float,
        max_count: int,
        max_members: int,
        now: float,
        stamp: str,
        up: float | None = None,
        leader_count: int = 1,
    ) -> bool:
        """Join the group as ``stamp``: False when it is closed or has no room left. ``up``:
        the earliest it may give up on the group (its answer-by when not said);
        ``leader_count``: its leader's instance count (``Lobby``: counted before the leader's
        own place may have landed)."""
        if leader_count + count > max_count:
            return False  # (no room beside the leader, whatever joined)
        return self._join(
            group_id, count, answer_by, up, now, stamp, leader_count, (max_count, max_members)
        )

    def _join(
        self,
        group_id: str,
        count: int,
        answer_by: float,
        up: float | None,
        now: float,
        stamp: str,
        leader_count: int,
        room: tuple[int, int] | None,
    ) -> bool:
        """Add this member's entry to the group's set (the same string on every try, so a
        retry of a join whose answer was lost finds the first one instead of joining twice),
        making the group's item if
        its leader has not yet, the leader's place and count counted from the start; within
        ``room`` (the most instances and members), if given: the leader's own join (no
        ``room``) takes the place kept for it and counts nothing more. An item an older
        version made (its members in lists, or each in an attribute of its own) is not
        joined: it has no ``counts`` of this version's ``FORMAT``."""
        entry = _entry(_stamp(stamp), count, answer_by, up, now)
        names = _names("n", "total", "closed", "last", "exp", "counts", "members")
        values = {
            ":one": _n(1),
            ":lead": _n(leader_count),
            ":count": _n(count),
            ":entry": {"SS": [entry]},
            ":this": {"S": entry},
            ":format": {"S": FORMAT},
            ":now": _n(now),
            ":exp": _expiration(now),
        }
        # A new item, or one of this version's (an older version's has members counted, or
        # their counts in a list, and no ``counts`` of this version's format).
        condition = (
            "attribute_not_exists(#closed) AND NOT contains(#members, :this) "
            "AND ((attribute_not_exists(#counts) AND attribute_not_exists(#n)) "
            "OR #counts = :format)"
        )
        if room is None:
            # The leader's place: kept in the counters by whoever made the item; the last join
            # stays a member's when one landed first.
            counted = "#n = if_not_exists(#n, :one), #total = if_not_exists(#total, :lead)"
            last = "if_not_exists(#last, :now)"
            del values[":count"]
        else:
            counted = (
                "#n = if_not_exists(#n, :one) + :one, "
                "#total = if_not_exists(#total, :lead) + :count"
            )
            last = ":now"
            most_count, most_members = room
            condition += " AND (attribute_not_exists(#n) OR (#total <= :room AND #n < :members))"
            values[":room"] = _n(most_count - count)
            values[":members"] = _n(most_members)
        try:
            self._call(
                "UpdateItem",
                Key={"id": {"S": group_item(group_id)}},
                UpdateExpression=(
                    f"SET {counted}, #last = {last}, #counts = :format, #exp = :exp "
                    "ADD #members :entry"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except AwsError as error:
            if error.code != "ConditionalCheckFailedException":
                raise
            # An earlier try of this very join may have landed (its answer lost).
            found = (failed_item(error) or {}).get("members")
            return isinstance(found, dict) and entry in (found.get("SS") or ())
        return True

    def unpoint(self, key: str, group_id: str) -> None:
        """The group is answered: the kind's item stops naming it (a lone probe after it then
        makes no join that would fail)."""
        try:
            self._call(
                "UpdateItem",
                Key={"id": {"S": key}},
                UpdateExpression="REMOVE #gid, #closes, #lead, #format",
                ConditionExpression="#gid = :gid",
                ExpressionAttributeNames=_names("gid", "closes", "lead", "format"),
                ExpressionAttributeValues={":gid": {"S": group_id}},
            )
        except AwsError as error:
            if error.code != "ConditionalCheckFailedException":
                raise

    def last_join(self, group_id: str) -> float | None:
        """When the group's last member joined (None: no such group)."""
        found = self._call(
            "GetItem",
            Key={"id": {"S": group_item(group_id)}},
            ConsistentRead=True,
            ProjectionExpression="#last",
            ExpressionAttributeNames=_names("last"),
        ).get("Item")
        try:
            return _number(found["last"]) if found else None
        except (KeyError, ValueError):
            return None

    def close(self, group_id: str, leader: str) -> Members:
        """The leader (its stamp) starts: nobody joins after this. The members, the leader
        first, then in the order they joined (by their clocks; the stamp breaks ties)."""
        answer = self._call(
            "UpdateItem",
            Key={"id": {"S": group_item(group_id)}},
            UpdateExpression="SET #closed = :yes",
            ExpressionAttributeNames=_names("closed"),
            ExpressionAttributeValues={":yes": {"BOOL": True}},
            ReturnValues="ALL_NEW",
        )
        item = answer.get("Attributes") or {}
        try:
            entries = _entries(item, strict=True)
            members = int(_number(item.get("n")))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise AwsError(
                "UpdateItem", "UnsoundItem", f"the group's item is not sound: {error}"
            ) from None
        if leader not in entries or members != len(entries):
            raise AwsError("UpdateItem", "UnsoundItem", "the group's item is not sound")
        others = sorted((s for s in entries if s != leader), key=lambda s: (entries[s][3], s))
        stamps = (leader, *others)
        return Members(
            tuple(entries[s][0] for s in stamps),
            tuple(entries[s][1] for s in stamps),
            tuple(entries[s][2] for s in stamps),
            stamps,
        )

    def publish(
        self,
        group_id: str,
        answers: Sequence[str | None],
        stamps: Sequence[str],
        subnets: Sequence[Subnet],
        now: float,
    ) -> None:
        """Every member's answer but the leader's (the first): the encoded answer, or None
        for "probe alone", under the member's stamp (``stamps``, in the answers' order); with
        the subnets the answers index (the leader's look-up)."""
        if len(stamps) != len(answers):
            raise ValueError(f"{len(answers)} answers for {len(stamps)} members")
        places = encode_subnets(subnets)
        items = []
        for position, (text, stamp) in enumerate(zip(answers, stamps, strict=True)):
            if position == 0:
                continue
            item: dict[str, Any] = {
                "id": {"S": answer_item(group_id, _stamp(stamp))},
                "size": _n(len(answers)),
                "expiration": _expiration(now),
            }
            if text is None:
                item["alone"] = {"BOOL": True}
            else:
                item["answer"] = {"S": text}
                item["subnets"] = {"S": places}
            items.append({"PutRequest": {"Item": item}})
        for start in range(0, len(items), BATCH_WRITE):
            batch = items[start : start + BATCH_WRITE]
            for tried in range(UNPROCESSED_TRIES):
                if tried:
                    # What DynamoDB did not take is handed back, most often because the table
                    # is being throttled: sent again after a pause that doubles (DynamoDB's
                    # BatchWriteItem reference: "use an exponential backoff algorithm").
                    self._sleep(backoff.delay(tried - 1, *UNPROCESSED_PAUSE, self._rng))
                answer = self._call(
                    "BatchWriteItem", RequestItems={self.table: batch}, table_in_request=True
                )
                batch = (answer.get("UnprocessedItems") or {}).get(self.table) or []
                if not batch:
                    break
            if batch:
                raise AwsError(
                    "BatchWriteItem", "UnprocessedItems", "DynamoDB kept back some answers"
                )

    def answer(self, group_id: str, stamp: str, subnet_ids: Sequence[str]) -> Published | None:
        """A member's (``stamp``) published answer (None: not yet). ``subnet_ids``: the
        member's own list (an answer about other subnets is not sound)."""
        found = self._call(
            "GetItem", Key={"id": {"S": answer_item(group_id, _stamp(stamp))}}, ConsistentRead=True
        ).get("Item")
        if not found:
            return None
        text, places = _text(found, "answer"), _text(found, "subnets")
        try:
            size = int(_number(found.get("size")))
        except ValueError:
            return Published(None, 0)
        subnets = decode_subnets(places, subnet_ids) if places is not None else None
        if not 2 <= size <= MAX_MEMBERS or text is None or subnets is None:
            return Published(None, 0)
        return Published(decode_answer(text, len(subnet_ids)), size, subnets)

    # -- one call ---------------------------------------------------------------------------
    def _call(self, operation: str, *, table_in_request: bool = False, **params: Any) -> Any:
        client = self.clients.client("dynamodb", self.region)
        method = getattr(client, _SNAKE[operation])
        if not table_in_request:
            params["TableName"] = self.table
        self.counts["calls"] += 1
        return self.retry.run(
            operation,
            lambda: call(operation, method, **params),
            deadline=self._monotonic() + CALL_SECONDS,
        )


_SNAKE = {
    "UpdateItem": "update_item",
    "GetItem": "get_item",
    "PutItem": "put_item",
    "BatchWriteItem": "batch_write_item",
}


def _names(*names: str) -> dict[str, str]:
    """Every attribute by a placeholder (DynamoDB reserves words such as ``total``)."""
    return {f"#{name}": ("expiration" if name == "exp" else name) for name in names}


def _entry(stamp: str, count: int, answer_by: float, up: float | None, now: float) -> str:
    """A member's entry in its group's set (see the module). The same join makes the same
    string: a retry whose first try landed finds it there."""
    return json.dumps(
        [stamp, count, answer_by, answer_by if up is None else up, now], separators=(",", ":")
    )


def _entries(item: dict[str, Any], *, strict: bool) -> dict[str, tuple[int, float, float, float]]:
    """The members a group's item holds, by stamp: (count, answer-by, give-up, joined).
    ``strict``: an entry that is not sound is a ``ValueError``; else it is skipped."""
    found = item.get("members", {"SS": []})
    texts = found.get("SS") if isinstance(found, dict) else None
    if not isinstance(texts, list):
        if strict:
            raise ValueError("the members are not a set of strings")
        return {}
    entries: dict[str, tuple[int, float, float, float]] = {}
    for text in texts:
        try:
            stamp, *numbers = json.loads(str(text)[:400])
            count, by, up, joined = (_finite(n) for n in numbers)
            if not isinstance(stamp, str) or not _STAMP.fullmatch(stamp) or stamp in entries:
                raise ValueError("a member's stamp is not one")
            if count != int(count) or count < 1:
                raise ValueError(f"a member's count is {count}")
        except (TypeError, ValueError, OverflowError, RecursionError) as error:
            if strict:
                raise ValueError(f"a member's entry is not sound: {error}") from None
            continue
        entries[stamp] = (int(count), by, up, joined)
    return entries


def _finite(value: Any) -> float:
    """A JSON number of an entry: an int or a float (not a bool, not a string), finite."""
    if type(value) not in (int, float):
        raise ValueError("not a number")
    number = float(value)  # (OverflowError: an int too big for one)
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def _expiration(now: float) -> dict[str, str]:
    return _n(math.ceil(now) + EXPIRATION_SECONDS)


def _text(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    text = value.get("S") if isinstance(value, dict) else None
    return text if isinstance(text, str) else None


def _number(value: Any) -> float:
    if not isinstance(value, dict) or not isinstance(value.get("N"), str):
        raise ValueError("not a number")
    number = float(value["N"][:64])
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def _lobby(item: dict[str, Any] | None) -> Lobby:
    item = item or {}
    seen = item.get("seen", {}).get("S") if isinstance(item.get("seen"), dict) else None
    gid = item.get("gid", {}).get("S") if isinstance(item.get("gid"), dict) else None
    try:
        closes = _number(item["closes"]) if "closes" in item else -math.inf
    except ValueError:
        closes = -math.inf  # a broken value: no group is open, the next one replaces it
    if _text(item, "format") != FORMAT:
        closes = -math.inf  # an older version's group: not joined, replaced (``FORMAT``)
    try:
        lead = _number(item["lead"]) if "lead" in item else 1.0
    except ValueError:
        lead = 0.0  # (a broken count: refused below)
    if not isinstance(gid, str) or not _GROUP_ID.fullmatch(gid) or lead != int(lead) or lead < 1:
        gid, closes, lead = None, -math.inf, 1.0  # (a broken count: no group to join)
    return Lobby(seen if isinstance(seen, str) else None, gid, closes, int(lead))


# -- a member's answer, as the leader publishes it -----------------------------------------

_AZ = re.compile(r"[a-z]{2}(-[a-z0-9]+){2,4}[a-z]")
_AZ_ID = re.compile(r"[a-z]{3,4}[0-9]?-az[0-9]{1,2}")
_VPC = re.compile(r"vpc-[0-9a-f]{8,17}")


def encode_subnets(subnets: Sequence[Subnet]) -> str:
    return json.dumps(
        [[s.subnet_id, s.vpc_id, s.availability_zone, s.availability_zone_id] for s in subnets],
        separators=(",", ":"),
    )


def decode_subnets(text: str, subnet_ids: Sequence[str]) -> list[Subnet] | None:
    """The leader's look-up of the member's subnets: exactly the member's ids, in its order,
    with AZ names and ids that are such; None otherwise."""
    try:
        rows = json.loads(text[:20_000])
        subnets = [Subnet(*row) for row in rows if isinstance(row, list) and len(row) == 4]
    except (TypeError, ValueError, RecursionError):
        return None
    if [s.subnet_id for s in subnets] != list(subnet_ids) or len(subnets) != len(rows):
        return None
    for s in subnets:
        fields = (s.vpc_id, s.availability_zone, s.availability_zone_id)
        if not all(isinstance(f, str) for f in fields):
            return None
        if not (
            _VPC.fullmatch(s.vpc_id)
            and _AZ.fullmatch(s.availability_zone)
            and _AZ_ID.fullmatch(s.availability_zone_id)
        ):
            return None
    return subnets


def encode_answer(answer: MemberAnswer) -> str:
    return json.dumps(
        {
            "v": answer.verdict.value,
            "s": answer.subnet,
            "seen": [
                [s.subnet, s.outcome.value, s.error_code, s.reservation_id] for s in answer.seen
            ],
            "e": answer.error_code,
            "r": answer.reservation_id,
            "c": answer.cancelled,
            "rs": answer.reservation_seconds,
        },
        separators=(",", ":"),
    )


def decode_answer(text: str, subnets: int) -> MemberAnswer | None:
    """A published answer, checked; None when any part of it is not sound."""
    try:
        data = json.loads(text[:20_000])
        verdict = Verdict(data["v"])
        if verdict is Verdict.UNDECIDED:
            return None
        seen = tuple(
            Seen(_index(at, subnets), Outcome(outcome), _code(code), _reservation(rid))
            for at, outcome, code, rid in data["seen"]
        )
        subnet = None if data["s"] is None else _index(data["s"], subnets)
        if (verdict is Verdict.WON) != (subnet is not None):
            return None
        cancelled = data["c"]
        seconds = float(data["rs"])
        if not (cancelled is None or type(cancelled) is bool) or not 0 <= seconds <= _MAX_SECONDS:
            return None
        reservation = _reservation(data["r"])
        if verdict is Verdict.WON and not (
            reservation is not None
            and any(
                s.subnet == subnet and s.outcome is Outcome.AVAILABLE and s.reservation_id
                for s in seen
            )
        ):
            return None  # "won" with no hold that EC2 confirmed there is not an answer
        return MemberAnswer(
            verdict=verdict,
            subnet=subnet,
            seen=seen,
            error_code=_code(data["e"]),
            reservation_id=reservation,
            cancelled=cancelled,
            reservation_seconds=seconds,
        )
    except (KeyError, TypeError, ValueError, RecursionError):
        return None


def _index(value: Any, subnets: int) -> int:
    if type(value) is not int or not 0 <= value < subnets:
        raise ValueError("not one of the member's subnets")
    return value


def _code(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _CODE.fullmatch(value):
        raise ValueError("not an error code")
    return value


def _reservation(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _RESERVATION.fullmatch(value):
        raise ValueError("not a reservation id")
    return value
