"""DynamoDB's bill: every table call metered in capacity units as DynamoDB counts them, and a
partition key asked for more than it serves in one second throttled (docs/fidelity.md, "DynamoDB's
bill and its partitions", quotes the AWS text each rule comes from).

- Item size: the sum of the attribute names' and values' sizes ("DynamoDB item sizes and
  formats", Developer Guide): a string its UTF-8 bytes, a number one byte per two significant
  digits plus one, a binary its raw bytes, a Boolean or null one byte, a List or Map 3 bytes plus
  its elements (1 byte each, and a Map element's name), a set its members.
- Writes: per 1 KB of the larger of the item before and after, rounded up, at least 1 (PutItem,
  UpdateItem, DeleteItem, each item of a BatchWriteItem); a write whose condition fails pays by
  the item that is there (1 for none); every item of a TransactWriteItems twice ("two
  underlying ... writes of every item"), whether the transaction succeeds or not.
- Reads: per 4 KB, rounded up, at least one; an eventually consistent read half of that
  (GetItem, each key of a BatchGetItem, a Query's or Scan's items summed; TransactGetItems
  twice a strongly consistent read).
- Per partition key (table and key value) and per second of the emulator's clock (so a test
  decides what one second holds by moving that clock, never by the machine's speed): past
  ``WRITE_UNITS_PER_SECOND`` write or ``READ_UNITS_PER_SECOND`` read units the call answers
  ``ProvisionedThroughputExceededException`` with the throttling reason
  ``TableWriteKeyRangeThroughputExceeded`` (or ``...Read...``) and does nothing (a BatchWriteItem
  hands the items of such keys back as ``UnprocessedItems``, and fails only when that is all of
  them). ``Settings.dynamodb_key_throttling`` turns the throttling off; the meter is always on.

What the meter does not count: secondary indexes (the broker's table has none), the items a
Query's or Scan's filter drops (DynamoDB bills what it read; the emulator sees what moto
returned), and burst or adaptive capacity (DynamoDB may lend a hot partition unused capacity for
a while; the emulator holds every key to the documented ceiling).
"""

from __future__ import annotations

import base64
import copy
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from moto.dynamodb.exceptions import (
    ERROR_TYPE_PREFIX,
    ConditionalCheckFailed,
    DynamodbException,
    TransactionCanceledException,
)
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.utilities import dynamo_json_dump

# "the traffic against a given partition key does not exceed 3000 read capacity units or 1000
# write capacity units" (Developer Guide, "Best practices for designing and using partition keys
# effectively").
WRITE_UNITS_PER_SECOND = 1000.0
READ_UNITS_PER_SECOND = 3000.0
WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
# "DynamoDB performs two underlying reads or writes of every item in the transaction".
TRANSACTION_FACTOR = 2

Wire = Mapping[str, Any]  # an item as the wire carries it: {"name": {"S": "..."}, ...}


# -- sizes -------------------------------------------------------------------------------------
def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def _number_size(text: str) -> int:
    """1 byte per two significant digits, plus 1 ("Leading and trailing zeroes are trimmed")."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        return 1 + math.ceil(len(text) / 2)
    digits = "".join(str(d) for d in value.normalize().as_tuple().digits).strip("0")
    return 1 + math.ceil(len(digits) / 2)


def _binary_size(value: Any) -> int:
    """The raw bytes ("the value's raw byte length is used"): the wire carries base64."""
    if isinstance(value, bytes | bytearray):
        return len(value)
    try:
        return len(base64.b64decode(str(value), validate=False))
    except ValueError:
        return len(str(value))


def value_size(value: Wire) -> int:
    """The size of one attribute value, without its name."""
    [(kind, content)] = value.items()
    if kind == "S":
        return _utf8(content)
    if kind == "N":
        return _number_size(content)
    if kind == "B":
        return _binary_size(content)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(_utf8(member) for member in content)
    if kind == "NS":
        return sum(_number_size(member) for member in content)
    if kind == "BS":
        return sum(_binary_size(member) for member in content)
    if kind == "L":
        return 3 + sum(1 + value_size(element) for element in content)
    if kind == "M":
        return 3 + sum(1 + _utf8(name) + value_size(element) for name, element in content.items())
    raise ValueError(f"not a DynamoDB attribute value type: {kind!r}")


def item_size(item: Wire | None) -> int:
    """Bytes of an item: its attribute names and values (0 for no item)."""
    if not item:
        return 0
    return sum(_utf8(name) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    """Write units for one item of ``size`` bytes: per 1 KB, rounded up, at least 1."""
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, consistent: bool) -> float:
    """Read units for ``size`` bytes read: per 4 KB, rounded up, at least 1; half eventually."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


# -- the meter ---------------------------------------------------------------------------------
@dataclass
class Peak:
    """The most units one partition key was asked for within one second."""

    units: float = 0.0
    table: str = ""
    key: str = ""
    second: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"units": self.units, "table": self.table, "key": self.key, "second": self.second}


@dataclass
class _Second:
    second: int
    write: float = 0.0
    read: float = 0.0


@dataclass
class Meter:
    """Totals per table, and per partition key the units of its current second."""

    write_units: dict[str, float] = field(default_factory=dict)
    read_units: dict[str, float] = field(default_factory=dict)
    throttled: dict[str, int] = field(default_factory=dict)
    busiest_write: Peak = field(default_factory=Peak)
    busiest_read: Peak = field(default_factory=Peak)
    _keys: dict[tuple[str, str], _Second] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def used(self, table: str, key: str, second: int) -> tuple[float, float]:
        """(write, read) units ``key`` was billed within ``second``."""
        with self._lock:
            tally = self._keys.get((table, key))
            if tally is None or tally.second != second:
                return 0.0, 0.0
            return tally.write, tally.read

    def charge(self, table: str, key: str, second: int, write: float, read: float) -> None:
        with self._lock:
            if write:
                self.write_units[table] = self.write_units.get(table, 0.0) + write
            if read:
                self.read_units[table] = self.read_units.get(table, 0.0) + read
            tally = self._keys.get((table, key))
            if tally is None or tally.second != second:
                tally = self._keys[(table, key)] = _Second(second)
            tally.write += write
            tally.read += read
            if tally.write > self.busiest_write.units:
                self.busiest_write = Peak(tally.write, table, key, second)
            if tally.read > self.busiest_read.units:
                self.busiest_read = Peak(tally.read, table, key, second)

    def refused(self, table: str) -> None:
        with self._lock:
            self.throttled[table] = self.throttled.get(table, 0) + 1

    def report(self) -> dict[str, Any]:
        """What the control interface answers: per table its units and throttled calls, and the
        busiest partition key's largest second, for writes and for reads."""
        with self._lock:
            tables = sorted({*self.write_units, *self.read_units, *self.throttled})
            return {
                "tables": {
                    name: {
                        "write_units": self.write_units.get(name, 0.0),
                        "read_units": self.read_units.get(name, 0.0),
                        "throttled": self.throttled.get(name, 0),
                    }
                    for name in tables
                },
                "busiest_key": {
                    "write": self.busiest_write.to_dict(),
                    "read": self.busiest_read.to_dict(),
                },
            }


class KeyThroughputExceeded(DynamodbException):
    """``ProvisionedThroughputExceededException`` as botocore's DynamoDB model (1.44.5) shapes it:
    ``message`` and ``ThrottlingReasons`` (``reason``, ``resource``: the table's ARN)."""

    error_type = ERROR_TYPE_PREFIX + "ProvisionedThroughputExceededException"

    def __init__(self, operation: str, table_arn: str) -> None:
        message = "The level of configured provisioned throughput for the table was exceeded."
        super().__init__(self.error_type, message)
        reason = f"Table{operation}KeyRangeThroughputExceeded"
        self.description = dynamo_json_dump(
            {
                "__type": self.error_type,
                "message": message,
                "ThrottlingReasons": [{"reason": reason, "resource": table_arn}],
            }
        )


# -- one call's items --------------------------------------------------------------------------
@dataclass
class _Target:
    """One item a write names: where it lives and what was there before."""

    table: str
    key: Wire
    before: Item | None = None
    units: float = 0.0


def _key_text(key: Wire, table: Any) -> str:
    """The partition key's value, as the meter names it."""
    value = key.get(table.hash_key_attr) or {}
    return "".join(str(v) for v in value.values())


def _dynamo(key: Wire, table: Any) -> tuple[DynamoType, DynamoType | None]:
    hash_key = DynamoType(key[table.hash_key_attr])
    range_attr = table.range_key_attr
    range_key = DynamoType(key[range_attr]) if range_attr and range_attr in key else None
    return hash_key, range_key


def _stored(backend: Any, name: str, key: Wire, keep: bool = False) -> Item | None:
    """The item stored under ``key`` (None: none); ``keep``: a copy, to put back later."""
    table = backend.get_table(name)
    try:
        hash_key, range_key = _dynamo(key, table)
    except KeyError:
        return None
    found = table.get_item(hash_key, range_key)
    return copy.deepcopy(found) if keep and found is not None else found


def _wire(item: Item | None) -> Wire | None:
    return None if item is None else item.to_json()["Attributes"]


def _restore(backend: Any, target: _Target) -> None:
    """Put back the item a throttled write changed (under the writes' lock: no reader saw it)."""
    table = backend.get_table(target.table)
    hash_key, range_key = _dynamo(target.key, table)
    if table.has_range_key:
        bucket = table.items[hash_key]
        if target.before is None:
            bucket.pop(range_key, None)
        else:
            bucket[range_key] = target.before
    elif target.before is None:
        table.items.pop(hash_key, None)
    else:
        table.items[hash_key] = target.before


def _key_of(backend: Any, name: str, item: Wire) -> dict[str, Any]:
    table = backend.get_table(name)
    attrs = [table.hash_key_attr, *([table.range_key_attr] if table.range_key_attr else [])]
    return {attr: item[attr] for attr in attrs if attr in item}


def _write_targets(action: str, body: Mapping[str, Any], backend: Any) -> list[_Target]:
    if action in ("PutItem",):
        name = body["TableName"]
        return [_Target(name, _key_of(backend, name, body["Item"]))]
    if action in ("UpdateItem", "DeleteItem"):
        return [_Target(body["TableName"], body["Key"])]
    if action == "BatchWriteItem":
        targets = []
        for name, requests in body["RequestItems"].items():
            for request in requests:
                if "PutRequest" in request:
                    item = request["PutRequest"]["Item"]
                    targets.append(_Target(name, _key_of(backend, name, item)))
                else:
                    targets.append(_Target(name, request["DeleteRequest"]["Key"]))
        return targets
    targets = []  # TransactWriteItems
    for entry in body["TransactItems"]:
        [(kind, op)] = entry.items()
        name = op["TableName"]
        key = _key_of(backend, name, op["Item"]) if kind == "Put" else op["Key"]
        targets.append(_Target(name, key))
    return targets


# -- the metered call --------------------------------------------------------------------------
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
READS = ("GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems")
_FAILED_CONDITIONS = (ConditionalCheckFailed, TransactionCanceledException)


class Bill:
    """Meters one call a handler's method serves (``emulator.install`` wraps each method), into
    the world's ``meter``, under the lock of DynamoDB's writes (a throttled write is undone before
    any other call sees it)."""

    def __init__(
        self,
        meter: Meter,
        second: Callable[[], int],
        throttling: Callable[[], bool],
        lock: threading.RLock,
    ) -> None:
        self.meter = meter
        self._second = second
        self._throttling = throttling
        self._lock = lock

    def serve(self, action: str, handler: Any, original: Callable[[Any], Any]) -> Any:
        with self._lock:
            if action in WRITES:
                return self._write(action, handler, original)
            return self._read(action, handler, original)

    # -- writes -------------------------------------------------------------------------------
    def _write(self, action: str, handler: Any, original: Callable[[Any], Any]) -> Any:
        backend = handler.dynamodb_backend
        body = handler.body
        try:
            targets = _write_targets(action, body, backend)
            for target in targets:
                target.before = _stored(backend, target.table, target.key, keep=True)
        except (KeyError, TypeError, ValueError, DynamodbException):
            return original(handler)  # a malformed request: moto answers it, nothing is billed
        failed: Exception | None = None
        try:
            result = original(handler)
        except _FAILED_CONDITIONS as error:
            failed, result = error, None
        factor = TRANSACTION_FACTOR if action == "TransactWriteItems" else 1
        for target in targets:
            before = item_size(_wire(target.before))
            after = (
                before if failed else item_size(_wire(_stored(backend, target.table, target.key)))
            )
            target.units = float(write_units(max(before, after)) * factor)
        second = self._second()
        over = self._over_write(targets, backend, second)
        if over and action == "BatchWriteItem" and len(over) < len(targets):
            for target in over:
                _restore(backend, target)
            self._charge([t for t in targets if t not in over], backend, second, write=True)
            unprocessed = result.result.setdefault("UnprocessedItems", {})
            for target in over:
                unprocessed.setdefault(target.table, []).append(self._request_of(body, target))
            return result
        if over:
            if failed is None:
                for target in targets:
                    _restore(backend, target)
            self._refuse(over[0], backend, "Write")
        self._charge(targets, backend, second, write=True)
        if failed is not None:
            raise failed
        return result

    def _over_write(self, targets: list[_Target], backend: Any, second: int) -> list[_Target]:
        if not self._throttling():
            return []
        asked: dict[tuple[str, str], float] = {}
        over = []
        for target in targets:
            key = (target.table, _key_text(target.key, backend.get_table(target.table)))
            asked[key] = asked.get(key, 0.0) + target.units
            if self.meter.used(*key, second)[0] + asked[key] > WRITE_UNITS_PER_SECOND:
                over.append(target)
        return over

    @staticmethod
    def _request_of(body: Mapping[str, Any], target: _Target) -> dict[str, Any]:
        for request in body["RequestItems"][target.table]:
            if "PutRequest" in request:
                item = request["PutRequest"]["Item"]
                if all(item.get(k) == v for k, v in target.key.items()):
                    return dict(request)
            elif request["DeleteRequest"]["Key"] == target.key:
                return dict(request)
        raise LookupError("a batch item the request did not hold")

    def _charge(self, targets: Iterable[_Target], backend: Any, second: int, write: bool) -> None:
        for target in targets:
            key = _key_text(target.key, backend.get_table(target.table))
            units = target.units
            self.meter.charge(
                target.table, key, second, units if write else 0, 0 if write else units
            )

    def _refuse(self, target: _Target, backend: Any, operation: str) -> None:
        self.meter.refused(target.table)
        raise KeyThroughputExceeded(operation, backend.get_table(target.table).table_arn)

    # -- reads --------------------------------------------------------------------------------
    def _read(self, action: str, handler: Any, original: Callable[[Any], Any]) -> Any:
        result = original(handler)
        backend = handler.dynamodb_backend
        try:
            targets = self._read_targets(action, handler.body, result, backend)
        except (KeyError, TypeError, ValueError, DynamodbException):
            return result
        second = self._second()
        if self._throttling():
            asked: dict[tuple[str, str], float] = {}
            for target in targets:
                key = (target.table, _key_text(target.key, backend.get_table(target.table)))
                asked[key] = asked.get(key, 0.0) + target.units
                if self.meter.used(*key, second)[1] + asked[key] > READ_UNITS_PER_SECOND:
                    self._refuse(target, backend, "Read")
        self._charge(targets, backend, second, write=False)
        return result

    def _read_targets(
        self, action: str, body: Mapping[str, Any], result: Any, backend: Any
    ) -> list[_Target]:
        consistent = bool(body.get("ConsistentRead", False))
        if action == "GetItem":
            name = body["TableName"]
            size = item_size(_wire(_stored(backend, name, body["Key"])))
            return [_Target(name, body["Key"], units=read_units(size, consistent))]
        if action == "BatchGetItem":
            targets = []
            for name, request in body["RequestItems"].items():
                strong = bool(request.get("ConsistentRead", False))
                for key in request["Keys"]:
                    size = item_size(_wire(_stored(backend, name, key)))
                    targets.append(_Target(name, key, units=read_units(size, strong)))
            return targets
        if action == "TransactGetItems":
            targets = []
            for entry in body["TransactItems"]:
                get = entry["Get"]
                size = item_size(_wire(_stored(backend, get["TableName"], get["Key"])))
                units = read_units(size, True) * TRANSACTION_FACTOR
                targets.append(_Target(get["TableName"], get["Key"], units=units))
            return targets
        # Query, Scan: the items read, summed per partition key, then rounded up.
        name = body["TableName"]
        table = backend.get_table(name)
        sizes: dict[str, tuple[Wire, int]] = {}
        for returned in (getattr(result, "result", None) or {}).get("Items", []):
            key = _key_of(backend, name, returned)
            stored = _stored(backend, name, key) if len(key) else None
            size = item_size(_wire(stored)) if stored is not None else item_size(returned)
            text = _key_text(key, table)
            sizes[text] = (key, sizes.get(text, (key, 0))[1] + size)
        if not sizes:  # nothing read still costs the minimum
            return [_Target(name, {}, units=read_units(0, consistent))]
        return [
            _Target(name, key, units=read_units(size, consistent)) for key, size in sizes.values()
        ]
