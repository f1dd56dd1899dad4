"""What the broker learned: ``history`` reads the capacity memory (contract: ``history``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from ..adapters import aws
from ..models.history import HistoryRow
from . import regions as where
from . import when
from .base import BrokerBase, _arguments
from .results import BrokerError, InvalidArguments


class History(BrokerBase):
    """The capacity memory, per (region, AZ id, instance type)."""

    def history(
        self,
        instance_types: Sequence[str] | str | None = None,
        regions: Sequence[str] | str | None = None,
        since: datetime | timedelta | str | None = None,
    ) -> list[HistoryRow]:
        """The capacity memory, one row per (region, AZ id, instance type): what the broker's
        attempts found there and the reservation-seconds it spent (contract: ``history``).
        Read from the state table when there is one (every container's and client's memory),
        else this broker's own. ``since``: a moment, or how long ago (``timedelta`` or "1h",
        "2d": ``when.ago``), within ten years (default: all kept)."""
        with _arguments():
            start = None if since is None else when.since(since)
        if self.function_prefix and not self.state_table:
            raise InvalidArguments(
                [
                    (
                        "state_table",
                        "the deployed functions keep their memory in the state table: pass "
                        "state_table= (the stack's StateTableName output; CLI: --state-table) "
                        "or set BROKER_STATE_TABLE",
                    )
                ]
            )
        wanted = where.check(where.region_list(regions))
        memory = self.memory
        # What this process learnt after its last answers goes to the table first.
        memory.flush(everything=True)
        try:
            return memory.history(
                instance_types=where.names(instance_types) or None,
                regions=None if not wanted or where.EVERY_REGION in wanted else wanted,
                since=start.timestamp() if start is not None else None,
            )
        except aws.AwsError as error:
            raise BrokerError(f"Could not read the capacity memory: {error.message}") from None
