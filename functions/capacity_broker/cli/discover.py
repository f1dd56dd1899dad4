"""``search``, ``az`` and ``spot``: which instance types exist, where, and what Spot costs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

from ..client import CapacityBroker
from ..client.results import Results
from ..models.discovery import AzRow, InstanceTypeRow, SpotPriceRow
from . import render
from .app import (
    Advance,
    OutputOpt,
    ProfileOpt,
    RegionsOpt,
    State,
    app,
    make_broker,
    progress_bar,
    split,
    state_of,
)
from .errors import finish_listing, guard, warn
from .render import Col

R = TypeVar("R")

SEARCH_COLUMNS = [
    Col("Instance Type"),
    Col("Region"),
    Col("vCPUs", numeric=True),
    Col("Memory (GiB)", numeric=True),
    Col("Architecture", priority=2),
    Col("Accelerators", priority=1, wrap=True),
]

AZ_COLUMNS = [
    Col("Instance Type"),
    Col("Region"),
    Col("AZs", numeric=True),
    Col("Availability Zones", wrap=True),
    Col("Zone IDs", priority=1, wrap=True),
]


def spot_columns(show_savings: bool) -> list[Col]:
    columns = [
        Col("Instance Type"),
        Col("Region", priority=2),
        Col("AZ"),
        Col("Spot $/h", numeric=True),
    ]
    if show_savings:
        columns += [Col("On-Demand $/h", numeric=True), Col("Savings", numeric=True)]
    return [*columns, Col("Since", priority=1, wrap=True)]


@app.command()
def search(
    ctx: typer.Context,
    pattern: Annotated[
        str, typer.Argument(metavar="PATTERN", help="m7i.large, m8g.* or a family such as p5.")
    ],
    regions: RegionsOpt = None,
    architecture: Annotated[
        str | None,
        typer.Option(
            "--architecture",
            "-a",
            metavar="ARCH",
            help="x86_64, arm64, ...",
            show_default=False,
        ),
    ] = None,
    min_vcpus: Annotated[
        int | None,
        typer.Option("--min-vcpus", min=1, help="At least N vCPUs.", show_default=False),
    ] = None,
    min_memory: Annotated[
        float | None,
        typer.Option("--min-memory", min=0, help="At least N GiB of memory.", show_default=False),
    ] = None,
    gpu_only: Annotated[bool, typer.Option("--gpu-only", help="Accelerated types only.")] = False,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Instance types by pattern, with vCPUs, memory, architecture and accelerators."""
    state = state_of(ctx, output, regions, profile)
    results = _across_regions(
        state,
        "search",
        lambda broker, wanted, advance: broker.search(
            pattern,
            wanted,
            architecture,
            min_vcpus,
            min_memory,
            gpu_only=gpu_only,
            progress=advance,
        ),
    )
    _show(
        state,
        InstanceTypeRow,
        results,
        f"No instance types match {pattern}",
        SEARCH_COLUMNS,
        [
            [
                r.instance_type,
                r.region,
                r.vcpus,
                render.number(r.memory_gib),
                ", ".join(r.architectures),
                r.accelerator or "",
            ]
            for r in results
        ],
    )


@app.command()
def az(
    ctx: typer.Context,
    pattern: Annotated[str, typer.Argument(metavar="PATTERN", help="Instance type or pattern.")],
    regions: RegionsOpt = None,
    min_az_count: Annotated[
        int | None,
        typer.Option(
            "--min-az-count", min=1, help="Offered in at least N AZs.", show_default=False
        ),
    ] = None,
    azs: Annotated[
        list[str] | None,
        typer.Option(
            "--azs",
            metavar="AZS",
            help="Only these AZs (names or ids), comma-separated.",
            show_default=False,
        ),
    ] = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Which Availability Zones offer each instance type."""
    state = state_of(ctx, output, regions, profile)
    results = _across_regions(
        state,
        "az",
        lambda broker, wanted, advance: broker.az(
            pattern, wanted, min_az_count, split(azs), progress=advance
        ),
    )
    _show(
        state,
        AzRow,
        results,
        f"No Availability Zone offers {pattern}",
        AZ_COLUMNS,
        [
            [
                r.instance_type,
                r.region,
                r.az_count,
                ", ".join(r.availability_zones),
                ", ".join(r.availability_zone_ids),
            ]
            for r in results
        ],
    )


@app.command()
def spot(
    ctx: typer.Context,
    pattern: Annotated[
        str, typer.Argument(metavar="PATTERN", help="Instance type or pattern (m8g.*).")
    ],
    regions: RegionsOpt = None,
    max_price: Annotated[
        float | None,
        typer.Option("--max-price", min=0, help="At most this, USD per hour.", show_default=False),
    ] = None,
    show_savings: Annotated[
        bool,
        typer.Option(
            "--show-savings",
            help="Compare with the On-Demand price from the AWS Price List (never estimated).",
        ),
    ] = False,
    sort_by_price: Annotated[
        bool, typer.Option("--sort-by-price", help="Cheapest first (default: by type and AZ).")
    ] = False,
    history: Annotated[
        float | None,
        typer.Option(
            "--history", min=0, help="Every price change in the last N hours.", show_default=False
        ),
    ] = None,
    product: Annotated[
        str, typer.Option("--product", metavar="PRODUCT", help="Product description.")
    ] = "Linux/UNIX",
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Spot prices by instance type and AZ."""
    state = state_of(ctx, output, regions, profile)
    results = _across_regions(
        state,
        "spot",
        lambda broker, wanted, advance: broker.spot(
            pattern,
            wanted,
            max_price,
            show_savings,
            sort_by_price,
            history_hours=history,
            product_description=product,
            progress=advance,
        ),
    )
    if show_savings:
        for note in sorted({r.savings_note for r in results if r.savings_note}):
            warn(note)
    rows: list[list[Any]] = []
    for r in results:
        row: list[Any] = [r.instance_type, r.region, r.availability_zone, f"{r.spot_price:g}"]
        if show_savings:
            row += [
                render.number(r.on_demand_price) or "n/a",
                render.number(r.savings_percent, "%") or "n/a",
            ]
        rows.append([*row, render.when(r.timestamp)])
    _show(
        state,
        SpotPriceRow,
        results,
        f"No Spot prices for {pattern}",
        spot_columns(show_savings),
        rows,
    )


def _across_regions(
    state: State, label: str, ask: Callable[[CapacityBroker, list[str], Advance | None], R]
) -> R:
    """The one body of the discovery commands: the broker, the regions it resolves, a
    progress bar over them, and one question asked across them (errors as ``guard`` says)."""
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        with progress_bar(state, wanted, label) as advance:
            return ask(broker, wanted, advance)


def _show(
    state: State,
    model: type[BaseModel],
    results: Results[Any],
    empty: str,
    columns: list[Col],
    rows: list[list[Any]],
) -> None:
    """The answer as a table or as ``--output`` says, then the exit code for partial answers."""
    render.listing(state.output, model, results, results.regions, empty, columns, rows)
    finish_listing(results)
