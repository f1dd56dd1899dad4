"""Acts 2-3: the broker's entry points, invoked the way a scheduler invokes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from capacity_broker.cli import render
from capacity_broker.client import InProcessContext
from rich.console import Console

from emulator.remote import RemoteEmulator

EVENTS = Path(__file__).resolve().parent.parent / "events"


def invoke(entry: str, event: dict[str, Any]) -> dict[str, Any]:
    """Call a handler in this process (its boto3 calls go to the emulator)."""
    import importlib

    module = importlib.import_module(f"capacity_broker.handlers.{entry}")
    answer: dict[str, Any] = module.handler(
        event, InProcessContext(f"capacity-broker-demo-{entry}")
    )
    return answer


def event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return data


# The CLI's columns for an answer's attempts: ids are never cut (issue 42: at 100 columns the
# story's first tables cut every one); at 80 the AZ id, the hold and `cancelled` give way
# first, and the line under the table names them.
ATTEMPT_COLUMNS = (
    render.Col("instance type", ident=True),
    render.Col("subnet", ident=True),
    render.Col("AZ", priority=2, ident=True),
    render.Col("outcome"),
    render.Col("reservation", priority=1, ident=True),
    render.Col("cancelled", priority=3),
)


def attempts_table(console: Console, answer: dict[str, Any]) -> None:
    """The answer's attempts, in the order the broker made them, laid out as the CLI's are."""
    render.print_table(
        console,
        ATTEMPT_COLUMNS,
        [
            (
                a.get("instance_type") or answer.get("instance_type", ""),
                a["subnet_id"],
                a.get("availability_zone_id", ""),
                a.get("error_code") or a["outcome"],
                a.get("reservation_id", ""),
                {True: "yes", False: "NO", None: ""}[a.get("cancelled")],
            )
            for a in answer.get("attempts", [])
        ],
    )


def probe(console: Console, emu: RemoteEmulator) -> None:
    request = event("probe_several_subnets")
    console.print(
        f"  scheduler → probe: {request['instance_type']} in {len(request['subnet_ids'])} "
        "subnets, in order of preference"
    )
    answer = invoke("probe", request)
    attempts_table(console, answer)
    console.print(
        f"  ← [bold]{answer['status']}[/]: {answer['message']}; "
        f"every probe reservation was cancelled before the answer "
        f"({answer['reservation_seconds']:.2f} reservation-seconds held in all)"
    )
    assert answer["status"] == "available", answer


def hold(console: Console, emu: RemoteEmulator) -> None:
    request = event("reserve")
    console.print(
        f"  scheduler → reserve: job {request['job_id']}, {request['instance_count']} nodes of "
        f"{' or '.join(request['instance_types'])} in {len(request['subnet_ids'])} subnets"
    )
    answer = invoke("reserve", request)
    attempts_table(console, answer)
    reservation = answer["reservation"]
    template = answer["launch_template"]
    console.print(
        f"  ← [bold]{answer['status']}[/]: hold {reservation['id']} "
        f"({reservation['instance_count']} × {reservation['instance_type']} in "
        f"{reservation['availability_zone']}, until {reservation['end_date']}); job narrowed to "
        f"{answer['subnet_ids']}; launch template {template['id']} version {template['version']}"
        " targets the hold"
    )
    waiting = invoke(
        "reserve",
        {
            "request_id": "job-1237-a1",
            "job_id": "1237",
            "instance_types": ["p5.48xlarge"],
            "subnet_ids": ["subnet-01b0000000000000b"],
            "instance_count": 4,
            "capacity_reservation_id": "cr-0b10c000000000002",
        },
    )
    console.print(
        f"  scheduler → reserve job 1237 in its own Capacity Block (bought, not started): "
        f"[bold]{waiting['status']}[/], ask again in {waiting.get('retry_after_seconds')} s "
        "(EC2 shows the block with 0 available until its start)"
    )
    assert waiting["status"] == "no_capacity", waiting
    released = invoke("release", event("release"))
    console.print(
        f"  scheduler → release job {request['job_id']}: [bold]{released['status']}[/], "
        f"cancelled {released['cancelled']}"
    )
    provision = event("reserve_provision")
    answer = invoke("reserve", provision)
    console.print(
        f"  scheduler → reserve + provision: job {provision['job_id']}, "
        f"{provision['instance_count']} × {provision['instance_types'][0]}"
    )
    placed = answer["reservation"]
    console.print(
        f"  ← [bold]{answer['status']}[/]: fleet launched {len(answer['instances'])} instances "
        f"({', '.join(answer['instances'][:2])}, ...) in {placed['availability_zone']}"
        f"; the hold {placed['id']} was released once they ran"
    )
    assert answer["status"] == "provisioned", answer


def leak_and_clean(console: Console, emu: RemoteEmulator) -> None:
    """A probe whose cancel fails leaves a billable reservation; the cleaner's sweep ends it."""
    emu.fail("CancelCapacityReservation", "UnauthorizedOperation", times=20)
    leaked = invoke("probe", event("probe"))
    emu.clear_faults()
    stuck = next(a["reservation_id"] for a in leaked["attempts"] if a.get("reservation_id"))
    console.print(
        f"  probe answered [bold]{leaked['status']}[/] but its cancel was refused: "
        f"cleanup={leaked.get('cleanup')}, {stuck} is still active (and billing)"
    )
    emu.advance(100)  # past the cleaner's 90 s probe grace
    from capacity_broker.handlers._runtime import CONTAINER
    from capacity_broker.root import Root

    # The function's clock must agree with the world's, which the demo moved forward: the
    # sweep runs on a root like the container's (its settings, adapters and memory) whose
    # cleaner reads the emulator's clock.
    usual = CONTAINER.root()
    CONTAINER.use(
        Root(usual.settings, adapters=usual.adapters, memory=usual.memory, cleaner_clock=emu.now)
    )
    try:
        swept = invoke("cleaner", event("cleaner_schedule"))
    finally:
        CONTAINER.use(usual)
        emu.reset_clock()
    for item in swept["cancelled"]:
        console.print(f"  cleaner (5-minute schedule) cancelled {item['id']}: {item['reason']}")
    kept = len(swept["kept"])
    console.print(
        f"  ← [bold]{swept['status']}[/]: examined {swept['examined']} owned reservations, "
        f"kept {kept}; the team's own ODCR and the Capacity Blocks were never examined"
    )
    assert any(item["id"] == stuck for item in swept["cancelled"]), swept


def capacity_tables(console: Console, emu: RemoteEmulator) -> None:
    """The capacity-broker CLI, as a person would run it, over three regions at once."""
    import os
    import subprocess
    import sys

    # The console script installed beside this interpreter (`pip install -e .`).
    command = [
        str(Path(sys.executable).with_name("capacity-broker")),
        "--regions",
        "us-east-1,us-west-2,eu-west-1",
        "--no-progress",
        "capacity",
        "--all",
    ]
    console.print("  $ capacity-broker --regions us-east-1,us-west-2,eu-west-1 capacity --all")
    shown = subprocess.run(  # noqa: S603 - our own CLI
        command,
        env={**os.environ, "COLUMNS": str(console.width)},  # the story's width
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    console.file.write(shown.stdout)  # already laid out by the CLI: print as is


def history(console: Console, emu: RemoteEmulator) -> None:
    """What the probes and holds above left in the capacity memory (the state table)."""
    import os
    import subprocess
    import sys

    from capacity_broker.handlers._runtime import CONTAINER

    # The facts learnt after each answer (the give-backs' seconds) ride with a container's
    # next write; this process is about to hand its memory over: write them now.
    if CONTAINER.built is not None:
        CONTAINER.built.close()
    table = os.environ["BROKER_STATE_TABLE"]
    command = [
        str(Path(sys.executable).with_name("capacity-broker")),
        "--no-progress",
        "history",
        "--state-table",
        table,
    ]
    console.print(f"  $ capacity-broker history --state-table {table}")
    shown = subprocess.run(  # noqa: S603 - our own CLI
        command,
        env={**os.environ, "COLUMNS": str(console.width)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    console.file.write(shown.stdout)
    assert "g6.xlarge" in shown.stdout, shown.stdout
