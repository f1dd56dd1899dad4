"""The code asset's bytecode (infra/bytecode.py): which CPython 3.14 compiles it, and checks."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from infra.bytecode import (
    PYTHON_ENV_VAR,
    BytecodeError,
    LocalBytecode,
    check_bytecode,
    copy_sources,
    docker_command,
    excluded_names,
    find_compiler,
)
from infra.functions import ASSET_EXCLUDE, CODE_DIR

pytestmark = pytest.mark.infra

NAMES = excluded_names(ASSET_EXCLUDE)


def executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_a_pattern_that_is_not_a_name_at_any_depth_is_refused() -> None:
    assert NAMES[:2] == ("__pycache__", "*.pyc")
    with pytest.raises(BytecodeError, match=r"'\*\*/tests/data'"):
        excluded_names(["**/tests/data"])
    with pytest.raises(BytecodeError, match=r"'\*\.md'"):
        excluded_names(["*.md"])


def test_the_named_interpreter_wins_and_must_exist(tmp_path: Path) -> None:
    mine = executable(tmp_path / "my-python")
    executable(tmp_path / "python3.14")
    env = {"PATH": str(tmp_path), PYTHON_ENV_VAR: str(mine)}
    compiler = find_compiler(env)
    assert compiler is not None
    assert compiler.prefix == (str(mine), "-m", "compileall")
    with pytest.raises(BytecodeError, match=f"{PYTHON_ENV_VAR}=/nowhere/python3.14"):
        find_compiler({"PATH": str(tmp_path), PYTHON_ENV_VAR: "/nowhere/python3.14"})


def test_python3_14_on_path_comes_before_pyodide(tmp_path: Path) -> None:
    found = executable(tmp_path / "python3.14")
    executable(tmp_path / "node")
    compiler = find_compiler({"PATH": str(tmp_path)})
    assert compiler is not None
    assert compiler.prefix == (str(found), "-m", "compileall")
    assert not compiler.mounts_directory


def test_pyodide_needs_node_and_npm_ci(tmp_path: Path) -> None:
    assert find_compiler({"PATH": str(tmp_path)}) is None  # no node: Docker's turn
    executable(tmp_path / "node")
    compiler = find_compiler({"PATH": str(tmp_path)})
    if compiler is None:
        pytest.skip("node_modules/pyodide is missing: run `npm ci` (the Makefile does)")
    assert compiler.description.startswith("Pyodide 314.")
    assert compiler.mounts_directory
    command = compiler.command(Path("/tmp/bundle"))
    assert command[:3] == [str(tmp_path / "node"), compiler.prefix[1], "/tmp/bundle"]
    assert command[3:] == [
        *("-q", "--invalidation-mode", "unchecked-hash"),
        *("-s", "/tmp/bundle", "-p", "/var/task", "/tmp/bundle"),
    ]


def test_without_any_python_3_14_docker_bundles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(PYTHON_ENV_VAR, raising=False)
    monkeypatch.delenv("CDK_DOCKER", raising=False)
    bundler = LocalBytecode(CODE_DIR, ASSET_EXCLUDE)
    with pytest.raises(BytecodeError, match=r"needs CPython 3\.14 and none was found"):
        bundler.try_bundle(str(tmp_path / "out"))
    executable(tmp_path / "docker")
    assert bundler.try_bundle(str(tmp_path / "out")) is False  # the CDK runs the image
    assert not (tmp_path / "out").exists()


def test_an_interpreter_that_is_not_3_14_fails_the_synth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytecode of another Python would be ignored by the runtime: compiled again, every time."""
    monkeypatch.setenv(PYTHON_ENV_VAR, sys.executable)
    with pytest.raises(BytecodeError, match=r"did not write CPython 3\.14 unchecked-hash") as error:
        LocalBytecode(CODE_DIR, ASSET_EXCLUDE).try_bundle(str(tmp_path))
    assert "capacity_broker/__init__.py: no capacity_broker/__pycache__/__init__.cpython-314" in (
        str(error.value)
    )


def test_check_bytecode_names_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    for name in ("good", "timestamped", "old", "missing"):
        (tmp_path / "pkg" / f"{name}.py").write_text("x = 1\n")
    cache = tmp_path / "pkg" / "__pycache__"
    magic = bytes.fromhex("2b0e0d0a")
    (cache / "good.cpython-314.pyc").write_bytes(magic + b"\x01\0\0\0" + bytes(8))
    (cache / "timestamped.cpython-314.pyc").write_bytes(magic + bytes(12))
    (cache / "old.cpython-314.pyc").write_bytes(bytes.fromhex("2a0e0d0a") + b"\x01\0\0\0")
    (cache / "good.cpython-311.pyc").write_bytes(b"")
    assert check_bytecode(tmp_path) == [
        "pkg/missing.py: no pkg/__pycache__/missing.cpython-314.pyc",
        "pkg/old.py: magic 2a0e0d0a, not CPython 3.14's 2b0e0d0a",
        "pkg/timestamped.py: flags 00000000, not unchecked-hash",
        "pkg/__pycache__/good.cpython-311.pyc: bytecode of another Python",
    ]


@pytest.mark.slow
def test_the_docker_fallback_builds_the_same_asset(tmp_path: Path) -> None:
    """The image's script, run here on host paths, gives the local bundle byte for byte.

    Its `python` is the CPython 3.14 found here, so this needs one (CI: Pyodide, `npm ci`).
    """
    compiler = find_compiler()
    if compiler is None:
        pytest.skip("no CPython 3.14 here: run `npm ci` (the Makefile does)")
    local = tmp_path / "local"
    LocalBytecode(CODE_DIR, ASSET_EXCLUDE).try_bundle(str(local))

    docker = tmp_path / "docker"
    docker.mkdir()
    # The script calls `<python> -m compileall <args>`: this `python` drops `-m compileall`.
    compileall = " ".join(shlex.quote(part) for part in compiler.compileall(docker))
    python = executable(tmp_path / "python", f'#!/bin/sh\nshift 2\nexec {compileall} "$@"\n')
    result = subprocess.run(
        docker_command(ASSET_EXCLUDE, source=str(CODE_DIR), output=str(docker), python=str(python)),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr

    def files(root: Path) -> dict[str, bytes]:
        return {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in root.rglob("*")
            if path.is_file()
        }

    assert check_bytecode(docker) == []
    assert files(docker) == files(local)


def test_the_docker_fallback_fails_on_bytecode_of_another_python(tmp_path: Path) -> None:
    """The image's script checks what its `python` wrote, as the local bundling does: bytecode
    Lambda's CPython 3.14 would ignore (here this process's Python) stops the synth."""
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "__init__.py").write_text("")
    (source / "pkg" / "mod.py").write_text("x = 1\n")
    output = tmp_path / "out"
    output.mkdir()
    result = subprocess.run(
        docker_command(
            ASSET_EXCLUDE, source=str(source), output=str(output), python=sys.executable
        ),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode != 0, result.stdout + result.stderr
    assert "pkg/mod.py: no CPython 3.14 unchecked-hash pkg/__pycache__/mod.cpython-314.pyc" in (
        result.stderr
    )
    assert "bytecode of another Python" in result.stderr


def test_copy_leaves_out_the_excluded_names(tmp_path: Path) -> None:
    source = tmp_path / "src"
    for relative in (
        "pkg/__init__.py",
        "pkg/__pycache__/__init__.cpython-311.pyc",
        "pkg/tests/test_a.py",
        "pkg/test_b.py",
        "pkg/b_test.py",
        "pkg/conftest.py",
        "pkg/sub/mod.py",
        "pkg/sub/data.json",
        "pkg.egg-info/PKG-INFO",
        ".mypy_cache/x",
    ):
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_text(relative)
    copied = copy_sources(source, tmp_path / "out", NAMES)
    assert [str(path) for path in copied] == [
        "pkg/__init__.py",
        "pkg/sub/data.json",
        "pkg/sub/mod.py",
    ]
    assert sorted(
        path.relative_to(tmp_path / "out").as_posix()
        for path in (tmp_path / "out").rglob("*")
        if path.is_file()
    ) == ["pkg/__init__.py", "pkg/sub/data.json", "pkg/sub/mod.py"]
    assert os.access(tmp_path / "out" / "pkg" / "sub" / "mod.py", os.R_OK)
