"""Retry pacing: jittered exponential delays, a deadline budget, and retry-after for schedulers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Uniform(Protocol):
    """What ``delay`` needs from a random source (``random.Random`` has it)."""

    def uniform(self, a: float, b: float) -> float: ...


# Past this exponent base * 2**attempt exceeds any sane cap; stop computing it (no overflow).
_MAX_EXPONENT = 62


def delay(attempt: int, base: float, cap: float, rng: Uniform) -> float:
    """Full-jitter backoff: uniform in [0, min(cap, base * 2**attempt)] seconds.

    Full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter") spreads concurrent
    retries of throttled calls so they do not hit the API again in lockstep.
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if base < 0 or cap < 0:
        raise ValueError("base and cap must be >= 0")
    ceiling = cap if attempt > _MAX_EXPONENT else min(cap, base * 2**attempt)
    return min(ceiling, max(0.0, rng.uniform(0.0, ceiling)))


@dataclass(frozen=True)
class Budget:
    """A deadline on a monotonic clock; every "now" is passed in (``time.monotonic()``)."""

    deadline: float

    @classmethod
    def starting(cls, now: float, seconds: float) -> Budget:
        return cls(now + seconds)

    def remaining(self, now: float) -> float:
        return max(0.0, self.deadline - now)

    def expired(self, now: float) -> bool:
        return now >= self.deadline

    def allows(self, pause: float, now: float) -> bool:
        """True when sleeping ``pause`` seconds still leaves time before the deadline."""
        return pause >= 0 and now + pause < self.deadline


RETRY_AFTER_BASE = 60
RETRY_AFTER_CAP = 900


def retry_after_seconds(attempt: int | None) -> int:
    """How long a scheduler should wait before asking again after ``no_capacity``.

    Doubles with the scheduler's own attempt count (60, 120, 240, 480, then 900 s at most),
    deterministic so that a retried request gets the same answer. Unknown count = first ask.
    """
    if attempt is None:
        attempt = 0
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    # The exponent is bounded so a huge attempt count costs nothing (2**10 is past the cap).
    return min(RETRY_AFTER_CAP, RETRY_AFTER_BASE * (1 << min(attempt, 10)))
