"""``history``: what the broker's probes and reserves found, per (region, AZ id, instance type):
the capacity memory (contract, "Python client and CLI")."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer

from ..client import when
from ..models.history import HistoryRow
from . import render
from .app import OutputOpt, ProfileOpt, RegionsOpt, app, make_broker, split, state_of
from .errors import guard
from .render import Col

COLUMNS = [
    Col("Instance type", ident=True),
    Col("AZ id", ident=True),
    Col("Region", priority=3),
    Col("Attempts", numeric=True),
    Col("Available", numeric=True),
    Col("Insufficient", numeric=True),
    Col("Success", numeric=True),
    Col("Last available", priority=1, wrap=True),
    Col("Last insufficient", priority=2, wrap=True),
    Col("Reservation-s", numeric=True),
]


def parse_since(value: str | None) -> timedelta | None:
    """``90s``, ``30m``, ``1h``, ``2d``, ``1w``: how far back (``client.when.ago``)."""
    if not value:
        return None
    try:
        return when.ago(value, "--since")
    except when.BadTime as error:
        raise typer.BadParameter(error.message, param_hint="--since") from None


def cells(row: HistoryRow) -> list[object]:
    rate = None if row.success_rate is None else f"{row.success_rate:.0%}"
    return [
        row.instance_type,
        row.availability_zone_id,
        row.region,
        row.attempts,
        row.available,
        row.insufficient,
        rate,
        render.when(row.last_available),
        render.when(row.last_insufficient),
        f"{row.reservation_seconds:.1f}",
    ]


@app.command()
def history(
    ctx: typer.Context,
    instance_types: Annotated[
        list[str] | None,
        typer.Option(
            "--instance-types",
            "-t",
            metavar="TYPES",
            help="Only these instance types (comma-separated or repeated).",
            show_default=False,
        ),
    ] = None,
    regions: RegionsOpt = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="AGO",
            help="Only what was learnt in the last 30m, 1h, 2d... (counts are kept per hour: "
            "the hour it falls in counts whole). Default: all that is kept (7 days).",
            show_default=False,
        ),
    ] = None,
    state_table: Annotated[
        str | None,
        typer.Option(
            "--state-table",
            metavar="TABLE",
            envvar="BROKER_STATE_TABLE",
            help="The broker's state table (the stack's StateTableName output), where every "
            "function keeps its capacity memory.",
            show_default=False,
        ),
    ] = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """What the broker's attempts found per AZ and instance type, and what they spent."""
    state = state_of(ctx, output, regions, profile)
    ago = parse_since(since)
    with guard():
        broker = make_broker(state, state_table=state_table)
        rows = broker.history(split(instance_types) or None, state.regions or None, ago)
    where = "the state table" if broker.state_table else "this process (no state table)"
    render.listing(
        state.output,
        HistoryRow,
        rows,
        [],
        f"Nothing in the capacity memory of {where}",
        COLUMNS,
        [cells(r) for r in rows],
        "Capacity memory: what the broker's attempts found",
    )
