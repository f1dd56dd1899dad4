"""`python -m demo` (`make run`)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.rule import Rule

from . import emulator_story
from .harness import emulator_process


def main() -> int:
    console = Console(highlight=False)
    console.print(Rule("capacity-broker demo: a local, capacity-aware EC2 (no AWS account needed)"))
    with emulator_process("demo") as emu:
        console.print(f"emulator listening at {emu.endpoint}\n")
        console.print("[bold]1. The emulator answers a capacity story through boto3[/]")
        emulator_story.run(console, emu)
    console.print(Rule("done: the emulator process has stopped"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
