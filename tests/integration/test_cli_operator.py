"""The operator's first hour (issue 15): regions like truffle (every enabled region unless
narrowed, unknown names refused at once by name, empty answers that say where they looked),
and the smaller points, each with the behaviour it had before named in the test.

Names added by this work are imported inside the tests, so this module also runs against
the code before it (each test then fails on its own point)."""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import subprocess
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

import boto3
import pytest
import typer
from capacity_broker import CapacityBroker
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

# Import the handlers before any CliRunner runs: a Powertools logger keeps the stdout it was
# created with, and a CliRunner's is closed after each invocation.
HANDLERS = [
    import_module(f"capacity_broker.handlers.{n}")
    for n in ("probe", "reserve", "release", "cleaner", "capacity")
]
SCENARIO_REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
SUBNET_A = "subnet-0d1a0000000000e1a"
SUBNET_B = "subnet-0d1b0000000000e1b"
DISCOVERY = ("capacity", "offerings", "search", "az", "spot", "plan")


@pytest.fixture
def world(broker: Any) -> Any:
    """The discovery scenario, and no BROKER_REGIONS: discovery's own default applies."""
    broker.load_scenario("discovery")
    return broker


@pytest.fixture
def cli() -> Any:
    from capacity_broker.cli import app

    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
        return runner.invoke(app, list(args), env=env)

    return invoke


def enabled() -> list[str]:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    return sorted(r["RegionName"] for r in ec2.describe_regions()["Regions"])


def discovery_args(command: str, regions: str) -> list[str]:
    return {
        "capacity": ["capacity", "--regions", regions],
        "offerings": ["offerings", "-t", "p5.48xlarge", "--regions", regions],
        "search": ["search", "g6", "--regions", regions],
        "az": ["az", "p5.48xlarge", "--regions", regions],
        "spot": ["spot", "g6", "--regions", regions],
        "plan": ["plan", "-w", "dev", "-t", "g6.xlarge", "-n", "1", "--regions", regions],
    }[command]


# -- regions ---------------------------------------------------------------------------------


def test_discovery_looks_at_every_enabled_region_by_default(world: Any, cli: Any) -> None:
    # Before: the default region only (us-east-1): a block in us-west-2 never showed.
    everywhere = enabled()
    assert len(everywhere) > len(SCENARIO_REGIONS)
    blocks = json.loads(cli("capacity", "--blocks", "-o", "json").stdout)
    assert {b["region"] for b in blocks} == {"us-east-1", "us-west-2"}
    world.clear_calls()
    full = json.loads(cli("capacity", "--all", "--full", "-o", "json").stdout)
    assert sorted(full["regions"]) == everywhere
    asked = {c.region for c in world.calls("DescribeCapacityReservations")}
    assert asked == set(everywhere)
    spots = json.loads(cli("spot", "m7i.large", "-o", "json").stdout)
    assert {p["region"] for p in spots} == {"us-east-1", "us-west-2"}
    # the client alike
    assert {r.region for r in CapacityBroker().capacity(reservation_type="all")} == set(
        SCENARIO_REGIONS
    )


def test_regions_narrow_it(world: Any, cli: Any) -> None:
    world.clear_calls()
    found = json.loads(cli("capacity", "--all", "-r", "eu-west-1", "-o", "json").stdout)
    assert {r["region"] for r in found} == {"eu-west-1"}
    assert world.calls("DescribeRegions") == []  # named regions need no look-up


@pytest.mark.parametrize("command", [*DISCOVERY, "clean"])
@pytest.mark.parametrize("name", ["mars-1", "us-east-9"])
def test_an_unknown_region_is_refused_at_once_by_name(
    world: Any, cli: Any, command: str, name: str
) -> None:
    # Before: mars-1 gave the model's raw regular expression; us-east-9 waited for a
    # connection error (12.6 s) and exited 3.
    world.clear_calls()
    args = ["clean", "-r", f"us-east-1,{name}"] if command == "clean" else None
    result = cli(*(args or discovery_args(command, f"us-east-1,{name}")), "-o", "json")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert f"'{name}'" in result.stderr
    assert "is not an AWS region" in result.stderr
    assert "pattern" not in result.stderr
    assert world.calls() == []  # refused before any call


def test_an_unknown_region_says_what_was_meant(world: Any, cli: Any) -> None:
    result = cli("capacity", "-r", "us-east-9")
    assert "(did you mean 'us-east-2' or 'us-east-1'?)" in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("invalid: regions: ")


def test_the_client_refuses_unknown_regions_before_any_call(world: Any) -> None:
    from capacity_broker.client import UnknownRegions

    world.clear_calls()
    with pytest.raises(UnknownRegions, match="'mars-1'"):
        CapacityBroker(regions=["mars-1"])
    broker = CapacityBroker()
    for call in (
        lambda: broker.capacity(regions=["us-east-9"]),
        lambda: broker.spot("g6", regions="eu-west-1,eu-west-9"),
        lambda: broker.clean(regions=["xx-nowhere-1"]),
    ):
        with pytest.raises(UnknownRegions) as raised:
            call()
        assert isinstance(raised.value, ValueError)
    assert world.calls() == []


def test_an_unknown_region_is_refused_without_the_network() -> None:
    # No emulator, no endpoint: a call would have to reach the real one and time out.
    env = {
        "PATH": str(Path(sys.executable).parent),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    } | {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
    script = "from capacity_broker.cli import main; main()"
    result = subprocess.run(
        [sys.executable, "-c", script, "capacity", "--regions", "us-east-9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "'us-east-9' is not an AWS region" in result.stderr


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (["capacity", "-t", "x2idn.metal"], "No capacity reservations match in "),
        (["capacity", "--blocks", "-t", "p4d.24xlarge"], "No capacity reservations match in "),
        (
            ["offerings", "-t", "g6.xlarge"],
            "No Capacity Block offerings for 1 x g6.xlarge for 24 h in ",
        ),
        (["search", "nothing.*"], "No instance types match nothing.* in "),
        (["az", "nothing.*"], "No Availability Zone offers nothing.* in "),
        (["spot", "c7i.large"], "No Spot prices for c7i.large in "),
    ],
)
def test_an_empty_answer_names_the_regions_it_looked_at(
    world: Any, cli: Any, args: list[str], start: str
) -> None:
    # Before: "No capacity reservations match." (nowhere said), and likewise for the others.
    everywhere = enabled()
    result = cli(*args)
    # contract v3: capacity and offerings answer "no" with exit 4, as plan does
    assert result.exit_code == (4 if args[0] in ("capacity", "offerings") else 0), result.stderr
    text = " ".join(result.stdout.split())
    assert text.startswith(start)
    assert text.endswith(f"{', '.join(everywhere)} ({len(everywhere)} regions).")
    narrowed = " ".join(cli(*args, "-r", "eu-west-1,us-west-2").stdout.split())
    assert narrowed == f"{start}eu-west-1, us-west-2 (2 regions)."
    assert cli(*args, "-o", "json").stdout == "[]\n"


# -- offerings --purchase --------------------------------------------------------------------


def _offer(cli: Any) -> dict[str, Any]:
    offers = json.loads(
        cli("offerings", "-t", "p5.48xlarge", "-n", "4", "-r", "us-east-1", "-o", "json").stdout
    )
    return offers[0]


def test_the_purchase_refusal_shows_what_it_would_commit_to(world: Any, cli: Any) -> None:
    # Before: "buying cb-... commits you to a Capacity Block that cannot be cancelled; add
    # --yes", without the block, its dates or its fee.
    offer = _offer(cli)
    world.clear_calls()
    args = ["offerings", "-t", "p5.48xlarge", "-n", "4", "-r", "us-east-1"]
    refused = cli(*args, "--purchase", offer["offering_id"])
    assert refused.exit_code == 2
    text = " ".join(refused.stderr.split())
    fee = f"{offer['upfront_fee']:,.2f} USD"
    assert f"upfront fee {fee}" in text
    assert f"4 x p5.48xlarge for 24 h in {offer['availability_zone']} (us-east-1)" in text
    assert "--yes" in text
    # what it would cost is a preview, not an error (issue 42: it printed as "error:")
    assert text.startswith("preview: buying ") and "error:" not in text
    assert world.calls("PurchaseCapacityBlock") == []
    gone = cli(*args, "--purchase", "cb-0000000000000000a")
    assert gone.exit_code == 4
    assert "not on sale" in gone.stderr


def test_a_bought_block_is_counted_in_its_summary(world: Any, cli: Any) -> None:
    # Before: "Total Blocks: 0" above the block it had just bought.
    offer = _offer(cli)
    args = ["offerings", "-t", "p5.48xlarge", "-n", "4", "-r", "us-east-1"]
    bought = cli(*args, "--purchase", offer["offering_id"], "--yes")
    assert bought.exit_code == 0, bought.stderr
    out = bought.stdout
    assert out.startswith("purchased: Bought Capacity Block cr-")
    assert "Total Blocks: 1" in out
    assert "Total Capacity: 4 instances" in out
    assert "upfront fee" in " ".join(out.split())
    again = cli(*args, "--purchase", offer["offering_id"], "--yes")
    assert "Total Blocks: 1" in again.stdout


# -- Spot savings offline --------------------------------------------------------------------


def test_the_demo_shows_spot_savings_offline(broker: Any, cli: Any) -> None:
    # Before: the demo scenario had no Spot prices, and the Price List answered HTTP 500.
    broker.load_scenario("demo")
    result = cli("spot", "g6.xlarge", "--show-savings", "-r", "us-east-1", "-o", "json")
    assert result.exit_code == 0, result.stderr
    prices = json.loads(result.stdout)
    assert len(prices) == 3
    for price in prices:
        assert price["on_demand_price"] == pytest.approx(0.8048)
        expected = round(100 * (1 - price["spot_price"] / 0.8048), 1)
        assert price["savings_percent"] == pytest.approx(expected)
        assert price["savings_note"] is None
    assert "unavailable" not in result.stderr
    assert len(broker.calls("GetProducts", service="pricing")) == 1  # one type, one region


# -- what reaches the terminal --------------------------------------------------------------


def test_the_libraries_log_lines_are_plain_warnings(world: Any, cli: Any) -> None:
    # Before: {"level":"WARNING","location":"read:71",...} JSON lines on the CLI's stderr.
    result = cli("--cluster-id", "discovery-cluster", "probe", "-t", "g6.xlarge", "-s", SUBNET_A)
    assert result.exit_code == 0, result.stderr
    assert "warning: feature flag parameter missing, using its default" in result.stderr
    assert '"level"' not in result.stderr
    assert not any(line.startswith("{") for line in result.stderr.splitlines())
    assert not any(line.startswith("{") for line in result.stdout.splitlines())


def test_the_clients_in_process_runs_log_plain_records(
    world: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Python program gets the functions' warnings as records of the standard logger
    "capacity-broker" (to format as it likes), not JSON on its own stdout/stderr."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    target, keep = logging.getLogger("capacity-broker"), Keep(logging.WARNING)
    target.addHandler(keep)
    try:
        broker = CapacityBroker(regions=["us-east-1"], cluster_id="discovery-cluster")
        assert broker.probe("g6.xlarge", [SUBNET_A]).status == "available"
    finally:
        target.removeHandler(keep)
    seen = capsys.readouterr()
    assert '"level"' not in seen.out + seen.err
    assert [r.name for r in records] == ["capacity_broker.adapters.ssm"]
    assert "feature flag parameter missing" in records[0].getMessage()


def test_invalid_input_is_reported_once(world: Any, cli: Any) -> None:
    # Before: "invalid: subnet_ids.0: ..." and then "error: Invalid request (1 problem):
    # subnet_ids.0: ..." for the same field.
    result = cli("--cluster-id", "x", "probe", "-t", "g6.xlarge", "-s", "subnet-nope")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("invalid: subnet_ids.0: must be a subnet id")
    client_side = cli("capacity", "--min-capacity", "5", "-t", "P5 48XLARGE")
    assert client_side.exit_code == 2
    assert len(client_side.stderr.splitlines()) == 1, client_side.stderr


def test_every_option_says_what_it_takes_and_flags_show_no_placeholder(cli: Any) -> None:
    # Before: 12 of probe's and reserve's options had no help text; flags showed "<bool>".
    from capacity_broker.cli import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name, command in group.commands.items():
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, (name, param.name)
        text = cli(name, "--help", env={"COLUMNS": "200"}).stdout
        assert "<bool>" not in text, name
    assert "<bool>" not in cli("--help", env={"COLUMNS": "200"}).stdout


# -- data formats ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "model"),
    [
        (["capacity", "--all", "--include-inactive"], "CapacityRow"),
        (["offerings", "-t", "p5.48xlarge", "-r", "us-east-1,us-west-2"], "BlockOffering"),
        (["search", "g6", "-r", "us-east-1"], "InstanceTypeRow"),
        (["az", "p5.48xlarge", "-r", "us-east-1,us-west-2"], "AzRow"),
        (["spot", "g6", "--show-savings", "-r", "us-east-1,us-west-2"], "SpotPriceRow"),
        (["spot", "m7i.large", "--show-savings", "-r", "us-east-1,us-west-2"], "SpotPriceRow"),
    ],
)
def test_json_rows_all_carry_the_same_keys(
    world: Any, cli: Any, args: list[str], model: str
) -> None:
    # Before: unknown fields were left out row by row (a spot row without a price had no
    # on_demand_price key; placement keys only on some blocks).
    from capacity_broker.models import capacity, discovery

    rows = json.loads(cli(*args, "-o", "json").stdout)
    assert len(rows) >= 2
    keys = {frozenset(row) for row in rows}
    assert len(keys) == 1, keys
    # (The discovery commands' rows live apart from capacity's own: models/discovery.py.)
    row_model = getattr(capacity, model, None) or getattr(discovery, model)
    assert set(row_model.model_fields) <= set(rows[0])
    as_csv = list(csv.DictReader(io.StringIO(cli(*args, "-o", "csv").stdout)))
    assert len(as_csv) == len(rows)


def test_capacity_rows_carry_the_seeds_instance_count(world: Any, cli: Any) -> None:
    rows = json.loads(cli("capacity", "--all", "-r", "us-east-1", "-o", "json").stdout)
    assert rows
    assert all(row["instance_count"] == row["total_capacity"] for row in rows)
    assert "instance_count" in cli("capacity", "-o", "csv").stdout.splitlines()[0].split(",")


def _cells(text: str) -> list[dict[str, str]]:
    rows = list(csv.DictReader(io.StringIO(text)))
    for row in rows:
        for value in row.values():
            assert not re.match(r"^\s*[\[{]", value or ""), value  # no JSON packed in a cell
    return rows


def test_probe_and_plan_csv_have_no_json_in_cells(world: Any, cli: Any) -> None:
    # Before: attempts, reservation, launch template and the plan's blocks were JSON in cells.
    probe = cli(
        "--cluster-id",
        "discovery-cluster",
        "probe",
        "-t",
        "g6.xlarge",
        "-s",
        f"{SUBNET_B},{SUBNET_A}",
        "-o",
        "csv",
    )
    rows = _cells(probe.stdout)
    assert [r["attempts.subnet_id"] for r in rows] == [SUBNET_B, SUBNET_A]
    assert [r["attempts.outcome"] for r in rows] == ["insufficient_capacity", "available"]
    assert {r["status"] for r in rows} == {"available"}
    reserve = cli(
        "--cluster-id",
        "discovery-cluster",
        "reserve",
        "--job-id",
        "csv-1",
        "-t",
        "g6.xlarge",
        "-n",
        "2",
        "-s",
        SUBNET_A,
        "-o",
        "csv",
    )
    (held,) = _cells(reserve.stdout)
    assert held["reservation.id"].startswith("cr-")
    assert held["subnet_ids"] == SUBNET_A
    plan = cli(
        "plan",
        "-w",
        "training",
        "-t",
        "p5.48xlarge",
        "-n",
        "32",
        "--days",
        "7",
        "-r",
        "us-east-1",
        "-o",
        "csv",
    )
    planned = _cells(plan.stdout)
    blocks = [r for r in planned if r["kind"] == "capacity_blocks"]
    # contract v3: only the block with the run's hours left covers it (the running one has
    # 143.5 h left of its 168: it used to count)
    assert len(blocks) == 1
    assert all(r["capacity_blocks.reservation_id"].startswith("cr-") for r in blocks)
    assert {r["recommendation"] for r in planned} == {"capacity-block"}
