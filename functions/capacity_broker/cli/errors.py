"""Exit codes, and how a failure reaches the user: one line each on stderr, said once.

The library's own warnings (the broker's functions run in this process log through the
standard logger ``capacity-broker``) come out as ``warning: ...`` lines too, never as JSON.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import typer
from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound
from rich.console import Console
from rich.markup import escape

from ..adapters.aws import AwsError
from ..client import BrokerError, InvalidArguments, RegionsFailed, Results
from ..client.in_process import FUNCTION_LOG
from ..domain.discovery import Verdict
from ..models.item_error import ItemError

EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_NO_CAPACITY = 4
EXIT_INTERRUPTED = 130

err = Console(stderr=True, highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {escape(message)}")


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(code)


def preview(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """What a command would commit to (a fee, a commitment) when it was not told ``--yes``:
    nothing went wrong and nothing was done, so it is not an ``error:`` line. Exit 2, as
    before: the command did not do what it names."""
    err.print(f"[yellow]preview:[/yellow] {escape(message)}")
    return typer.Exit(code)


def invalid(errors: Sequence[tuple[str, str]], code: int = EXIT_USAGE) -> typer.Exit:
    """Each refused field once: ``invalid: <field>: <why>``."""
    for name, message in errors:
        err.print(f"[red]invalid:[/red] {escape(name)}: {escape(message)}")
    return typer.Exit(code)


def region_errors(errors: Sequence[ItemError]) -> None:
    for error in errors:
        err.print(
            f"[red]error:[/red] {escape(str(error.region or error.id or ''))}: "
            f"{escape(str(error.error_code or ''))}: {escape(error.message)}"
        )


def finish_listing(results: Results[Any]) -> None:
    """Region failures to stderr; exit 1 when some regions failed."""
    if results.errors:
        region_errors(results.errors)
        raise typer.Exit(EXIT_PARTIAL)


def verdict_code(verdict: str, errors: Sequence[ItemError] = ()) -> int:
    """An answer's exit code, the same in ``plan``, ``offerings`` and ``capacity`` (contract
    v3): 0 when what was asked exists (``ready``, ``buy``, ``split``, ``extend``), 4 when it
    does not (``unavailable``), 3 when no region could be asked (``error``), and 1 when some
    could not: a region that was not asked may hold what the others do not."""
    if verdict == "error":
        return EXIT_FAILED
    if errors:
        return EXIT_PARTIAL
    try:
        exists = Verdict(verdict).exists
    except ValueError:
        return EXIT_FAILED
    return EXIT_OK if exists else EXIT_NO_CAPACITY


def finish_verdict(results: Results[Any]) -> None:
    """A listing with a verdict (``capacity``, ``offerings``): region failures to stderr,
    then ``verdict_code``."""
    region_errors(results.errors)
    raise typer.Exit(verdict_code(results.verdict or "unavailable", results.errors))


class _Lines(logging.Handler):
    """The library's log records as the CLI's own ``warning:`` / ``error:`` lines."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.ERROR:
            err.print(f"[red]error:[/red] {escape(message)}")
        else:
            warn(message)


def show_library_warnings() -> None:
    """Route the library's warnings to stderr as plain lines (once per process)."""
    if not any(isinstance(h, _Lines) for h in FUNCTION_LOG.handlers):
        FUNCTION_LOG.addHandler(_Lines(logging.WARNING))
        FUNCTION_LOG.propagate = False


@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Every failure becomes a message on stderr and its exit code."""
    try:
        yield
    except typer.Exit:
        raise
    except InvalidArguments as error:
        raise invalid(error.errors or [("request", str(error))]) from None
    except RegionsFailed as error:
        region_errors(error.errors)
        raise fail("every region failed", EXIT_FAILED) from None
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
        details: Any = error.response.get("Error", {})
        raise fail(
            f"{details.get('Code', 'ClientError')}: {details.get('Message') or error}",
            EXIT_FAILED,
        ) from None
    except KeyboardInterrupt:
        raise fail("interrupted", EXIT_INTERRUPTED) from None
