"""DynamoDB: where probes alike from different containers meet (grouped probes, contract v3).

A Lambda container serves one invocation at a time, so the desktops of a class that start
together arrive in different containers; they meet here, in the state table, under this
module's own prefix of the table's ids (``logic.group.TableMeeting`` runs the protocol)::

    group#<region>#<digest of the key>     one per kind of probe (``domain.group.GroupKey``)
        seen        the last arrival's stamp (a random token), removed when that probe leaves
        gid         the group taking members now (its id), and
        closes      when it stops taking them (epoch seconds, the processes' wall clocks)
    group#<group id>                       one per group
        counts      the members' instance counts, in the order they joined (the leader first)
        bys         when each member must have its answer (epoch seconds)
        ups         the earliest each member may give up on the group (epoch seconds): how
                    long its leader may ask EC2 for it (``domain.group.asks_until``)
        last        when the last member joined (the leader closes when nobody has for a while)
        closed      set by the leader when it starts asking EC2: nobody joins after
    group#<group id>#<position>            one per member but the leader: its answer
        answer      the member's answer (JSON, ``encode_answer``), or
        alone       true: the group could not answer; the member probes alone
    expiration  TTL on every item: an hour after it was written

Each step is one call on one small item: an arrival is one ``UpdateItem`` (and one more when
it leaves); joining, opening and closing a group are conditional ``UpdateItem``/``PutItem``
calls, so two containers never both lead one group and nobody joins a closed one; answers are
written in batches of 25 (``BatchWriteItem``) to one item per member, so a class of 200 does
not read one hot item. Every call is retried by the adapter's ``RetryPolicy`` within a short
deadline; a table that fails raises ``AwsError`` and the caller probes alone (advice, never a
failure).

The table is shared, so what is read is checked (``decode_answer``): a member's answer that is
not sound (an unknown verdict or outcome, a subnet outside the member's list, a reservation id
that is not one) is dropped and the member probes alone.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
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
_CODE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
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


def answer_item(group_id: str, position: int) -> str:
    return f"{PREFIX}{group_id}#{position}"


@dataclass(frozen=True)
class Lobby:
    """A kind of probe's item as an arrival found it."""

    seen: str | None  # the stamp of the last arrival still in flight (None: none)
    group_id: str | None  # the group taking members, if ``closes`` is still ahead
    closes: float


@dataclass(frozen=True)
class Members:
    """A closed group: its members' counts, answer-by and give-up times, in joining order
    (``ups`` is empty for a group whose item has none: one written by an older version)."""

    counts: tuple[int, ...]
    bys: tuple[float, ...]
    ups: tuple[float, ...] = ()


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
        stamp: str = "",
        up: float | None = None,
    ) -> Lobby | None:
        """Open a group led by this probe (the first member): its item first, then the kind's
        pointer to it, unless another container opened one since ``replacing`` was read.
        None: opened; else the kind's item as the failed write found it (who opened the group
        that won: the probe joins it without reading the item again). A pointer write whose
        answer was lost and whose retry then failed its condition is told apart by the item it
        returns (this group's id: it was this write), and so is the group item's own write
        (the group's id is this probe's own: an item holding this probe's stamp first was
        made by an earlier try of this write, or by an earlier round of this arrival that built
        the same id on a clock that had not moved; either way only this probe is in it)."""
        try:
            self._call(
                "PutItem",
                Item={
                    "id": {"S": group_item(group_id)},
                    "counts": {"L": [_n(count)]},
                    "bys": {"L": [_n(answer_by)]},
                    "ups": {"L": [_n(answer_by if up is None else up)]},
                    "stamps": {"L": [{"S": stamp}]},
                    "total": _n(count),
                    "last": _n(now),
                    "expiration": _expiration(now),
                },
                ConditionExpression="attribute_not_exists(#id)",
                ExpressionAttributeNames=_names("id"),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except AwsError as error:
            if error.code != "ConditionalCheckFailedException":
                raise
            stamps = (failed_item(error) or {}).get("stamps", {}).get("L")
            if not stamp or not isinstance(stamps, list) or stamps[:1] != [{"S": stamp}]:
                raise  # not this probe's group: the arrival goes alone (``TableMeeting``)
        values: dict[str, Any] = {
            ":gid": {"S": group_id},
            ":closes": _n(closes),
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
                UpdateExpression="SET #gid = :gid, #closes = :closes, #exp = :exp",
                ConditionExpression=condition,
                ExpressionAttributeNames=_names("gid", "closes", "exp"),
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except AwsError as error:
            if error.code != "ConditionalCheckFailedException":
                raise
            found = failed_item(error) or {}
            return None if _text(found, "gid") == group_id else _lobby(found)
        return None

    def join(
        self,
        group_id: str,
        count: int,
        answer_by: float,
        max_count: int,
        max_members: int,
        now: float,
        stamp: str = "",
        up: float | None = None,
    ) -> int | None:
        """Join the group: this member's position, or None (closed, or no room left). The
        member's ``stamp`` is kept with it, so a retry of a join whose answer was lost finds
        the first one instead of joining twice. ``up``: the earliest it may give up on the
        group (its answer-by when not said)."""
        try:
            answer = self._call(
                "UpdateItem",
                Key={"id": {"S": group_item(group_id)}},
                UpdateExpression=(
                    "SET #counts = list_append(#counts, :count), #bys = list_append(#bys, :by), "
                    "#ups = list_append(if_not_exists(#ups, :none), :up), "
                    "#stamps = list_append(#stamps, :stamps), #total = #total + :n, #last = :now"
                ),
                ConditionExpression=(
                    "attribute_exists(#counts) AND attribute_not_exists(#closed) "
                    "AND #total <= :room AND size(#counts) < :members "
                    "AND NOT contains(#stamps, :stamp)"
                ),
                ExpressionAttributeNames=_names(
                    "counts", "bys", "ups", "stamps", "total", "closed", "last"
                ),
                ExpressionAttributeValues={
                    ":now": _n(now),
                    ":count": {"L": [_n(count)]},
                    ":by": {"L": [_n(answer_by)]},
                    ":up": {"L": [_n(answer_by if up is None else up)]},
                    ":none": {"L": []},
                    ":stamps": {"L": [{"S": stamp}]},
                    ":stamp": {"S": stamp},
                    ":n": _n(count),
                    ":room": _n(max_count - count),
                    ":members": _n(max_members),
                },
                ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except AwsError as error:
            if error.code != "ConditionalCheckFailedException":
                raise
            # An earlier try of this very join may have landed (its answer lost).
            stamps = (failed_item(error) or {}).get("stamps", {}).get("L")
            found = [i for i, v in enumerate(stamps or []) if v == {"S": stamp}]
            return found[0] if stamp and found else None
        counts = answer.get("Attributes", {}).get("counts", {}).get("L")
        if not isinstance(counts, list) or not counts:
            raise AwsError("UpdateItem", "UnsoundItem", "the group's item answered no members")
        return len(counts) - 1

    def unpoint(self, key: str, group_id: str) -> None:
        """The group is closed: the kind's item stops naming it (a lone probe after it then
        makes no join that would fail)."""
        try:
            self._call(
                "UpdateItem",
                Key={"id": {"S": key}},
                UpdateExpression="REMOVE #gid, #closes",
                ConditionExpression="#gid = :gid",
                ExpressionAttributeNames=_names("gid", "closes"),
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

    def close(self, group_id: str) -> Members:
        """The leader starts: nobody joins after this. The members, in joining order."""
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
            counts = tuple(int(_number(v)) for v in item["counts"]["L"])
            bys = tuple(_number(v) for v in item["bys"]["L"])
        except (KeyError, TypeError, ValueError) as error:
            raise AwsError(
                "UpdateItem", "UnsoundItem", f"the group's item is not sound: {error}"
            ) from None
        if len(counts) != len(bys) or not counts or min(counts) < 1:
            raise AwsError("UpdateItem", "UnsoundItem", "the group's item is not sound")
        try:
            ups = tuple(_number(v) for v in item.get("ups", {}).get("L", []))
        except (AttributeError, TypeError, ValueError):
            ups = ()
        # Only a give-up for every member tells when the first one gives up (an item an older
        # version opened has none for its leader, and then for nobody).
        return Members(counts, bys, ups if len(ups) == len(counts) else ())

    def publish(
        self, group_id: str, answers: Sequence[str | None], subnets: Sequence[Subnet], now: float
    ) -> None:
        """Every member's answer but the leader's (position 0): the encoded answer, or None
        for "probe alone"; with the subnets the answers index (the leader's look-up)."""
        places = encode_subnets(subnets)
        items = []
        for position, text in enumerate(answers):
            if position == 0:
                continue
            item: dict[str, Any] = {
                "id": {"S": answer_item(group_id, position)},
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

    def answer(self, group_id: str, position: int, subnet_ids: Sequence[str]) -> Published | None:
        """A member's published answer (None: not yet). ``subnet_ids``: the member's own
        list (an answer about other subnets is not sound)."""
        found = self._call(
            "GetItem", Key={"id": {"S": answer_item(group_id, position)}}, ConsistentRead=True
        ).get("Item")
        if not found:
            return None
        text, places = _text(found, "answer"), _text(found, "subnets")
        try:
            size = int(_number(found.get("size")))
        except ValueError:
            return Published(None, 0)
        subnets = decode_subnets(places, subnet_ids) if places is not None else None
        if not position < size <= MAX_MEMBERS or text is None or subnets is None:
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
    if not isinstance(gid, str) or not _GROUP_ID.fullmatch(gid):
        gid, closes = None, -math.inf
    return Lobby(seen if isinstance(seen, str) else None, gid, closes)


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
