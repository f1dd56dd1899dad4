"""The ``capacity-broker`` command line against the discovery scenario: rows in every format,
the summary, errors on stderr and exit codes scripts can trust."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import import_module
from typing import Any

import boto3
import pytest
import typer
import yaml
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from capacity_broker.cli import (
    EXIT_FAILED,
    EXIT_NO_CAPACITY,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    app,
    guard,
    parse_when,
)
from capacity_broker.client import ENTRY_POINTS, CapacityBroker
from capacity_broker.models.capacity import CAPACITY_ROW_FIELDS
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

# Import the handlers before any CliRunner runs: a Powertools logger keeps the stdout it was
# created with, and a CliRunner's is closed after each invocation.
HANDLERS = [import_module(f"capacity_broker.handlers.{name}") for name in ENTRY_POINTS]

REGIONS = "us-east-1,us-west-2,eu-west-1"
SUBNET_A = "subnet-0d1a0000000000e1a"
SUBNET_B = "subnet-0d1b0000000000e1b"


@pytest.fixture
def world(broker: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BROKER_REGIONS", REGIONS)
    broker.load_scenario("discovery")
    return broker


@pytest.fixture
def cli() -> Any:
    runner = CliRunner()

    def invoke(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> Any:
        return runner.invoke(app, list(args), input=stdin, env=env)

    return invoke


def rows(result: Any) -> list[dict[str, Any]]:
    data = json.loads(result.stdout)
    assert isinstance(data, list)
    return data


def reservation_ids(text: str) -> list[str]:
    """The ids in the tables (the UltraCluster footer after them names placed blocks again)."""
    tables = text.split("UltraCluster Placement:")[0]
    return re.findall(r"\bcr-[0-9a-f]{17}\b", tables)


# -- capacity --------------------------------------------------------------------------------


def test_odcr_table_with_the_summary(world: Any, cli: Any) -> None:
    result = cli("capacity")
    assert result.exit_code == EXIT_OK, result.stderr
    out = result.stdout
    assert "Capacity Reservation Summary (ODCRs):" in out
    assert "Total Reservations: 10" in out
    assert "Total Capacity: 242 instances" in out
    assert "Available: 103 instances (42.6% free)" in out
    assert len(reservation_ids(out)) == 10
    assert "inf2.xlarge" in out
    assert "Capacity Block" not in out.replace("Capacity Reservation Summary", "")
    assert result.stderr == ""


def test_block_table_with_durations_and_placement(world: Any, cli: Any) -> None:
    result = cli("capacity", "--blocks")
    assert result.exit_code == EXIT_OK
    out = result.stdout
    assert "Capacity Block Summary:" in out
    assert "Total Blocks: 5" in out
    assert "Instance Types: 2 (p5.48xlarge, trn1.32xlarge)" in out
    assert "Duration Range: 168-336 hours (7-14 days)" in out
    # The footer says what the rows say (it said "Yes" for the lot while rows said "no"): one
    # of the five blocks reports network nodes. llm-next has nodes too, but it has not started
    # and EC2 shows a topology only for active or pending reservations.
    placed = [
        r["reservation_id"]
        for r in rows(cli("capacity", "--blocks", "-o", "json"))
        if r["ultra_cluster_placement"]
    ]
    assert len(placed) == 1
    assert f"UltraCluster Placement: 1 of 5 blocks ({', '.join(placed)})" in " ".join(out.split())
    assert "UltraCluster Placement: Yes" not in out
    assert len(reservation_ids(out)) == 5
    assert "scheduled" in out
    wide = cli("capacity", "--blocks", "--output", "table", env={"COLUMNS": "160"})
    assert "336h" in wide.stdout
    assert "1 report no network nodes; 3 not known until they start" in " ".join(out.split())
    both = cli("capacity", "--blocks", "-t", "p5.48xlarge", "-r", "us-east-1")
    assert f"1 of 2 blocks ({placed[0]}); 1 not known until they start" in " ".join(
        both.stdout.split()
    )


@pytest.mark.parametrize(
    ("args", "count"),
    [
        ((), 10),
        (("--odcr",), 10),
        (("--blocks",), 5),
        (("--all",), 15),
        (("--all", "--include-inactive"), 18),
        (("--all", "--active-only"), 15),
        (("--instance-types", "g6.xlarge,inf2.xlarge"), 4),
        (("-t", "g6.xlarge", "-t", "inf2.xlarge"), 4),
        (("--instance-types", "g6*"), 3),
        (("--regions", "us-east-1,eu-west-1"), 8),
        (("--region", "us-west-2", "--region", "eu-west-1"), 4),
        (("--gpu-only",), 6),
        (("--available-only",), 9),
        (("--min-capacity", "10"), 5),
        (("--odcr", "--gpu-only", "--available-only"), 6),
        (("--odcr", "--gpu-only", "--min-capacity", "10"), 3),
        (("--blocks", "--instance-types", "p5.48xlarge", "--regions", "us-east-1"), 2),
        # only the active p5 block: a scheduled block has 0 available until its start
        (("--blocks", "--gpu-only", "--min-capacity", "20"), 1),
        (("--all", "--gpu-only", "--regions", "us-west-2"), 4),
        (("--instance-types", "x2idn.metal"), 0),
    ],
)
def test_filters_give_the_same_rows_in_json_and_table(
    world: Any, cli: Any, args: tuple[str, ...], count: int
) -> None:
    # contract v3: nothing listed is "unavailable", exit 4 (it was 0), as in plan and offerings
    code = EXIT_OK if count else EXIT_NO_CAPACITY
    as_json = cli("capacity", *args, "--output", "json")
    assert as_json.exit_code == code, as_json.stderr
    found = rows(as_json)
    assert len(found) == count
    as_table = cli("capacity", *args)
    assert as_table.exit_code == code
    assert sorted(reservation_ids(as_table.stdout)) == sorted(r["reservation_id"] for r in found)
    if found:
        total = sum(r["total_capacity"] for r in found)
        assert f"Total Capacity: {total} instances" in as_table.stdout


def test_empty_results_are_valid_json_yaml_and_csv(world: Any, cli: Any) -> None:
    args = ("capacity", "--instance-types", "x2idn.metal")
    assert cli(*args, "-o", "json").stdout == "[]\n"
    assert yaml.safe_load(cli(*args, "-o", "yaml").stdout) == []
    header = cli(*args, "-o", "csv").stdout
    assert header.splitlines()[0].startswith("reservation_id,reservation_type,")
    assert len(header.splitlines()) == 1
    table = cli(*args)
    # An empty answer names where it looked (it used to say only "No capacity reservations
    # match.").
    assert table.stdout == (
        "No capacity reservations match in us-east-1, us-west-2, eu-west-1 (3 regions).\n"
    )
    # contract v3: capacity and offerings say "no" with exit 4, as plan does; the other
    # listings are not answers about capacity (exit 0). Names EC2 offers (or patterns) that
    # nothing matches give an empty listing; a name EC2 does not offer in the regions asked is
    # refused instead (test_instance_types.py).
    for command, code in (
        (("offerings", "-t", "m5.large", "-r", "eu-west-1"), EXIT_NO_CAPACITY),
        (("search", "nothing.*"), EXIT_OK),
        (("az", "nothing.*"), EXIT_OK),
        (("spot", "c7i.large"), EXIT_OK),
    ):
        result = cli(*command, "--output", "json")
        assert result.exit_code == code, (command, result.stderr)
        assert result.stdout == "[]\n", command


def test_global_options_before_the_command(world: Any, cli: Any) -> None:
    result = cli("--output", "json", "--regions", "eu-west-1", "capacity")
    assert {r["region"] for r in rows(result)} == {"eu-west-1"}
    # the command's own option wins
    result = cli("-o", "yaml", "-r", "eu-west-1", "capacity", "-o", "json", "-r", "us-west-2")
    assert {r["region"] for r in rows(result)} == {"us-west-2"}


def test_yaml_and_csv_rows(world: Any, cli: Any) -> None:
    as_yaml = yaml.safe_load(cli("capacity", "--blocks", "-o", "yaml").stdout)
    assert len(as_yaml) == 5
    assert all(r["reservation_type"] == "capacity-block" for r in as_yaml)
    as_csv = list(csv.DictReader(io.StringIO(cli("capacity", "--all", "-o", "csv").stdout)))
    assert len(as_csv) == 15
    assert {r["reservation_type"] for r in as_csv} == {"odcr", "capacity-block"}
    assert all(int(r["total_capacity"]) >= int(r["available_capacity"]) for r in as_csv)


def test_json_and_yaml_rows_carry_every_contract_field(world: Any, cli: Any) -> None:
    for args in (("capacity", "--all", "--include-inactive"), ("capacity", "--odcr")):
        as_json = rows(cli(*args, "-o", "json"))
        as_yaml = yaml.safe_load(cli(*args, "-o", "yaml").stdout)
        assert as_json == as_yaml
        for row in as_json:
            assert set(CAPACITY_ROW_FIELDS) <= set(row), row
        odcrs = [r for r in as_json if r["reservation_type"] == "odcr"]
        assert odcrs
        assert all(r["capacity_block_id"] is None for r in odcrs)
    unlimited = rows(cli("capacity", "-t", "m7i.large", "-r", "us-east-1", "-o", "json"))
    assert [(r["end_date"], r["end_date_type"]) for r in unlimited] == [(None, "unlimited")]
    full = json.loads(cli("capacity", "--odcr", "--full", "-o", "json").stdout)
    assert all(r["capacity_block_id"] is None for r in full["reservations"])
    assert full["summary"]["block_duration_hours"] is None


def test_full_json_carries_the_summary(world: Any, cli: Any) -> None:
    data = json.loads(cli("capacity", "--all", "--full", "-o", "json").stdout)
    assert data["status"] == "ok"
    assert data["summary"]["by_type"] == {"capacity-block": 5, "odcr": 10}
    assert data["summary"]["total_capacity"] == sum(
        r["total_capacity"] for r in data["reservations"]
    )


def test_owned_rows_with_the_cluster_id(world: Any, cli: Any) -> None:
    found = rows(cli("--cluster-id", "discovery-cluster", "capacity", "-o", "json"))
    assert [r["instance_type"] for r in found if r["owned_by_broker"]] == ["c7i.48xlarge"]


def test_a_failed_region_goes_to_stderr_and_exits_1(world: Any, cli: Any) -> None:
    world.fail(
        "DescribeCapacityReservations", "UnauthorizedOperation", region="eu-west-1", times=99
    )
    result = cli("capacity", "--output", "json")
    assert result.exit_code == EXIT_PARTIAL
    assert {r["region"] for r in rows(result)} == {"us-east-1", "us-west-2"}
    assert "eu-west-1" in result.stderr
    assert "UnauthorizedOperation" in result.stderr
    table = cli("capacity")
    assert table.exit_code == EXIT_PARTIAL
    assert len(reservation_ids(table.stdout)) == 8
    assert "eu-west-1" in table.stderr


def test_every_region_failing_exits_3_with_nothing_on_stdout(world: Any, cli: Any) -> None:
    world.fail("DescribeCapacityReservations", "UnauthorizedOperation", times=99)
    result = cli("capacity", "--output", "json")
    assert result.exit_code == EXIT_FAILED
    assert result.stdout == ""
    for region in REGIONS.split(","):
        assert region in result.stderr
    assert "every region failed" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("capacity", "--odcr", "--blocks"),
        ("capacity", "--min-capacity", "-1"),
        ("capacity", "--output", "xml"),
        ("capacity", "--colour"),
        ("capacity", "--instance-types", "p5 48xlarge"),
        ("offerings", "-t", "p5.48xlarge", "--days", "15"),
        ("offerings", "-t", "p5.48xlarge", "--days", "7", "--hours", "24"),
        ("offerings", "-t", "p5.48xlarge", "--count", "65"),
        ("offerings", "-t", "p5.48xlarge", "--start-after", "next tuesday"),
        ("plan", "-w", "batch", "-t", "p5.48xlarge", "-n", "1"),
        ("nonsense",),
    ],
)
def test_usage_errors_exit_2(world: Any, cli: Any, args: tuple[str, ...]) -> None:
    world.clear_calls()
    result = cli(*args)
    assert result.exit_code == EXIT_USAGE, (args, result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr
    assert world.calls() == []


# -- offerings and purchase ------------------------------------------------------------------


def test_offerings(world: Any, cli: Any) -> None:
    result = cli("offerings", "-t", "p5.48xlarge", "-n", "16", "--days", "7", "-o", "json")
    assert result.exit_code == EXIT_OK
    offers = rows(result)
    prices = [o["price_per_instance_hour"] for o in offers]
    assert prices == sorted(prices)
    assert {o["duration_hours"] for o in offers} == {168}
    table = cli("offerings", "-t", "p5.48xlarge", "-n", "16", "--days", "7", "--limit", "3")
    assert table.stdout.count("cb-") == 3
    assert "29.875" in table.stdout


def test_purchase_needs_yes_and_happens_once(world: Any, cli: Any) -> None:
    offers = rows(cli("offerings", "-t", "p5.48xlarge", "-n", "4", "-r", "us-east-1", "-o", "json"))
    offering = offers[0]["offering_id"]
    args = ("offerings", "-t", "p5.48xlarge", "-n", "4", "-r", "us-east-1", "--purchase", offering)
    refused = cli(*args)
    assert refused.exit_code == EXIT_USAGE
    assert "--yes" in refused.stderr
    assert world.calls("PurchaseCapacityBlock") == []
    bought = cli(*args, "--yes", "-o", "json")
    assert bought.exit_code == EXIT_OK, bought.stderr
    answer = json.loads(bought.stdout)
    assert answer["status"] == "purchased"
    again = cli(*args, "--yes", "-o", "json")
    assert again.exit_code == EXIT_OK
    assert json.loads(again.stdout)["status"] == "already_purchased"
    assert (
        json.loads(again.stdout)["reservation"]["reservation_id"]
        == answer["reservation"]["reservation_id"]
    )
    assert len(world.calls("PurchaseCapacityBlock")) == 1
    table = cli(*args, "--yes")
    assert "already_purchased" in table.stdout
    gone = cli(*args[:-1], "cb-0000000000000000a", "--yes")
    assert gone.exit_code == EXIT_NO_CAPACITY


# -- search, az, spot, plan ------------------------------------------------------------------


def test_search_az_and_spot(world: Any, cli: Any) -> None:
    found = rows(cli("search", "p6", "--gpu-only", "-r", "us-east-1", "-o", "json"))
    assert {r["instance_type"] for r in found} >= {"p6-b200.48xlarge", "p6-b300.48xlarge"}
    table = cli("search", "g6", "--min-vcpus", "8", "--min-memory", "32", "-r", "us-east-1")
    assert table.exit_code == EXIT_OK
    assert "g6.2xlarge" in table.stdout
    assert "g6.xlarge " not in table.stdout
    assert "NVIDIA L4" in table.stdout
    zones = rows(cli("az", "p5.48xlarge", "--min-az-count", "2", "-o", "json"))
    assert {z["region"] for z in zones} >= {"us-east-1", "us-west-2"}
    assert all(z["az_count"] >= 2 for z in zones)
    spot = cli("spot", "g6", "--sort-by-price", "--max-price", "0.3", "-o", "json")
    assert [p["spot_price"] for p in rows(spot)] == [0.262, 0.2875]


def test_spot_savings_say_why_they_are_missing(world: Any, cli: Any) -> None:
    result = cli("spot", "m7i.large", "--show-savings", "-r", "us-east-1")
    assert result.exit_code == EXIT_OK
    assert "n/a" in result.stdout
    assert "On-Demand price unavailable" in result.stderr
    data = rows(cli("spot", "m7i.large", "--show-savings", "-r", "us-east-1", "-o", "json"))
    # Every row carries every key (null when unknown): no price is claimed, the note says why.
    assert data
    assert all(
        p["on_demand_price"] is None and p["savings_percent"] is None and p["savings_note"]
        for p in data
    )


def test_plan_exit_codes(world: Any, cli: Any) -> None:
    ready = cli("plan", "-w", "training", "-t", "p5.48xlarge", "-n", "32", "--days", "7")
    assert ready.exit_code == EXIT_OK
    assert "Recommendation: Capacity Blocks" in ready.stdout
    # contract v3: the verdict "buy" (it was "bookable"), exit 0 like every "yes"
    bookable = cli(
        "plan", "-w", "training", "-t", "p5.48xlarge", "-n", "64", "--days", "10", "-o", "json"
    )
    assert bookable.exit_code == EXIT_OK
    assert json.loads(bookable.stdout)["status"] == "buy"
    none = cli("plan", "-w", "inference", "-t", "g6.xlarge", "-n", "500", "-o", "json")
    assert none.exit_code == EXIT_NO_CAPACITY
    assert json.loads(none.stdout)["recommendation"] == "odcr"


# -- the broker's actions --------------------------------------------------------------------


def test_probe(world: Any, cli: Any) -> None:
    found = cli("probe", "-t", "g6.xlarge", "-s", f"{SUBNET_B},{SUBNET_A}", "-o", "json")
    assert found.exit_code == EXIT_OK, found.stderr
    answer = json.loads(found.stdout)
    assert (answer["status"], answer["subnet_id"]) == ("available", SUBNET_A)
    table = cli("probe", "-t", "g6.xlarge", "-s", SUBNET_B)
    assert table.exit_code == EXIT_NO_CAPACITY
    assert "unavailable" in table.stdout
    assert "insufficient_capacity" in table.stdout


def test_probe_from_an_event_file(world: Any, cli: Any, tmp_path: Any) -> None:
    event = tmp_path / "probe.json"
    event.write_text(json.dumps({"instance_type": "g6.xlarge", "subnet_ids": [SUBNET_A]}))
    result = cli("probe", "--event", str(event), "--request-id", "vdi-cli-1", "-o", "json")
    assert result.exit_code == EXIT_OK
    assert json.loads(result.stdout)["request_id"] == "vdi-cli-1"
    piped = cli("probe", "--event", "-", "-o", "json", stdin=event.read_text())
    assert json.loads(piped.stdout)["status"] == "available"


def test_invalid_action_requests_exit_2(world: Any, cli: Any) -> None:
    result = cli("probe", "-t", "g6.xlarge", "-s", "subnet-nope", "-o", "json")
    assert result.exit_code == EXIT_USAGE
    assert json.loads(result.stdout)["status"] == "invalid_request"
    assert "subnet_ids" in result.stderr


def test_actions_without_a_cluster_id_exit_2(
    world: Any, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BROKER_CLUSTER_ID")
    result = cli("probe", "-t", "g6.xlarge", "-s", SUBNET_A)
    assert result.exit_code == EXIT_USAGE
    assert "cluster" in result.stderr
    ok = cli("--cluster-id", "discovery-cluster", "probe", "-t", "g6.xlarge", "-s", SUBNET_A)
    assert ok.exit_code == EXIT_OK


def test_clean_dry_run(world: Any, cli: Any) -> None:
    result = cli("clean", "--dry-run", "-r", "us-east-1", "-o", "json")
    if "not part of this installation" in result.stderr:
        pytest.skip("no cleaner entry point in this tree yet")
    assert result.exit_code in (EXIT_OK, EXIT_PARTIAL), result.stderr
    assert json.loads(result.stdout)["dry_run"] is True


def test_clean_direct_expands_all(world: Any, cli: Any) -> None:
    everywhere = sorted(
        r["RegionName"]
        for r in boto3.client("ec2", region_name="us-east-1").describe_regions()["Regions"]
    )
    result = cli("clean", "-r", "all", "-o", "json")
    assert result.exit_code in (EXIT_OK, EXIT_PARTIAL), result.stderr
    assert json.loads(result.stdout)["regions"] == everywhere
    only = cli("-r", "us-west-2", "clean", "-o", "json")
    assert only.exit_code == EXIT_OK, only.stderr
    assert json.loads(only.stdout)["regions"] == ["us-west-2"]


# -- deployed mode (--function-prefix), against a stubbed Lambda client ------------------------

PREFIX = "cb-test"


def _payload(data: Any) -> StreamingBody:
    raw = json.dumps(data).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


@pytest.fixture
def lam(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Stubber, list[dict[str, Any]]]]:
    """Every deployed broker's Lambda client: a stubbed one; yields it and the events sent."""
    client = boto3.client(
        "lambda", region_name="us-east-1", config=Config(retries={"total_max_attempts": 1})
    )
    sent: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.append({"function": params["FunctionName"], **json.loads(params["Payload"])})

    client.meta.events.register("before-parameter-build.lambda.Invoke", record)
    monkeypatch.setattr(CapacityBroker, "_lambda_client", lambda self: client)
    with Stubber(client) as stub:
        yield stub, sent


def _sweep_answer(stub: Stubber) -> None:
    answer = {
        "status": "ok",
        "request_id": "clean-1",
        "dry_run": True,
        "regions": ["us-east-1"],
        "examined": 0,
        "message": "nothing to do",
    }
    stub.add_response(
        "invoke",
        {"StatusCode": 200, "Payload": _payload(answer)},
        {"FunctionName": f"{PREFIX}-cleaner", "InvocationType": "RequestResponse", "Payload": ANY},
    )


def test_clean_deployed_takes_the_global_regions_and_expands_all(
    world: Any, cli: Any, lam: tuple[Stubber, list[dict[str, Any]]]
) -> None:
    stub, sent = lam
    everywhere = sorted(
        r["RegionName"]
        for r in boto3.client("ec2", region_name="us-east-1").describe_regions()["Regions"]
    )
    cases = [
        (("-r", "us-west-2", "clean"), ["us-west-2"]),
        (("--regions", "us-west-2,eu-west-1", "clean"), ["us-west-2", "eu-west-1"]),
        (("-r", "us-west-2", "clean", "-r", "eu-west-1"), ["eu-west-1"]),  # the command's wins
        (("clean", "-r", "all"), everywhere),
        (("-r", "all", "clean"), everywhere),
        (("clean",), None),  # none given: the function's BROKER_REGIONS
    ]
    for args, regions in cases:
        _sweep_answer(stub)
        result = cli("--function-prefix", PREFIX, *args, "-o", "json")
        assert result.exit_code == EXIT_OK, (args, result.stderr)
        event = sent[-1]
        assert event["function"] == f"{PREFIX}-cleaner"
        assert (event["action"], event["dry_run"]) == ("sweep", True)
        assert event.get("regions") == regions, args
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("AccessDeniedException", 403),
        ("TooManyRequestsException", 429),
        ("ServiceException", 500),
    ],
)
@pytest.mark.parametrize(
    "args",
    [
        ("probe", "-t", "g6.xlarge", "-s", SUBNET_A),
        ("capacity", "--all"),
        ("clean", "-r", "us-east-1"),
    ],
)
def test_lambda_refusing_the_invoke_exits_3_with_one_line(
    world: Any,
    cli: Any,
    lam: tuple[Stubber, list[dict[str, Any]]],
    code: str,
    status: int,
    args: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stub, _ = lam
    stub.add_client_error("invoke", code, "not today", status)
    if code == "TooManyRequestsException":
        # A throttled invoke is asked again within the caller's patience (60 s by default);
        # here the patience is spent at once, so the throttle is the answer.
        from capacity_broker.client import base
        from capacity_broker.client.deployed import Patience

        monkeypatch.setattr(base, "Patience", lambda: Patience(seconds=0))
    result = cli("--function-prefix", PREFIX, *args, "-o", "json")
    assert result.exit_code == EXIT_FAILED, (result.exception, result.stderr)
    assert isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error:")
    assert code in line
    assert f"{PREFIX}-" in line


def test_a_raw_client_error_is_a_failure_not_a_traceback() -> None:
    error = ClientError(
        {"Error": {"Code": "AccessDenied", "Message": "no"}, "ResponseMetadata": {}}, "Anything"
    )
    with pytest.raises(typer.Exit) as raised, guard():
        raise error
    assert raised.value.exit_code == EXIT_FAILED


def test_unknown_profile_is_a_usage_error(world: Any, cli: Any) -> None:
    result = cli("--profile", "no-such-profile", "capacity")
    assert result.exit_code == EXIT_USAGE
    assert "no-such-profile" in result.stderr


def test_help_documents_the_exit_codes(cli: Any) -> None:
    result = cli("--help")
    assert result.exit_code == EXIT_OK
    text = " ".join(result.stdout.split())
    for phrase in ("0 ok", "1 partial", "2 usage error", "3 failed", "4 answered"):
        assert phrase in text
    for command in (
        "capacity",
        "offerings",
        "search",
        "az",
        "spot",
        "probe",
        "reserve",
        "release",
        "clean",
        "plan",
        "local",
    ):
        assert command in result.stdout
        assert cli(command, "--help").exit_code == EXIT_OK


def test_dates() -> None:
    assert parse_when("2026-12-01", "x") is not None
    moment = parse_when("2026-12-01T11:30Z", "x")
    assert moment is not None
    assert moment.utcoffset() is not None
    assert parse_when(None, "x") is None
    later = parse_when("+3d", "x")
    assert later is not None


def test_the_console_script() -> None:
    script = [sys.executable, "-c", "from capacity_broker.cli import main; main()"]
    ok = subprocess.run([*script, "--help"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == EXIT_OK
    assert "capacity-broker" in ok.stdout
    bad = subprocess.run(
        [*script, "capacity", "--odcr", "--blocks"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == EXIT_USAGE
    assert bad.stdout == ""
