"""The console scripts as slurmctld starts them: no environment but SLURM_CONF, and every
descriptor closed (stdin, stdout and stderr too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import capacity_broker

# The resume program as its console script runs it, importing the code under test (the
# installed script would import whatever the interpreter's install points at).
SOURCE = Path(capacity_broker.__file__).resolve().parent.parent
PROGRAM = (
    f"import sys; sys.path.insert(0, {str(SOURCE)!r}); "
    "from capacity_broker.slurm.programs import resume; sys.exit(resume())"
)


def closed_standard_descriptors() -> None:
    for fd in (0, 1, 2):
        os.close(fd)


def run_like_slurmctld(env: dict[str, str], *args: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, *args],
        env=env,
        preexec_fn=closed_standard_descriptors,
        timeout=120,
        check=False,
    )
    return done.returncode


def test_a_missing_configuration_is_logged_and_the_nodes_are_not_left_waiting(
    tmp_path: Path,
) -> None:
    log = tmp_path / "programs.log"
    # A slurm.conf scontrol refuses at once (a missing one it waits 60 s for).
    (tmp_path / "slurm.conf").write_text("SlurmctldHost=localhost\n")
    env = {
        "SLURM_CONF": str(tmp_path / "slurm.conf"),
        "CAPACITY_BROKER_SLURM_CONFIG": str(tmp_path / "missing.yaml"),
        "CAPACITY_BROKER_SLURM_LOG": str(log),
    }
    assert run_like_slurmctld(env, "hpc-c5-[1-2]") == 1
    text = log.read_text()
    assert "missing.yaml: cannot read the configuration" in text
    # The power-down was tried (no slurmctld here: it fails, and says so).
    assert "could not power down hpc-c5-[1-2]" in text


def test_a_bad_hostlist_is_a_usage_error(tmp_path: Path) -> None:
    log = tmp_path / "programs.log"
    env = {"CAPACITY_BROKER_SLURM_LOG": str(log)}
    assert run_like_slurmctld(env, "hpc-[1-") == 2
    assert "hpc-[1-" in log.read_text()
