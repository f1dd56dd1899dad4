"""No test's verdict may depend on how fast the machine is (the team's standards).

A scan of every test module: an ``assert`` that reads the machine's clock (``time.monotonic``,
``time.time``, ``time.perf_counter`` and their ``_ns`` forms), directly or through a name or a
local function computed from it, asserts on wall-clock duration. Concurrency is proven with
the emulator's barrier (``emu.gather``), ages and timeouts on the emulator's clock, throttling
with buckets whose time moves with the calls (``throttle(seconds_per_call=...)``). What may
stay is listed in ``ALLOWED`` with the reason its verdict cannot turn on the machine's speed.

(``tests/integration/test_cleaner.py::test_throttling_and_failed_cancels_give_partial_then_
the_next_sweep_finishes`` failed on a busy machine: its emulator buckets refilled on the real
clock, so a slow machine never outran them and no call was throttled.)
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = frozenset(
    {"monotonic", "time", "perf_counter", "monotonic_ns", "time_ns", "perf_counter_ns"}
)
# (file relative to tests/, function) -> why its wall-clock assertion cannot fail on a slow
# machine. Keep it short; every entry is a reading of the machine's clock a reviewer accepted.
ALLOWED: dict[tuple[str, str], str] = {
    ("emulator/test_knobs.py", "test_latency_for_every_call"): (
        "a lower bound on an injected sleep: a slower machine only makes the call longer"
    ),
    ("emulator/test_knobs.py", "test_latency_per_action"): (
        "a lower bound on an injected sleep: a slower machine only makes the call longer"
    ),
    ("emulator/test_knobs.py", "test_latency_applies_to_errors_too"): (
        "a lower bound on an injected sleep: a slower machine only makes the call longer"
    ),
    ("integration/test_local.py", "served"): (
        "a 60 s guard while a subprocess starts: it fails only on a hang, never on speed"
    ),
    ("integration/test_local_iam.py", "test_the_command_says_what_it_runs_as"): (
        "a 120 s guard while `capacity-broker local` starts: it fails only on a hang"
    ),
    (
        "integration/test_hostile_state_table.py",
        "test_no_memory_item_fails_or_changes_an_answer",
    ): "a bound from above on stored times (none in the future): a slower machine only loosens it",
}


def _clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in CLOCKS and isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in {"monotonic", "perf_counter"}


_CARRIERS = frozenset({"min", "max", "abs", "round", "float", "int", "sum", "sorted"})


def _reads_clock(expr: ast.AST | None, tainted: set[str]) -> bool:
    """Whether ``expr``'s value is a reading of the machine's clock or arithmetic on one (a
    duration, a deadline): through names, operators, ``min``/``max`` and the like, and local
    functions returning one. A reading passed into another call (a deadline handed to the code
    under test, a unique id made from the clock) does not make that call's result one."""
    if expr is None:
        return False
    if _clock_call(expr):
        return True
    if isinstance(expr, ast.Name):
        return expr.id in tainted
    if isinstance(expr, ast.BinOp):
        return _reads_clock(expr.left, tainted) or _reads_clock(expr.right, tainted)
    if isinstance(expr, ast.UnaryOp):
        return _reads_clock(expr.operand, tainted)
    if isinstance(expr, ast.Compare):
        return any(_reads_clock(e, tainted) for e in [expr.left, *expr.comparators])
    if isinstance(expr, ast.BoolOp):
        return any(_reads_clock(e, tainted) for e in expr.values)
    if isinstance(expr, ast.GeneratorExp | ast.ListComp):
        return _reads_clock(expr.elt, tainted)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        if expr.func.id in tainted:
            return True
        if expr.func.id in _CARRIERS:
            return any(_reads_clock(a, tainted) for a in expr.args)
    return False


def _violations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """Line numbers of the asserts in ``function`` that read the machine's clock."""
    tainted: set[str] = set()
    # Names assigned from the clock, and local functions returning it, until nothing changes.
    changed = True
    while changed:
        changed = False
        for node in ast.walk(function):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _reads_clock(node.value, tainted):
                    for target in targets:
                        for name in ast.walk(target):
                            if isinstance(name, ast.Name) and name.id not in tainted:
                                tainted.add(name.id)
                                changed = True
            elif (
                isinstance(node, ast.FunctionDef)
                and node is not function
                and node.name not in tainted
                and any(
                    isinstance(r, ast.Return) and _reads_clock(r.value, tainted)
                    for r in ast.walk(node)
                )
            ):
                tainted.add(node.name)
                changed = True
    return [
        node.lineno
        for node in ast.walk(function)
        if isinstance(node, ast.Assert) and _reads_clock(node.test, tainted)
    ]


def wall_clock_asserts() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = _violations(node)
                if lines:
                    found[(str(path.relative_to(TESTS)), node.name)] = lines
    return found


def test_no_test_asserts_on_wall_clock_duration() -> None:
    # A nested function's asserts are found in it and in every function around it: an allowed
    # function covers what is nested in it, and what it is nested in.
    found = wall_clock_asserts()
    allowed = {
        key
        for key in found
        if key in ALLOWED
        or any(key[0] == k[0] and (k[1] in _outer(key) or key[1] in _outer(k)) for k in ALLOWED)
    }
    offending = {key: lines for key, lines in found.items() if key not in allowed}
    assert offending == {}, (
        "asserts on the machine's clock (make the verdict independent of speed, or add the "
        "function to ALLOWED with the reason it cannot fail on a slow machine): "
        + "; ".join(f"tests/{f}::{fn} line(s) {lines}" for (f, fn), lines in offending.items())
    )


def _outer(key: tuple[str, str]) -> set[str]:
    """The functions around ``key``'s function in its file (an allowed one covers its nested
    helpers)."""
    tree = ast.parse((TESTS / key[0]).read_text())
    around: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inner = {n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef)}
            if key[1] in inner:
                around.add(node.name)
    return around


def test_every_allowed_entry_is_still_needed() -> None:
    found = wall_clock_asserts()
    stale = [key for key in ALLOWED if key not in found]
    assert stale == [], f"ALLOWED entries with no wall-clock assert any more: {stale}"


def test_the_scan_finds_a_timed_assert() -> None:
    """The scan itself: a duration read from the clock and asserted on is found, through a
    name and through a local function."""
    source = (
        "import time\n"
        "def test_x():\n"
        "    start = time.perf_counter()\n"
        "    elapsed = time.perf_counter() - start\n"
        "    assert elapsed < 2.0\n"
        "def test_y():\n"
        "    def timed():\n"
        "        t = time.monotonic()\n"
        "        return time.monotonic() - t\n"
        "    one = min(timed() for _ in range(2))\n"
        "    assert one >= 0.2\n"
        "def test_z():\n"
        "    assert 1 + 1 == 2\n"
    )
    tree = ast.parse(source)
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert _violations(functions["test_x"]) == [5]
    assert _violations(functions["test_y"]) == [11]
    assert _violations(functions["test_z"]) == []
