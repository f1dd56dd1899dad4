"""How the operator names a cluster's reserved pool (``PoolSpec``: resource groups and/or one
tag, and the order of its kinds), parsed from the settings or a node set. The settings, which
every entry point reads, need only this; the pool's rules are ``domain.pool`` (cold import,
issue 44). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from .tags import MAX_KEY_LENGTH, MAX_VALUE_LENGTH, TAG_PREFIX


class Rung(StrEnum):
    """What served an instance: a pool reservation's kind, the broker's hold, or On-Demand."""

    ODCR = "odcr"
    CAPACITY_BLOCK = "capacity-block"
    INTERRUPTIBLE = "interruptible"
    HOLD = "hold"
    ON_DEMAND = "on-demand"


# The operator's priority among the pool's kinds when nothing else is configured: what is
# paid for whether used or not and will not be taken away first (ODCR), then an active
# Capacity Block (prepaid, but ends), then an interruptible reservation (may be reclaimed).
DEFAULT_PRIORITY: tuple[Rung, ...] = (Rung.ODCR, Rung.CAPACITY_BLOCK, Rung.INTERRUPTIBLE)
POOL_RUNGS = frozenset(DEFAULT_PRIORITY)


class PoolSpecError(ValueError):
    """A pool setting that cannot name a pool (the message says why)."""


@dataclass(frozen=True)
class PoolSpec:
    """How the operator names the pool: resource groups (names or ARNs) and/or one tag."""

    groups: tuple[str, ...] = ()
    tag_key: str | None = None
    tag_value: str | None = None
    priority: tuple[Rung, ...] = DEFAULT_PRIORITY

    @property
    def empty(self) -> bool:
        return not self.groups and self.tag_key is None

    @classmethod
    def parse(
        cls,
        groups: Iterable[str] = (),
        tag: str | None = None,
        priority: Iterable[str] | None = None,
    ) -> PoolSpec:
        """From the deploy options' or a node set's text: ``tag`` is ``key=value``; ``priority``
        names pool kinds (``odcr``, ``capacity-block``, ``interruptible``), each at most once."""
        key = value = None
        if tag:
            key, sep, value = tag.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key:
                raise PoolSpecError(f"pool tag {tag!r} is not key=value")
            if len(key) > MAX_KEY_LENGTH or len(value) > MAX_VALUE_LENGTH:
                # No reservation can carry it: the pool it names would be silently empty.
                raise PoolSpecError(
                    f"pool tag: EC2 tag keys are at most {MAX_KEY_LENGTH} characters and values "
                    f"at most {MAX_VALUE_LENGTH} (this key {len(key)}, value {len(value)})"
                )
            if key.casefold().startswith(TAG_PREFIX):
                # The broker's own keys mark what it owns; a pool is what it does not own.
                raise PoolSpecError(f"pool tag key {key!r} is one of the broker's own keys")
        order: tuple[Rung, ...] = DEFAULT_PRIORITY
        if priority is not None:
            named = [p.strip() for p in priority if p.strip()]
            try:
                order = tuple(Rung(p) for p in named)
            except ValueError:
                raise PoolSpecError(
                    f"pool priority {named!r}: each must be one of "
                    + ", ".join(r.value for r in DEFAULT_PRIORITY)
                ) from None
            if len(set(order)) != len(order) or not set(order) <= POOL_RUNGS or not order:
                raise PoolSpecError(
                    f"pool priority {named!r}: pool kinds, each at most once, at least one"
                )
        return cls(tuple(g.strip() for g in groups if g.strip()), key, value, order)
