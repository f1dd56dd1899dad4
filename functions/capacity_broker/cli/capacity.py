"""``capacity``: the ODCRs and Capacity Blocks you hold, with truffle's summaries.

The summary and the UltraCluster footer are computed from the rows shown, so they can never
disagree with the table (a bought block is "Total Blocks: 1", a mix of placed and unplaced
blocks is not a "Yes").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer
from rich.console import Console

from ..client import ReservationType, Results
from ..domain.discovery import FUTURE_WAITING_STATES
from ..logic.capacity import summary_of
from ..models.capacity import CapacityRow, CapacitySummary
from ..models.discovery import PoolRow
from . import render
from .app import (
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
from .errors import EXIT_USAGE, fail, finish_verdict, guard
from .render import Col, Output

ODCR_COLUMNS = [
    Col("Instance Type"),
    Col("Region", priority=3),
    Col("AZ"),
    Col("Total", numeric=True),
    Col("Avail", numeric=True),
    Col("Used", priority=2, numeric=True),
    Col("State"),
    Col("Match", priority=4),
    # future-dated ODCRs: when they start and until when they are committed
    Col("Start", priority=6, wrap=True),
    Col("End", wrap=True),
    Col("Commitment", priority=7, wrap=True),
    Col("Owned", priority=5),
    Col("Reservation", ident=True),
]

BLOCK_COLUMNS = [
    Col("Instance Type"),
    Col("Count", numeric=True),
    # 0 until the block starts (EC2 shows no capacity before then); at 80 columns it gives way
    # to Left, the number a training run needs (issue 42)
    Col("Avail", priority=1, numeric=True),
    Col("Region", priority=4),
    Col("AZ"),
    Col("Start", priority=1, wrap=True),
    Col("End", wrap=True),
    Col("Duration", priority=2, numeric=True),
    # hours a run can still have before EC2 stops the block's instances: key, as the README
    # promises it for training (it was dropped first at 80 columns)
    Col("Left", numeric=True),
    Col("State"),
    Col("Interconnect", priority=5),
    Col("UltraCluster", priority=3),
    Col("Reservation", ident=True),
    # the purchase a reservation is a segment of: segments of one block share it
    Col("Block", ident=True, priority=2),
]


def block_count(rows: Sequence[CapacityRow]) -> int:
    """Capacity Blocks, not reservations: the segments of one purchase (one CapacityBlockId,
    "a separate Capacity Reservation is created for each segment", botocore 1.44.5) are one
    block."""
    return len(
        {(r.region, r.capacity_block_id or r.reservation_id) for r in rows if r.is_capacity_block}
    )


def summary_lines(kind: str, summary: CapacitySummary, blocks: int | None = None) -> list[str]:
    types = ", ".join(summary.instance_types)
    count = len(summary.instance_types)
    if kind == ReservationType.CAPACITY_BLOCKS:
        shown = summary.reservations if blocks is None else blocks
        segments = (
            f" ({summary.reservations} reservations)" if shown != summary.reservations else ""
        )
        lines = [
            "Capacity Block Summary:",
            f"Total Blocks: {shown}{segments}",
            f"Instance Types: {count} ({types})",
            f"Total Capacity: {summary.total_capacity} instances",
        ]
        if summary.block_duration_hours:
            low = summary.block_duration_hours.min_hours
            high = summary.block_duration_hours.max_hours
            lines.append(
                f"Duration Range: {low:g}-{high:g} hours ({low / 24:g}-{high / 24:g} days)"
            )
        return lines
    label = "ODCRs" if kind == ReservationType.ODCR else "ODCRs and Capacity Blocks"
    return [
        f"Capacity Reservation Summary ({label}):",
        f"Total Reservations: {summary.reservations}",
        f"Instance Types: {count} ({types})",
        f"Total Capacity: {summary.total_capacity} instances",
        f"Available: {summary.available_capacity} instances ({summary.free_percent:g}% free)",
    ]


def placement_line(blocks: Sequence[CapacityRow]) -> str:
    """What EC2's topology said about the blocks shown, as the rows say it."""
    placed = [b.reservation_id for b in blocks if b.ultra_cluster_placement is True]
    known = [b for b in blocks if b.ultra_cluster_placement is not None]
    if not known:
        return "UltraCluster Placement: Unknown (EC2 did not report the topology)"
    if len(placed) == len(blocks):
        return "UltraCluster Placement: Yes (optimized networking for distributed training)"
    unknown = len(blocks) - len(known)
    # EC2 reports a topology only for active or pending reservations: a block that has not
    # started is unknown, never "no".
    later = f"; {unknown} not known until they start" if unknown else ""
    if not placed:
        return (
            "UltraCluster Placement: No (EC2 reports no network nodes for "
            f"{len(known)} of these blocks{later})"
        )
    others = len(known) - len(placed)
    return (
        f"UltraCluster Placement: {len(placed)} of {len(blocks)} blocks "
        f"({', '.join(placed)})" + (f"; {others} report no network nodes" if others else "") + later
    )


def show(kind: str, rows: Sequence[CapacityRow], regions: Sequence[str] = ()) -> None:
    """The summary and the tables of ``rows`` (ODCRs and blocks apart), or where it looked."""
    out = render.stdout()
    if not rows:
        where = f" in {render.regions_text(regions)}" if regions else ""
        render.say(out, f"No capacity reservations match{where}.")
        return
    summary = summary_of(rows)
    for number, line in enumerate(summary_lines(kind, summary, block_count(rows))):
        render.say(out, line, indent=3 if number else 0, hang=3)
    tables(out, rows)


def tables(out: Console, rows: Sequence[CapacityRow], titled: bool = False) -> None:
    """ODCRs and Capacity Blocks in a table each (titled when both are there)."""
    odcrs = [r for r in rows if not r.is_capacity_block]
    blocks = [r for r in rows if r.is_capacity_block]
    if odcrs:
        _odcr_table(out, odcrs, "On-Demand Capacity Reservations" if blocks or titled else None)
    if blocks:
        _block_table(out, blocks, "Capacity Blocks" if odcrs or titled else None)
        render.say(out, placement_line(blocks))


def _odcr_table(out: Console, odcrs: Sequence[CapacityRow], title: str | None) -> None:
    render.print_table(
        out,
        ODCR_COLUMNS,
        [
            [
                r.instance_type,
                r.region,
                r.availability_zone,
                r.total_capacity,
                r.available_capacity,
                r.used_capacity,
                r.state,
                r.instance_match_criteria,
                render.when(r.start_date) if r.state != "active" else "",
                render.when(r.end_date) or "unlimited",
                render.when(r.commitment_end_date),
                "yes" if r.owned_by_broker else "",
                r.reservation_id,
            ]
            for r in odcrs
        ],
        title,
    )
    if all(r.end_date is None for r in odcrs):
        commitments = [r.commitment_end_date for r in odcrs if r.commitment_end_date]
        waiting = any(r.state in FUTURE_WAITING_STATES for r in odcrs)
        # A future-dated reservation is held (and billed) until cancelled too, but it cannot
        # be cancelled before its commitment ends: not "use it indefinitely" (issue 42).
        if commitments:
            render.say(
                out,
                "No fixed end date - held until cancelled, and committed until "
                f"{render.when(max(commitments))}: it cannot be cancelled before then",
            )
        elif waiting:
            render.say(
                out,
                "No fixed end date once delivered - held until cancelled; a future-dated "
                "reservation cannot be cancelled before its commitment ends",
            )
        else:
            render.say(out, "No fixed end date - can use indefinitely")


def _block_table(out: Console, blocks: Sequence[CapacityRow], title: str | None) -> None:
    render.print_table(
        out,
        BLOCK_COLUMNS,
        [
            [
                r.instance_type,
                r.total_capacity,
                r.available_capacity,
                r.region,
                r.availability_zone,
                render.when(r.start_date),
                render.when(r.end_date),
                render.number(r.duration_hours, "h"),
                render.number(r.hours_left, "h"),
                r.state,
                r.interconnect_status or "unknown",
                render.yes_no(r.ultra_cluster_placement),
                r.reservation_id,
                r.capacity_block_id or "",
            ]
            for r in _by_block(blocks)
        ],
        title,
    )


def _by_block(blocks: Sequence[CapacityRow]) -> list[CapacityRow]:
    """The rows in their order, each block's segments together (first seen first)."""
    first: dict[tuple[str, str], int] = {}
    for index, row in enumerate(blocks):
        first.setdefault((row.region, row.capacity_block_id or row.reservation_id), index)
    return sorted(
        blocks,
        key=lambda r: first[(r.region, r.capacity_block_id or r.reservation_id)],
    )


POOL_COLUMNS = [
    Col("Instance Type"),
    Col("Kind", priority=2),
    Col("Region", priority=3),
    Col("AZ"),
    Col("Total", numeric=True),
    Col("Unused", numeric=True),
    Col("$/h each", priority=1, numeric=True),
    Col("Unused $/h", numeric=True),
    Col("Reservation", ident=True),
]


def show_pool(state: State, tag: str | None, groups: list[str] | None) -> None:
    """``capacity --pool``: the pool's reservations, their idle instances and cost now."""
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions or None)
        rows = broker.pool(tag=tag, groups=groups, regions=wanted)
    output = state.output
    if output is Output.csv:
        render.write_csv(render.plain(rows), render.columns_of(PoolRow))
        return
    if output is not Output.table:
        render.write_data(rows, output)
        return
    out = render.stdout()
    if not rows:
        render.say(out, f"No reservations in the pool in {render.regions_text(wanted)}.")
        return
    unused = sum(r.unused_instances for r in rows)
    priced = [r.unused_hourly_cost_usd for r in rows if r.unused_hourly_cost_usd is not None]
    render.say(out, "Reserved Pool:")
    render.say(out, f"Reservations: {len(rows)}", indent=3, hang=3)
    render.say(out, f"Unused: {unused} instances", indent=3, hang=3)
    render.say(
        out, f"Unused cost now: ${sum(priced):,.2f}/hour (On-Demand rates)", indent=3, hang=3
    )
    render.print_table(
        out,
        POOL_COLUMNS,
        [
            [
                r.instance_type,
                r.kind,
                r.region,
                r.availability_zone,
                r.total_instances,
                r.unused_instances,
                "" if r.hourly_price_usd is None else f"{r.hourly_price_usd:,.4g}",
                "" if r.unused_hourly_cost_usd is None else f"{r.unused_hourly_cost_usd:,.2f}",
                r.reservation_id,
            ]
            for r in rows
        ],
        None,
    )


def write(output: Output, results: Results[CapacityRow], full: bool = False) -> None:
    """The rows as data (``--full``: the whole answer, summary and errors included)."""
    if output is Output.csv:
        render.write_csv(render.plain(list(results)), render.columns_of(CapacityRow))
    elif full:
        render.write_data(
            {
                "status": results.status,
                "verdict": results.verdict,
                "regions": results.regions,
                "summary": render.plain(results.summary or summary_of(list(results))),
                "reservations": render.plain(list(results)),
                "errors": render.plain(results.errors),
                "message": results.message,
            },
            output,
        )
    else:
        render.write_data(list(results), output)


@app.command()
def capacity(
    ctx: typer.Context,
    odcr: Annotated[bool, typer.Option("--odcr", help="ODCRs only (default).")] = False,
    blocks: Annotated[bool, typer.Option("--blocks", help="Capacity Blocks only.")] = False,
    all_types: Annotated[bool, typer.Option("--all", help="ODCRs and Capacity Blocks.")] = False,
    instance_types: Annotated[
        list[str] | None,
        typer.Option(
            "--instance-types",
            "-t",
            metavar="TYPES",
            help="Types or patterns, comma-separated: p5.48xlarge, p5 (every size), g6.*",
            show_default=False,
        ),
    ] = None,
    regions: RegionsOpt = None,
    gpu_only: Annotated[
        bool,
        typer.Option(
            "--gpu-only", help="Accelerated types only (EC2's GPU, Neuron, Inferentia facts)."
        ),
    ] = False,
    available_only: Annotated[
        bool, typer.Option("--available-only", help="Only reservations with free instances.")
    ] = False,
    min_capacity: Annotated[
        int, typer.Option("--min-capacity", min=0, help="At least N available instances.")
    ] = 0,
    active_only: Annotated[
        bool,
        typer.Option(
            "--active-only/--include-inactive",
            help="Usable reservations only (ODCRs active, blocks active or scheduled), or "
            "also cancelled, expired, pending...",
        ),
    ] = True,
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="json/yaml: the whole answer (summary, errors), not just the rows."
        ),
    ] = False,
    pool: Annotated[
        bool,
        typer.Option(
            "--pool",
            help="The cluster's reserved pool: each reservation's unused instances and what "
            "they cost an hour now.",
        ),
    ] = False,
    pool_tag: Annotated[
        str | None,
        typer.Option(
            "--pool-tag",
            metavar="KEY=VALUE",
            help="With --pool: the tag naming the pool (default: BROKER_POOL_TAG).",
            show_default=False,
        ),
    ] = None,
    pool_group: Annotated[
        list[str] | None,
        typer.Option(
            "--pool-group",
            metavar="NAME",
            help="With --pool: a Capacity Reservation group (name or ARN) of the pool "
            "(default: BROKER_POOL_GROUPS).",
            show_default=False,
        ),
    ] = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """ODCRs and Capacity Blocks you hold: where, how much is free, when blocks run."""
    state = state_of(ctx, output, regions, profile)
    if pool:
        if odcr or blocks or all_types:
            raise fail(
                "--pool lists the pool's reservations of every kind: no --odcr/--blocks/--all",
                EXIT_USAGE,
            )
        show_pool(state, pool_tag, split(pool_group) or None)
        return
    if sum((odcr, blocks, all_types)) > 1:
        raise fail("give one of --odcr, --blocks, --all", EXIT_USAGE)
    kind = (
        ReservationType.CAPACITY_BLOCKS
        if blocks
        else ReservationType.ALL
        if all_types
        else ReservationType.ODCR
    )
    with guard():
        broker = make_broker(state)
        if broker.mode == "deployed":
            # The function lists its BROKER_REGIONS unless regions are given.
            wanted = broker.resolve_regions(state.regions) if state.regions else None
        else:
            wanted = broker.resolve_regions(state.regions)
        with progress_bar(state, wanted or [], "capacity") as advance:
            results = broker.capacity(
                instance_types=split(instance_types) or None,
                regions=wanted,
                reservation_type=kind,
                gpu_only=gpu_only,
                available_only=available_only,
                min_capacity=min_capacity,
                active_only=active_only,
                progress=advance,
            )
    if state.output is Output.table:
        show(kind, list(results), results.regions)
    else:
        write(state.output, results, full)
    finish_verdict(results)
