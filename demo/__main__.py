"""`python -m demo` (`make run`)."""

from __future__ import annotations

import os
import sys

from capacity_broker.cli import render
from rich.rule import Rule

from . import broker_story, emulator_story
from .harness import emulator_process


def state_table(endpoint: str) -> None:
    """The broker's state table, as the stack makes it: request records and capacity memory."""
    from capacity_broker.local import make_state_table

    name = os.environ.setdefault("BROKER_STATE_TABLE", "capacity-broker-demo-state")
    make_state_table(name, "us-east-1", endpoint)


def feature_flags(endpoint: str) -> None:
    """The feature flags at their initial values, as the stack writes them (``infra/flags.py``):
    the functions read them, as deployed, instead of warning that they are missing."""
    import boto3
    from capacity_broker.domain import flags
    from capacity_broker.domain.names import default_parameter_prefix

    ssm = boto3.client("ssm", region_name="us-east-1", endpoint_url=endpoint)
    prefix = default_parameter_prefix(os.environ["BROKER_CLUSTER_ID"])
    defaults = {flags.FLAG_ENABLE: flags.DEFAULT_ENABLE, flags.FLAG_STRICT: flags.DEFAULT_STRICT}
    for name, value in defaults.items():
        ssm.put_parameter(
            Name=flags.flag_path(prefix, name),
            Value="true" if value else "false",
            Type="String",
            Overwrite=True,
        )


def main() -> int:
    # The broker runs in this process; its Lambda environment, for the demo cluster.
    os.environ.setdefault("BROKER_CLUSTER_ID", "demo")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    # The CLI's console: the terminal's width, else $COLUMNS, else 80 (a pipe, a file).
    console = render.stdout()
    console.print(Rule("capacity-broker demo: a local, capacity-aware EC2 (no AWS account needed)"))
    with emulator_process("demo") as emu:
        console.print(f"emulator listening at {emu.endpoint}\n")
        state_table(emu.endpoint)
        feature_flags(emu.endpoint)
        console.print("[bold]1. The emulator answers a capacity story through boto3[/]")
        emulator_story.run(console, emu)
        console.print("\n[bold]2. VDI: probe a desktop's subnets[/]")
        broker_story.probe(console, emu)
        console.print(
            "\n[bold]3. HPC: hold a job's nodes, point its template at the hold, launch[/]"
        )
        broker_story.hold(console, emu)
        console.print("\n[bold]4. A leaked reservation, and the cleaner that ends it[/]")
        broker_story.leak_and_clean(console, emu)
        console.print("\n[bold]5. What reserved capacity exists: ODCRs and Capacity Blocks[/]")
        broker_story.capacity_tables(console, emu)
        console.print("\n[bold]6. What the broker learnt: the capacity memory[/]")
        broker_story.history(console, emu)
    console.print(Rule("done: the emulator process has stopped"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
