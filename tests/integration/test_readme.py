"""The README runs as written: its shell and Python blocks, in order, in one bash session
started the way a newcomer's shell is after ``make run`` (the repository's virtualenv exists,
nothing is exported, no AWS). Blocks fenced as ``sh norun`` are shown, not run (``make run``
itself, a deploy, a foreground server); their commands are checked here another way."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doc_blocks import REPO, Block, marked, newcomer_env
from doc_blocks import blocks as all_blocks
from doc_blocks import script as as_script

pytestmark = [pytest.mark.integration, pytest.mark.slow]

README = REPO / "README.md"


def blocks(kind: str | None = None) -> list[Block]:
    """The README's shell and Python blocks (of ``kind``: run or norun)."""
    if kind == "run":
        return [b for b in all_blocks(README) if "norun" not in b[1].split()]
    if kind == "norun":
        return marked(README, "norun")
    return all_blocks(README)


def script() -> str:
    """The runnable blocks as one bash script; a Python block runs with the venv's python."""
    return as_script(
        blocks("run"),
        [
            "set -euo pipefail",
            # Whatever happens, no local broker outlives the test.
            'trap \'[ -n "${AWS_ENDPOINT_URL:-}" ] && capacity-broker local --stop >/dev/null '
            "2>&1 || true' EXIT",
        ],
    )


def test_the_readme_runs_as_written(tmp_path: Path) -> None:
    assert (REPO / ".venv" / "bin" / "activate").exists(), "make venv first (make run does)"
    runnable = blocks("run")
    assert sum(lang == "sh" for lang, _, _ in runnable) >= 4
    assert sum(lang == "python" for lang, _, _ in runnable) >= 2
    path = tmp_path / "readme.sh"
    path.write_text(script())
    result = subprocess.run(
        ["bash", str(path)],
        cwd=REPO,
        env=newcomer_env(tmp_path / "run"),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, f"{out[-6000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
    # What the examples say they show, they show.
    assert "Capacity Reservation Summary (ODCRs and Capacity Blocks):" in out
    assert "Capacity Block Summary:" in out
    # the block the 7-day plan needs: 8 days (a block must outlast the run), its count
    assert "Capacity Block offerings: 2 x p5.48xlarge, 192 h" in out
    assert re.search(r"g6\.xlarge\s+us-east-1a\s+0\.3012\s+0\.8048\s+62\.6%", out), out
    assert "Recommendation: Capacity Blocks" in out
    # contract v3: the running 2-instance block has 143.5 h left, not the 168 h it used to
    # count; the block that starts in three days covers the run
    flat = " ".join(out.split())
    assert "ready: Capacity Block cr-0b10c000000000002 covers it" in flat
    assert re.search(r"(split|buy): ", out), out
    assert "extended: Extended cr-0b10c000000000002 by 24 h" in flat
    assert "already_extended: Already extended: cr-0b10c000000000002" in flat
    assert "requested: Requested cr-" in flat
    assert '"interconnect_status": "ok"' in out
    assert "ready Capacity Block cr-0b10c000000000002 covers it" in flat
    assert re.search(r"^buy \d+$", out, re.M), out
    assert "available: g6.xlarge has capacity for 1 in subnet-01b0000000000000b" in out
    assert "reserved: cr-" in out
    assert "released: Released 1 hold(s) for job id 1234" in out
    assert (
        "available subnet-01b0000000000000b\n"
        "  subnet-01a0000000000000a: insufficient_capacity\n"
        "  subnet-01b0000000000000b: available\n"
    ) in out
    assert re.search(r"^cb-[0-9a-f]{17} 2x active ", out, re.M)
    # and nothing is left running: the last block stopped the broker
    assert "stopped http://127.0.0.1:" in result.stderr
    assert "Traceback" not in result.stderr


def test_only_these_blocks_are_shown_and_not_run() -> None:
    # make run / make test (the README starts after them), a deploy (checked below), and a
    # foreground server (the background one is run above). Anything else must run.
    shown = [body.split()[:3] for _, _, body in blocks("norun")]
    assert shown == [
        ["make", "run", "#"],
        ["make", "deploy", 'CDK_ARGS="-c'],
        [".venv/bin/python", "-m", "emulator"],
    ]


# -- the deploy line ---------------------------------------------------------------------------


def deploy_line() -> list[str]:
    (line,) = [
        body.strip() for _, _, body in blocks("norun") if body.strip().startswith("make deploy")
    ]
    return shlex.split(line)


def test_the_deploy_line_runs_the_pinned_cdk_with_the_venv() -> None:
    # `make -n` prints what `make deploy` runs, as written in the README, without running it.
    command = deploy_line()
    assert command[:2] == ["make", "deploy"]
    dry = subprocess.run(
        ["make", "-n", *command[1:]],
        cwd=REPO,
        env=newcomer_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    cdk = [line for line in dry.stdout.splitlines() if "npx cdk deploy" in line]
    assert cdk == [
        f'PATH="{REPO}/.venv/bin:$PATH" npx cdk deploy -c clusterId=soca-prod '
        "-c stackNamePrefix=soca-prod-job- -c regions=us-east-1"
    ]
    # Deploy runs with the caller's own credentials: no fake keys from the Makefile.
    env = subprocess.run(
        ["make", "-n", "-p", "deploy"],
        cwd=REPO,
        env=newcomer_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "AWS_ACCESS_KEY_ID = testing" not in env.stdout.split("# Files")[0]  # global
    assert "deploy: AWS_ACCESS_KEY_ID" not in env.stdout
    assert "test: AWS_ACCESS_KEY_ID = testing" in env.stdout  # the offline targets keep them


def test_deploying_without_a_cluster_id_stops_with_a_clear_error() -> None:
    if not (REPO / "node_modules" / ".bin" / "cdk").exists():
        pytest.skip("node_modules/.bin/cdk is missing: run `npm ci` (the Makefile does)")
    assert shutil.which("npx"), "npx is not on PATH"
    env = newcomer_env() | {
        # No credentials at all: the command must stop before it would need any.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    result = subprocess.run(
        ["make", "deploy"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "context clusterId is required" in output
    assert 'make deploy CDK_ARGS="-c clusterId=<your cluster id>"' in output
    assert "Traceback" not in output
