"""``capacity-broker``: the command line over :class:`capacity_broker.CapacityBroker`.

Tables (Rich) for people, ``--output json|yaml|csv`` for scripts: a list command prints a
list (``[]`` when nothing matched), an action prints its answer object; nothing else ever
goes to stdout in those formats. Warnings, region failures and errors go to stderr, and the
exit code says how it went (see ``capacity-broker --help``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from .adapters.aws import AwsError
from .client import (
    BrokerError,
    CapacityBroker,
    EntryPointUnavailable,
    InvalidArguments,
    RegionsFailed,
    ReservationType,
    Results,
)
from .models.capacity import CapacityRow, CapacitySummary
from .models.common import ItemError
from .slurm.check import app as slurm_app

EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_NO_CAPACITY = 4
EXIT_INTERRUPTED = 130

HELP = (
    "Capacity broker for Amazon EC2: ODCRs and Capacity Blocks, offerings, instance types, "
    "Spot prices, and the broker's probe / reserve / release / clean actions.\n\n"
    "Calls AWS directly with your credentials (--profile), or the deployed functions with "
    "--function-prefix; `capacity-broker local` runs everything offline."
)

EPILOG = (
    "Exit codes: 0 ok; 1 partial (some regions or items failed, the rest is shown); "
    "2 usage error or invalid request; 3 failed (every region failed, AWS or configuration "
    'error); 4 answered "no" (no capacity, offering gone, plan unavailable); 130 interrupted. '
    "JSON/YAML/CSV output of an empty list is [] (CSV: the header only); errors go to stderr."
)


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"
    csv = "csv"


@dataclass
class State:
    output: Output = Output.table
    regions: list[str] = field(default_factory=list)
    profile: str | None = None
    function_prefix: str | None = None
    cluster_id: str | None = None
    progress: bool = True


app = typer.Typer(
    name="capacity-broker",
    help=HELP,
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(slurm_app, name="slurm")

# -- shared options --------------------------------------------------------------------------

OutputOpt = Annotated[
    Output | None,
    typer.Option("--output", "-o", help="table (default), json, yaml or csv.", show_default=False),
]
RegionsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--regions",
        "--region",
        "-r",
        help="Regions, comma-separated or repeated; 'all' = every enabled region.",
        show_default=False,
    ),
]
ProfileOpt = Annotated[
    str | None, typer.Option("--profile", help="AWS profile to use.", show_default=False)
]


def _split(values: Sequence[str] | None) -> list[str]:
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


@app.callback()
def main_options(
    ctx: typer.Context,
    output: OutputOpt = None,
    regions: RegionsOpt = None,
    profile: ProfileOpt = None,
    function_prefix: Annotated[
        str | None,
        typer.Option(
            "--function-prefix",
            envvar="CAPACITY_BROKER_FUNCTION_PREFIX",
            help="Invoke the deployed functions <prefix>-probe, ... instead of calling AWS "
            "directly (the stack's FunctionPrefix output).",
            show_default=False,
        ),
    ] = None,
    cluster_id: Annotated[
        str | None,
        typer.Option(
            "--cluster-id",
            envvar="BROKER_CLUSTER_ID",
            help="The broker's cluster id (direct probe/reserve/release/clean; marks "
            "owned reservations).",
            show_default=False,
        ),
    ] = None,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="No progress display on stderr.")
    ] = False,
) -> None:
    ctx.obj = State(
        output=output or Output.table,
        regions=_split(regions),
        profile=profile,
        function_prefix=function_prefix,
        cluster_id=cluster_id,
        progress=not no_progress,
    )


def _state(
    ctx: typer.Context,
    output: Output | None = None,
    regions: Sequence[str] | None = None,
    profile: str | None = None,
) -> State:
    base: State = ctx.obj if isinstance(ctx.obj, State) else State()
    return State(
        output=output or base.output,
        regions=_split(regions) or base.regions,
        profile=profile or base.profile,
        function_prefix=base.function_prefix,
        cluster_id=base.cluster_id,
        progress=base.progress,
    )


# -- output ----------------------------------------------------------------------------------

err = Console(stderr=True, highlight=False, soft_wrap=True)


def _stdout() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal:
        # A pipe or a file: no wrapping of wide tables at 80 columns.
        console = Console(highlight=False, width=max(shutil.get_terminal_size().columns, 200))
    return console


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {escape(message)}")


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(code)


def _plain(data: Any) -> Any:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json", exclude_none=True)
    if isinstance(data, list):
        return [_plain(item) for item in data]
    return data


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ";".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def write_data(data: Any, output: Output, columns: Sequence[str] | None = None) -> None:
    """JSON / YAML / CSV of a list (``[]`` when empty) or of one answer object."""
    plain = _plain(data)
    if output is Output.json:
        sys.stdout.write(json.dumps(plain, indent=2) + "\n")
    elif output is Output.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(plain, sort_keys=False, allow_unicode=True))
    elif output is Output.csv:
        rows = plain if isinstance(plain, list) else [plain]
        names = list(columns or ())
        for row in rows:
            names.extend(k for k in row if k not in names)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row.get(k)) for k in names})
        sys.stdout.write(buffer.getvalue())
    sys.stdout.flush()


def _table(title: str | None, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for header in headers:
        numeric = header in NUMERIC_HEADERS
        table.add_column(header, justify="right" if numeric else "left", no_wrap=not numeric)
    for row in rows:
        table.add_row(*(escape(_cell(v)) for v in row))
    return table


NUMERIC_HEADERS = frozenset(
    {
        "Total",
        "Available",
        "Used",
        "Count",
        "Instances",
        "vCPUs",
        "Memory (GiB)",
        "Hours",
        "Duration",
        "AZs",
        "Spot $/h",
        "On-Demand $/h",
        "Savings",
        "Upfront fee",
        "$/instance-hour",
    }
)


def _when(value: datetime | None, with_time: bool = True) -> str:
    if value is None:
        return ""
    moment = value.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M" if with_time else "%Y-%m-%d")


def region_errors(errors: Sequence[ItemError]) -> None:
    for error in errors:
        err.print(
            f"[red]error:[/red] {escape(str(error.region or error.id or ''))}: "
            f"{escape(str(error.error_code or ''))}: {escape(error.message)}"
        )


@contextlib.contextmanager
def progress_bar(
    state: State, regions: Sequence[str], label: str
) -> Iterator[Callable[[str, bool], None] | None]:
    """A transient region-by-region progress display on stderr (terminals only)."""
    if not state.progress or state.output is not Output.table or len(regions) < 2:
        yield None
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{label}: {len(regions)} regions", total=len(regions))
        lock = threading.Lock()

        def advance(region: str, ok: bool) -> None:
            with lock:
                bar.update(
                    task,
                    advance=1,
                    description=f"{label}: {region} {'done' if ok else 'failed'}",
                )

        yield advance


@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Every failure becomes a message on stderr and its exit code."""
    try:
        yield
    except typer.Exit:
        raise
    except InvalidArguments as error:
        answer_errors = (error.answer or {}).get("errors")
        if answer_errors:
            for item in answer_errors:
                err.print(
                    f"[red]invalid:[/red] {escape(str(item.get('field')))}: "
                    f"{escape(str(item.get('message')))}"
                )
            raise fail(str((error.answer or {}).get("message", error)), EXIT_USAGE) from None
        raise fail(str(error), EXIT_USAGE) from None
    except RegionsFailed as error:
        region_errors(error.errors)
        raise fail("every region failed", EXIT_FAILED) from None
    except EntryPointUnavailable as error:
        raise fail(str(error), EXIT_FAILED) from None
    except BrokerError as error:
        raise fail(str(error), EXIT_FAILED) from None
    except AwsError as error:
        raise fail(str(error), EXIT_FAILED) from None
    except ProfileNotFound as error:
        raise fail(str(error), EXIT_USAGE) from None
    except BotoCoreError as error:
        raise fail(f"{type(error).__name__}: {error}", EXIT_FAILED) from None
    except ClientError as error:
        # Not a BotoCoreError: an AWS answer the code above did not turn into its own error.
        details = error.response.get("Error", {})
        raise fail(
            f"{details.get('Code', 'ClientError')}: {details.get('Message') or error}",
            EXIT_FAILED,
        ) from None
    except KeyboardInterrupt:
        raise fail("interrupted", EXIT_INTERRUPTED) from None


def make_broker(state: State) -> CapacityBroker:
    session = None
    if state.profile:
        import boto3

        session = boto3.session.Session(profile_name=state.profile)
    if state.function_prefix:
        return CapacityBroker.deployed(state.function_prefix, session, state.regions or None)
    return CapacityBroker(state.regions or None, session, cluster_id=state.cluster_id)


def finish_listing(results: Results[Any]) -> None:
    """Region failures to stderr; exit 1 when some regions failed."""
    if results.errors:
        region_errors(results.errors)
        raise typer.Exit(EXIT_PARTIAL)


# -- capacity --------------------------------------------------------------------------------

CAPACITY_COLUMNS = list(CapacityRow.model_fields)


def show_listing(
    state: State,
    results: Results[Any],
    empty: str,
    title: str | None,
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
) -> None:
    """A listing command's output: a table (or a line saying there is nothing), or the rows
    as data; then the exit code the listing earned."""
    if state.output is Output.table:
        out = _stdout()
        out.print(_table(title, headers, rows) if results else empty)
    else:
        write_data(list(results), state.output)
    finish_listing(results)


def _summary_text(kind: str, summary: CapacitySummary, rows: Sequence[CapacityRow]) -> str:
    types = ", ".join(summary.instance_types)
    count = len(summary.instance_types)
    if kind == "capacity-block":
        lines = [
            "Capacity Block Summary:",
            f"   Total Blocks: {summary.reservations}",
            f"   Instance Types: {count} ({types})",
            f"   Total Capacity: {summary.total_capacity} instances",
        ]
        if summary.block_duration_hours:
            low, high = (
                summary.block_duration_hours.min_hours,
                summary.block_duration_hours.max_hours,
            )
            lines.append(
                f"   Duration Range: {low:g}-{high:g} hours ({low / 24:g}-{high / 24:g} days)"
            )
        return "\n".join(lines)
    label = "ODCRs" if kind == "odcr" else "ODCRs and Capacity Blocks"
    return "\n".join(
        [
            f"Capacity Reservation Summary ({label}):",
            f"   Total Reservations: {summary.reservations}",
            f"   Instance Types: {count} ({types})",
            f"   Total Capacity: {summary.total_capacity} instances",
            f"   Available: {summary.available_capacity} instances "
            f"({summary.free_percent:g}% free)",
        ]
    )


def render_capacity(kind: str, results: Results[CapacityRow]) -> None:
    out = _stdout()
    summary = results.summary or CapacitySummary()
    if not results:
        out.print("No capacity reservations match.")
        return
    out.print(escape(_summary_text(kind, summary, results)))
    odcrs = [r for r in results if not r.is_capacity_block]
    blocks = [r for r in results if r.is_capacity_block]
    if odcrs:
        out.print(
            _table(
                "On-Demand Capacity Reservations" if blocks else None,
                [
                    "Instance Type",
                    "Region",
                    "AZ",
                    "Total",
                    "Available",
                    "Used",
                    "State",
                    "Match",
                    "End",
                    "Owned",
                    "Reservation",
                ],
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
                        _when(r.end_date) or "unlimited",
                        "yes" if r.owned_by_broker else "",
                        r.reservation_id,
                    ]
                    for r in odcrs
                ],
            )
        )
        if all(r.end_date is None for r in odcrs):
            out.print("No fixed end date - can use indefinitely")
    if blocks:
        out.print(
            _table(
                "Capacity Blocks" if odcrs else None,
                [
                    "Instance Type",
                    "Count",
                    # 0 until the block starts (EC2 shows no capacity before then)
                    "Available",
                    "Region",
                    "AZ",
                    "Start",
                    "End",
                    "Duration",
                    "State",
                    "UltraCluster",
                    "Reservation",
                ],
                [
                    [
                        r.instance_type,
                        r.total_capacity,
                        r.available_capacity,
                        r.region,
                        r.availability_zone,
                        _when(r.start_date),
                        _when(r.end_date),
                        f"{r.duration_hours:g}h" if r.duration_hours is not None else "",
                        r.state,
                        {True: "yes", False: "no", None: "unknown"}[r.ultra_cluster_placement],
                        r.reservation_id,
                    ]
                    for r in blocks
                ],
            )
        )
        placement = summary.ultra_cluster_placement
        out.print(
            "UltraCluster Placement: "
            + {
                True: "Yes (optimized networking for distributed training)",
                False: "No network placement reported by EC2",
                None: "Unknown (EC2 did not report the topology)",
            }[placement]
        )


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
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """ODCRs and Capacity Blocks you hold: where, how much is free, when blocks run."""
    state = _state(ctx, output, regions, profile)
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
        # No regions given: the client's defaults, or (deployed) the function's BROKER_REGIONS.
        wanted = broker.resolve_regions(state.regions) if state.regions else None
        shown = wanted or ([] if broker.mode == "deployed" else broker.regions)
        with progress_bar(state, shown, "capacity") as advance:
            results = broker.capacity(
                instance_types=_split(instance_types) or None,
                regions=wanted,
                reservation_type=kind,
                gpu_only=gpu_only,
                available_only=available_only,
                min_capacity=min_capacity,
                active_only=active_only,
                progress=advance,
            )
    if state.output is Output.table:
        render_capacity(kind.value, results)
    elif full and state.output in (Output.json, Output.yaml):
        write_data(
            {
                "status": results.status,
                "regions": results.regions,
                "summary": _plain(results.summary or CapacitySummary()),
                "reservations": _plain(list(results)),
                "errors": _plain(results.errors),
                "message": results.message,
            },
            state.output,
        )
    else:
        write_data(list(results), state.output, CAPACITY_COLUMNS)
    finish_listing(results)


# -- offerings and purchase ------------------------------------------------------------------

_RELATIVE = re.compile(r"^\+(\d+(?:\.\d+)?)([hdw])$")


def parse_when(value: str | None, name: str) -> datetime | None:
    """ISO 8601 (a date, or a time; UTC unless it says otherwise) or ``+3d`` / ``+12h`` /
    ``+2w`` from now."""
    if not value:
        return None
    match = _RELATIVE.match(value.strip())
    if match:
        amount, unit = float(match[1]), match[2]
        delta = {"h": timedelta(hours=amount), "d": timedelta(days=amount)}.get(
            unit, timedelta(weeks=amount)
        )
        return datetime.now(UTC) + delta
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not a date: use 2026-12-01, 2026-12-01T11:30Z or +3d", param_hint=name
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def block_hours(days: int | None, hours: int | None) -> int:
    if days is not None and hours is not None:
        raise typer.BadParameter("give --days or --hours, not both")
    if days is not None:
        return days * 24
    return hours if hours is not None else 24


@app.command()
def offerings(
    ctx: typer.Context,
    instance_type: Annotated[
        str, typer.Option("--instance-type", "-t", help="One instance type, e.g. p5.48xlarge.")
    ],
    count: Annotated[
        int, typer.Option("--count", "-n", min=1, max=64, help="Instances in the block.")
    ] = 1,
    days: Annotated[
        int | None,
        typer.Option(
            "--days",
            min=1,
            help="Block length: 1-14 days, or 7-day steps to 182.",
            show_default=False,
        ),
    ] = None,
    hours: Annotated[
        int | None,
        typer.Option(
            "--hours", min=24, help="Block length in hours (default 24).", show_default=False
        ),
    ] = None,
    start_after: Annotated[
        str | None,
        typer.Option(
            "--start-after", help="Earliest start (2026-12-01 or +3d).", show_default=False
        ),
    ] = None,
    end_before: Annotated[
        str | None,
        typer.Option("--end-before", help="Latest end (2026-12-31 or +8w).", show_default=False),
    ] = None,
    regions: RegionsOpt = None,
    purchase: Annotated[
        str | None,
        typer.Option(
            "--purchase",
            help="Buy this offering (needs --yes). Capacity Blocks cannot be cancelled.",
            show_default=False,
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm the purchase.")] = False,
    platform: Annotated[
        str, typer.Option("--platform", help="Instance platform of a purchase.")
    ] = "Linux/UNIX",
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Show the N best offerings.", show_default=False),
    ] = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Capacity Blocks on sale, cheapest per instance-hour first; --purchase to buy one."""
    state = _state(ctx, output, regions, profile)
    duration = block_hours(days, hours)
    after = parse_when(start_after, "--start-after")
    before = parse_when(end_before, "--end-before")
    if purchase and not yes:
        raise fail(
            f"buying {purchase} commits you to a Capacity Block that cannot be cancelled; "
            "add --yes to confirm",
            EXIT_USAGE,
        )
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        if purchase:
            answer = broker.purchase_capacity_block(
                purchase, instance_type, count, duration, after, before, wanted, platform
            )
            if state.output is Output.table:
                out = _stdout()
                out.print(f"{answer.status}: {escape(answer.message)}")
                if answer.reservation is not None:
                    render_capacity("capacity-block", Results([answer.reservation]))
            else:
                write_data(answer, state.output)
            code = {
                "purchased": EXIT_OK,
                "already_purchased": EXIT_OK,
                "not_found": EXIT_NO_CAPACITY,
            }.get(answer.status, EXIT_FAILED)
            if code != EXIT_OK and state.output is not Output.table:
                err.print(f"{answer.status}: {escape(answer.message)}")
            raise typer.Exit(code)
        with progress_bar(state, wanted, "offerings") as advance:
            results = broker.offerings(
                instance_type, count, duration, after, before, wanted, progress=advance
            )
    if limit is not None:
        del results[limit:]
    show_listing(
        state,
        results,
        f"No Capacity Block offerings for {count} x {instance_type} for {duration} h.",
        f"Capacity Block offerings: {count} x {instance_type}, {duration} h",
        [
            "Offering",
            "Region",
            "AZ",
            "Instances",
            "Start",
            "End",
            "Hours",
            "Upfront fee",
            "$/instance-hour",
        ],
        [
            [
                o.offering_id,
                o.region,
                o.availability_zone,
                o.instance_count,
                _when(o.start_date),
                _when(o.end_date),
                o.duration_hours,
                f"{o.upfront_fee:,.2f} {o.currency or ''}".strip()
                if o.upfront_fee is not None
                else "",
                f"{o.price_per_instance_hour:g}" if o.price_per_instance_hour is not None else "",
            ]
            for o in results
        ],
    )


# -- search, az, spot ------------------------------------------------------------------------


@app.command()
def search(
    ctx: typer.Context,
    pattern: Annotated[str, typer.Argument(help="m7i.large, m8g.* or a family such as p5.")],
    regions: RegionsOpt = None,
    architecture: Annotated[
        str | None,
        typer.Option("--architecture", "-a", help="x86_64, arm64, ...", show_default=False),
    ] = None,
    min_vcpus: Annotated[int | None, typer.Option("--min-vcpus", min=1, show_default=False)] = None,
    min_memory: Annotated[
        float | None,
        typer.Option("--min-memory", min=0, help="GiB.", show_default=False),
    ] = None,
    gpu_only: Annotated[bool, typer.Option("--gpu-only", help="Accelerated types only.")] = False,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Instance types by pattern, with vCPUs, memory, architecture and accelerators."""
    state = _state(ctx, output, regions, profile)
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        with progress_bar(state, wanted, "search") as advance:
            results = broker.search(
                pattern,
                wanted,
                architecture,
                min_vcpus,
                min_memory,
                gpu_only=gpu_only,
                progress=advance,
            )
    show_listing(
        state,
        results,
        f"No instance types match {pattern}.",
        None,
        ["Instance Type", "Region", "vCPUs", "Memory (GiB)", "Architecture", "Accelerators"],
        [
            [
                r.instance_type,
                r.region,
                r.vcpus,
                f"{r.memory_gib:g}",
                ", ".join(r.architectures),
                r.accelerator or "",
            ]
            for r in results
        ],
    )


@app.command()
def az(
    ctx: typer.Context,
    pattern: Annotated[str, typer.Argument(help="Instance type or pattern.")],
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
            "--azs", help="Only these AZs (names or ids), comma-separated.", show_default=False
        ),
    ] = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Which Availability Zones offer each instance type."""
    state = _state(ctx, output, regions, profile)
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        with progress_bar(state, wanted, "az") as advance:
            results = broker.az(pattern, wanted, min_az_count, _split(azs), progress=advance)
    show_listing(
        state,
        results,
        f"No Availability Zone offers {pattern}.",
        None,
        ["Instance Type", "Region", "AZs", "Availability Zones", "Zone IDs"],
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
    pattern: Annotated[str, typer.Argument(help="Instance type or pattern (m8g.*).")],
    regions: RegionsOpt = None,
    max_price: Annotated[
        float | None,
        typer.Option("--max-price", min=0, help="USD per hour.", show_default=False),
    ] = None,
    show_savings: Annotated[
        bool,
        typer.Option(
            "--show-savings",
            help="Compare with the On-Demand price from the AWS Price List (never estimated).",
        ),
    ] = False,
    sort_by_price: Annotated[bool, typer.Option("--sort-by-price")] = False,
    history: Annotated[
        float | None,
        typer.Option(
            "--history", min=0, help="Every price change in the last N hours.", show_default=False
        ),
    ] = None,
    product: Annotated[str, typer.Option("--product", help="Product description.")] = "Linux/UNIX",
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Spot prices by instance type and AZ."""
    state = _state(ctx, output, regions, profile)
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        with progress_bar(state, wanted, "spot") as advance:
            results = broker.spot(
                pattern,
                wanted,
                max_price,
                show_savings,
                sort_by_price,
                history_hours=history,
                product_description=product,
                progress=advance,
            )
    if show_savings:
        notes = sorted({r.savings_note for r in results if r.savings_note})
        for note in notes:
            warn(note)
    headers = ["Instance Type", "Region", "AZ", "Spot $/h"]
    if show_savings:
        headers += ["On-Demand $/h", "Savings"]
    headers.append("Since")
    rows = []
    for r in results:
        row: list[Any] = [r.instance_type, r.region, r.availability_zone, f"{r.spot_price:g}"]
        if show_savings:
            row += [
                f"{r.on_demand_price:g}" if r.on_demand_price is not None else "n/a",
                f"{r.savings_percent:g}%" if r.savings_percent is not None else "n/a",
            ]
        row.append(_when(r.timestamp))
        rows.append(row)
    show_listing(state, results, f"No Spot prices for {pattern}.", None, headers, rows)


# -- plan ------------------------------------------------------------------------------------


class WorkloadChoice(StrEnum):
    training = "training"
    inference = "inference"
    dev = "dev"


@app.command()
def plan(
    ctx: typer.Context,
    workload: Annotated[WorkloadChoice, typer.Option("--workload", "-w")],
    instance_type: Annotated[str, typer.Option("--instance-type", "-t")],
    count: Annotated[int, typer.Option("--count", "-n", min=1)],
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
    state = _state(ctx, output, regions, profile)
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        with progress_bar(state, wanted, "plan") as advance:
            answer = broker.plan(
                workload.value, instance_type, count, days, wanted, progress=advance
            )
    if state.output is Output.table:
        out = _stdout()
        kind = "Capacity Blocks" if answer.recommendation == "capacity-block" else "ODCRs"
        out.print(f"Recommendation: {kind}")
        for reason in answer.reasons:
            out.print(f"  - {escape(reason)}")
        for note in answer.notes:
            out.print(f"  note: {escape(note)}")
        out.print(f"{answer.status}: {escape(answer.message)}")
        if answer.offerings:
            out.print(
                _table(
                    "Offerings",
                    ["Offering", "Region", "AZ", "Instances", "Start", "Hours", "$/instance-hour"],
                    [
                        [
                            o.offering_id,
                            o.region,
                            o.availability_zone,
                            o.instance_count,
                            _when(o.start_date),
                            o.duration_hours,
                            o.price_per_instance_hour,
                        ]
                        for o in answer.offerings
                    ],
                )
            )
    else:
        write_data(answer, state.output)
    region_errors(answer.errors)
    code = {
        "ready": EXIT_OK,
        "bookable": EXIT_OK,
        "unavailable": EXIT_NO_CAPACITY,
    }.get(answer.status, EXIT_FAILED)
    if code == EXIT_OK and answer.errors:
        code = EXIT_PARTIAL
    raise typer.Exit(code)


# -- the broker's actions --------------------------------------------------------------------

EventOpt = Annotated[
    Path | None,
    typer.Option(
        "--event",
        help="A JSON request to start from ('-' reads stdin); options override its fields.",
        show_default=False,
    ),
]
RequestIdOpt = Annotated[
    str | None,
    typer.Option(
        "--request-id", help="Idempotency key (generated when absent).", show_default=False
    ),
]
OK_STATUSES = {
    "available",
    "skipped",
    "reserved",
    "provisioned",
    "unreserved",
    "released",
    "ok",
}
NO_STATUSES = {"unavailable", "no_capacity", "rejected"}


def read_event(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError as error:
        raise typer.BadParameter(f"not JSON: {error}", param_hint="--event") from None
    if not isinstance(data, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--event")
    return data


def _merge(event: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    merged = dict(event)
    merged.update({k: v for k, v in fields.items() if v is not None and v != []})
    return merged


def run_action(
    state: State,
    entry: str,
    event: dict[str, Any] | Callable[[CapacityBroker], dict[str, Any]],
) -> None:
    """Invoke ``entry`` with ``event`` (or the event the broker builds: ``clean``'s)."""
    with guard():
        broker = make_broker(state)
        answer = broker.invoke(entry, event(broker) if callable(event) else event)
        if answer.get("status") == "invalid_request":
            if state.output is not Output.table:
                write_data(answer, state.output)
            raise InvalidArguments(
                [(str(e.get("field")), str(e.get("message"))) for e in answer.get("errors") or []],
                answer,
            )
    if state.output is Output.table:
        render_answer(answer)
    else:
        write_data(answer, state.output)
    status = str(answer.get("status"))
    if status in OK_STATUSES:
        raise typer.Exit(EXIT_OK)
    if status in NO_STATUSES:
        raise typer.Exit(EXIT_NO_CAPACITY)
    if status == "partial":
        for item in answer.get("errors") or []:
            err.print(f"[red]error:[/red] {escape(json.dumps(item))}")
        raise typer.Exit(EXIT_PARTIAL)
    err.print(f"[red]error:[/red] {escape(str(answer.get('message')))}")
    raise typer.Exit(EXIT_FAILED)


def render_answer(answer: Mapping[str, Any]) -> None:
    out = _stdout()
    out.print(f"{escape(str(answer.get('status')))}: {escape(str(answer.get('message', '')))}")
    scalars = [
        (k, v)
        for k, v in answer.items()
        if k not in ("status", "message") and not isinstance(v, (list, dict))
    ]
    for key, value in scalars:
        out.print(f"  {key}: {escape(_cell(value))}")
    for key, value in answer.items():
        if isinstance(value, dict) and value:
            out.print(f"  {key}: {escape(json.dumps(value))}")
    attempts = answer.get("attempts") or []
    if attempts:
        out.print(
            _table(
                "Attempts",
                ["Subnet", "Type", "AZ", "Outcome", "Error", "Reservation", "Cancelled"],
                [
                    [
                        a.get("subnet_id"),
                        a.get("instance_type"),
                        a.get("availability_zone"),
                        a.get("outcome"),
                        a.get("error_code"),
                        a.get("reservation_id"),
                        a.get("cancelled"),
                    ]
                    for a in attempts
                ],
            )
        )
    for key in ("cancelled", "kept", "skipped", "errors", "instances"):
        items = answer.get(key) or []
        if items:
            rows = [i if isinstance(i, dict) else {"id": i} for i in items]
            headers = list(dict.fromkeys(k for r in rows for k in r))
            out.print(
                _table(key.capitalize(), headers, [[r.get(h) for h in headers] for r in rows])
            )


@app.command()
def probe(
    ctx: typer.Context,
    instance_type: Annotated[
        str | None, typer.Option("--instance-type", "-t", show_default=False)
    ] = None,
    subnet_ids: Annotated[
        list[str] | None,
        typer.Option(
            "--subnet-ids",
            "-s",
            help="In order of preference, comma-separated.",
            show_default=False,
        ),
    ] = None,
    count: Annotated[int | None, typer.Option("--count", "-n", show_default=False)] = None,
    platform: Annotated[str | None, typer.Option("--platform", show_default=False)] = None,
    image_id: Annotated[str | None, typer.Option("--image-id", show_default=False)] = None,
    tenancy: Annotated[str | None, typer.Option("--tenancy", show_default=False)] = None,
    request_id: RequestIdOpt = None,
    event: EventOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Is there capacity right now? Short probe reservations, cancelled at once."""
    state = _state(ctx, output, None, profile)
    run_action(
        state,
        "probe",
        _merge(
            read_event(event),
            instance_type=instance_type,
            subnet_ids=_split(subnet_ids),
            instance_count=count,
            instance_platform=platform,
            image_id=image_id,
            tenancy=tenancy,
            request_id=request_id,
        ),
    )


@app.command()
def reserve(
    ctx: typer.Context,
    job_id: Annotated[str | None, typer.Option("--job-id", show_default=False)] = None,
    instance_types: Annotated[
        list[str] | None,
        typer.Option(
            "--instance-types", "-t", help="Preference order, comma-separated.", show_default=False
        ),
    ] = None,
    subnet_ids: Annotated[
        list[str] | None, typer.Option("--subnet-ids", "-s", show_default=False)
    ] = None,
    count: Annotated[int | None, typer.Option("--count", "-n", show_default=False)] = None,
    stack_name: Annotated[str | None, typer.Option("--stack-name", show_default=False)] = None,
    launch_template_id: Annotated[
        str | None, typer.Option("--launch-template-id", show_default=False)
    ] = None,
    launch_template_version: Annotated[
        str | None, typer.Option("--launch-template-version", show_default=False)
    ] = None,
    capacity_reservation_id: Annotated[
        str | None, typer.Option("--capacity-reservation-id", show_default=False)
    ] = None,
    provision: Annotated[
        bool | None, typer.Option("--provision/--no-provision", show_default=False)
    ] = None,
    strict: Annotated[bool | None, typer.Option("--strict/--no-strict", show_default=False)] = None,
    attempt: Annotated[int | None, typer.Option("--attempt", min=0, show_default=False)] = None,
    request_id: RequestIdOpt = None,
    event: EventOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Hold capacity for an HPC job (and point its launch template at it)."""
    state = _state(ctx, output, None, profile)
    template = None
    if launch_template_id:
        template = {"id": launch_template_id}
        if launch_template_version:
            template["version"] = launch_template_version
    run_action(
        state,
        "reserve",
        _merge(
            read_event(event),
            job_id=job_id,
            instance_types=_split(instance_types),
            subnet_ids=_split(subnet_ids),
            instance_count=count,
            stack_name=stack_name,
            launch_template=template,
            capacity_reservation_id=capacity_reservation_id,
            provision=provision,
            strict=strict,
            attempt=attempt,
            request_id=request_id,
        ),
    )


@app.command()
def release(
    ctx: typer.Context,
    job_id: Annotated[str | None, typer.Option("--job-id", show_default=False)] = None,
    stack_name: Annotated[str | None, typer.Option("--stack-name", show_default=False)] = None,
    reservation_id: Annotated[
        str | None, typer.Option("--reservation-id", show_default=False)
    ] = None,
    request_id: RequestIdOpt = None,
    event: EventOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Give a job's hold back (by job id, stack name or reservation id)."""
    state = _state(ctx, output, None, profile)
    run_action(
        state,
        "release",
        _merge(
            read_event(event),
            job_id=job_id,
            stack_name=stack_name,
            reservation_id=reservation_id,
            request_id=request_id,
        ),
    )


@app.command()
def clean(
    ctx: typer.Context,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run/--no-dry-run",
            help="Report what the cleaner would cancel (default), or cancel it.",
        ),
    ] = True,
    regions: RegionsOpt = None,
    request_id: RequestIdOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Run a cleaner sweep over the broker's own reservations."""
    # The command's --regions, else the global one; 'all' expanded as every command does.
    state = _state(ctx, output, regions, profile)
    run_action(
        state,
        "cleaner",
        lambda broker: broker.clean_event(dry_run, state.regions, request_id=request_id),
    )


# -- local -----------------------------------------------------------------------------------


@app.command()
def local(
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario",
            help="Scenario file (YAML/JSON) or a bundled one's name (demo, discovery).",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="0 picks a free port.")
    ] = 5055,
    function_prefix: Annotated[
        str, typer.Option("--function-prefix", help="Functions are <prefix>-probe, ...")
    ] = "capacity-broker-local",
    cluster_id: Annotated[str, typer.Option("--cluster-id")] = "local",
    region: Annotated[
        str, typer.Option("--region", help="The functions' own region.")
    ] = "us-east-1",
) -> None:
    """Serve the emulator and the five functions (Lambda Invoke API) on 127.0.0.1."""
    try:
        from .local import LocalBroker
    except ModuleNotFoundError as error:
        raise fail(
            f"capacity-broker local needs the emulator extra ({error.name} is missing): "
            "pip install 'capacity-broker[emulator]'"
        ) from None
    broker = LocalBroker(
        scenario=scenario, port=port, prefix=function_prefix, cluster_id=cluster_id, region=region
    )
    try:
        broker.start()
    except ModuleNotFoundError as error:
        raise fail(
            f"capacity-broker local needs the emulator extra ({error.name} is missing): "
            "pip install 'capacity-broker[emulator]'"
        ) from None
    except (OSError, ValueError, KeyError) as error:
        raise fail(f"could not start: {error}") from None
    # A container or supervisor stops with SIGTERM: shut down as on Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)
    names = ", ".join(broker.function_names)
    lines = [
        f"capacity-broker local: emulator and functions on {broker.endpoint}",
        f"export AWS_ENDPOINT_URL={broker.endpoint}",
        "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
        f"AWS_DEFAULT_REGION={region}",
        f"functions: {names}",
        f"cluster id: {cluster_id}; regions: {','.join(broker.regions)}",
        "Ctrl-C stops it.",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    try:
        broker.serve_forever()
    except KeyboardInterrupt:
        broker.stop()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """The console script."""
    app(prog_name="capacity-broker")
