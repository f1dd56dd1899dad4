"""``reserve-ahead``: a future-dated ODCR requested, postponed or cancelled, each guarded.

- ``--instance-type T --count N --availability-zone AZ --start WHEN --commitment-days D``:
  EC2's terms checked, the commitment said; ``--yes`` requests it (at most once).
- ``--reservation-id cr-... --start WHEN``: EC2's date-change quote shown;
  ``--quote Q --yes`` accepts that quote.
- ``--reservation-id cr-... --cancel``: EC2's cancellation quote shown (free ones say so);
  ``--quote Q --yes`` (or ``--yes`` when it is free) cancels.

Nothing changes without ``--yes``; nothing is accepted that was not shown.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from ..client import ReservationType
from ..models.discovery import AheadAnswer
from . import capacity as capacity_view
from . import offerings as offerings_view
from . import render
from .app import OutputOpt, ProfileOpt, RegionsOpt, State, app, make_broker, state_of
from .errors import EXIT_FAILED, EXIT_NO_CAPACITY, EXIT_OK, EXIT_USAGE, err, fail, guard, preview
from .render import Output

CODES = {
    "requested": EXIT_OK,
    "already_requested": EXIT_OK,
    "changed": EXIT_OK,
    "cancelled": EXIT_OK,
    # a quote shown, nothing changed: like a purchase without --yes
    "quoted": EXIT_USAGE,
    "refused": EXIT_NO_CAPACITY,
    "not_found": EXIT_NO_CAPACITY,
}


@app.command(name="reserve-ahead")
def reserve_ahead(
    ctx: typer.Context,
    instance_type: Annotated[
        str | None,
        typer.Option(
            "--instance-type",
            "-t",
            metavar="TYPE",
            help="Instance type (C, M, R, I, T, G, U or X families).",
            show_default=False,
        ),
    ] = None,
    count: Annotated[
        int | None,
        typer.Option(
            "--count",
            "-n",
            min=1,
            max=1000,
            help="Instances (at least 32 vCPUs in all).",
            show_default=False,
        ),
    ] = None,
    availability_zone: Annotated[
        str | None,
        typer.Option(
            "--availability-zone",
            "-z",
            metavar="AZ",
            help="The zone, e.g. us-east-1a (its Region is where it is requested).",
            show_default=False,
        ),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            "--start",
            metavar="WHEN",
            help="When it starts (5-120 days ahead: 2027-01-15, +30d); with "
            "--reservation-id, the new start.",
            show_default=False,
        ),
    ] = None,
    commitment_days: Annotated[
        float | None,
        typer.Option(
            "--commitment-days",
            min=14,
            help="Days committed to once delivered (at least 14).",
            show_default=False,
        ),
    ] = None,
    reservation_id: Annotated[
        str | None,
        typer.Option(
            "--reservation-id",
            metavar="CR",
            help="A future-dated reservation requested here: postpone (--start) or --cancel.",
            show_default=False,
        ),
    ] = None,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="Cancel --reservation-id (EC2's quote first).")
    ] = False,
    quote: Annotated[
        str | None,
        typer.Option(
            "--quote", metavar="QUOTE", help="The quote shown earlier, to accept with --yes."
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: request, or accept.")] = False,
    platform: Annotated[
        str, typer.Option("--platform", metavar="PLATFORM", help="Instance platform.")
    ] = "Linux/UNIX",
    regions: RegionsOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Request a future-dated ODCR (5-120 days ahead, committed 14+ days), or postpone or
    cancel one after EC2's quote. Nothing changes without --yes."""
    state = state_of(ctx, output, regions, profile)
    moment = offerings_view.parse_when(start, "--start")
    with guard():
        broker = make_broker(state)
        if reservation_id is not None:
            if cancel == (moment is not None):
                raise fail("with --reservation-id give --start WHEN or --cancel", EXIT_USAGE)
            wanted = broker.resolve_regions(state.regions)
            confirm = yes and (quote is not None or cancel)
            if cancel:
                answer = broker.cancel_ahead(
                    reservation_id, wanted, quote_id=quote, confirm=confirm
                )
            else:
                assert moment is not None
                answer = broker.change_start(
                    reservation_id, moment, wanted, quote_id=quote, confirm=confirm
                )
            raise typer.Exit(_show(state, answer))
        if (
            instance_type is None
            or count is None
            or availability_zone is None
            or moment is None
            or commitment_days is None
        ):
            missing = [
                name
                for name, value in (
                    ("--instance-type", instance_type),
                    ("--count", count),
                    ("--availability-zone", availability_zone),
                    ("--start", moment),
                    ("--commitment-days", commitment_days),
                )
                if value is None
            ]
            raise fail(f"a request needs {', '.join(missing)}", EXIT_USAGE)
        if not yes:
            terms = broker.reserve_ahead_terms(
                instance_type, count, availability_zone, moment, commitment_days
            )
            raise preview(
                f"requesting commits you to {terms}. Add --yes to request it; nothing was "
                "requested",
                EXIT_USAGE,
            )
        answer = broker.reserve_ahead(
            instance_type,
            count,
            availability_zone,
            moment,
            commitment_days,
            instance_platform=platform,
        )
    raise typer.Exit(_show(state, answer))


def _show(state: State, answer: AheadAnswer) -> int:
    code = CODES.get(answer.status, EXIT_FAILED)
    if state.output is Output.table:
        out = render.stdout()
        render.say(out, f"{answer.status}: {answer.message}", hang=2)
        if answer.request_key:
            render.say(out, f"Request key: {answer.request_key}", hang=2)
        if answer.reservation is not None:
            capacity_view.show(ReservationType.ODCR, [answer.reservation])
    elif state.output is Output.csv:
        render.write_csv([render.plain(answer)])
    else:
        render.write_data(answer, state.output)
    if code != EXIT_OK and state.output is not Output.table:
        err.print(f"{escape(answer.status)}: {escape(answer.message)}")
    return code
