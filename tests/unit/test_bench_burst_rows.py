"""Issue 39's burst rows (``bench/report.py``, ``bench/burst.py``): what makes a run of the class
count, how spread arrivals start, which answers are wrong against the sequential oracle, and
that a row says MISSED when its figure misses. The figures themselves are the bench's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from bench.burst import PLENTY, SUBNETS, spread, wrong  # noqa: E402 - the root is put on sys.path first
from bench.report import class_run_met, rows_for  # noqa: E402


def _run(**more: Any) -> dict[str, Any]:
    bill = {
        "write_units": 600.0,
        "read_units": 400.0,
        "write_units_per_desktop": 3.0,
        "read_units_per_desktop": 2.0,
        "busiest_key_write_units": 90.0,
        "busiest_key_read_units": 10.0,
        "throttled": 0.0,
    }
    return {
        "n": 40,
        "not_available": 0,
        "wrong": 0,
        "throttled_share": 0.0,
        "throttled": 0,
        "ec2_calls": 100,
        "p50_s": 3.0,
        "p99_s": 8.0,
        "left_holding": 0,
        "table_bill": bill,
        **more,
    }


def test_a_run_counts_only_when_every_desktop_is_answered_right_in_time_and_unthrottled() -> None:
    assert class_run_met(_run())
    assert not class_run_met(_run(not_available=1))
    assert not class_run_met(_run(wrong=1))
    assert not class_run_met(_run(throttled_share=0.051))
    assert not class_run_met(_run(p99_s=10.01))


def test_a_spread_class_starts_evenly_over_its_seconds() -> None:
    assert spread(40, 10.0)[:3] == [0.0, 0.25, 0.5]
    assert spread(40, 10.0)[-1] == 9.75


def test_answers_beyond_the_oracle_s_count_for_their_subnet_are_wrong() -> None:
    def at(*where: int) -> list[dict[str, Any]]:
        return [{"subnet_id": SUBNETS[s]} for s in where]

    assert wrong(at(2, 2, 2), 3, PLENTY) == 0
    assert wrong(at(2, 3), 2, PLENTY) == 1  # the fourth subnet while the third had room
    room = (2, 0, 100, 100)
    assert wrong(at(2, 0, 2, 0), 4, room) == 0  # arrival order is the class's: a multiset
    assert wrong(at(0, 0, 0, 2), 4, room) == 1  # three in a subnet with room for two


def _burst(cold: list[dict[str, Any]], crash_s: float, hung_s: float) -> dict[str, Any]:
    lone = {"median_s": 1.0, "seconds": [1.0], "statuses": {"available": 1}}
    return {
        "grouping_available": True,
        "classes": {"cold": {"n": 40, "spread_s": 0.0, "runs": cold}},
        "runs": {},
        "skew": {
            "in_step": _run(subnets={SUBNETS[0]: 8, SUBNETS[2]: 8}),
            "skewed": _run(subnets={SUBNETS[2]: 8, SUBNETS[0]: 8}),
            "capacity": [8, 0, 100_000, 100_000],
        },
        "crash": {
            "seconds_until_nothing_held": crash_s,
            "formed": True,
            "held_at_kill": 1,
            "members": 4,
            "first_subnet_answers": 4,
        },
        "lone": {
            "default": lone,
            "no_table": lone,
            "hung_table": {**lone, "median_s": hung_s},
        },
    }


def _verdicts(results: dict[str, Any]) -> dict[str, str]:
    return {row.name.split(":")[0]: row.verdict for row in rows_for(results)}


def test_the_rows_say_met_and_missed_as_measured() -> None:
    met = _verdicts({"burst": _burst([_run()] * 10, 12.0, 1.2)})
    missed = _verdicts({"burst": _burst([_run()] * 9 + [_run(p99_s=25.0)], 31.0, 6.0)})
    cold = next(k for k in met if k.startswith("class of 40 cold (one-type"))
    crash = next(k for k in met if k.startswith("leader SIGKILLed"))
    hung = next(k for k in met if "hangs" in k)
    skew = next(k for k in met if "clocks off" in k)
    assert (met[cold], met[crash], met[hung], met[skew]) == ("met",) * 4
    assert (missed[cold], missed[crash], missed[hung]) == ("MISSED",) * 3


def test_fewer_runs_than_the_issue_s_ten_are_for_the_record_not_a_verdict() -> None:
    verdicts = _verdicts({"burst": _burst([_run()] * 2, 12.0, 1.2)})
    assert next(v for k, v in verdicts.items() if k.startswith("class of 40 cold (")) == "info"


def test_the_wall_time_is_judged_for_the_default_plan_only() -> None:
    def wall(default: bool, seconds: float) -> str:
        meta = {"wall_s": seconds, "default_plan": default, "machine": {"cores": 2}}
        return next(r.verdict for r in rows_for({"meta": meta}) if "wall time" in r.name)

    assert (wall(True, 899.0), wall(True, 901.0), wall(False, 2000.0)) == ("met", "MISSED", "info")
