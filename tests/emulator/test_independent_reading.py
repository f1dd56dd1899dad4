"""Contract v4, "The emulator is an independent reading of AWS": a rule the emulator enforces
is written in the emulator from the AWS text it cites, never imported from the broker, so a
wrong reading cannot pass by agreeing with itself. Every module of ``emulator/`` is parsed and
its imports (top level or inside functions, ``import`` or ``from``, and ``importlib`` calls
with a literal name) are read: none names ``capacity_broker``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.emulator

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"
BROKER = "capacity_broker"


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", ""))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.append(node.args[0].value)
    return names


def test_the_emulator_imports_nothing_from_the_broker() -> None:
    modules = sorted(EMULATOR.rglob("*.py"))
    assert len(modules) > 30  # the whole package was found
    found = {
        str(path.relative_to(EMULATOR)): name
        for path in modules
        for name in _imports(ast.parse(path.read_text(), filename=str(path)))
        if name == BROKER or name.startswith(BROKER + ".")
    }
    assert found == {}


def test_the_walk_sees_imports_wherever_they_are() -> None:
    """The check itself: an import inside a function, a ``from`` import and an importlib call
    are all seen."""
    source = (
        "def f():\n"
        "    import capacity_broker.domain.blocks\n"
        "from capacity_broker.domain import ahead\n"
        "importlib.import_module('capacity_broker.config')\n"
    )
    assert sorted(_imports(ast.parse(source))) == [
        "capacity_broker.config",
        "capacity_broker.domain",
        "capacity_broker.domain.blocks",
    ]
