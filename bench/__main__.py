"""``make bench`` (``python -m bench``): the broker's speed, as ratios measured in one run.

Writes ``bench/results.json`` and prints a table. Not part of ``make test``: targets are judged
here, never asserted in the test suite. ``python -m bench --help`` for the knobs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .harness import prepare_environment

RESULTS = Path(__file__).resolve().parent / "results.json"
BENCHES = ("probe", "reserve", "fanout", "cleaner", "pacing", "capacity", "imports", "burst")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--only", default=",".join(BENCHES), help="comma list of " + ", ".join(BENCHES)
    )
    parser.add_argument(
        "--reps",
        type=int,
        default=5,
        help="timed repetitions of probe/reserve/fanout/capacity (9 before issue 39's rows)",
    )
    parser.add_argument(
        "--scales",
        default="5",
        help="cleaner time compressions S, comma list (the first is the measurement of record; "
        "1 = EC2's real rates, 2 more minutes: '1,5' before issue 39's rows)",
    )
    parser.add_argument(
        "--owned", type=int, default=2000, help="owned leaked reservations (cleaner)"
    )
    parser.add_argument("--foreign", type=int, default=2000, help="foreign reservations (cleaner)")
    parser.add_argument(
        "--pacing-owned",
        type=int,
        default=600,
        help="owned leaked reservations, one region (pacing: raised, default, shared bucket)",
    )
    parser.add_argument("--pacing-foreign", type=int, default=600, help="foreign ones (pacing)")
    parser.add_argument(
        "--pacing-scale",
        type=float,
        default=5.0,
        help="time compression S of the default and shared pacing runs (1 = EC2's real rates, "
        "about 6 minutes: the default before issue 39's rows)",
    )
    parser.add_argument(
        "--pacing-raised-scale",
        type=float,
        default=1.0,
        help="time compression S of the raised pacing run (bucket 10x the default; 1, about 13 s: "
        "at 5 its 250 cancels a second are more than this process's cancels through the "
        "in-process emulator, and the row measured that, not the pacing; issue 44)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="fresh interpreters per module (imports; 9 before issue 39's rows)",
    )
    parser.add_argument(
        "--reserve-concurrency",
        default="32,16",
        help="BROKER_MAX_CONCURRENCY values for reserve (32 is the default; 16 = two waves)",
    )
    parser.add_argument(
        "--class-size",
        type=int,
        default=40,
        help="the burst's class of N cold one-type containers (issue 39: 40)",
    )
    parser.add_argument(
        "--class-runs",
        type=int,
        default=10,
        help="runs in a row of that class, all at once and spread (issue 39: 10 of 10)",
    )
    parser.add_argument(
        "--spread-s",
        type=float,
        default=10.0,
        help="seconds the spread class arrives over (probe i starts at i*S/N)",
    )
    parser.add_argument(
        "--snapstart-size",
        type=int,
        default=200,
        help="the one-type class restored from SnapStart whose table bill is judged (200)",
    )
    parser.add_argument(
        "--skew-size",
        type=int,
        default=16,
        help="the class whose containers' clocks are off by up to 60 s (and its in-step twin)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="also issue 23's burst matrix: one-type and mixed classes of --burst-sizes, cold "
        "and SnapStart, the largest with no table, and the lone probe as deployed at 367ccc0",
    )
    parser.add_argument(
        "--burst-sizes",
        default="10,50,200",
        help="class sizes N of the --full matrix (N cold containers probing at once)",
    )
    parser.add_argument(
        "--burst-processes",
        type=int,
        default=10,
        help="worker processes the burst's containers are spread over (memory: ~100 MB each)",
    )
    parser.add_argument(
        "--lone-reps",
        type=int,
        default=5,
        help="lone probes each way (burst; with a table, without, with a hung one; 11 before)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a fast smoke run (fewer of everything)"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.rounds, args.owned, args.foreign, args.scales = 3, 3, 600, 600, "5"
        args.pacing_owned, args.pacing_foreign, args.pacing_scale = 300, 300, 5.0
        args.class_runs, args.snapstart_size, args.lone_reps = 2, 50, 3
    return args


def _plan(args: argparse.Namespace) -> dict[str, Any]:
    """What a run measures: its arguments but where it writes."""
    return {k: v for k, v in vars(args).items() if k != "output"}


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            cwd=Path(__file__).resolve().parent,
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    prepare_environment()
    # Imported after the environment is set: boto3 and the broker read it at import.
    from . import harness
    from .report import rows_for

    wanted = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = sorted(set(wanted) - set(BENCHES))
    if unknown:
        _say(f"unknown benchmark(s): {', '.join(unknown)}")
        return 2
    results: dict[str, Any] = {
        "meta": {
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": _commit(),
            "machine": harness.machine(),
            "load_average_before": harness.load_average(),
            "arguments": {k: str(v) for k, v in vars(args).items()},
        }
    }
    begun = time.perf_counter()
    for name in wanted:
        _say(f"bench: {name} ...")
        started = time.perf_counter()
        results[name] = _run(name, args)
        results[name]["bench_wall_s"] = round(time.perf_counter() - started, 1)
        _say(f"bench: {name} done in {results[name]['bench_wall_s']} s")
    results["meta"]["load_average_after"] = harness.load_average()
    results["meta"]["wall_s"] = round(time.perf_counter() - begun, 1)
    # The wall-time row judges the default plan only: every benchmark, nothing --full.
    results["meta"]["default_plan"] = _plan(args) == _plan(_arguments([]))
    rows = rows_for(results)
    results["table"] = [row.to_dict() for row in rows]
    args.output.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")

    from .formulas import table

    print(table(rows))
    print(f"\nwrote {args.output} ({results['meta']['wall_s']} s)")
    return 0


def _run(name: str, args: argparse.Namespace) -> dict[str, Any]:
    if name == "probe":
        from .placement import bench_probe

        return bench_probe(args.reps)
    if name == "reserve":
        from .placement import bench_reserve

        levels = [int(c) for c in args.reserve_concurrency.split(",") if c.strip()]
        return bench_reserve(max(3, args.reps - 2), levels)
    if name == "fanout":
        from .fanout import bench_fanout

        return bench_fanout(args.reps)
    if name == "cleaner":
        from .sweep import bench_cleaner

        scales = [float(x) for x in args.scales.split(",") if x.strip()]
        # The phase before the first cancel does not depend on S: profile it once.
        return {
            "runs": {
                f"{s:g}": bench_cleaner(s, args.owned, args.foreign, profile=(i == 0))
                for i, s in enumerate(scales)
            }
        }
    if name == "pacing":
        from .pacing import bench_pacing

        return bench_pacing(
            args.pacing_owned,
            args.pacing_foreign,
            args.pacing_scale,
            raised_scale=args.pacing_raised_scale,
        )
    if name == "capacity":
        from .listing import bench_capacity

        return bench_capacity(args.reps)
    if name == "burst":
        from .burst import bench_burst

        sizes = [int(n) for n in args.burst_sizes.split(",") if n.strip()]
        return bench_burst(
            args.burst_processes,
            args.lone_reps,
            class_size=args.class_size,
            class_runs=args.class_runs,
            spread_s=args.spread_s,
            snapstart_size=args.snapstart_size,
            skew_size=args.skew_size,
            full_sizes=sizes if args.full else None,
        )
    from .imports import bench_imports

    return bench_imports(args.rounds)


if __name__ == "__main__":
    sys.exit(main())
