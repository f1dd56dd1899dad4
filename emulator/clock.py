"""The emulator's wall clock: real time by default, frozen or shifted by tests and demos.

Everything time-dependent in the emulator (EndDate expiry, Capacity Block start and end,
pending reservations becoming active) reads this clock, so a test can move an hour forward
without waiting an hour.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class Clock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offset = timedelta(0)
        self._frozen: datetime | None = None

    def now(self) -> datetime:
        with self._lock:
            if self._frozen is not None:
                return self._frozen
            return datetime.now(UTC) + self._offset

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            delta = timedelta(seconds=seconds)
            if self._frozen is not None:
                self._frozen += delta
            else:
                self._offset += delta
        return self.now()

    def freeze(self, at: datetime | None = None) -> datetime:
        at = at or self.now()
        with self._lock:
            self._frozen = _aware(at)
        return self.now()

    def set(self, at: datetime) -> datetime:
        """Jump to ``at``; the clock keeps running (or stays frozen) from there."""
        with self._lock:
            if self._frozen is not None:
                self._frozen = _aware(at)
            else:
                self._offset = _aware(at) - datetime.now(UTC)
        return self.now()

    def reset(self) -> None:
        with self._lock:
            self._offset = timedelta(0)
            self._frozen = None


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)
