"""What a class cost the state table, read from the emulator's DynamoDB meter
(``emulator.dynamodb_bill``, ``RemoteEmulator.dynamodb_bill``): capacity units as DynamoDB bills
them, per desktop, and the busiest partition key's largest second."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def per_desktop(bill: Mapping[str, Any], table: str, desktops: int) -> dict[str, float]:
    """The meter's report for ``table`` over a class of ``desktops``: write and read units per
    desktop, the most write and read units one partition key was asked for within one second
    (of any table the emulator serves: the state table is the only one), and the calls
    DynamoDB throttled."""
    units = (bill.get("tables") or {}).get(table) or {}
    busiest = bill.get("busiest_key") or {}
    share = max(1, desktops)
    return {
        "write_units": float(units.get("write_units", 0.0)),
        "read_units": float(units.get("read_units", 0.0)),
        "write_units_per_desktop": float(units.get("write_units", 0.0)) / share,
        "read_units_per_desktop": float(units.get("read_units", 0.0)) / share,
        "busiest_key_write_units": float((busiest.get("write") or {}).get("units", 0.0)),
        "busiest_key_read_units": float((busiest.get("read") or {}).get("units", 0.0)),
        "throttled": float(units.get("throttled", 0)),
    }
