"""`make run` (``python -m demo``) as a newcomer runs it: a fresh interpreter, nothing exported,
no AWS. The demo asserts its own story (a probe answers available, a job waits for its block,
the fleet launches, the cleaner ends the leaked reservation, history shows the memory); this
test holds it to finishing, every act shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ACTS = (
    "1. The emulator answers a capacity story through boto3",
    "2. VDI: probe a desktop's subnets",
    "3. HPC: hold a job's nodes",
    "4. A leaked reservation, and the cleaner that ends it",
    "5. What reserved capacity exists",
    "6. What the broker learnt: the capacity memory",
)


@pytest.mark.parametrize("columns", [None, 100], ids=["piped", "100-columns"])
def test_make_run_tells_the_whole_story(columns: int | None) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "BROKER_", "CAPACITY_BROKER_", "POWERTOOLS_"))
        and k not in ("COLUMNS", "LINES")
    } | ({"COLUMNS": str(columns)} if columns else {})
    width = columns or 80
    run = subprocess.run(
        [sys.executable, "-m", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for act in ACTS:
        assert act in run.stdout, (act, run.stdout[-3000:])
    assert "Capacity memory" in run.stdout
    assert "done: the emulator process has stopped" in run.stdout
    assert "Traceback" not in run.stderr
    # Piped, the story is 80 columns wide, as the CLI's tables are (it printed a 143-column
    # table), and it is the story only: no log line of the functions it runs (a JSON
    # "feature flag parameter missing" warning, the flags the stack would have written).
    wide = [line for line in run.stdout.splitlines() if len(line) > width]
    assert wide == [], wide
    # Its tables cut no id, nor any other word (issue 42: the probe's and the hold's attempts
    # cut every id, even at 100 columns): what does not fit is left out and named.
    cut = [line for line in run.stdout.splitlines() if re.search(r"\S…", line)]
    assert cut == [], cut
    assert re.search(
        r"^g6\.xlarge +subnet-01a0000000000000a +(use1-az6 +)?InsufficientInstanceCapacity",
        run.stdout,
        re.M,
    ), run.stdout
    logged = [line for line in run.stdout.splitlines() if line.lstrip().startswith("{")]
    assert logged == [], logged
