"""``offerings``: Capacity Blocks on sale, and ``--purchase`` to buy one.

A purchase cannot be undone, so without ``--yes`` the command looks the offering up and says
what buying it would commit to (block, dates, upfront fee) before refusing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, NamedTuple

import typer
from rich.markup import escape

from ..client import CapacityBroker, ReservationType, when
from ..domain.discovery import searched
from ..models.discovery import BlockOffering, PurchaseAnswer
from . import capacity as capacity_view
from . import render
from .app import (
    EndBeforeOpt,
    OutputOpt,
    ProfileOpt,
    RegionsOpt,
    StartAfterOpt,
    State,
    app,
    make_broker,
    progress_bar,
    state_of,
)
from .errors import (
    EXIT_FAILED,
    EXIT_NO_CAPACITY,
    EXIT_OK,
    EXIT_USAGE,
    err,
    fail,
    finish_verdict,
    guard,
    preview,
)
from .render import Col, Output

COLUMNS = [
    Col("Offering", ident=True),
    Col("Region", priority=3),
    Col("AZ"),
    Col("Count", numeric=True),
    Col("Start", wrap=True),
    Col("End", priority=2, wrap=True),
    # "192 h", or "6 h 35 min" for a same-day block
    Col("Duration", priority=1),
    Col("Upfront fee", numeric=True),
    Col("$/inst-hour", numeric=True),
]


def parse_when(value: str | None, name: str) -> datetime | None:
    """ISO 8601 (a date, or a time; UTC unless it says otherwise) or ``+3d`` / ``+12h`` /
    ``+2w`` from now, within ten years (``client.when.moment``)."""
    if not value:
        return None
    try:
        return when.moment(value, name)
    except when.BadTime as error:
        raise typer.BadParameter(error.message, param_hint=name) from None


def block_hours(days: int | None, hours: int | None) -> int:
    if days is not None and hours is not None:
        raise typer.BadParameter("give --days or --hours, not both")
    if days is not None:
        return days * 24
    return hours if hours is not None else 24


def cells(o: BlockOffering) -> list[object]:
    """An offering's row under ``COLUMNS``."""
    return [
        o.offering_id,
        o.region,
        o.availability_zone,
        o.instance_count,
        render.when(o.start_date),
        render.when(o.end_date),
        o.duration_text,
        render.money(o.upfront_fee, o.currency),
        render.number(o.price_per_instance_hour),
    ]


def commitment(offer: BlockOffering) -> str:
    """What buying ``offer`` commits to, in one sentence."""
    fee = render.money(offer.upfront_fee, offer.currency) or "an unknown upfront fee"
    per_hour = (
        f" ({render.number(offer.price_per_instance_hour)} per instance-hour)"
        if offer.price_per_instance_hour is not None
        else ""
    )
    return (
        f"{offer.instance_count} x {offer.instance_type} for {offer.duration_text} in "
        f"{offer.availability_zone} ({offer.region}), {render.when(offer.start_date)} to "
        f"{render.when(offer.end_date)} UTC, upfront fee {fee}{per_hour}"
    )


@app.command()
def offerings(
    ctx: typer.Context,
    instance_type: Annotated[
        str,
        typer.Option(
            "--instance-type", "-t", metavar="TYPE", help="One instance type, e.g. p5.48xlarge."
        ),
    ],
    count: Annotated[
        int | None,
        typer.Option(
            "--count",
            "-n",
            min=1,
            max=64,
            help="Instances in the block (default 1).",
            show_default=False,
        ),
    ] = None,
    ultraservers: Annotated[
        int | None,
        typer.Option(
            "--ultraservers",
            min=1,
            metavar="N",
            help="UltraServers in the block, instead of --count (EC2's UltraserverCount).",
            show_default=False,
        ),
    ] = None,
    ultraserver_type: Annotated[
        str | None,
        typer.Option(
            "--ultraserver-type",
            metavar="TYPE",
            help="Only blocks of this UltraServer type, e.g. u-p6e-gb200x72.",
            show_default=False,
        ),
    ] = None,
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
    start_after: StartAfterOpt = None,
    end_before: EndBeforeOpt = None,
    regions: RegionsOpt = None,
    purchase: Annotated[
        str | None,
        typer.Option(
            "--purchase",
            metavar="OFFERING",
            help="Buy this offering (needs --yes). Capacity Blocks cannot be cancelled.",
            show_default=False,
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Confirm the purchase (and its upfront fee).")
    ] = False,
    platform: Annotated[
        str, typer.Option("--platform", metavar="PLATFORM", help="Instance platform of a purchase.")
    ] = "Linux/UNIX",
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Show the N best offerings.", show_default=False),
    ] = None,
    output: OutputOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Capacity Blocks on sale, cheapest per instance-hour first; --purchase to buy one."""
    state = state_of(ctx, output, regions, profile)
    duration = block_hours(days, hours)
    if count is not None and ultraservers is not None:
        raise typer.BadParameter("give --count or --ultraservers, not both")
    instances = count if count is not None else 1
    after = parse_when(start_after, "--start-after")
    before = parse_when(end_before, "--end-before")
    servers = Servers(ultraservers, ultraserver_type)
    asked = searched(instance_type, instances, ultraservers, ultraserver_type)
    with guard():
        broker = make_broker(state)
        wanted = broker.resolve_regions(state.regions)
        terms = (instance_type, instances, duration, after, before, wanted)
        if purchase and not yes:
            _refuse(broker, purchase, terms, servers)
        if purchase:
            answer = broker.purchase_capacity_block(
                purchase,
                *terms,
                platform,
                ultraservers=servers.number,
                ultraserver_type=servers.kind,
            )
            raise typer.Exit(_show_purchase(state, answer))
        with progress_bar(state, wanted, "offerings") as advance:
            results = broker.offerings(
                *terms,
                progress=advance,
                ultraservers=servers.number,
                ultraserver_type=servers.kind,
            )
    if limit is not None:
        del results[limit:]
    render.listing(
        state.output,
        BlockOffering,
        results,
        results.regions,
        f"No Capacity Block offerings for {asked} for {duration} h",
        COLUMNS,
        [cells(o) for o in results],
        f"Capacity Block offerings: {asked}, {duration} h",
    )
    finish_verdict(results)


Terms = tuple[str, int, int, datetime | None, datetime | None, list[str]]


class Servers(NamedTuple):
    """A search by UltraServers: how many (None: by instances), and of which type."""

    number: int | None
    kind: str | None


def _refuse(broker: CapacityBroker, offering_id: str, terms: Terms, servers: Servers) -> None:
    """No ``--yes``: say what the purchase would commit to (a read-only look-up), buy nothing."""
    instance_type, count, duration, _, _, regions = terms
    listing = broker.offerings(*terms, ultraservers=servers.number, ultraserver_type=servers.kind)
    offer = next((o for o in listing if o.offering_id == offering_id), None)
    if offer is None:
        asked = searched(instance_type, count, servers.number, servers.kind)
        raise fail(
            f"offering {offering_id} is not on sale for {asked} for "
            f"{duration} h in {', '.join(regions)}; nothing was bought",
            EXIT_NO_CAPACITY,
        )
    raise preview(
        f"buying {offering_id} commits you to {commitment(offer)}; a Capacity Block cannot be "
        "cancelled. Add --yes to confirm; nothing was bought",
        EXIT_USAGE,
    )


def _show_purchase(state: State, answer: PurchaseAnswer) -> int:
    code = {
        "purchased": EXIT_OK,
        "already_purchased": EXIT_OK,
        "not_found": EXIT_NO_CAPACITY,
    }.get(answer.status, EXIT_FAILED)
    if state.output is Output.table:
        out = render.stdout()
        render.say(out, f"{answer.status}: {answer.message}")
        if answer.status == "purchased" and answer.offering is not None:
            render.say(out, f"Committed: {commitment(answer.offering)}", hang=2)
        shown = answer.reservations or ([answer.reservation] if answer.reservation else [])
        if shown:
            capacity_view.show(ReservationType.CAPACITY_BLOCKS, shown)
        return code
    if state.output is Output.csv:
        render.write_csv([render.plain(answer)])
    else:
        render.write_data(answer, state.output)
    if code != EXIT_OK:
        err.print(f"{escape(answer.status)}: {escape(answer.message)}")
    return code
