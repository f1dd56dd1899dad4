"""Where to try: (instance type, subnet) pairs in the caller's order of preference."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Pair:
    """One place a hold can be tried; ``index`` is its rank (0 = most preferred)."""

    instance_type: str
    subnet_id: str
    index: int


def _require_unique(label: str, values: Sequence[str]) -> None:
    if not values:
        raise ValueError(f"{label} must not be empty")
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{label} lists {value!r} twice")
        seen.add(value)


def pairs(instance_types: Sequence[str], subnet_ids: Sequence[str]) -> list[Pair]:
    """Every (type, subnet) pair, type-major: all subnets of the first type come first.

    Type-major because the scheduler's first instance type is what the job was sized for;
    a second-choice type in the best subnet is worse than the first-choice type anywhere.
    """
    _require_unique("instance_types", instance_types)
    _require_unique("subnet_ids", subnet_ids)
    ranked = ((t, s) for t in instance_types for s in subnet_ids)
    return [Pair(t, s, index) for index, (t, s) in enumerate(ranked)]
