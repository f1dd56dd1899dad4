"""``capacity-broker``: the command line over :class:`capacity_broker.CapacityBroker`.

Tables (Rich, fitted to the terminal) for people, ``--output json|yaml|csv`` for scripts: a
list command prints a list (``[]`` when nothing matched), an action prints its answer object;
nothing else ever goes to stdout in those formats. Warnings, region failures and errors go to
stderr, and the exit code says how it went (see ``capacity-broker --help``).

One module per command group (``capacity``, ``offerings``, ``discover``: search/az/spot,
``plan``, ``actions``: probe/reserve/release/clean, ``local``); ``render`` holds every rule
of presentation, ``errors`` the exit codes and messages, ``app`` the Typer app and the
options commands share.
"""

from __future__ import annotations

from ..slurm.check import app as slurm_app

# Each module adds its commands to ``app`` when imported; the order is the order of --help.
from . import (  # noqa: F401
    actions,
    ahead,
    capacity,
    discover,
    extend,
    history,
    local,
    offerings,
    plan,
)
from .app import app
from .errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_CAPACITY,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    guard,
)
from .offerings import parse_when

# Sub-apps (``capacity-broker <group> ...``) are registered here, one line each.
app.add_typer(slurm_app, name="slurm")


def main() -> None:
    """The console script."""
    app(prog_name="capacity-broker")


__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NO_CAPACITY",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_USAGE",
    "app",
    "guard",
    "main",
    "parse_when",
]
