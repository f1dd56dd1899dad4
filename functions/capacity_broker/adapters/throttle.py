"""Client-side pacing at EC2's published request rates, so bursts wait instead of failing.

EC2 throttles per account and region with token buckets (mutating actions: bucket 50,
refill 5/s; non-mutating: 100, 20/s). A sweep of thousands of cancels that fires at will
only collects RequestLimitExceeded; pacing at the refill rate reaches the same end sooner and
leaves room for the account's other callers. Rates can be scaled (benchmarks compress time)
with BROKER_EC2_RATE_SCALE.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

PUBLISHED = {"mutating": (50.0, 5.0), "non_mutating": (100.0, 20.0)}


def action_group(action: str) -> str:
    return "non_mutating" if action.startswith(("Describe", "Get", "List")) else "mutating"


class Bucket:
    def __init__(
        self,
        capacity: float,
        refill: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.capacity = capacity
        self.refill = refill
        self.tokens = capacity
        self._clock = clock
        self._sleep = sleep
        self._stamp = clock()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take a token, waiting for one if needed; returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                self.tokens = min(self.capacity, self.tokens + (now - self._stamp) * self.refill)
                self._stamp = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return waited
                pause = (1 - self.tokens) / self.refill
            self._sleep(pause)
            waited += pause


class Pacer:
    """One bucket per (region, action group), shared by every thread of the container."""

    def __init__(self, scale: float | None = None) -> None:
        if scale is None:
            scale = float(os.environ.get("BROKER_EC2_RATE_SCALE") or 1.0)
        self.scale = scale
        self._buckets: dict[tuple[str, str], Bucket] = {}
        self._lock = threading.Lock()

    def acquire(self, region: str, action: str) -> float:
        group = action_group(action)
        key = (region, group)
        bucket = self._buckets.get(key)
        if bucket is None:
            with self._lock:
                bucket = self._buckets.get(key)
                if bucket is None:
                    capacity, refill = PUBLISHED[group]
                    bucket = self._buckets[key] = Bucket(capacity, refill * self.scale)
        return bucket.acquire()


pacer = Pacer()
