"""DynamoDB: the capacity memory's items in the state table (``BROKER_STATE_TABLE``).

The table is Powertools Idempotency's (partition key ``id``, TTL attribute ``expiration``),
shared with the request records. Those have ids ``capacity-broker.<function>#<hash>``; the
memory's start with ``capacity-memory#``, so neither can meet the other.

One item per (region, instance type, hour) — a ``domain.memory.Tally``::

    id              capacity-memory#us-east-1#g6.xlarge#2026-11-21T10
    region, instance_type, hour (epoch seconds of the hour), expiration (TTL, epoch seconds)
    n#<seen>#<az id>    attempts that answered <seen> there        ADD
    t#<seen>#<az id>    when it was last seen (epoch seconds)      SET
    rs#<az id>          reservation-seconds spent there            ADD
    lat#<bucket>        create latencies (domain.memory buckets)   ADD
    quota_at, quota_carried   the last quota error of the type     SET

Every write is one ``UpdateItem``: counters and seconds are ``ADD``-ed, so concurrent
containers never lose each other's facts. Last-seen times are ``SET`` (DynamoDB has no
"maximum" update): when two containers write the same AZ's time within a round trip of each
other, the one written last stays, which can be older by that round trip; nothing decides on
a difference that small. A request reads its (region, instance type)'s current hour, and the
previous one while its decision window reaches back into it: one ``BatchGetItem``.

Reading is defensive: the table is shared with every container of the cluster and anyone who
may write it, and the memory is advice. ``decode`` checks every value against
``domain.memory``'s bounds (counts, buckets, seconds, times not in the future, the id naming
the item's own slot); what is not sound is left out and logged once per item, never raised.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from ..domain import backoff
from ..domain import memory as rules
from ..domain.errors import ErrorClass
from ..domain.memory import Seen, Tally
from .aws import AwsError, Clients, RetryPolicy, TableHealth, call

PREFIX = "capacity-memory#"
MAX_WARNED = 1000  # item ids whose problems were logged, kept to log each once
BATCH_KEYS = 100  # BatchGetItem's limit per call
log = logging.getLogger(__name__)
_SNAKE = {"UpdateItem": "update_item", "BatchGetItem": "batch_get_item", "Scan": "scan"}


def item_id(region: str, instance_type: str, hour: int) -> str:
    stamp = datetime.fromtimestamp(hour, UTC).strftime("%Y-%m-%dT%H")
    return f"{PREFIX}{region}#{instance_type}#{stamp}"


def _n(value: float) -> dict[str, str]:
    """A DynamoDB number in plain notation (microsecond precision is plenty here)."""
    if float(value).is_integer():
        return {"N": str(int(value))}
    return {"N": format(float(value), ".6f").rstrip("0").rstrip(".") or "0"}


def encode(tally: Tally, expiration: int) -> dict[str, Any]:
    """``UpdateItem`` parameters (without the table name) that add ``tally`` to its item."""
    adds: dict[str, float] = {}
    sets: dict[str, Any] = {
        "region": {"S": tally.region},
        "instance_type": {"S": tally.instance_type},
        "hour": _n(tally.hour),
        "expiration": _n(expiration),
    }
    for (az, seen), n in tally.counts.items():
        adds[f"n#{seen}#{az}"] = n
    for (az, seen), at in tally.last.items():
        sets[f"t#{seen}#{az}"] = _n(at)
    for az, seconds in tally.reservation_seconds.items():
        adds[f"rs#{az}"] = seconds
    for bucket, n in tally.latency.items():
        adds[f"lat#{bucket}"] = n
    if tally.quota_at is not None:
        sets["quota_at"] = _n(tally.quota_at)
        if tally.quota_carried is not None:
            sets["quota_carried"] = _n(tally.quota_carried)
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    clauses: dict[str, list[str]] = {"ADD": [], "SET": []}
    for verb, pairs in (("ADD", {k: _n(v) for k, v in adds.items()}), ("SET", sets)):
        for name, value in pairs.items():
            slot = len(names)
            names[f"#a{slot}"] = name
            values[f":v{slot}"] = value
            joiner = " " if verb == "ADD" else " = "
            clauses[verb].append(f"#a{slot}{joiner}:v{slot}")
    expression = " ".join(f"{verb} {', '.join(parts)}" for verb, parts in clauses.items() if parts)
    return {
        "Key": {"id": {"S": item_id(tally.region, tally.instance_type, tally.hour)}},
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def _text(value: Any) -> str:
    if not isinstance(value, Mapping) or not isinstance(value.get("S"), str):
        raise ValueError("not a string")
    return str(value["S"])


def _number(value: Any) -> float:
    """A DynamoDB number as a float (a huge one as infinity, for the bounds to refuse)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("N"), str):
        raise ValueError("not a number")
    text = value["N"]
    try:
        return float(text[:64])
    except ValueError:
        raise ValueError(f"{text[:64]!r} is not a number") from None


# Attributes of the item that are not facts.
_ENVELOPE = frozenset({"id", "region", "instance_type", "hour", "expiration"})


def decode(
    item: Mapping[str, Any], now: float | None = None, problems: list[str] | None = None
) -> Tally | None:
    """The tally an item holds, every value checked (``domain.memory``'s bounds, times not
    later than ``now`` plus the clock skew); None for an item that is not the memory's or
    whose slot (id, region, instance type, hour) is not sound. A fact that is not sound is
    left out; what was left out, and why, is added to ``problems``. Never raises: the state
    table is written by others too, and the memory is advice."""
    notes = problems if problems is not None else []
    now = time.time() if now is None else now
    ident = item.get("id")
    if not isinstance(ident, Mapping) or not str(ident.get("S", "")).startswith(PREFIX):
        return None
    try:
        region = rules.checked_name(_text(item.get("region")))
        instance_type = rules.checked_name(_text(item.get("instance_type")))
        hour = rules.checked_hour(_number(item.get("hour")), now)
        if ident.get("S") != item_id(region, instance_type, hour):
            raise ValueError("its id does not name its region, instance type and hour")
    except ValueError as error:
        notes.append(f"skipped: {error}")
        return None
    tally = Tally(region=region, instance_type=instance_type, hour=hour)
    for name, value in item.items():
        if name in _ENVELOPE:
            continue
        try:
            _read_fact(tally, str(name), value, now)
        except ValueError as error:
            notes.append(f"{str(name)[:80]!r} left out: {error}")
    return tally


def _read_fact(tally: Tally, name: str, value: Any, now: float) -> None:
    """One attribute of an item into ``tally``; ValueError when it is not sound."""
    head, _, rest = name.partition("#")
    if head in ("n", "t"):
        seen_name, _, az = rest.partition("#")
        key = (rules.checked_name(az), Seen(seen_name))
        if head == "n":
            tally.counts[key] = rules.checked_count(_number(value))
        else:
            tally.last[key] = rules.checked_moment(_number(value), tally.hour, now)
    elif head == "rs":
        tally.reservation_seconds[rules.checked_name(rest)] = rules.checked_seconds(_number(value))
    elif head == "lat":
        try:
            bucket = float(rest)
        except ValueError:
            raise ValueError(f"latency bucket {rest[:20]!r} is not a number") from None
        tally.latency[rules.checked_bucket(bucket)] = rules.checked_count(_number(value))
    elif name == "quota_at":
        tally.quota_at = rules.checked_moment(_number(value), tally.hour, now)
    elif name == "quota_carried":
        tally.quota_carried = rules.checked_count(_number(value))
    else:
        raise ValueError("not an attribute of the capacity memory")


class MemoryTable:
    def __init__(
        self,
        table: str,
        region: str,
        clients: Clients,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        health: TableHealth | None = None,
    ) -> None:
        self.table = table
        self.region = region
        self.clients = clients
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self.health = health or TableHealth(clock)
        self._warned: set[str] = set()  # items whose problems this table (one per root) logged

    @property
    def _client(self) -> Any:
        return self.clients.client("dynamodb", self.region)

    def _call(self, action: str, deadline: float | None, **params: Any) -> Any:
        method = getattr(self._client, _SNAKE[action])

        def once() -> Any:
            # The table is advice: once a call found it failing, nothing asks it for a while
            # (not even this call's retries: each would wait out the client's timeout again).
            if not self.health.up:
                raise AwsError(action, "StateTableDown", f"the state table {self.table} is down")
            try:
                return call(action, method, **params)
            except AwsError as error:
                if error.error_class is not ErrorClass.INVALID:
                    self.health.failed()
                raise

        return self.retry.run(action, once, deadline=deadline)

    def _batch_get(self, keys: list[dict[str, Any]], deadline: float | None) -> Any:
        request = {self.table: {"Keys": keys, "ConsistentRead": False}}
        return self._call("BatchGetItem", deadline, RequestItems=request)

    def _decode(self, item: Mapping[str, Any], now: float | None) -> Tally | None:
        """``decode``, with what it left out logged once per item (every request reads the
        same items: a warning each time would drown the log)."""
        problems: list[str] = []
        tally = decode(item, now, problems)
        if problems:
            ident = str(item.get("id", {}).get("S", "?"))[:300]
            if ident not in self._warned:
                if len(self._warned) >= MAX_WARNED:
                    self._warned.clear()
                self._warned.add(ident)
                log.warning(
                    "capacity memory item %s in %s: %s",
                    ident,
                    self.table,
                    "; ".join(problems)[:2000],
                    extra={"memory_item": ident},
                )
        return tally

    def add(self, tally: Tally, expiration: int, deadline: float | None = None) -> None:
        """Add ``tally`` to its item (created if missing): one ``UpdateItem``."""
        self._call("UpdateItem", deadline, TableName=self.table, **encode(tally, expiration))

    def read(
        self,
        slots: Iterable[tuple[str, str, int]],
        deadline: float | None = None,
        now: float | None = None,
    ) -> list[Tally]:
        """The items of these (region, instance type, hour) slots that exist, checked as of
        ``now`` (wall clock; default: this machine's). Keys DynamoDB leaves unprocessed are
        asked again, with backoff, until ``deadline``."""
        ids = sorted({item_id(*slot) for slot in slots})
        found: list[Tally] = []
        rng = random.Random()
        for start in range(0, len(ids), BATCH_KEYS):
            keys: list[dict[str, Any]] = [{"id": {"S": i}} for i in ids[start : start + BATCH_KEYS]]
            attempt = 0
            while keys:
                page = self._batch_get(keys, deadline)
                for item in page.get("Responses", {}).get(self.table, []):
                    tally = self._decode(item, now)
                    if tally is not None:
                        found.append(tally)
                keys = page.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
                if keys:
                    pause = backoff.delay(attempt, self.retry.base, self.retry.cap, rng)
                    attempt += 1
                    if deadline is not None and not backoff.Budget(deadline).allows(
                        pause, self._clock()
                    ):
                        raise AwsError(
                            "BatchGetItem",
                            "ProvisionedThroughputExceededException",
                            f"{len(keys)} keys still unprocessed at the deadline",
                        )
                    self._sleep(pause)
        return found

    def scan(
        self,
        since_hour: int | None = None,
        deadline: float | None = None,
        now: float | None = None,
    ) -> Iterator[Tally]:
        """Every memory item (of hours from ``since_hour``), every page, checked as of
        ``now``."""
        params: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "begins_with(#id, :prefix)",
            "ExpressionAttributeNames": {"#id": "id"},
            "ExpressionAttributeValues": {":prefix": {"S": PREFIX}},
        }
        if since_hour is not None:
            params["FilterExpression"] += " AND #hour >= :since"
            params["ExpressionAttributeNames"]["#hour"] = "hour"
            params["ExpressionAttributeValues"][":since"] = _n(since_hour)
        start: dict[str, Any] | None = None
        while True:
            page = self._call(
                "Scan", deadline, **params, **({"ExclusiveStartKey": start} if start else {})
            )
            for item in page.get("Items", []):
                tally = self._decode(item, now)
                if tally is not None:
                    yield tally
            start = page.get("LastEvaluatedKey")
            if not start:
                return
