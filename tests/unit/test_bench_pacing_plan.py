"""``make bench``'s plan for the pacing rows (issue 44): the raised bucket is swept at EC2's
real rates whatever the other cases' time scale, since at x5 its 250 cancels a second are more
than one process sends through the in-process emulator (the row then measured the process)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from bench import pacing  # noqa: E402 - the repository root is put on sys.path first
from bench.__main__ import _arguments  # noqa: E402
from bench.sweep import Sweep  # noqa: E402


def test_the_default_plan_sweeps_the_raised_bucket_at_real_rates_and_the_others_at_x5() -> None:
    args = _arguments([])
    assert args.pacing_raised_scale == 1.0
    assert args.pacing_scale == 5.0


def test_each_case_is_swept_and_recorded_at_its_own_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    scales: dict[str, float] = {}

    def sweep(spec: Any, regions: list[str], scale: float, profile: bool = False, **knobs: Any):
        name = "raised" if "raised" in knobs else "shared" if "others" in knobs else "default"
        scales[name] = scale
        return Sweep(
            seconds=1.0,
            answer={"cancelled": [], "errors": []},
            calls=[SimpleNamespace(outcome="ok")],
            timeline={},
            overlap={},
            phases={"before_first_cancel": 0.1, "cancelling": 0.8, "after_last_cancel": 0.1},
            owned_left=[],
            foreign_touched=[],
            foreign_cancels=0,
            seed_seconds=0.0,
            dry_seconds=0.0,
            worker_time={},
            cpu_profile=None,
            cancel_bucket=(50.0, 5.0 * scale),
            pacer={regions[0]: {}},
            others={},
        )

    monkeypatch.setattr(pacing, "measure_sweep", sweep)
    runs = pacing.bench_pacing(60, 60, scale=5.0, raised_scale=1.0)["runs"]
    assert scales == {"raised": 1.0, "default": 5.0, "shared": 5.0}
    assert {name: run["time_scale"] for name, run in runs.items()} == scales
