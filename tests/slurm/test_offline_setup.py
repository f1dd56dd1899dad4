"""docs/slurm.md's offline set-up (section 14) runs as written: its blocks fenced ``bash try``,
in order, in one bash shell started the way a newcomer's is after ``make run`` in a clone
(the clone's ``.venv`` exists, nothing is exported, no AWS), with the real munged and
slurmctld. Its job's nodes are launched by the programs slurmctld starts, which get nothing
but SLURM_CONF and SLURM_RESUME_FILE: they reach the local broker only through the file the
page writes. The programs are the clone's console scripts, as slurm.conf names them, so the
clone's virtualenv must import this checkout's code (checked first)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doc_blocks import REPO, Block, marked, newcomer_env, script

pytestmark = pytest.mark.slurm

PAGE = REPO / "docs" / "slurm.md"
VENV = REPO / ".venv"
# A failed run is still bounded: each wait in the page has its own (`timeout 300 …`).
WHOLE_RUN = 1500


def setup_blocks() -> list[Block]:
    return marked(PAGE, "try")


def test_the_page_marks_a_whole_setup_to_run() -> None:
    bodies = "\n".join(body for _, _, body in setup_blocks())
    # In order: the broker, munge, slurm.conf and the programs' file, slurmctld, a job, the end.
    steps = [
        "capacity-broker local",
        "/usr/sbin/munged --socket=",
        "AuthInfo=socket=",
        "ResumeProgram=",
        "capacity-broker.yaml",
        "credentials_file:",
        "/usr/sbin/slurmctld",
        "sbatch",
        "capacity-broker history",
        "scontrol shutdown",
        "capacity-broker local --stop",
    ]
    where = [bodies.find(step) for step in steps]
    assert -1 not in where, dict(zip(steps, where, strict=True))
    assert where == sorted(where), dict(zip(steps, where, strict=True))
    assert all(lang == "bash" for lang, _, _ in setup_blocks())


def _pids(scratch: Path, pidfile: str) -> list[int]:
    """Pids in the page's pid files under ``scratch`` whose process still runs and was
    started for this scratch directory (its command line or environment names it)."""
    found = []
    for path in scratch.glob(f"*/{pidfile}"):
        try:
            pid = int(path.read_text().split()[0])
            proc = Path(f"/proc/{pid}")
            seen = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if str(scratch).encode() in seen:
            found.append(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (not our child, reaped by its parent later) has ended all the same.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"


def _still_running(pids: list[int], patience: float = 60) -> list[int]:
    """Those of ``pids`` still alive after ``patience`` seconds (fewer as soon as they end)."""
    deadline = time.monotonic() + patience
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


def _end(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    for pid in _still_running(pids):
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """The shell's TMPDIR: the page's ``mktemp -d`` lands here. Short, under /tmp: munged's
    socket path must fit a Unix socket's 108 bytes, which a pytest tmp_path may not."""
    path = Path(tempfile.mkdtemp(prefix="cb-try-", dir="/tmp"))
    path.chmod(0o755)  # as /tmp is: munged wants every directory above its socket searchable
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_offline_setup_runs_as_written(slurm_tools: dict[str, str], scratch: Path) -> None:
    assert (VENV / "bin" / "activate").exists(), "make venv first (make run does)"
    # The programs slurmctld runs are the clone's console scripts: their interpreter, with no
    # environment at all (as slurmctld starts them), must import this checkout.
    interpreter = (VENV / "bin" / "capacity-broker-slurm-resume").read_text().split("\n")[0][2:]
    imported = subprocess.run(
        [interpreter, "-c", "import capacity_broker; print(capacity_broker.__file__)"],
        env={},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()
    assert Path(imported).is_relative_to(REPO / "functions"), (
        f"{VENV} imports {imported}, not this checkout's code"
    )

    runnable = setup_blocks()
    path = scratch / "setup.sh"
    path.write_text(script(runnable, ["set -euo pipefail"]))
    env = newcomer_env(scratch / "run") | {"TMPDIR": str(scratch)}
    shell = subprocess.Popen(
        ["bash", str(path)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = shell.communicate(timeout=WHOLE_RUN)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        out, err = shell.communicate()
    finally:
        # The page stops what it started (slurmctld saves its state first, so give it time);
        # whatever still runs after that is ended here, and counted against the page.
        left = _still_running(_pids(scratch, "slurmctld.pid") + _pids(scratch, "munged.pid"))
        _end(left)
        subprocess.run(
            [str(VENV / "bin" / "capacity-broker"), "local", "--stop"],
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
    logs = "".join(
        f"\n--- {p.relative_to(scratch)} (tail)\n" + "\n".join(p.read_text().splitlines()[-30:])
        for p in sorted(scratch.glob("*/*.log"))
    )
    said = f"{out[-8000:]}\n--- stderr ---\n{err[-4000:]}{logs}"
    assert shell.returncode == 0, said
    assert f"::block {len(runnable) - 1} (bash)::" in out, said
    assert not left, f"the page left {left} running\n{said}"

    # What the page says the job shows, it shows: slurmctld ran the resume program, which
    # reached the local broker through its file alone; the six nodes were held and launched
    # together in the one AZ with room for them, and each node carries its instance.
    (log,) = scratch.glob("*/capacity-broker.log")
    programs = log.read_text()
    assert "capacity-broker-slurm-resume hpc-c7i-[1-6] (deployed mode)" in programs, said
    assert "job 1: Launched 6 × c7i.48xlarge in us-east-1c" in programs, said
    assert "capacity-broker-slurm-resume hpc-c7i-[1-6] done\n" in programs, said
    assert re.search(r"NodeAddr=127\.10\.3\.\d+ ", out), said
    assert re.search(r"Comment=capacity-broker:instance=i-[0-9a-f]{17},bound=", out), said
    # The capacity memory: one AZ had room for the six, the other two had not.
    history = re.findall(r"^c7i\.48xlarge\s+use1-az\d+\s+1\s+(\d)\s+(\d)\s", out, re.M)
    assert sorted(history) == [("0", "1"), ("0", "1"), ("1", "0")], said
    # The give-back: the suspend program terminated the six instances it was given.
    (ended,) = re.findall(r"suspend hpc-c7i-\[1-6\]: terminated (.*)", programs)
    assert len(re.findall(r"hpc-c7i-[1-6]=i-[0-9a-f]{17}", ended)) == 6, said
    assert "capacity-broker-slurm-suspend hpc-c7i-[1-6] done\n" in programs, said
    assert "stopped http://127.0.0.1:" in err, said
    assert "Traceback" not in out + err + programs, said
