"""A discrete-event model of the pacing benchmark, on virtual time (seconds to run, not
minutes): how the tuning of ``adapters/throttle.py`` was chosen, and the comparison with
botocore's adaptive retry mode. Not part of ``make bench``, whose figures are measured.

    .venv/bin/python -m bench.pacing_model

The model: one EC2 bucket (the emulator's ``TokenBucket``: burst, refill, another client
taking a share), ``workers`` threads each taking the next cancel, a fixed latency before EC2
takes the token (the emulator sleeps its latency, then checks the bucket), and the broker's
retry (full-jitter backoff, 0.2 s doubling). No CPU, no listing: the ratios are the pacing's alone.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from typing import Any

from capacity_broker.adapters.throttle import AdaptiveBucket, Ticket
from capacity_broker.domain.buckets import Limits

from emulator.throttling import TokenBucket


class Fixed:
    """The pacer before adaptation: EC2's published bucket, whatever EC2 answers."""

    def __init__(self, limits: Limits, scale: float, clock: Any, **_: Any) -> None:
        self.burst, self.rate = limits.burst, limits.refill * scale
        self.tokens, self.stamp = limits.burst, clock()

    def try_take(self, now: float) -> Ticket | float:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return Ticket(now, probe=False)
        return max(1e-3, (1 - self.tokens) / self.rate)

    def answered(self, ticket: Ticket, now: float) -> None:
        pass

    def throttled(self, ticket: Ticket, now: float) -> None:
        pass


class BotocoreAdaptive:
    """botocore's ``ClientRateLimiter`` (retries/adaptive.py) on the model's clock: its own
    ``CubicCalculator`` and ``RateClocker``, and its token bucket's rules (capacity = one second
    of the rate, at least 0.5 a second; off until the first throttle)."""

    def __init__(self, limits: Limits, scale: float, clock: Any, **_: Any) -> None:
        from botocore.retries.adaptive import RateClocker
        from botocore.retries.throttling import CubicCalculator

        class Clock:
            def current_time(self) -> float:
                return float(clock())

        self._clock = clock
        self.cubic = CubicCalculator(starting_max_rate=0, start_time=clock())
        self.clocker = RateClocker(Clock())
        self.enabled = False
        self.rate, self.capacity, self.tokens, self.stamp = 0.5, 1.0, 0.0, clock()

    def _refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def try_take(self, now: float) -> Ticket | float:
        if not self.enabled:
            return Ticket(now, probe=False)
        self._refill(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return Ticket(now, probe=False)
        return max(1e-3, (1 - self.tokens) / self.rate)

    def _answer(self, now: float, throttled: bool) -> None:
        measured = self.clocker.record()
        if throttled:
            used = measured if not self.enabled else min(measured, self.rate)
            new = self.cubic.error_received(used, now)
            self.enabled = True
        else:
            new = self.cubic.success_received(now)
        self._refill(now)
        value = min(new, 2 * measured)
        self.rate, self.capacity = max(value, 0.5), max(value, 1.0)
        self.tokens = min(self.tokens, self.capacity)

    def answered(self, ticket: Ticket, now: float) -> None:
        self._answer(now, False)

    def throttled(self, ticket: Ticket, now: float) -> None:
        self._answer(now, True)


@dataclass
class Outcome:
    seconds: float
    bound: float
    calls: int
    throttled: int

    @property
    def ratio(self) -> float:
        return self.seconds / self.bound

    @property
    def throttled_share(self) -> float:
        return self.throttled / self.calls


def run(
    pacer: type = AdaptiveBucket,
    calls: int = 600,
    burst: float = 50,
    refill: float = 5,
    other_share: float = 0.0,
    workers: int = 32,
    latency: float = 0.1,
    seed: int = 1,
) -> Outcome:
    rng = random.Random(seed)
    now = [0.0]
    # The emulator's own bucket (and other client), on the model's clock.
    ec2 = TokenBucket(burst, refill, other_rate=other_share * refill, clock=lambda: now[0])
    bucket = pacer(Limits(50, 5), 1.0, clock=lambda: now[0])
    events: list[tuple[float, int, str, Any]] = []
    order = iter(range(10**9))
    for _ in range(workers):
        heapq.heappush(events, (0.0, next(order), "want", None))
    left, sent, throttled, last = calls, 0, 0, 0.0
    while events:
        at, _, kind, data = heapq.heappop(events)
        now[0] = at
        if kind == "want":
            if data is None:
                if not left:
                    continue
                left, data = left - 1, 0
            got = bucket.try_take(at)
            if isinstance(got, Ticket):
                sent += 1
                heapq.heappush(events, (at + latency, next(order), "arrive", (data, got)))
            else:
                heapq.heappush(events, (at + got, next(order), "want", data))
        else:
            attempt, ticket = data
            if ec2.take():
                bucket.answered(ticket, at)
                last = at
                heapq.heappush(events, (at, next(order), "want", None))
            else:
                throttled += 1
                bucket.throttled(ticket, at)
                pause = rng.uniform(0, min(5.0, 0.2 * 2**attempt))
                heapq.heappush(events, (at + pause, next(order), "want", attempt + 1))
    return Outcome(last, max(0.0, calls - burst) / refill, sent, throttled)


CASES = {
    "bucket 10x the default": {"refill": 50},
    "the default bucket": {},
    "half the bucket taken": {"other_share": 0.5},
}


def main() -> None:
    pacers = (("broker", AdaptiveBucket), ("fixed (before)", Fixed), ("botocore", BotocoreAdaptive))
    for name, pacer in pacers:
        for case, knobs in CASES.items():
            out = run(pacer, **knobs)
            print(
                f"{name:18} {case:24} {out.seconds:6.1f} s  {out.ratio:.2f}x the bound  "
                f"{out.throttled} of {out.calls} calls throttled ({out.throttled_share:.3f})"
            )


if __name__ == "__main__":
    main()
