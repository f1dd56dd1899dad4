"""``plan``: can this run happen in this window, and on what? The seeds' decision guide, then
the verdict (contract v3): ready, buy, split, extend or unavailable."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from ..models.discovery import PlanAnswer
from . import capacity as capacity_view
from . import offerings as offerings_view
from . import render
from .app import (
    EndBeforeOpt,
    OutputOpt,
    ProfileOpt,
    RegionsOpt,
    StartAfterOpt,
    app,
    make_broker,
    search_progress,
    split,
    state_of,
)
from .errors import guard, region_errors, verdict_code
from .render import Col, Output

# CSV: one row per block, ODCR and offering the plan found (the plan's own fields beside).
LISTS = ("capacity_blocks", "odcrs", "offerings", "largest_offerings", "errors")

SPLIT_COLUMNS = [
    Col("Block", ident=True),
    Col("Source"),
    Col("Region", priority=3),
    Col("AZ"),
    Col("Count", numeric=True),
    Col("Start", wrap=True),
    Col("End", priority=2, wrap=True),
    Col("Upfront fee", priority=1, numeric=True),
]


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
        list[str],
        typer.Option(
            "--instance-type",
            "-t",
            metavar="TYPES",
            help="An instance type, or several in preference order (comma-separated).",
        ),
    ],
    count: Annotated[
        int, typer.Option("--count", "-n", min=1, help="Instances the workload needs.")
    ],
    days: Annotated[
        float | None,
        typer.Option(
            "--days",
            min=0,
            help="Length of the run; omit for continuous use.",
            show_default=False,
        ),
    ] = None,
    start_after: StartAfterOpt = None,
    end_before: EndBeforeOpt = None,
    regions: RegionsOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Can N instances run for D days in this window? ready, buy, split, extend or
    unavailable: a block counts only with the run's hours left before EC2 stops it."""
    state = state_of(ctx, output, regions, profile)
    after = offerings_view.parse_when(start_after, "--start-after")
    before = offerings_view.parse_when(end_before, "--end-before")
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        with search_progress(state, wanted, "plan") as (advance, asking):
            answer = broker.plan(
                workload.value,
                split(instance_type),
                count,
                days,
                wanted,
                after,
                before,
                progress=advance,
                asking=asking,
            )
    if state.output is Output.table:
        show(answer)
    elif state.output is Output.csv:
        render.write_csv(render.answer_rows(answer.to_json_dict(), LISTS))
    else:
        render.write_data(answer, state.output)
    region_errors(answer.errors)
    raise typer.Exit(verdict_code(answer.status, answer.errors))


def show(answer: PlanAnswer) -> None:
    out = render.stdout()
    kind = "Capacity Blocks" if answer.recommendation == "capacity-block" else "ODCRs"
    render.say(out, f"Recommendation: {kind}")
    for reason in answer.reasons:
        render.say(out, f"- {reason}", indent=2, hang=2)
    for note in answer.notes:
        render.say(out, f"note: {note}", indent=2, hang=6)
    render.say(out, f"{answer.status}: {answer.message}", hang=2)
    capacity_view.tables(out, [*answer.capacity_blocks, *answer.odcrs], titled=True)
    if answer.extension is not None:
        e = answer.extension
        render.say(
            out,
            f"Extension: {e.offering_id} for {e.reservation_id}, {e.duration_hours} h, "
            f"{render.money(e.upfront_fee, e.currency)}",
            hang=2,
        )
    if answer.offerings:
        render.print_table(
            out,
            offerings_view.COLUMNS,
            [offerings_view.cells(o) for o in answer.offerings],
            "Offerings",
        )
    if answer.split is not None:
        render.print_table(
            out,
            SPLIT_COLUMNS,
            [
                [
                    p.id,
                    p.source,
                    p.region,
                    p.availability_zone,
                    p.instance_count,
                    render.when(p.start_date),
                    render.when(p.end_date),
                    render.money(p.upfront_fee, p.currency),
                ]
                for p in answer.split.pieces
            ],
            f"Split: {answer.split.instance_count} instances from "
            f"{render.when(answer.split.run_start)}",
        )
        for cost in answer.split.costs:
            render.say(out, f"- {cost}", indent=2, hang=2)
    elif answer.largest_offerings:
        render.print_table(
            out,
            offerings_view.COLUMNS,
            [offerings_view.cells(o) for o in answer.largest_offerings],
            "Largest offerings",
        )
    if answer.commands:
        # Whole lines, never wrapped at the terminal's width: they are to be copied.
        out.print(
            {"buy": "Buy it:", "extend": "Extend it:"}.get(answer.status, "Buy each offering:")
        )
        for command in answer.commands:
            out.print(f"  {command}", soft_wrap=True, markup=False, highlight=False)
