"""``history``: the capacity memory, one row per (region, AZ id, instance type) (contract,
"Python client and CLI")."""

from __future__ import annotations

from datetime import UTC, datetime

from ..domain.history import HistoryLine
from ..domain.memory import Seen
from .common import ResponseModel
from .times import UtcDateTime


class HistoryRow(ResponseModel):
    """What the broker's attempts found in one place. ``attempts`` counts every create there;
    ``success_rate`` is the share of capacity answers (available, insufficient, unsupported)
    that found capacity, null before the first. Times are UTC; ``reservation_seconds`` is what
    the holds the broker gave back there were held, summed."""

    region: str
    availability_zone_id: str
    instance_type: str
    attempts: int
    available: int
    insufficient: int
    unsupported: int
    limit_exceeded: int
    errors: int
    success_rate: float | None
    last_available: UtcDateTime | None
    last_insufficient: UtcDateTime | None
    reservation_seconds: float

    def to_json_dict(self) -> dict[str, object]:
        # Every contract field, null when unknown (a table's columns do not come and go).
        return self.model_dump(mode="json")

    @classmethod
    def of(cls, line: HistoryLine) -> HistoryRow:
        def moment(at: float | None) -> datetime | None:
            return None if at is None else datetime.fromtimestamp(at, UTC)

        rate = line.success_rate
        return cls(
            region=line.region,
            availability_zone_id=line.availability_zone_id,
            instance_type=line.instance_type,
            attempts=line.attempts,
            available=line.counts.get(Seen.AVAILABLE, 0),
            insufficient=line.counts.get(Seen.INSUFFICIENT, 0),
            unsupported=line.counts.get(Seen.UNSUPPORTED, 0),
            limit_exceeded=line.counts.get(Seen.QUOTA, 0),
            errors=line.counts.get(Seen.ERROR, 0),
            success_rate=None if rate is None else round(rate, 4),
            last_available=moment(line.last_available),
            last_insufficient=moment(line.last_insufficient),
            reservation_seconds=round(line.reservation_seconds, 3),
        )
