"""The broker's actions: ``probe``, ``reserve``, ``release`` and ``clean``.

Each sends one request to its entry point (the deployed function with ``--function-prefix``,
else the handler in this process) and shows the answer: the status and message, the answer's
own fields, and its lists (attempts, cancelled, kept, ...) as tables. ``--event`` starts from
a JSON request; the options override its fields.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ..client import CapacityBroker, InvalidArguments
from . import render
from .app import OutputOpt, ProfileOpt, RegionsOpt, State, app, make_broker, split, state_of
from .errors import EXIT_FAILED, EXIT_NO_CAPACITY, EXIT_OK, EXIT_PARTIAL, err, guard, invalid
from .render import Col, Output

OK_STATUSES = {"available", "skipped", "reserved", "provisioned", "unreserved", "released", "ok"}
NO_STATUSES = {"unavailable", "no_capacity", "rejected"}
# An answer's lists, each a table (and CSV rows of their own), per entry point.
LISTS = {
    "probe": ("attempts",),
    "reserve": ("attempts",),
    "release": ("cancelled", "skipped"),
    "cleaner": ("cancelled", "kept", "errors"),
}

ATTEMPT_COLUMNS = [
    Col("Subnet", ident=True),
    Col("Type", priority=1),
    Col("AZ"),
    Col("Outcome"),
    Col("Error", priority=3),
    Col("Reservation", priority=2, ident=True),
    Col("Cancelled"),
]

# -- options ----------------------------------------------------------------------------------

EventOpt = Annotated[
    Path | None,
    typer.Option(
        "--event",
        metavar="FILE",
        help="A JSON request to start from ('-' reads stdin); options override its fields.",
        show_default=False,
    ),
]
RequestIdOpt = Annotated[
    str | None,
    typer.Option(
        "--request-id",
        metavar="ID",
        help="Idempotency key (generated when absent): the same id and request never act twice.",
        show_default=False,
    ),
]
SubnetsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--subnet-ids",
        "-s",
        metavar="SUBNETS",
        help="Subnet ids in order of preference, comma-separated or repeated.",
        show_default=False,
    ),
]
CountOpt = Annotated[
    int | None,
    typer.Option("--count", "-n", help="Instances (default 1).", show_default=False),
]
JobIdOpt = Annotated[
    str | None,
    typer.Option("--job-id", metavar="ID", help="The scheduler's job id.", show_default=False),
]
StackNameOpt = Annotated[
    str | None,
    typer.Option(
        "--stack-name",
        metavar="NAME",
        help="The CloudFormation stack that launches the job's nodes.",
        show_default=False,
    ),
]


def read_event(path: Path | None) -> dict[str, Any]:
    """The ``--event`` request; what cannot be read as a JSON object is one ``invalid:`` line
    naming the file and why, exit 2 (a usage error), never a traceback."""
    if path is None:
        return {}
    where = "stdin" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise invalid([("--event", f"{where} is a directory, not a JSON file")]) from None
    except FileNotFoundError:
        raise invalid([("--event", f"{where}: no such file")]) from None
    except UnicodeDecodeError as error:
        raise invalid(
            [("--event", f"{where} is not UTF-8 text (byte {error.start}): a JSON file is")]
        ) from None
    except OSError as error:
        raise invalid([("--event", f"cannot read {where}: {error.strerror or error}")]) from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise invalid([("--event", f"{where} is not JSON: {error}")]) from None
    if not isinstance(data, dict):
        raise invalid([("--event", f"{where} must hold a JSON object")])
    return data


def merge(event: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    merged = dict(event)
    merged.update({k: v for k, v in fields.items() if v is not None and v != []})
    return merged


# -- answers ----------------------------------------------------------------------------------


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
                write(state.output, entry, answer)
            raise InvalidArguments(
                [(str(e.get("field")), str(e.get("message"))) for e in answer.get("errors") or []]
                or [("request", str(answer.get("message")))],
                answer,
            )
    if state.output is Output.table:
        show(entry, answer)
    else:
        write(state.output, entry, answer)
    status = str(answer.get("status"))
    if status in OK_STATUSES:
        raise typer.Exit(EXIT_OK)
    if status in NO_STATUSES:
        raise typer.Exit(EXIT_NO_CAPACITY)
    if status == "partial":
        for item in answer.get("errors") or []:
            err.print(f"[red]error:[/red] {escape(render.cell(item))}")
        raise typer.Exit(EXIT_PARTIAL)
    err.print(f"[red]error:[/red] {escape(str(answer.get('message')))}")
    raise typer.Exit(EXIT_FAILED)


def write(output: Output, entry: str, answer: Mapping[str, Any]) -> None:
    if output is Output.csv:
        render.write_csv(render.answer_rows(answer, LISTS.get(entry, ())))
    else:
        render.write_data(dict(answer), output)


def show(entry: str, answer: Mapping[str, Any]) -> None:
    out = render.stdout()
    render.say(out, f"{answer.get('status')}: {answer.get('message', '')}", hang=2)
    lists = LISTS.get(entry, ())
    own = render.flatten({k: v for k, v in answer.items() if k not in ("status", "message")})
    for key, value in own.items():
        if key in lists or (isinstance(value, list) and value and isinstance(value[0], dict)):
            continue
        if value not in (None, [], ""):
            text = ", ".join(map(render.cell, value)) if isinstance(value, list) else value
            render.say(out, f"{key}: {render.cell(text)}", indent=2, hang=4)
    for key in lists:
        items = answer.get(key) or []
        if not items:
            continue
        if key == "attempts":
            render.print_table(out, ATTEMPT_COLUMNS, [_attempt(a) for a in items], "Attempts")
        else:
            _generic_table(out, key, items)


def _attempt(a: Mapping[str, Any]) -> list[Any]:
    return [
        a.get("subnet_id"),
        a.get("instance_type"),
        a.get("availability_zone"),
        a.get("outcome"),
        a.get("error_code"),
        a.get("reservation_id"),
        a.get("cancelled"),
    ]


def _generic_table(out: Any, key: str, items: Sequence[Any]) -> None:
    """A list of ids or of objects: the id first and kept, the rest dropped right to left."""
    rows = [i if isinstance(i, Mapping) else {"id": i} for i in items]
    headers = list(dict.fromkeys(k for r in rows for k in r))
    cols = [
        Col(h, ident=h == "id", priority=0 if h == "id" else n, wrap=h != "id")
        for n, h in enumerate(headers)
    ]
    render.print_table(out, cols, [[r.get(h) for h in headers] for r in rows], key.capitalize())


# -- commands ---------------------------------------------------------------------------------


@app.command()
def probe(
    ctx: typer.Context,
    instance_type: Annotated[
        str | None,
        typer.Option(
            "--instance-type",
            "-t",
            metavar="TYPE",
            help="The instance type to find capacity for (g6.xlarge).",
            show_default=False,
        ),
    ] = None,
    subnet_ids: SubnetsOpt = None,
    count: CountOpt = None,
    platform: Annotated[
        str | None,
        typer.Option(
            "--platform",
            metavar="PLATFORM",
            help="EC2's reservation platform (default Linux/UNIX); or give --image-id.",
            show_default=False,
        ),
    ] = None,
    image_id: Annotated[
        str | None,
        typer.Option(
            "--image-id",
            metavar="AMI",
            help="Derive the platform from this AMI (ami-...).",
            show_default=False,
        ),
    ] = None,
    tenancy: Annotated[
        str | None,
        typer.Option(
            "--tenancy",
            metavar="TENANCY",
            help="default (default) or dedicated.",
            show_default=False,
        ),
    ] = None,
    request_id: RequestIdOpt = None,
    event: EventOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Is there capacity right now? Short probe reservations, cancelled at once."""
    state = state_of(ctx, output, None, profile)
    run_action(
        state,
        "probe",
        merge(
            read_event(event),
            instance_type=instance_type,
            subnet_ids=split(subnet_ids),
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
    job_id: JobIdOpt = None,
    instance_types: Annotated[
        list[str] | None,
        typer.Option(
            "--instance-types",
            "-t",
            metavar="TYPES",
            help="Instance types in order of preference, comma-separated.",
            show_default=False,
        ),
    ] = None,
    subnet_ids: SubnetsOpt = None,
    count: Annotated[
        int | None,
        typer.Option(
            "--count", "-n", help="Instances the job needs, held in one AZ.", show_default=False
        ),
    ] = None,
    stack_name: StackNameOpt = None,
    launch_template_id: Annotated[
        str | None,
        typer.Option(
            "--launch-template-id",
            metavar="ID",
            help="Make a version of this template (lt-...) that launches into the hold.",
            show_default=False,
        ),
    ] = None,
    launch_template_version: Annotated[
        str | None,
        typer.Option(
            "--launch-template-version",
            metavar="VERSION",
            help="The version to build on: a number, $Latest or $Default.",
            show_default=False,
        ),
    ] = None,
    capacity_reservation_id: Annotated[
        str | None,
        typer.Option(
            "--capacity-reservation-id",
            metavar="ID",
            help="Use this existing ODCR or Capacity Block (cr-...) instead of holding one.",
            show_default=False,
        ),
    ] = None,
    provision: Annotated[
        bool | None,
        typer.Option(
            "--provision/--no-provision",
            help="Launch the nodes too (an all-or-nothing EC2 Fleet; needs the template).",
            show_default=False,
        ),
    ] = None,
    strict: Annotated[
        bool | None,
        typer.Option(
            "--strict/--no-strict",
            help="Without a hold, keep the job queued (default: the EnforceStrict flag).",
            show_default=False,
        ),
    ] = None,
    attempt: Annotated[
        int | None,
        typer.Option(
            "--attempt",
            min=0,
            help="How many times the scheduler asked for this job before (backoff grows).",
            show_default=False,
        ),
    ] = None,
    request_id: RequestIdOpt = None,
    event: EventOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Hold capacity for an HPC job (and point its launch template at it)."""
    state = state_of(ctx, output, None, profile)
    template = None
    if launch_template_id:
        template = {"id": launch_template_id}
        if launch_template_version:
            template["version"] = launch_template_version
    run_action(
        state,
        "reserve",
        merge(
            read_event(event),
            job_id=job_id,
            instance_types=split(instance_types),
            subnet_ids=split(subnet_ids),
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
    job_id: JobIdOpt = None,
    stack_name: StackNameOpt = None,
    reservation_id: Annotated[
        str | None,
        typer.Option(
            "--reservation-id",
            metavar="ID",
            help="One hold by its reservation id (cr-...).",
            show_default=False,
        ),
    ] = None,
    request_id: RequestIdOpt = None,
    event: EventOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Give a job's hold back (by job id, stack name or reservation id)."""
    state = state_of(ctx, output, None, profile)
    run_action(
        state,
        "release",
        merge(
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
    state = state_of(ctx, output, regions, profile)
    run_action(
        state,
        "cleaner",
        lambda broker: broker.clean_event(dry_run, state.regions, request_id=request_id),
    )
