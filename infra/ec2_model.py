"""The functions' EC2 API model: the installed botocore's own, trimmed to the operations the
broker calls (``capacity_broker.adapters.ec2.operations``).

What is kept: the model's ``version`` and ``metadata``, those operations, and every shape they
reach (input, output, errors, and the members, list items and map keys and values of those,
at any depth), each as botocore has it but for its ``documentation`` and
``documentationUrl``, which a client never reads. ``make ec2-model`` writes it to
``adapters/botocore_data/ec2/<api version>/service-2.json`` (``Clients`` loads it from there);
``tests/infra/test_ec2_model.py`` fails when the file differs from a fresh trim, so a
new botocore pin or a new operation is followed by ``make ec2-model``.

Plain JSON, not gzipped as botocore ships its models: at this size reading and decompressing
cost more than the bytes saved (docs/performance.md, "A smaller EC2 model"). One operation
and one shape a line, so a new pin's change reads as a diff.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from botocore.loaders import Loader
from capacity_broker.adapters.aws import BOTOCORE_DATA
from capacity_broker.adapters.ec2.operations import OPERATIONS

SERVICE = "ec2"
DOCUMENTATION = frozenset({"documentation", "documentationUrl"})


def botocore_model() -> tuple[str, dict[str, Any]]:
    """The installed botocore's own EC2 model and its API version: from botocore's data
    directory alone (not a user's ``~/.aws/models``, nor the trimmed model itself)."""
    loader = Loader(include_default_search_paths=False)
    loader.search_paths.append(Loader.BUILTIN_DATA_PATH)
    version = loader.determine_latest_version(SERVICE, "service-2")
    model: dict[str, Any] = loader.load_data(f"{SERVICE}/{version}/service-2")
    return version, model


def trimmed(model: Mapping[str, Any], operations: Iterable[str]) -> dict[str, Any]:
    """``model`` with only ``operations``, the shapes they reach, and no documentation; the
    order of botocore's file is kept."""
    wanted = set(operations)
    unknown = sorted(wanted - set(model["operations"]))
    if unknown:
        raise ValueError(f"not operations of botocore's {SERVICE} model: {unknown}")
    kept = {name: _bare(op) for name, op in model["operations"].items() if name in wanted}
    shapes: Mapping[str, Any] = model["shapes"]
    reached: set[str] = set()
    todo = [name for op in kept.values() for name in _shape_names(op)]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(_shape_names(shapes[name]))
    out = {k: v for k, v in model.items() if k not in ("operations", "shapes", *DOCUMENTATION)}
    out["operations"] = kept
    out["shapes"] = {name: _bare(shape) for name, shape in shapes.items() if name in reached}
    return out


def _shape_names(node: Any) -> Iterator[str]:
    """The shapes an operation or a shape names: every ``"shape": "<name>"`` in it (a member
    that happens to be called ``shape`` is a dict, not a name)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "shape" and isinstance(value, str):
                yield value
            else:
                yield from _shape_names(value)
    elif isinstance(node, list):
        for item in node:
            yield from _shape_names(item)


def _bare(node: Mapping[str, Any]) -> dict[str, Any]:
    """An operation or a shape without its documentation, nor its references' (input,
    output, errors, members, list member, map key and value)."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in DOCUMENTATION:
            continue
        if key in ("input", "output", "member", "key", "value") and isinstance(value, Mapping):
            value = _bare(value)
        elif key == "errors" and isinstance(value, list):
            value = [_bare(ref) for ref in value]
        elif key == "members" and isinstance(value, Mapping):
            value = {name: _bare(ref) for name, ref in value.items()}
        out[key] = value
    return out


def render(model: Mapping[str, Any]) -> str:
    """Compact JSON, one operation and one shape a line."""

    def compact(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    parts = []
    for key, value in model.items():
        if key in ("operations", "shapes"):
            lines = ",\n".join(f"{compact(k)}:{compact(v)}" for k, v in value.items())
            parts.append(f"{compact(key)}:{{\n{lines}\n}}")
        else:
            parts.append(f"{compact(key)}:{compact(value)}")
    return "{" + ",\n".join(parts) + "}\n"


def model_file(version: str) -> Path:
    return BOTOCORE_DATA / SERVICE / version / "service-2.json"


def fresh() -> tuple[Path, str]:
    """Where the trimmed model goes, and what it is, from the installed botocore."""
    version, model = botocore_model()
    return model_file(version), render(trimmed(model, OPERATIONS))


def main(argv: list[str] | None = None) -> int:
    """``python -m infra.ec2_model [--check]``: write (or compare) the trimmed model."""
    args = sys.argv[1:] if argv is None else argv
    path, text = fresh()
    if args == ["--check"]:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            print(f"{path} is stale: run `make ec2-model`", file=sys.stderr)
            return 1
        return 0
    if args:
        print("usage: python -m infra.ec2_model [--check]", file=sys.stderr)
        return 2
    # Only the installed botocore's API version: a model of another version left beside it
    # would be the one the loader picks if it were newer.
    for stale in (BOTOCORE_DATA / SERVICE).glob("*/service-2.json*"):
        if stale != path:
            stale.unlink()
            with contextlib.suppress(OSError):  # (its directory, when it is left empty)
                stale.parent.rmdir()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
