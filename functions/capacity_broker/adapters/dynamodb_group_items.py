"""The grouped probes' items in the state table (``dynamodb_group``): their ids, and how what
is read back is checked (the table is shared: a number that is not a finite one, a state that
is not one of the protocol's, is read as nothing, never believed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..domain.group import Ending, GroupState, KindItem

# Not "group#", the previous protocol's: during a deploy, the two versions never read each
# other's items (the new one's containers meet apart from the old one's).
PREFIX = "meet#"


def kind_item(kind: str) -> str:
    return f"{PREFIX}{kind}"


def group_item(group_id: str) -> str:
    return f"{PREFIX}{group_id}"


def answer_item(group_id: str, slot: int) -> str:
    return f"{PREFIX}{group_id}#{slot}"


def key(item_id: str) -> dict[str, Any]:
    return {"id": {"S": item_id}}


def names(*names: str) -> dict[str, str]:
    """Every attribute by a placeholder (DynamoDB reserves words such as ``st``'s neighbours)."""
    return {f"#{name}": ("expiration" if name == "exp" else name) for name in names}


def text(item: Mapping[str, Any], name: str) -> str | None:
    value = (item.get(name) or {}).get("S")
    return value if isinstance(value, str) else None


def number(item: Mapping[str, Any], name: str) -> float | None:
    """A finite number attribute, or None (the table is shared: what is read is checked)."""
    text = (item.get(name) or {}).get("N")
    try:
        value = float(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if value is not None and abs(value) < 1e12 else None


def _state(item: Mapping[str, Any]) -> GroupState | None:
    try:
        found = text(item, "st")
        return GroupState(found) if found is not None else None
    except ValueError:
        return None


def kind(item: Mapping[str, Any]) -> KindItem:
    slots = number(item, "n")
    patience = number(item, "p")
    return KindItem(
        seen=text(item, "seen"),
        group_id=text(item, "gid"),
        state=_state(item),
        slots=int(slots) if slots is not None and slots >= 0 else 0,
        patience=patience if patience is not None and patience >= 0 else float("inf"),
        closed_by=text(item, "cb"),
    )


def ending(item: Mapping[str, Any]) -> Ending:
    given_back = (item.get("given_back") or {}).get("BOOL")
    return Ending(_state(item), given_back is True)
