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
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from ..domain import backoff
from ..domain.memory import Seen, Tally
from .aws import AwsError, Clients, RetryPolicy, call

PREFIX = "capacity-memory#"
BATCH_KEYS = 100  # BatchGetItem's limit per call
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


def decode(item: Mapping[str, Any]) -> Tally | None:
    """The tally an item holds; None for an item that is not the memory's."""
    if not str(item.get("id", {}).get("S", "")).startswith(PREFIX):
        return None
    try:
        tally = Tally(
            region=item["region"]["S"],
            instance_type=item["instance_type"]["S"],
            hour=int(float(item["hour"]["N"])),
        )
    except (KeyError, ValueError):
        return None
    for name, value in item.items():
        number = value.get("N")
        if number is None:
            continue
        head, _, rest = name.partition("#")
        try:
            if head in ("n", "t"):
                seen_name, _, az = rest.partition("#")
                seen = Seen(seen_name)
                if head == "n":
                    tally.counts[(az, seen)] = int(float(number))
                else:
                    tally.last[(az, seen)] = float(number)
            elif head == "rs":
                tally.reservation_seconds[rest] = float(number)
            elif head == "lat":
                tally.latency[int(rest)] = int(float(number))
            elif name == "quota_at":
                tally.quota_at = float(number)
            elif name == "quota_carried":
                tally.quota_carried = int(float(number))
        except ValueError:
            continue  # an attribute a later version wrote: not ours to read
    return tally


class MemoryTable:
    def __init__(
        self,
        table: str,
        region: str,
        clients: Clients,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self.region = region
        self.clients = clients
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._clock = clock

    @property
    def _client(self) -> Any:
        return self.clients.client("dynamodb", self.region)

    def _call(self, action: str, deadline: float | None, **params: Any) -> Any:
        method = getattr(self._client, _SNAKE[action])
        return self.retry.run(action, lambda: call(action, method, **params), deadline=deadline)

    def _batch_get(self, keys: list[dict[str, Any]], deadline: float | None) -> Any:
        request = {self.table: {"Keys": keys, "ConsistentRead": False}}
        return self._call("BatchGetItem", deadline, RequestItems=request)

    def add(self, tally: Tally, expiration: int, deadline: float | None = None) -> None:
        """Add ``tally`` to its item (created if missing): one ``UpdateItem``."""
        self._call("UpdateItem", deadline, TableName=self.table, **encode(tally, expiration))

    def read(
        self, slots: Iterable[tuple[str, str, int]], deadline: float | None = None
    ) -> list[Tally]:
        """The items of these (region, instance type, hour) slots that exist. Keys DynamoDB
        leaves unprocessed are asked again, with backoff, until ``deadline``."""
        ids = sorted({item_id(*slot) for slot in slots})
        found: list[Tally] = []
        rng = random.Random()
        for start in range(0, len(ids), BATCH_KEYS):
            keys: list[dict[str, Any]] = [{"id": {"S": i}} for i in ids[start : start + BATCH_KEYS]]
            attempt = 0
            while keys:
                page = self._batch_get(keys, deadline)
                for item in page.get("Responses", {}).get(self.table, []):
                    tally = decode(item)
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

    def scan(self, since_hour: int | None = None, deadline: float | None = None) -> Iterator[Tally]:
        """Every memory item (of hours from ``since_hour``), every page."""
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
                tally = decode(item)
                if tally is not None:
                    yield tally
            start = page.get("LastEvaluatedKey")
            if not start:
                return
