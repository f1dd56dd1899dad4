"""Test-wide setup: fake credentials, no real AWS, and the emulator fixture."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Before anything imports boto3: nothing in the suite may reach real AWS.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        # Scenarios name their own AMIs; moto's ~1,300 defaults cost time in every test.
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
    }
)
for _var in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
    os.environ.pop(_var, None)


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Every test ends with the environment it started with (a module's or the session's
    fixtures set theirs before this snapshot). The first function-scoped fixture, so the last
    torn down: ``monkeypatch`` alone does not ensure it. Its undo puts back what a variable
    held when ``setenv`` was called, and a ``LocalBroker`` fixture sets and restores the same
    variables itself: when ``monkeypatch`` was set up before that fixture (an autouse fixture
    that uses it), its undo ran after the broker's stop and put the stopped broker's
    ``AWS_ENDPOINT_URL`` back, and every later test on that worker called a closed port."""
    before = dict(os.environ)
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)


@pytest.fixture
def emu() -> Iterator[object]:
    """The capacity-aware local EC2, in this process, empty (load a scenario to seed it)."""
    import emulator

    with emulator.mock() as instance:
        yield instance


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The Slurm tests skip without Slurm (tests/slurm/conftest.py): say so, and why, where
    `make test` ends, not only in the skip list."""
    reasons: set[str] = set()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        if isinstance(longrepr, tuple) and "Slurm tests skipped:" in str(longrepr[2]):
            reasons.add(str(longrepr[2]).removeprefix("Skipped: "))
    for reason in sorted(reasons):
        terminalreporter.write_line(reason, yellow=True, bold=True)
