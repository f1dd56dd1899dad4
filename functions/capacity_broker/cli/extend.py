"""``extend``: buy a Capacity Block extension, guarded like a purchase.

Without ``--yes`` the command asks EC2 what the extension costs and says it (fee, new end),
buying nothing (exit 2). With ``--yes`` it buys, at most once: a request already bought (the
same block and length, see ``logic.discovery.extend``) answers ``already_extended``.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from ..client import ReservationType
from ..models.discovery import ExtendAnswer
from . import capacity as capacity_view
from . import render
from .app import OutputOpt, ProfileOpt, RegionsOpt, app, make_broker, state_of
from .errors import EXIT_FAILED, EXIT_NO_CAPACITY, EXIT_OK, EXIT_USAGE, err, guard, preview
from .render import Output

CODES = {
    "extended": EXIT_OK,
    "already_extended": EXIT_OK,
    "not_offered": EXIT_NO_CAPACITY,
    "refused": EXIT_NO_CAPACITY,
}


@app.command()
def extend(
    ctx: typer.Context,
    reservation_id: Annotated[
        str,
        typer.Option("--reservation-id", metavar="CR", help="The Capacity Block (cr-...)."),
    ],
    days: Annotated[
        int,
        typer.Option("--days", min=1, help="Extension: 1-14 days, or 7-day steps to 182."),
    ],
    yes: Annotated[
        bool, typer.Option("--yes", help="Confirm the purchase (and its upfront fee).")
    ] = False,
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="Buy another extension of the same length although one was just bought.",
        ),
    ] = False,
    regions: RegionsOpt = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Extend a Capacity Block by D days: the fee is shown, --yes buys it, never twice."""
    state = state_of(ctx, output, regions, profile)
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        if not yes:
            offer = broker.extension_offer(reservation_id, days, wanted)
            if offer.status == "offered":
                raise preview(
                    f"{offer.message} An extension cannot be undone. Add --yes to buy it; "
                    "nothing was bought",
                    EXIT_USAGE,
                )
            raise typer.Exit(_show(state.output, offer))
        answer = broker.extend(reservation_id, days, wanted, again=again)
    raise typer.Exit(_show(state.output, answer))


def _show(output: Output, answer: ExtendAnswer) -> int:
    code = CODES.get(answer.status, EXIT_FAILED)
    if output is Output.table:
        out = render.stdout()
        render.say(out, f"{answer.status}: {answer.message}", hang=2)
        render.say(out, f"Idempotency key: {answer.idempotency_key}", hang=2)
        if answer.reservation is not None:
            capacity_view.show(ReservationType.CAPACITY_BLOCKS, [answer.reservation])
    elif output is Output.csv:
        render.write_csv([render.plain(answer)])
    else:
        render.write_data(answer, output)
    if code != EXIT_OK and output is not Output.table:
        err.print(f"{escape(answer.status)}: {escape(answer.message)}")
    return code
