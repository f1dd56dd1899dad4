"""The arithmetic behind ``make bench`` (``bench/formulas.py``): the bound the cleaner is judged
against, the verdicts, the operator's numbers and the ``-X importtime`` summary."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from bench.formulas import (  # noqa: E402 - the repository root is put on sys.path first
    Row,
    Target,
    bucket_seconds,
    busiest_share,
    max_cancels_in,
    median,
    parse_importtime,
    ratio,
    reservation_hours_per_day,
    self_time_by_package,
    slowest_modules,
    split_evenly,
    sweep_bound,
    sweep_minutes,
    table,
)


def test_a_full_bucket_lets_the_burst_through_at_once() -> None:
    assert bucket_seconds(50, 50, 5) == 0
    assert bucket_seconds(10, 50, 5) == 0
    assert bucket_seconds(0, 50, 5) == 0


def test_beyond_the_burst_calls_wait_for_the_refill() -> None:
    assert bucket_seconds(51, 50, 5) == pytest.approx(0.2)
    assert bucket_seconds(667, 50, 5) == pytest.approx(123.4)


def test_the_bound_of_one_bucket_is_the_least_time_its_burst_and_refill_allow_the_calls() -> None:
    # The pacing rows: 600 cancels through one bucket; burst + refill x T >= 600.
    assert bucket_seconds(600, 50, 50) == pytest.approx(11.0)  # 10x the default, raised
    assert bucket_seconds(600, 50, 5) == pytest.approx(110.0)  # the default
    assert bucket_seconds(600, 50, 2.5) == pytest.approx(220.0)  # the half another client left


def test_bucket_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="refill"):
        bucket_seconds(10, 50, 0)
    with pytest.raises(ValueError, match="calls"):
        bucket_seconds(-1, 50, 5)


def test_regions_run_in_parallel_so_the_slowest_sets_the_bound() -> None:
    per_region = {"us-east-1": 667, "us-west-2": 667, "eu-west-1": 666}
    assert sweep_bound(per_region) == pytest.approx((667 - 50) / 5)
    assert sweep_bound({"a": 100, "b": 1000}) == pytest.approx(190.0)
    assert sweep_bound({}) == 0


def test_time_scale_divides_the_bound() -> None:
    per_region = {"us-east-1": 667}
    assert sweep_bound(per_region, time_scale=5) == pytest.approx(sweep_bound(per_region) / 5)
    with pytest.raises(ValueError, match="time_scale"):
        sweep_bound(per_region, time_scale=0)


def test_split_evenly_deals_the_remainder_to_the_first() -> None:
    assert split_evenly(2000, ["a", "b", "c"]) == {"a": 667, "b": 667, "c": 666}
    assert sum(split_evenly(7, ["x", "y"]).values()) == 7
    with pytest.raises(ValueError, match="no parts"):
        split_evenly(1, [])


def test_operator_numbers() -> None:
    # 60 probes an hour, each holding 0.11 s: 60 * 24 * 0.11 / 3600 hours a day.
    assert reservation_hours_per_day(60, 0.11) == pytest.approx(0.044)
    # 10,000 leaked in one region at 5/s beyond a burst of 50: 1,990 s.
    assert sweep_minutes(10_000, 1) == pytest.approx(1990 / 60)
    assert sweep_minutes(2000, 3) == pytest.approx(123.4 / 60)
    assert sweep_minutes(2000, 3, overhead_ratio=1.1) == pytest.approx(123.4 * 1.1 / 60)
    # A 15-minute Lambda cancels at most 50 + 900 * 5 in one region.
    assert max_cancels_in(900) == 4550


def test_ratio_and_median() -> None:
    assert ratio(3, 2) == 1.5
    with pytest.raises(ValueError, match="denominator"):
        ratio(1, 0)
    assert median([3, 1, 2]) == 2
    with pytest.raises(ValueError, match="nothing"):
        median([])


def test_busiest_share_tells_one_region_at_a_time_from_side_by_side() -> None:
    serial = [("a", 0.1), ("a", 0.5), ("b", 1.2), ("b", 1.7)]
    assert busiest_share(serial)["median"] == 1.0
    parallel = [("a", 0.1), ("b", 0.2), ("c", 0.3), ("a", 1.1), ("b", 1.2), ("c", 1.3)]
    assert busiest_share(parallel)["median"] == pytest.approx(0.333, abs=1e-3)
    assert busiest_share([])["windows"] == 0


def test_targets_and_verdicts() -> None:
    assert Target(1.5).met(1.5)
    assert not Target(1.5).met(1.51)
    assert Target(0, "exactly").met(0)
    assert not Target(0, "exactly").met(1)
    assert Row("x", 1.2, Target(1.5)).verdict == "met"
    assert Row("x", 1.6, Target(1.5)).verdict == "MISSED"
    assert Row("x", 9.0, None).verdict == "info"


def test_the_table_has_a_line_per_row_and_the_verdicts() -> None:
    text = table(
        [
            Row("probe / floor", 1.19, Target(1.5)),
            Row("foreign", 0, Target(0, "exactly"), unit="count"),
        ]
    )
    lines = text.splitlines()
    assert len(lines) == 4
    assert "1.19x" in lines[2] and "<= 1.5x" in lines[2] and "met" in lines[2]
    assert "= 0" in lines[3]
    share = table([Row("throttled / calls", 0.0164, Target(0.05), unit="share")])
    assert "0.016" in share and "<= 0.05 " in share and "met" in share


IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:       100 |        100 |   _io
import time:      2000 |       5000 |     botocore
import time:      3000 |       3000 |       botocore.client
import time:       500 |       9500 |   capacity_broker.handlers.probe
import time:      4000 |       4000 |     capacity_broker.models
not an import line
"""


def test_importtime_is_parsed_and_summed_by_package() -> None:
    rows = parse_importtime(IMPORTTIME)
    assert [r.module for r in rows] == [
        "_io",
        "botocore",
        "botocore.client",
        "capacity_broker.handlers.probe",
        "capacity_broker.models",
    ]
    assert rows[2].depth == 3
    packages = self_time_by_package(rows)
    assert list(packages) == ["botocore", "capacity_broker", "_io"]
    assert packages["botocore"] == pytest.approx(5.0)
    assert slowest_modules(rows, "capacity_broker", 1) == [("capacity_broker.models", 4.0)]
