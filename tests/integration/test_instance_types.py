"""Instance types are validated like regions (contract v3): a name EC2 does not offer in the
region is ``invalid_request`` naming the field and the name, with the nearest real names, in
every place a type is accepted, and never "no capacity" or an empty listing. EC2's list is
asked once per EC2 adapter (a container's, a client's) per region."""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import yaml
from capacity_broker.cli import EXIT_OK, EXIT_USAGE, app
from capacity_broker.client import ENTRY_POINTS, CapacityBroker, InvalidArguments
from capacity_broker.handlers.capacity import handler as capacity
from capacity_broker.handlers.probe import handler as probe
from capacity_broker.handlers.reserve import handler as reserve
from capacity_broker.root import Adapters
from capacity_broker.slurm.config import load
from typer.testing import CliRunner

pytestmark = pytest.mark.integration

# Import the handlers before any CliRunner runs (a Powertools logger keeps its stdout).
HANDLERS = [import_module(f"capacity_broker.handlers.{name}") for name in ENTRY_POINTS]

SUBNET_A = "subnet-0d1a0000000000e1a"
SUBNET_B = "subnet-0d1b0000000000e1b"
LIST = "DescribeInstanceTypeOfferings"


@pytest.fixture
def world(broker: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BROKER_REGIONS", "us-east-1")
    broker.load_scenario("discovery")
    broker.clear_calls()
    return broker


def asks(world: Any) -> list[Any]:
    """The asks for the region's list (its first pages: a list may take more than one)."""
    return [
        c
        for c in world.calls(LIST)
        if c.params.get("LocationType") == "region" and "NextToken" not in c.params
    ]


def named(ask: Any) -> list[str]:
    """The instance types an ask was filtered on (none: the region's whole list)."""
    return [v for f in ask.params.get("Filters", []) for v in f["Values"]]


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_probe_refuses_a_typo_by_name_and_holds_nothing(world: Any, context: Any) -> None:
    answer = probe({"instance_type": "g6.xlarg", "subnet_ids": [SUBNET_A]}, context)
    assert answer["status"] == "invalid_request"
    [error] = answer["errors"]
    assert error["field"] == "instance_type"
    assert "'g6.xlarg' is not an instance type EC2 offers in us-east-1" in error["message"]
    assert "did you mean 'g6.xlarge'" in error["message"]
    assert world.calls("CreateCapacityReservation") == []


def test_reserve_names_the_wrong_one_of_its_types(world: Any, context: Any) -> None:
    answer = reserve(
        {
            "job_id": "job-1",
            "instance_types": ["g6.xlarge", "p5.48xlage"],
            "subnet_ids": [SUBNET_A],
            "instance_count": 1,
        },
        context,
    )
    assert answer["status"] == "invalid_request"
    [error] = answer["errors"]
    assert error["field"] == "instance_types.1"
    assert "did you mean 'p5.48xlarge'" in error["message"]
    assert world.calls("CreateCapacityReservation") == []


def test_a_real_type_not_offered_in_the_subnets_az_is_still_an_honest_answer(
    world: Any, context: Any
) -> None:
    """p5.48xlarge is offered in us-east-1, not in us-east-1c or 1e (the scenario): a probe
    there is answered by EC2 per AZ, not refused as a typo."""
    answer = probe({"instance_type": "p5.48xlarge", "subnet_ids": [SUBNET_A]}, context)
    assert answer["status"] != "invalid_request", answer


def test_the_types_are_asked_by_name_and_the_list_only_to_refuse_one(
    world: Any, context: Any
) -> None:
    """A cold container asks EC2 about the request's types by name (a row each, where the
    region's list is some 900); a warm one asks nothing; the list is asked once, to refuse a
    name with the nearest real ones, and is kept."""
    first = probe({"instance_type": "g6.xlarge", "subnet_ids": [SUBNET_A]}, context)
    assert first["status"] == "available"
    [by_name] = asks(world)
    assert named(by_name) == ["g6.xlarge"]
    world.clear_calls()
    warm = probe({"instance_type": "g6.xlarge", "subnet_ids": [SUBNET_A]}, context)
    assert warm["status"] == "available"
    assert asks(world) == []
    typo = probe({"instance_type": "g6.xlarg", "subnet_ids": [SUBNET_A]}, context)
    assert typo["status"] == "invalid_request"
    assert [named(ask) for ask in asks(world)] == [["g6.xlarg"], []]  # by name, then the list
    world.clear_calls()
    again = probe({"instance_type": "g6.xlarg", "subnet_ids": [SUBNET_A]}, context)
    other = probe({"instance_type": "m7i.large", "subnet_ids": [SUBNET_A]}, context)
    assert (again["status"], other["status"]) == ("invalid_request", "available")
    assert asks(world) == []  # the list is known now: every name is checked against it
    # A warm container refuses a name from the list it has: no look-up of anything else.
    assert world.calls("DescribeVpcs") == [] and world.calls("DescribeSubnets") == []
    assert len(world.calls("CreateCapacityReservation")) == 1  # the m7i.large probe's


def test_a_name_is_confirmed_only_by_a_row_that_names_it_exactly(broker: Any) -> None:
    """A filter value may be a pattern: ``m7i.*`` matches real types, but no row names
    ``m7i.*``, so nothing is confirmed (ids are ids, contract v3)."""
    ec2 = Adapters().ec2("us-east-1")
    assert ec2.offers(["m7i.*", "m7i.large"]) == {"m7i.large"}
    assert not ec2.knows_offered(["m7i.*"])
    assert ec2.knows_offered(["m7i.large"])


def test_capacity_refuses_a_typo_and_takes_patterns(world: Any, context: Any) -> None:
    answer = capacity({"instance_types": ["g6.xlarg"], "regions": ["us-east-1"]}, context)
    assert answer["status"] == "invalid_request"
    assert answer["errors"][0]["field"] == "instance_types.0"
    assert "did you mean 'g6.xlarge'" in answer["errors"][0]["message"]
    listed = capacity({"instance_types": ["g6.*"], "regions": ["us-east-1"]}, context)
    assert listed["status"] == "ok"


def test_the_cli_says_usage_not_no_capacity(world: Any) -> None:
    """``probe --instance-type g6.xlarg`` answered ``unavailable`` (exit 4) and ``offerings
    … p5.48xlage`` "No offerings" (exit 0)."""
    probed = cli("probe", "-t", "g6.xlarg", "-s", SUBNET_A, "-o", "json")
    assert probed.exit_code == EXIT_USAGE, probed.output
    assert json.loads(probed.stdout)["status"] == "invalid_request"
    assert "did you mean 'g6.xlarge'" in probed.stderr
    offered = cli("offerings", "-t", "p5.48xlage", "-r", "us-east-1")
    assert offered.exit_code == EXIT_USAGE, offered.output
    assert "p5.48xlage" in offered.stderr
    assert "did you mean 'p5.48xlarge'" in offered.stderr
    assert world.calls("DescribeCapacityBlockOfferings") == []
    planned = cli("plan", "-w", "training", "-t", "p5.48xlage", "-n", "1", "-r", "us-east-1")
    assert planned.exit_code == EXIT_USAGE, planned.output
    assert cli("offerings", "-t", "p5.48xlarge", "-r", "us-east-1").exit_code == EXIT_OK


@pytest.mark.parametrize("look_up", ["search", "az", "spot"])
def test_searches_refuse_a_plain_name_and_keep_patterns(world: Any, look_up: str) -> None:
    client = CapacityBroker(regions=["us-east-1"])
    with pytest.raises(InvalidArguments, match=r"did you mean 'g6\.xlarge'"):
        getattr(client, look_up)("g6.xlarg")
    assert getattr(client, look_up)("g6")  # a family is a pattern
    assert getattr(client, look_up)("g6.xlarge")
    # one client: the region's list was asked once for all of it
    assert len(asks(world)) == 1


def test_a_region_whose_list_cannot_be_asked_refuses_nothing(world: Any) -> None:
    """A name a region may offer is never called a typo: without its list, the look-up
    itself answers for that region."""
    world.fail(LIST, "UnauthorizedOperation", times=100)
    client = CapacityBroker(regions=["us-east-1"])
    assert client.search("g6.xlarge")


def test_the_slurm_configurations_types(world: Any, tmp_path: Path) -> None:
    """What ``slurm check`` reports: a node set whose type EC2 does not offer fails every job."""
    from capacity_broker.slurm.config import unknown_instance_types

    path = tmp_path / "slurm.yaml"
    nodeset = {
        "nodes": "gpu-[1-4]",
        "instance_types": ["g6.xlarge", "g6.xlarg"],
        "subnet_ids": [SUBNET_A],
        "launch_template": {"id": "lt-0f000000000000001"},
    }
    path.write_text(
        yaml.safe_dump({"region": "us-east-1", "cluster_id": "c1", "nodesets": [nodeset]})
    )
    config = load(path)
    [(field, message)] = unknown_instance_types(config, Adapters().ec2("us-east-1"))
    assert field == "nodesets.0.instance_types.1"
    assert "did you mean 'g6.xlarge'" in message
