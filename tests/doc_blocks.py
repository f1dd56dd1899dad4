"""The shell and Python blocks of a page (README.md, docs/*.md), for the tests that run them as
written: tests/integration/test_readme.py (every block unless fenced ``norun``) and
tests/slurm/test_offline_setup.py (docs/slurm.md's blocks fenced ``try``). A block's fence
says which: ```` ```sh norun ````, ```` ```bash try ````."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(?P<lang>\w+)(?P<info>[^\n]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)
RUNNABLE = ("sh", "bash", "python")

Block = tuple[str, str, str]


def blocks(page: Path) -> list[Block]:
    """(language, info string, body) of every shell and Python block of ``page``."""
    return [
        (m["lang"], m["info"].strip(), m["body"])
        for m in FENCE.finditer(page.read_text(encoding="utf-8"))
        if m["lang"] in RUNNABLE
    ]


def marked(page: Path, word: str) -> list[Block]:
    """The blocks whose fence's info string has ``word`` (``norun``, ``try``)."""
    return [b for b in blocks(page) if word in b[1].split()]


def script(runnable: list[Block], prelude: list[str]) -> str:
    """The blocks as one bash script, in order, after ``prelude``; each announces itself
    (``::block N (lang)::``), and a Python block runs with the shell's ``python``."""
    lines = list(prelude)
    for number, (lang, _, body) in enumerate(runnable):
        lines.append(f"echo '::block {number} ({lang})::'")
        if lang == "python":
            lines.append(f"python - <<'README_PY'\n{body}README_PY")
        else:
            lines.append(body)
    return "\n".join(lines) + "\n"


def newcomer_env(runtime: Path | None = None) -> dict[str, str]:
    """A shell after `make run`: no AWS configuration, no broker variables, a terminal of
    its own width left to the tools (piped output: 80 columns); with ``runtime``, a login's
    private runtime directory of its own (where `local --background` keeps its records: no
    other test's background broker is found there)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "BROKER_", "CAPACITY_BROKER_", "POWERTOOLS_"))
        and k not in ("COLUMNS", "LINES", "VIRTUAL_ENV", "PYTHONPATH", "SLURM_CONF")
    }
    if runtime is not None:
        runtime.mkdir(mode=0o700)
        env["XDG_RUNTIME_DIR"] = str(runtime)
    return env
