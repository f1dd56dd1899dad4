"""The domain stays pure: standard library only (no AWS SDK, no I/O modules)."""

from __future__ import annotations

import ast
from pathlib import Path

import capacity_broker.domain as domain

ALLOWED = {
    "__future__",
    "collections",
    "dataclasses",
    "datetime",
    "enum",
    "hashlib",
    "json",
    "math",
    "types",
    "typing",
    # Unicode's character database: pure lookups (reserved tag keys, domain/tags.py)
    "unicodedata",
    # close matches of a name among names: pure string comparison (domain/catalog.py)
    "difflib",
}
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval"}


def _modules() -> list[Path]:
    files = sorted(Path(domain.__path__[0]).glob("*.py"))
    assert len(files) >= 12
    return files


def test_domain_imports_only_the_standard_library() -> None:
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: another domain module
                    continue
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert roots <= ALLOWED, f"{path.name} imports {roots - ALLOWED}"


def test_domain_does_no_io_or_clock_reading() -> None:
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in FORBIDDEN_CALLS, f"{path.name} calls {node.func.id}"
            # ("time" cannot even be imported, see ALLOWED)
            if isinstance(node, ast.Attribute) and node.attr in ("now", "utcnow", "today"):
                raise AssertionError(f"{path.name} reads the clock (.{node.attr})")
