"""The arithmetic of the benchmarks, kept pure (no AWS, no emulator) so it can be unit-tested.

Everything here is a definition the report relies on: the token-bucket bound of a sweep, what
a ratio and a verdict are, what an operator's numbers follow from, and how ``python -X
importtime`` output is summed up.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

# EC2's published request token buckets per account and region: (burst, refill per second).
EC2_MUTATING = (50.0, 5.0)


# -- statistics -------------------------------------------------------------------------------


def median(values: Iterable[float]) -> float:
    data = list(values)
    if not data:
        raise ValueError("median of nothing")
    return float(statistics.median(data))


def best(values: Iterable[float]) -> float:
    data = list(values)
    if not data:
        raise ValueError("best of nothing")
    return float(min(data))


def ratio(numerator: float, denominator: float) -> float:
    if denominator <= 0:
        raise ValueError(f"ratio over a non-positive denominator ({denominator})")
    return numerator / denominator


# -- the token-bucket bound of a sweep ----------------------------------------------------------


def bucket_seconds(calls: int, burst: float, refill: float) -> float:
    """Least time ``calls`` requests take through one token bucket that starts full: the first
    ``burst`` go at once, every further one waits for a token at ``refill`` per second."""
    if calls < 0 or burst < 0 or refill <= 0:
        raise ValueError("calls and burst must be >= 0 and refill > 0")
    return max(0.0, calls - burst) / refill


def sweep_bound(
    per_region: Mapping[str, int],
    burst: float = EC2_MUTATING[0],
    refill: float = EC2_MUTATING[1],
    time_scale: float = 1.0,
) -> float:
    """The cleaner's bound: ``max over regions r of max(0, n_r - burst) / (refill * scale)``.

    Each region has its own bucket and regions are swept in parallel, so the slowest region
    sets the bound. ``time_scale`` multiplies the refill rate (the benchmark compresses time
    the same way on both sides: the emulator's buckets and the broker's pacer).
    """
    if time_scale <= 0:
        raise ValueError("time_scale must be > 0")
    return max(
        (bucket_seconds(n, burst, refill * time_scale) for n in per_region.values()), default=0.0
    )


def split_evenly(total: int, parts: Sequence[str]) -> dict[str, int]:
    """``total`` items dealt round-robin over ``parts`` (what the benchmark seeds)."""
    if not parts:
        raise ValueError("no parts")
    base, extra = divmod(total, len(parts))
    return {p: base + (1 if i < extra else 0) for i, p in enumerate(parts)}


def busiest_share(events: Iterable[tuple[str, float]], window: float = 1.0) -> dict[str, float]:
    """``events`` are (key, seconds). Per ``window`` of time, the share of the window's events
    that belong to its most frequent key; summarized as median and mean over the windows."""
    windows: dict[int, Counter[str]] = defaultdict(Counter)
    for key, at in events:
        windows[int(at // window)][key] += 1
    shares = [max(c.values()) / sum(c.values()) for c in windows.values() if c]
    if not shares:
        return {"windows": 0, "median": 0.0, "mean": 0.0}
    return {
        "windows": len(shares),
        "median": round(median(shares), 3),
        "mean": round(sum(shares) / len(shares), 3),
    }


def rounds(calls: Iterable[tuple[str, float]], gap: float = 0.05) -> list[dict[str, object]]:
    """(action, start seconds) grouped into rounds: a call that starts more than ``gap`` after
    the first call of the current round opens the next one. Shows how many round trips a flow
    makes one after another, and what each carried (``at_ms``: from the first call)."""
    ordered = sorted(calls, key=lambda c: c[1])
    if not ordered:
        return []
    origin = ordered[0][1]
    groups: list[tuple[float, Counter[str]]] = []
    for action, at in ordered:
        if not groups or at - groups[-1][0] > gap:
            groups.append((at, Counter()))
        groups[-1][1][action] += 1
    return [{"at_ms": round((at - origin) * 1000), "calls": dict(c)} for at, c in groups]


# -- what the numbers mean for an operator --------------------------------------------------------


def reservation_hours_per_day(probes_per_hour: float, seconds_held_per_probe: float) -> float:
    """Instance-reservation hours a day that probing keeps held (per instance probed)."""
    return probes_per_hour * 24 * seconds_held_per_probe / 3600


def sweep_minutes(
    leaked: int,
    regions: int,
    burst: float = EC2_MUTATING[0],
    refill: float = EC2_MUTATING[1],
    overhead_ratio: float = 1.0,
) -> float:
    """Minutes to cancel ``leaked`` reservations spread evenly over ``regions`` at EC2's real
    rates, times the measured ratio to the bound."""
    if regions < 1:
        raise ValueError("at least one region")
    per_region = math.ceil(leaked / regions)
    return bucket_seconds(per_region, burst, refill) * overhead_ratio / 60


def max_cancels_in(
    seconds: float, burst: float = EC2_MUTATING[0], refill: float = EC2_MUTATING[1]
) -> int:
    """Cancels one region's bucket allows in ``seconds`` (a Lambda's 15-minute ceiling, say)."""
    return int(burst + max(0.0, seconds) * refill)


# -- verdicts and the table --------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """``value <= limit`` (``at_most``) or ``value == limit`` (``exactly``)."""

    limit: float
    kind: Literal["at_most", "exactly"] = "at_most"

    def met(self, value: float) -> bool:
        if self.kind == "exactly":
            return value == self.limit
        return value <= self.limit

    def text(self) -> str:
        limit = f"{self.limit:g}"
        return f"= {limit}" if self.kind == "exactly" else f"<= {limit}"


@dataclass(frozen=True)
class Row:
    name: str
    value: float
    target: Target | None
    unit: str = "x"
    detail: str = ""

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "info"
        return "met" if self.target.met(self.value) else "MISSED"

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "value": round(self.value, 4),
            "unit": self.unit,
            "target": self.target.text() if self.target else None,
            "verdict": self.verdict,
            "detail": self.detail,
        }


def format_value(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "count":
        return f"{value:.0f}"
    if unit == "share":
        return f"{value:.3f}"
    if unit == "s":
        return f"{value:.3f} s"
    return f"{value:g} {unit}"


def table(rows: Sequence[Row]) -> str:
    """A plain-text table (also valid Markdown)."""
    header = ("measure", "measured", "target", "verdict", "detail")
    body = [
        (
            r.name,
            format_value(r.value, r.unit),
            (r.target.text() + ("x" if r.unit == "x" else "")) if r.target else "-",
            r.verdict,
            r.detail,
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(b) for b in body)])


# -- python -X importtime ----------------------------------------------------------------------

_IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)\s*$")


@dataclass(frozen=True)
class Imported:
    module: str
    self_us: int
    cumulative_us: int
    depth: int


def parse_importtime(text: str) -> list[Imported]:
    """The rows of ``python -X importtime`` (stderr), header and other lines skipped."""
    rows = []
    for raw in text.splitlines():
        match = _IMPORTTIME.match(raw)
        if match:
            self_us, cumulative_us, indent, module = match.groups()
            rows.append(Imported(module, int(self_us), int(cumulative_us), len(indent) // 2))
    return rows


def self_time_by_package(rows: Iterable[Imported]) -> dict[str, float]:
    """Milliseconds of import work per top-level package (self times, so nothing counts twice),
    largest first."""
    totals: dict[str, int] = defaultdict(int)
    for row in rows:
        totals[row.module.split(".")[0]] += row.self_us
    return {k: v / 1000 for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def slowest_modules(
    rows: Iterable[Imported], prefix: str = "", limit: int = 10
) -> list[tuple[str, float]]:
    """The modules (under ``prefix``) with the largest self time, in milliseconds."""
    chosen = [r for r in rows if r.module == prefix.rstrip(".") or r.module.startswith(prefix)]
    chosen.sort(key=lambda r: -r.self_us)
    return [(r.module, r.self_us / 1000) for r in chosen[:limit]]
