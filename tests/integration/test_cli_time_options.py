"""The time options of the real commands: whatever string ``history --since`` and ``offerings
--start-after`` / ``--end-before`` are given, the command ends in its answer (exit 0, or 4 for
nothing on sale) or in a usage error (exit 2) that names the option; never in a traceback.
The client's ``since=``, ``start_after=`` and ``end_before=`` refuse the same values as
``InvalidArguments``."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from importlib import import_module
from typing import Any

import pytest
from capacity_broker import CapacityBroker
from capacity_broker.cli import EXIT_NO_CAPACITY, EXIT_OK, EXIT_USAGE, app
from capacity_broker.client import ENTRY_POINTS, InvalidArguments
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

HANDLERS = [import_module(f"capacity_broker.handlers.{name}") for name in ENTRY_POINTS]
SCALE = max(1, int(os.environ.get("BROKER_PROOF_SCALE", "1")))
RANDOM = os.environ.get("BROKER_PROOF_RANDOM", "") == "1"
COMMANDS = settings(
    max_examples=60 * SCALE,
    deadline=None,
    derandomize=not RANDOM,
    database=settings.default.database if RANDOM else None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

numbers = st.one_of(
    st.integers(0, 10**15).map(str),
    st.integers(1, 60).map(lambda n: "9" * n),
    st.floats(0, 1e30, allow_nan=False).map(lambda f: f"{f:f}"),
)
durations = st.builds(lambda n, u: f"{n}{u}", numbers, st.sampled_from("smhdw"))
ahead = st.builds(lambda n, u: f"+{n}{u}", numbers, st.sampled_from("hdw"))
dates = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(
    lambda d: d.isoformat() + "Z"
)
anything = st.text(max_size=30).filter(lambda s: not s.startswith("-"))


@pytest.fixture
def world(broker: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("BROKER_STATE_TABLE", raising=False)
    broker.load_scenario("discovery")
    return broker


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["--no-progress", *args], env={"COLUMNS": "100"})


def settled(result: Any, option: str, answers: tuple[int, ...]) -> None:
    """An answer, or a usage error naming ``option`` and what it takes; nothing else."""
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    if result.exit_code == EXIT_USAGE:
        assert option in result.stderr
        return
    assert result.exit_code in answers, (result.exit_code, result.stderr)


@COMMANDS
@given(st.one_of(durations, anything))
@example("99999999999w")
@example("1e400h")
@example("3650d")
@example("3651d")
@example("99999w")  # a timedelta, but 1,900 years before now is before year 1
def test_history_since_answers_or_is_a_usage_error(world: Any, value: str) -> None:
    settled(run("history", "--since", value, "-o", "json"), "--since", (EXIT_OK,))


@COMMANDS
@given(st.sampled_from(["--start-after", "--end-before"]), st.one_of(ahead, dates, anything))
@example("--start-after", "+99999999999d")
@example("--start-after", "+1000000000h")
@example("--start-after", "+3650d")
@example("--end-before", "9999-12-31T23:59:59-23:59")
@example("--end-before", "0001-01-01")
def test_offerings_dates_answer_or_are_a_usage_error(world: Any, option: str, value: str) -> None:
    result = run("offerings", "-t", "p5.48xlarge", "-r", "us-east-1", option, value, "-o", "json")
    settled(result, option, (EXIT_OK, EXIT_NO_CAPACITY))


def test_the_reported_values_are_usage_errors_naming_the_range(world: Any) -> None:
    since = run("history", "--since", "99999999999w")
    assert since.exit_code == EXIT_USAGE
    assert "--since" in since.stderr and "3650d" in since.stderr
    start = run("offerings", "-t", "p5.48xlarge", "--start-after", "+99999999999d")
    assert start.exit_code == EXIT_USAGE
    assert "--start-after" in start.stderr and "+3650d" in start.stderr


def test_the_client_refuses_the_same_values(world: Any) -> None:
    client = CapacityBroker(regions=["us-east-1"])
    for since in ("99999999999w", timedelta(days=999_999_999), timedelta(days=99_999 * 7)):
        with pytest.raises(InvalidArguments, match=r"since: .* out of range"):
            client.history(since=since)  # type: ignore[arg-type]
    assert client.history(since="1h") == []
    far = datetime(9999, 12, 31, tzinfo=UTC)
    with pytest.raises(InvalidArguments, match=r"start_after: .* out of range"):
        client.offerings("p5.48xlarge", start_after=far)
    with pytest.raises(InvalidArguments, match=r"end_before: .* out of range"):
        client.offerings("p5.48xlarge", end_before="+99999999999d")
    assert len(client.offerings("p5.48xlarge", start_after="+1d")) > 0
