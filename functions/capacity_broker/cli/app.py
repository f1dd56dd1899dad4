"""The ``capacity-broker`` Typer app: global options, the per-invocation state, the options
commands share, the broker a command talks to, and the region progress display."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from typer.core import TyperGroup, TyperOption

from ..client import CapacityBroker
from ..client.regions import names
from .errors import show_library_warnings
from .render import Output

HELP = (
    "Capacity broker for Amazon EC2: ODCRs and Capacity Blocks, offerings, instance types, "
    "Spot prices, training plans (plan, extend, reserve-ahead), and the broker's probe / "
    "reserve / release / clean actions.\n\n"
    "Calls AWS directly with your credentials (--profile), or the deployed functions with "
    "--function-prefix; `capacity-broker local` runs everything offline. Discovery looks at "
    "every region enabled for the account unless --regions narrows it."
)

EPILOG = (
    "Exit codes: 0 ok; 1 partial (some regions or items failed, the rest is shown); "
    "2 usage error or invalid request; 3 failed (every region failed, AWS or configuration "
    'error); 4 answered "no" (the verdict "unavailable": plan, offerings and capacity found '
    "nothing; no capacity; offering gone); 130 interrupted. "
    "JSON/YAML/CSV output of an empty list is [] (CSV: the header only); errors go to stderr."
)


@dataclass
class State:
    output: Output = Output.table
    regions: list[str] = field(default_factory=list)
    profile: str | None = None
    function_prefix: str | None = None
    cluster_id: str | None = None
    progress: bool = True


def _no_placeholder_for_flags(params: Sequence[object]) -> None:
    """An on/off option takes no value: no ``<bool>`` beside it in the help."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


class Group(TyperGroup):
    """The command group: its commands' flags (and ``--help``) show no type placeholder."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _no_placeholder_for_flags(params)
        return params

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _no_placeholder_for_flags([*command.params, command.get_help_option(ctx)])
        return command


app = typer.Typer(
    name="capacity-broker",
    cls=Group,
    help=HELP,
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# -- options commands share -------------------------------------------------------------------

OutputOpt = Annotated[
    Output | None,
    typer.Option(
        "--output",
        "-o",
        metavar="FORMAT",
        help="table (default; fits the terminal), json, yaml or csv (never depend on it).",
        show_default=False,
    ),
]
RegionsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--regions",
        "--region",
        "-r",
        metavar="REGIONS",
        help="Regions, comma-separated or repeated (default: every region enabled for the "
        "account; 'all' says so explicitly). Unknown names are refused at once.",
        show_default=False,
    ),
]
# When a Capacity Block (offerings) or a run (plan) may start and must end: one grammar for
# both, the client's too (``client.when.moment``).
StartAfterOpt = Annotated[
    str | None,
    typer.Option(
        "--start-after",
        metavar="WHEN",
        help="Earliest start: 2026-12-01, 2026-12-01T11:30Z or +3d (UTC unless it says so).",
        show_default=False,
    ),
]
EndBeforeOpt = Annotated[
    str | None,
    typer.Option(
        "--end-before",
        metavar="WHEN",
        help="Latest end: 2026-12-31 or +8w.",
        show_default=False,
    ),
]
ProfileOpt = Annotated[
    str | None,
    typer.Option("--profile", metavar="PROFILE", help="AWS profile to use.", show_default=False),
]


def split(values: Sequence[str] | None) -> list[str]:
    """Repeated and comma-separated option values as one list."""
    return [name for value in values or () for name in names(value)]


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
            metavar="PREFIX",
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
            metavar="ID",
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
    show_library_warnings()
    ctx.obj = State(
        output=output or Output.table,
        regions=split(regions),
        profile=profile,
        function_prefix=function_prefix,
        cluster_id=cluster_id,
        progress=not no_progress,
    )


def state_of(
    ctx: typer.Context,
    output: Output | None = None,
    regions: Sequence[str] | None = None,
    profile: str | None = None,
) -> State:
    """The global options, with the command's own (given after the command) winning."""
    base: State = ctx.obj if isinstance(ctx.obj, State) else State()
    return State(
        output=output or base.output,
        regions=split(regions) or base.regions,
        profile=profile or base.profile,
        function_prefix=base.function_prefix,
        cluster_id=base.cluster_id,
        progress=base.progress,
    )


def make_broker(state: State, state_table: str | None = None) -> CapacityBroker:
    """The broker a command runs on (``state_table``: ``history``'s, else the environment's)."""
    session = None
    if state.profile:
        import boto3

        session = boto3.session.Session(profile_name=state.profile)
    if state.function_prefix:
        return CapacityBroker.deployed(
            state.function_prefix, session, state.regions or None, state_table=state_table
        )
    return CapacityBroker(
        state.regions or None, session, cluster_id=state.cluster_id, state_table=state_table
    )


Advance = Callable[[str, bool], None]
Asking = Callable[[str], None]


def _terminal(state: State) -> Console | None:
    """stderr's console when a progress display may be shown there: a terminal, a table."""
    if not state.progress or state.output is not Output.table:
        return None
    console = Console(stderr=True)
    return console if console.is_terminal else None


@contextlib.contextmanager
def progress_bar(state: State, regions: Sequence[str], label: str) -> Iterator[Advance | None]:
    """A transient region-by-region progress display on stderr (terminals only)."""
    console = _terminal(state) if len(regions) >= 2 else None
    if console is None:
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
def search_progress(
    state: State, regions: Sequence[str], label: str
) -> Iterator[tuple[Advance | None, Asking | None]]:
    """``progress_bar``'s region display, then a line saying which question EC2 is being
    asked and for how long the search has run: a search of offerings waits on EC2's Capacity
    Block bucket (0.15 calls a second) and must not look hung. One display (Rich runs one at
    a time), on a terminal's stderr only, gone when the command answers."""
    console = _terminal(state)
    if console is None:
        yield None, None
        return
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=10),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        lock = threading.Lock()
        listing = (
            bar.add_task(f"{label}: {len(regions)} regions", total=len(regions))
            if len(regions) >= 2
            else None
        )
        search: list[Any] = []  # the search's task, once the first question is asked

        def advance(region: str, ok: bool) -> None:
            if listing is None:
                return
            with lock:
                bar.update(
                    listing,
                    advance=1,
                    description=f"{label}: {region} {'done' if ok else 'failed'}",
                )

        def asking(question: str) -> None:
            with lock:
                text = f"{label}: EC2 offerings of {question}"
                if not search:
                    search.append(bar.add_task(text, total=None))
                    if listing is not None:
                        bar.update(listing, visible=False)
                bar.update(search[0], description=text, refresh=True)

        yield advance, asking
