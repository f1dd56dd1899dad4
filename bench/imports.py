"""Cold import of each handler module against ``import boto3``, each in a fresh interpreter.

Every sample is a new ``python`` process (same interpreter, same environment, bytecode caches
warm) that times the import statement alone, in CPU time of the process and in wall time.
Modules are sampled in turn, N rounds, and the best of each is kept; the ratios use CPU time
(other processes on a shared machine stretch wall time, not CPU). ``python -X importtime`` then
shows where a handler's import time goes.

Bytecode: each target is imported once, writing its bytecode, before the samples, whatever the
caller's ``PYTHONDONTWRITEBYTECODE`` says (without it, every sample of a fresh clone compiles
the broker's sources, and the row measures the compiler).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from .formulas import best, parse_importtime, ratio, self_time_by_package, slowest_modules

HANDLERS = ["probe", "reserve", "release", "cleaner", "capacity"]
BASELINE = "boto3"
# What a handler's import loads from third parties, whatever the broker's own code does: the
# floor its row is judged beside. botocore's session (the broker makes its clients from it, not
# from boto3's), pydantic, Powertools' Logger (and the utility that gives the broker's loggers
# its format), Metrics and parser. Not ``utilities.parameters``: no handler imports it (the
# flags' adapter does, on the first invocation, and it loads boto3: the cold probe's row).
DEPENDENCIES = (
    "botocore.session, botocore.config, pydantic, aws_lambda_powertools.logging, "
    "aws_lambda_powertools.logging.utils, aws_lambda_powertools.metrics, "
    "aws_lambda_powertools.utilities.parser"
)
# The reserve's import also loads Powertools' idempotency (its records), and with it boto3
# (Powertools' DynamoDB persistence layer imports it): its own floor.
FLOORS = {"reserve": f"{DEPENDENCIES}, aws_lambda_powertools.utilities.idempotency"}


# What the deployed functions' environment sets that changes import work (infra/functions.py).
DEPLOYED = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}


def _environment() -> dict[str, str]:
    """The same for every sample: this environment without the broker's variables (a handler
    must import with none of them set) and with bytecode written (see the module), plus what
    the deployed functions set."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("BROKER_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    return kept | DEPLOYED


def _time_import(statement: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process) of one import in a fresh interpreter."""
    code = (
        "import time\n"
        "wall, cpu = time.perf_counter(), time.process_time()\n"
        f"import {statement}\n"
        "print(time.perf_counter() - wall, time.process_time() - cpu)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"import {statement} failed:\n{done.stderr[-2000:]}")
    wall, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _importtime(module: str, env: dict[str, str], runs: int = 3) -> dict[str, Any]:
    """The quickest of ``runs`` ``-X importtime`` traces of ``import module``, summarized."""
    traces = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        rows = parse_importtime(done.stderr)
        total = next((r.cumulative_us for r in rows if r.module == module), 0)
        traces.append((total, rows))
    total, rows = min(traces, key=lambda t: t[0])
    packages = self_time_by_package(rows)
    return {
        "cumulative_ms": total / 1000,
        "by_package_ms": {k: round(v, 1) for k, v in list(packages.items())[:10]},
        "slowest_own_modules_ms": [
            (m, round(ms, 1)) for m, ms in slowest_modules(rows, "capacity_broker", 10)
        ],
    }


def bench_imports(rounds: int) -> dict[str, Any]:
    env = _environment()
    targets = {BASELINE: BASELINE, "dependencies": DEPENDENCIES}
    targets |= {f"dependencies+{name}": floor for name, floor in FLOORS.items()}
    targets |= {name: f"capacity_broker.handlers.{name}" for name in HANDLERS}
    walls: dict[str, list[float]] = {name: [] for name in targets}
    cpus: dict[str, list[float]] = {name: [] for name in targets}
    for statement in targets.values():
        _time_import(statement, env)  # writes the bytecode the samples then read
    for _ in range(rounds):
        for name, statement in targets.items():
            wall, cpu = _time_import(statement, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    bests = {name: best(values) for name, values in cpus.items()}
    best_walls = {name: best(values) for name, values in walls.items()}
    traces = {name: _importtime(f"capacity_broker.handlers.{name}", env) for name in HANDLERS}
    traces[BASELINE] = _importtime(BASELINE, env)
    return {
        "rounds": rounds,
        # The ratios use the process's CPU time: on a shared machine, other processes stretch
        # the wall time of an import but not the CPU it needs. Wall times are kept beside them.
        "measure": "best of N, CPU time of the importing process",
        "best_s": bests,
        "best_wall_s": best_walls,
        "cpu_samples_s": cpus,
        "wall_samples_s": walls,
        "ratio_to_boto3": {name: ratio(bests[name], bests[BASELINE]) for name in targets},
        "wall_ratio_to_boto3": {
            name: ratio(best_walls[name], best_walls[BASELINE]) for name in targets
        },
        "importtime": traces,
    }
