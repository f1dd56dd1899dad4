"""The capacity memory's history (contract: ``capacity-broker history``): its tallies summed
per (region, AZ id, instance type).

A module of its own beside ``domain.memory``: only ``capacity-broker history`` and the client
read the history (``logic.memory.CapacityMemory.history``); the probe and reserve that learn
into the memory never build these lines (cold imports).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .memory import Seen, Tally, hour_of, merge


@dataclass(frozen=True)
class HistoryLine:
    """One (region, AZ id, instance type) of history (contract: ``capacity-broker history``)."""

    region: str
    availability_zone_id: str
    instance_type: str
    counts: Mapping[Seen, int]
    last_available: float | None
    last_insufficient: float | None
    reservation_seconds: float

    @property
    def attempts(self) -> int:
        return sum(self.counts.values())

    @property
    def success_rate(self) -> float | None:
        """The share of capacity answers that found capacity. Quota and other errors say
        nothing about capacity, so they count as attempts but not here."""
        answered = sum(
            self.counts.get(seen, 0)
            for seen in (Seen.AVAILABLE, Seen.INSUFFICIENT, Seen.UNSUPPORTED)
        )
        return self.counts.get(Seen.AVAILABLE, 0) / answered if answered else None


def history(
    tallies: Iterable[Tally],
    since: float | None = None,
    instance_types: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
) -> list[HistoryLine]:
    """Tallies summed per (region, AZ id, instance type), sorted. Counts are kept per hour,
    so ``since`` includes the whole hour it falls in; the last times are exact (a last time
    before ``since`` is left out)."""
    wanted_types = set(instance_types) if instance_types else None
    wanted_regions = set(regions) if regions else None
    first_hour = hour_of(since) if since is not None else None
    counts: dict[tuple[str, str, str], dict[Seen, int]] = {}
    last: dict[tuple[str, str, str, Seen], float] = {}
    seconds: dict[tuple[str, str, str], float] = {}
    for tally in merge(tallies).values():
        if wanted_types is not None and tally.instance_type not in wanted_types:
            continue
        if wanted_regions is not None and tally.region not in wanted_regions:
            continue
        if first_hour is not None and tally.hour < first_hour:
            continue
        for (az, seen), n in tally.counts.items():
            row = counts.setdefault((tally.region, az, tally.instance_type), {})
            row[seen] = row.get(seen, 0) + n
        for (az, seen), at in tally.last.items():
            key = (tally.region, az, tally.instance_type, seen)
            last[key] = max(at, last.get(key, at))
        for az, spent in tally.reservation_seconds.items():
            where = (tally.region, az, tally.instance_type)
            seconds[where] = seconds.get(where, 0.0) + spent
            counts.setdefault(where, {})

    def recent(where: tuple[str, str, str], seen: Seen) -> float | None:
        at = last.get((*where, seen))
        return at if at is not None and (since is None or at >= since) else None

    return [
        HistoryLine(
            region=where[0],
            availability_zone_id=where[1],
            instance_type=where[2],
            counts=dict(row),
            last_available=recent(where, Seen.AVAILABLE),
            last_insufficient=recent(where, Seen.INSUFFICIENT),
            reservation_seconds=seconds.get(where, 0.0),
        )
        for where, row in sorted(counts.items())
    ]
