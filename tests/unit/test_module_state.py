"""No module of the broker keeps mutable state but the Lambda container's one cached root.

Caches belong to the objects that use them, and the composition root (``root.Root``) builds
those objects (issue 20). This reads every module of ``functions/capacity_broker`` (its syntax
tree, nothing is imported) and refuses:

- a ``global`` statement (a module rebinding its own state);
- a ``functools.cache`` / ``lru_cache`` decorator (a process-wide memo);
- a module-level name bound to a container (``{}``, ``[]``, ``set()``, comprehensions, ...)
  that any module mutates (``X[k] = v``, ``X.append(...)``, ``X.clear()``, ``X += ...``): a
  container never mutated is a constant;
- a module-level name bound to an object made by a call, unless the object is known to be
  immutable (``frozenset``, ``re.compile``, a ``NamedTuple``, a frozen dataclass, an enum ...);
- ``globals()`` used to write;

except what ``ALLOWED`` names, each with the reason it is not state.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "functions" / "capacity_broker"

# module:name -> why it is not state (or, for CONTAINER, why it is the one state allowed).
ALLOWED: Mapping[str, str] = {
    "handlers._runtime:CONTAINER": "the Lambda container's one cached root (and its tracer): "
    "what Lambda keeps between invocations, built from the environment on first use",
    "handlers._runtime:TEXT_EVENT": "a sentinel of a class with empty __slots__: no state",
    "handlers.probe:logger": "Powertools Logger: the Lambda handler's JSON log output",
    "handlers.probe:metrics": "Powertools Metrics: the Lambda handler's EMF output, flushed by "
    "log_metrics after each invocation",
    "handlers.probe:handler": "the Lambda handler function (lambda_handler returns a function)",
    "handlers.reserve:logger": "Powertools Logger (as probe's)",
    "handlers.reserve:metrics": "Powertools Metrics (as probe's)",
    "handlers.reserve:handler": "the Lambda handler function",
    "handlers.release:logger": "Powertools Logger (as probe's)",
    "handlers.release:metrics": "Powertools Metrics (as probe's)",
    "handlers.release:handler": "the Lambda handler function",
    "handlers.cleaner:logger": "Powertools Logger (as probe's)",
    "handlers.cleaner:metrics": "Powertools Metrics (as probe's)",
    "handlers.cleaner:handler": "the Lambda handler function",
    "handlers.capacity:logger": "Powertools Logger (as probe's)",
    "handlers.capacity:metrics": "Powertools Metrics (as probe's)",
    "handlers.capacity:handler": "the Lambda handler function",
    "cli.app:app": "the Typer application (the command tree, built at import)",
    "slurm.check:app": "the Typer application of `capacity-broker slurm`",
    "cli.errors:err": "Rich's console on stderr: an output stream",
    "models.invalid:_shown": "reprlib.Repr configured once at import (its length limits), then "
    "only read",
    "adapters.aws:CLIENT_CONFIG": "botocore's client Config: read-only settings",
    "adapters.aws:STATE_TABLE_CONFIG": "botocore's client Config: read-only settings",
    "domain.templates:GONE": "a sentinel (its class has no attributes)",
    # Memos of pure functions of the installed botocore's data files: the same answer for
    # every root, session and account; nothing learnt from AWS.
    "adapters.regions:known_regions": "lru_cache of the regions in botocore's partitions.json",
    "adapters.ec2.launches:_request_shape": "cache of a botocore model's shape",
    # The import system's own cache, as PEP 562 documents it.
    "models:__getattr__": "globals() keeps a lazily imported model (PEP 562)",
}

# Calls whose result is immutable (or, for loggers, configuration the logging module owns).
IMMUTABLE_CALLS = frozenset(
    {
        "frozenset",
        "tuple",
        "MappingProxyType",
        "types.MappingProxyType",
        "re.compile",
        "TypeVar",
        "logging.getLogger",
        "timedelta",
        "Path",
        "Decimal",
        "str",
        "int",
        "float",
    }
)
CONTAINER_CALLS = frozenset(
    {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque"}
)
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "update",
        "setdefault",
        "pop",
        "popitem",
        "clear",
        "add",
        "discard",
        "remove",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
    }
)
CACHES = frozenset({"cache", "lru_cache", "functools.cache", "functools.lru_cache"})


@dataclass(frozen=True)
class Finding:
    module: str
    name: str
    line: int
    what: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.name}"

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.name}: {self.what}"


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _immutable_classes(trees: Mapping[str, ast.Module]) -> set[str]:
    """Classes of the package whose instances cannot change: NamedTuples, enums, frozen
    dataclasses and frozen pydantic models."""
    found: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {_dotted(b).split(".")[-1] for b in node.bases}
            frozen_dataclass = any(
                isinstance(d, ast.Call)
                and _dotted(d.func).endswith("dataclass")
                and any(
                    k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value
                    for k in d.keywords
                )
                for d in node.decorator_list
            )
            frozen_model = any(
                isinstance(s, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "model_config" for t in s.targets)
                and "frozen=True" in ast.unparse(s.value)
                for s in node.body
            )
            if (
                bases & {"NamedTuple", "Enum", "StrEnum", "IntEnum"}
                or frozen_dataclass
                or (frozen_model)
            ):
                found.add(node.name)
    return found


def _module_assignments(tree: ast.Module) -> Iterator[tuple[str, ast.expr, int]]:
    """(name, value, line) of every module-level binding, in ``if``/``try`` blocks too."""
    body: list[ast.stmt] = list(tree.body)
    while body:
        node = body.pop(0)
        if isinstance(node, ast.If | ast.Try):
            body.extend(node.body + node.orelse)
            if isinstance(node, ast.Try):
                body.extend(node.finalbody + [s for h in node.handlers for s in h.body])
            continue
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if value is None:
            continue
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    yield leaf.id, value, node.lineno


@dataclass(frozen=True)
class _Uses:
    """What one module mutates in place (dotted spellings) and the names it imports."""

    mutated: frozenset[str]
    imported: frozenset[tuple[str, str, str]]  # (from module, name, local alias)

    @classmethod
    def of(cls, tree: ast.Module) -> _Uses:
        mutated: set[str] = set()
        imported: set[tuple[str, str, str]] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported |= {(node.module, a.name, a.asname or a.name) for a in node.names}
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in MUTATORS:
                    mutated.add(_dotted(node.func.value))
            elif isinstance(node, ast.Assign | ast.Delete):
                mutated |= {_dotted(t.value) for t in node.targets if isinstance(t, ast.Subscript)}
            elif isinstance(node, ast.AugAssign):
                mutated.add(_dotted(node.target))
        return cls(frozenset(mutated), frozenset(imported))


def _mutated(uses: Mapping[str, _Uses], module: str, name: str) -> bool:
    """Whether any module changes ``module.name`` in place (by its own name, an imported name
    or ``module.name``)."""
    short = module.rsplit(".", 1)[-1]
    for where, used in uses.items():
        spellings = {f"{short}.{name}"}
        if where == module:
            spellings.add(name)
        spellings |= {
            alias
            for source, imported, alias in used.imported
            if imported == name and source.rsplit(".", 1)[-1] == short
        }
        if spellings & used.mutated:
            return True
    return False


def findings(trees: Mapping[str, ast.Module]) -> list[Finding]:
    immutable = _immutable_classes(trees)
    uses = {module: _Uses.of(tree) for module, tree in trees.items()}
    found: list[Finding] = []
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found += [Finding(module, n, node.lineno, "global statement") for n in node.names]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    if _dotted(decorator) in CACHES:
                        found.append(
                            Finding(module, node.name, node.lineno, f"@{_dotted(decorator)}")
                        )
                writes_globals = any(
                    isinstance(n, ast.Subscript)
                    and isinstance(n.ctx, ast.Store)
                    and _dotted(n.value) == "globals"
                    for n in ast.walk(node)
                )
                if writes_globals:
                    found.append(Finding(module, node.name, node.lineno, "writes globals()"))
        for name, value, line in _module_assignments(tree):
            if name.startswith("__") and name.endswith("__"):
                continue  # __all__ and the like
            container = isinstance(
                value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp
            ) or (isinstance(value, ast.Call) and _dotted(value.func) in CONTAINER_CALLS)
            if container:
                if _mutated(uses, module, name):
                    found.append(Finding(module, name, line, "a container something mutates"))
                continue
            if isinstance(value, ast.Call):
                made = _dotted(value.func)
                if made in IMMUTABLE_CALLS or made.split(".")[-1] in immutable:
                    continue
                found.append(Finding(module, name, line, f"an object made by {made}()"))
    return found


def parse(root: Path) -> dict[str, ast.Module]:
    trees = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        module = ".".join(p for p in parts if p != "__init__")
        trees[module] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return trees


def test_no_module_level_state_but_the_containers_root() -> None:
    found = findings(parse(PACKAGE))
    unexpected = [str(f) for f in found if f.key not in ALLOWED]
    assert unexpected == [], "module-level state outside the composition root:\n" + "\n".join(
        unexpected
    )


def test_every_allowance_is_still_needed() -> None:
    """An allowance nothing needs any more is removed, so the list stays the truth."""
    needed = {f.key for f in findings(parse(PACKAGE))}
    assert sorted(set(ALLOWED) - needed) == []


def test_the_one_state_is_the_containers_root() -> None:
    state = [k for k in ALLOWED if k == "handlers._runtime:CONTAINER"]
    assert state == ["handlers._runtime:CONTAINER"]


# -- the scanner finds what it is for ---------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("_cache = {}\ndef put(k, v):\n    _cache[k] = v\n", "a container something mutates"),
        ("_seen = []\ndef see(x):\n    _seen.append(x)\n", "a container something mutates"),
        ("_n = 0\ndef bump():\n    global _n\n    _n += 1\n", "global statement"),
        ("import functools\n@functools.lru_cache(maxsize=1)\ndef f():\n    return 1\n", "@"),
        ("from functools import cache\n@cache\ndef f():\n    return 1\n", "@cache"),
        ("import threading\nLOCK = threading.Lock()\n", "threading.Lock()"),
        ("class Pacer:\n    pass\npacer = Pacer()\n", "Pacer()"),
        ("import weakref\n_w = weakref.WeakKeyDictionary()\n", "WeakKeyDictionary()"),
        ("def f(name, value):\n    globals()[name] = value\n", "writes globals()"),
    ],
)
def test_the_scanner_finds_module_state(source: str, expected: str) -> None:
    found = findings({"example": ast.parse(source)})
    assert found, source
    assert expected in found[0].what


def test_constants_and_immutable_objects_are_not_state() -> None:
    source = (
        "import re\nfrom typing import NamedTuple\nfrom dataclasses import dataclass\n"
        "TABLE = {'a': 1}\nNAMES = ['x', 'y']\nPATTERN = re.compile('x')\n"
        "class Limits(NamedTuple):\n    burst: float\n"
        "@dataclass(frozen=True)\nclass Out:\n    x: int = 0\n"
        "DEFAULT = Limits(1.0)\nPLAIN = Out()\n"
        "def lookup(k):\n    return TABLE.get(k)\n"
    )
    assert findings({"example": ast.parse(source)}) == []


def test_a_constant_mutated_from_another_module_is_state() -> None:
    trees = {
        "tables": ast.parse("TABLE = {}\n"),
        "user": ast.parse("from .tables import TABLE\ndef put(k):\n    TABLE[k] = 1\n"),
    }
    assert [f.key for f in findings(trees)] == ["tables:TABLE"]
