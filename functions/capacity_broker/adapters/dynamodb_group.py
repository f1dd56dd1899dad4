"""DynamoDB: the state table as a ``GroupStore`` (``logic.grouping.store``), where probes alike
from different containers meet. A Lambda container serves one invocation at a time, so the
desktops of a class arrive in different containers; they meet here, under this module's own
prefix of the table's one key, ``id``::

    meet#<region>#<digest of the kind>     one per kind of probe (``domain.group.GroupKey``)
        seen    the stamp of the last arrival still in flight (removed when it leaves)
        gid     the group it names; st  that group's state (open, closed)
        n       the slots that group has taken (its leader's included)
        p       its leader's patience (seconds: a duration, never an instant)
        cb      the stamp of the arrival that closed it (its leader, or a member that left)
    meet#<group id>                        one per group, written when it ends
        st      published or abandoned (whoever writes first decides, ``by`` its stamp);
        given_back  an abandoned group's holds are given back
    meet#<group id>#<slot>                 one per member: its answer (``logic.grouping.answers``)
    expiration  TTL on every item: an hour after it was written

Every method is one call on one small item (the answers: batches of 25 items), and decides
nothing. No item grows with a class: a join adds one to ``n`` and returns the slot, so a
desktop costs DynamoDB a few write units however large its class (the kind's item is about
200 bytes: one write unit per join, one read unit per strong read).

The table is advice, on DynamoDB's terms: its client answers within about a second
(``aws.STATE_TABLE_CONFIG``), a call is retried only inside its own second, and a table that
failed (no answer, a 5xx, throttling, a refusal) is not asked again for ``DOWN_SECONDS``: every
method raises ``StoreDown`` at once meanwhile, and the probes go on alone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..domain.errors import ErrorClass
from ..domain.group import Ending, GroupState, Joined, KindItem, StoreDown
from . import dynamodb_group_items as items
from .aws import AwsError, Clients, RetryPolicy, TableHealth, call, failed_item
from .dynamodb_memory import _n

EXPIRATION_SECONDS = 60 * 60
CALL_SECONDS = 1.0  # how long one call may take, its retries included
BATCH_WRITE = 25  # BatchWriteItem's limit per call
UNPROCESSED_TRIES = 4
_CONDITION = "ConditionalCheckFailedException"


class TableStore:
    """The meeting items of one state table (``table`` in ``region``); thread-safe."""

    def __init__(
        self,
        table: str,
        region: str,
        clients: Clients,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        retry: RetryPolicy | None = None,
        health: TableHealth | None = None,
    ) -> None:
        self.table = table
        self.region = region
        self.clients = clients
        self.retry = retry or RetryPolicy(base=0.05, cap=0.25, max_attempts=3)
        self._monotonic = monotonic
        self._wall = wall  # only for the items' TTL (DynamoDB's expiry reads epoch seconds)
        self._sleep = sleep
        self.health = health or TableHealth(monotonic)
        self.counts = {"calls": 0}

    # -- the kind's item ------------------------------------------------------------------------
    def join(self, kind: str, stamp: str, patience: float, max_slots: int) -> Joined | KindItem:
        # A join is not asked twice blindly: one whose write landed but whose answer was lost
        # would take a second slot, a member nobody is (its share of the group's hold pushes the
        # members after it to a later subnet). A refusal that DynamoDB says it did not apply
        # (throttling) is asked again within the call's second; any other failure is followed
        # by a read of the kind's item, which says whether this join landed (its mark, and the
        # slot it took) or may have (``Joined`` with no slot).
        try:
            got = self._call(
                "UpdateItem",
                retry=_ONCE,
                Key=items.key(items.kind_item(kind)),
                UpdateExpression="SET #seen = :stamp, #ls = #n, #exp = :exp ADD #n :one",
                ConditionExpression="#st = :open AND #n < :most AND #p <= :mine",
                ExpressionAttributeNames=items.names("seen", "ls", "exp", "n", "st", "p"),
                ExpressionAttributeValues={
                    ":stamp": {"S": stamp},
                    ":exp": self._expiration(),
                    ":one": {"N": "1"},
                    ":open": {"S": GroupState.OPEN.value},
                    ":most": {"N": str(max_slots)},
                    ":mine": _n(patience),
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _Refused as refused:
            return items.kind(refused.item)
        except StoreDown as down:
            if not down.maybe_applied:
                raise
            return self._join_unknown(kind, stamp)
        item = got.get("Attributes") or {}
        found = items.kind(item)
        if found.group_id is None or found.slots < 2:
            raise self._unsound("a join's answer names no group")
        return Joined(found.group_id, found.slots - 1)

    def _join_unknown(self, kind: str, stamp: str) -> Joined | KindItem:
        """After a join whose answer was lost: whether it landed, from the kind's item."""
        got = self._call(
            "GetItem", gate=False, Key=items.key(items.kind_item(kind)), ConsistentRead=True
        )
        item = got.get("Item") or {}
        found = items.kind(item)
        if found.group_id is None or found.state is None:
            return found  # no group: nothing was joined
        last = items.number(item, "ls")
        if found.seen == stamp and last is not None and found.state is GroupState.OPEN:
            return Joined(found.group_id, int(last))  # its own, the last join so far
        return Joined(found.group_id, None)

    def mark(self, kind: str, stamp: str) -> KindItem | None:
        try:
            self._call(
                "UpdateItem",
                Key=items.key(items.kind_item(kind)),
                # (Not over another arrival's mark: arrivals that find no group within one
                # round trip of each other are a burst, not a crowd of lone probes.)
                UpdateExpression="SET #seen = :stamp, #exp = :exp",
                ConditionExpression=(
                    "attribute_not_exists(#seen) AND (attribute_not_exists(#st) OR #st <> :open)"
                ),
                ExpressionAttributeNames=items.names("seen", "exp", "st"),
                ExpressionAttributeValues={
                    ":stamp": {"S": stamp},
                    ":exp": self._expiration(),
                    ":open": {"S": GroupState.OPEN.value},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _Refused as refused:
            return items.kind(refused.item)
        return None

    def open(self, kind: str, group_id: str, stamp: str, patience: float) -> KindItem | None:
        try:
            self._call(
                "UpdateItem",
                Key=items.key(items.kind_item(kind)),
                UpdateExpression=(
                    "SET #seen = :stamp, #gid = :gid, #st = :open, #n = :one, #p = :p, #exp = :exp"
                ),
                ConditionExpression="attribute_not_exists(#st) OR #st <> :open",
                ExpressionAttributeNames=items.names("seen", "gid", "st", "n", "p", "exp"),
                ExpressionAttributeValues={
                    ":stamp": {"S": stamp},
                    ":gid": {"S": group_id},
                    ":open": {"S": GroupState.OPEN.value},
                    ":one": {"N": "1"},
                    ":p": _n(patience),
                    ":exp": self._expiration(),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _Refused as refused:
            found = items.kind(refused.item)
            if found.group_id == group_id and found.state is GroupState.OPEN:
                return None  # (this open's own write: its first answer was lost)
            return found
        return None

    def slots(self, kind: str, group_id: str) -> int | None:
        # (Strong: a read that lags would show the group not open yet, or the one before it.)
        got = self._call(
            "GetItem", gate=False, Key=items.key(items.kind_item(kind)), ConsistentRead=True
        )
        found = items.kind(got.get("Item") or {})
        if found.group_id != group_id or found.state is not GroupState.OPEN:
            return None
        return found.slots

    def close(self, kind: str, group_id: str, by: str) -> int | None:
        try:
            got = self._call(
                "UpdateItem",
                gate=False,
                Key=items.key(items.kind_item(kind)),
                # (The marks go with the close: a member never leaves, and an arrival after
                # the close is alone, or opens the next group once one alike is in flight.)
                UpdateExpression="SET #st = :closed, #cb = :by REMOVE #seen",
                ConditionExpression="#gid = :gid AND #st = :open",
                ExpressionAttributeNames=items.names("st", "cb", "gid", "seen"),
                ExpressionAttributeValues={
                    ":closed": {"S": GroupState.CLOSED.value},
                    ":by": {"S": by},
                    ":gid": {"S": group_id},
                    ":open": {"S": GroupState.OPEN.value},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _Refused as refused:
            found = items.kind(refused.item)
            if found.group_id == group_id and found.closed_by == by:
                return found.slots  # (this close's own write: its first answer was lost)
            return None
        return items.kind(got.get("Attributes") or {}).slots

    def leave(self, kind: str, stamp: str) -> None:
        # (A refusal: another arrival's mark, that one's to remove.)
        with contextlib.suppress(_Refused):
            self._call(
                "UpdateItem",
                Key=items.key(items.kind_item(kind)),
                UpdateExpression="REMOVE #seen",
                ConditionExpression="#seen = :stamp",
                ExpressionAttributeNames=items.names("seen"),
                ExpressionAttributeValues={":stamp": {"S": stamp}},
            )

    # -- the group's own item ---------------------------------------------------------------
    def settle(self, group_id: str, state: GroupState, by: str) -> Ending | None:
        if state not in (GroupState.PUBLISHED, GroupState.ABANDONED):
            raise ValueError(f"a group ends published or abandoned, not {state}")
        try:
            self._call(
                "UpdateItem",
                gate=False,
                Key=items.key(items.group_item(group_id)),
                UpdateExpression="SET #st = :st, #by = :by, #exp = :exp",
                ConditionExpression="attribute_not_exists(#st)",
                ExpressionAttributeNames=items.names("st", "by", "exp"),
                ExpressionAttributeValues={
                    ":st": {"S": state.value},
                    ":by": {"S": by},
                    ":exp": self._expiration(),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _Refused as refused:
            if items.text(refused.item, "by") == by:
                return None  # (this write's own: its first answer was lost)
            return items.ending(refused.item)
        return None

    def given_back(self, group_id: str) -> None:
        with contextlib.suppress(_Refused):  # (not abandoned: nothing to say)
            self._call(
                "UpdateItem",
                gate=False,
                Key=items.key(items.group_item(group_id)),
                UpdateExpression="SET #given_back = :yes",
                ConditionExpression="#st = :abandoned",
                ExpressionAttributeNames=items.names("given_back", "st"),
                ExpressionAttributeValues={
                    ":yes": {"BOOL": True},
                    ":abandoned": {"S": GroupState.ABANDONED.value},
                },
            )

    def ending(self, group_id: str) -> Ending:
        got = self._call(
            "GetItem", gate=False, Key=items.key(items.group_item(group_id)), ConsistentRead=True
        )
        return items.ending(got.get("Item") or {})

    # -- the answers --------------------------------------------------------------------------
    def publish(self, group_id: str, answers: Mapping[int, str]) -> None:
        expiration = self._expiration()
        puts = [
            {
                "PutRequest": {
                    "Item": {
                        "id": {"S": items.answer_item(group_id, slot)},
                        "answer": {"S": text},
                        "expiration": expiration,
                    }
                }
            }
            for slot, text in answers.items()
        ]
        for start in range(0, len(puts), BATCH_WRITE):
            batch = puts[start : start + BATCH_WRITE]
            for _ in range(UNPROCESSED_TRIES):
                got = self._call(
                    "BatchWriteItem",
                    gate=False,
                    table_in_request=True,
                    RequestItems={self.table: batch},
                )
                batch = (got.get("UnprocessedItems") or {}).get(self.table) or []
                if not batch:
                    break
                self._sleep(0.05)
            if batch:
                raise self._failed(
                    AwsError("BatchWriteItem", "UnprocessedItems", "DynamoDB kept answers back")
                )

    def answer(self, group_id: str, slot: int) -> str | None:
        got = self._call(
            "GetItem",
            gate=False,
            Key=items.key(items.answer_item(group_id, slot)),
            ConsistentRead=False,
        )
        text = (got.get("Item") or {}).get("answer", {}).get("S")
        return text if isinstance(text, str) else None

    # -- one call -----------------------------------------------------------------------------
    def _call(
        self,
        operation: str,
        *,
        table_in_request: bool = False,
        gate: bool = True,
        retry: RetryPolicy | None = None,
        **params: Any,
    ) -> Any:
        """One call, retried within its second. ``gate``: refused at once while the table is
        down (an arrival's calls: a probe goes alone); a group's own calls (its close, its
        answers) are always asked, each bounded by its second."""
        if gate and not self.health.up:
            raise StoreDown(f"the state table {self.table} failed a moment ago")
        client = self.clients.client("dynamodb", self.region)
        method = getattr(client, _SNAKE[operation])
        if not table_in_request:
            params["TableName"] = self.table
        self.counts["calls"] += 1
        try:
            return (retry or self.retry).run(
                operation,
                lambda: call(operation, method, **params),
                deadline=self._monotonic() + CALL_SECONDS,
                sleep=self._sleep,
                clock=self._monotonic,
            )
        except AwsError as error:
            if error.code == _CONDITION:
                raise _Refused(failed_item(error) or {}) from error
            raise self._failed(error) from error

    def _failed(self, error: AwsError) -> StoreDown:
        self.health.failed()
        down = StoreDown(f"the state table {self.table}: {error}")
        # (A server error answered: the write may have landed, and the table answers, so a
        # read can tell. No answer at all (a table that hangs or refuses) is left there: its
        # read would cost a probe one more second of a table that is down.)
        down.maybe_applied = error.error_class is ErrorClass.TRANSIENT and error.code is not None
        return down

    def _unsound(self, what: str) -> StoreDown:
        return self._failed(AwsError("UpdateItem", "UnsoundItem", what))

    def _expiration(self) -> dict[str, str]:
        return {"N": str(int(self._wall()) + EXPIRATION_SECONDS)}


class _Refused(Exception):
    """A condition that did not hold: the item as it was."""

    def __init__(self, item: dict[str, Any]) -> None:
        super().__init__("the condition did not hold")
        self.item = item


# One try: a join is not asked again blindly (``join``).
_ONCE = RetryPolicy(max_attempts=1)

_SNAKE = {
    "UpdateItem": "update_item",
    "GetItem": "get_item",
    "BatchWriteItem": "batch_write_item",
}
