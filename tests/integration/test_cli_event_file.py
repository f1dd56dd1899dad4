"""``--event FILE`` that cannot be read as a JSON object: one ``invalid:`` line naming the file
and why, exit 2, no traceback (issue 42: a missing, directory or non-UTF-8 file printed a
40-line traceback and exit 1). Run as a user runs it: the command in a process of its own,
this checkout's code first on its path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from capacity_broker.cli import EXIT_USAGE

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(ROOT / "functions"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    return subprocess.run(
        [sys.executable, "-m", "capacity_broker.cli", *args],
        capture_output=True,
        text=True,
        env=env | {"PYTHONPATH": path, "COLUMNS": "200"},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("kind", ["missing", "directory", "not UTF-8", "not JSON", "a list"])
def test_an_event_file_that_cannot_be_read_is_one_line_and_exit_2(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "probe.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "not UTF-8":
        path.write_bytes(b'{"instance_type": "g6.xlarge\xff"}')
    elif kind == "not JSON":
        path.write_text("{instance_type: g6.xlarge")
    elif kind == "a list":
        path.write_text("[]")
    result = run("probe", "--event", str(path))
    assert result.returncode == EXIT_USAGE, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"invalid: --event: {path}")
    assert result.stdout == ""
