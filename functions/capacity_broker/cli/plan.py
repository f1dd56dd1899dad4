"""``plan``: Capacity Blocks or ODCRs? The seeds' decision guide, checked against what is
available now."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from . import capacity as capacity_view
from . import offerings as offerings_view
from . import render
from .app import OutputOpt, ProfileOpt, RegionsOpt, app, make_broker, progress_bar, state_of
from .errors import EXIT_FAILED, EXIT_NO_CAPACITY, EXIT_OK, EXIT_PARTIAL, guard, region_errors
from .render import Output

# CSV: one row per block, ODCR and offering the plan found (the plan's own fields beside).
LISTS = ("capacity_blocks", "odcrs", "offerings", "errors")


class WorkloadChoice(StrEnum):
    training = "training"
    inference = "inference"
    dev = "dev"


@app.command()
def plan(
    ctx: typer.Context,
    workload: Annotated[
        WorkloadChoice,
        typer.Option("--workload", "-w", help="What the capacity is for."),
    ],
    instance_type: Annotated[
        str,
        typer.Option("--instance-type", "-t", metavar="TYPE", help="One instance type."),
    ],
    count: Annotated[
        int, typer.Option("--count", "-n", min=1, help="Instances the workload needs.")
    ],
    days: Annotated[
        float | None,
        typer.Option(
            "--days",
            min=0,
            help="Fixed length of the run; omit for continuous.",
            show_default=False,
        ),
    ] = None,
    regions: RegionsOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Capacity Blocks or ODCRs? The decision guide, checked against what is available."""
    state = state_of(ctx, output, regions, profile)
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        with progress_bar(state, wanted, "plan") as advance:
            answer = broker.plan(
                workload.value, instance_type, count, days, wanted, progress=advance
            )
    if state.output is Output.table:
        out = render.stdout()
        kind = "Capacity Blocks" if answer.recommendation == "capacity-block" else "ODCRs"
        render.say(out, f"Recommendation: {kind}")
        for reason in answer.reasons:
            render.say(out, f"- {reason}", indent=2, hang=2)
        for note in answer.notes:
            render.say(out, f"note: {note}", indent=2, hang=6)
        render.say(out, f"{answer.status}: {answer.message}", hang=2)
        capacity_view.tables(out, [*answer.capacity_blocks, *answer.odcrs], titled=True)
        if answer.offerings:
            render.print_table(
                out,
                offerings_view.COLUMNS,
                [offerings_view.cells(o) for o in answer.offerings],
                "Offerings",
            )
    elif state.output is Output.csv:
        render.write_csv(render.answer_rows(answer.to_json_dict(), LISTS))
    else:
        render.write_data(answer, state.output)
    region_errors(answer.errors)
    code = {
        "ready": EXIT_OK,
        "bookable": EXIT_OK,
        "unavailable": EXIT_NO_CAPACITY,
    }.get(answer.status, EXIT_FAILED)
    if code == EXIT_OK and answer.errors:
        code = EXIT_PARTIAL
    raise typer.Exit(code)
