"""``offerings --ultraservers N``: Capacity Blocks of UltraServers are searched by how many
UltraServers (botocore 1.44.5, DescribeCapacityBlockOfferings: ``UltraserverCount`` "The number
of EC2 UltraServers in the offerings", ``UltraserverType`` "The EC2 UltraServer type of the
Capacity Block offerings"; only ``CapacityDurationHours`` is required). The command asked for
instances only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from capacity_broker import CapacityBroker
from capacity_broker.cli import app
from typer.testing import CliRunner

from .test_training import world_of

pytestmark = pytest.mark.integration

TRN2U = "trn2u.48xlarge"
SERVER = "u-trn2x64"  # 4 trn2u.48xlarge (16 Trainium2 chips each)
WORLD = {
    "settings": {"same_day_offerings": False},
    "regions": {
        "us-east-1": {
            # EC2 offers trn2u in us-east-1a here (moto's list of offerings predates it).
            "pools": [{"availability_zone": "us-east-1a", "instance_type": TRN2U, "capacity": 0}],
            "offerings": [
                {
                    "instance_type": TRN2U,
                    "availability_zone": "us-east-1a",
                    "max_instance_count": 8,
                    "price_per_instance_hour": "40",
                    "earliest_start": "+1d",
                    "latest_start": "+2d",
                    "ultraserver_type": SERVER,
                    "instances_per_ultraserver": 4,
                }
            ],
        }
    },
}


@pytest.fixture
def servers(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    return world_of(broker, container, monkeypatch, WORLD)


def offerings(*args: str) -> Any:
    return CliRunner().invoke(
        app, ["offerings", "-t", TRN2U, "--days", "1", *args], env={"COLUMNS": "250"}
    )


def test_offerings_by_ultraserver_count(servers: Any) -> None:
    result = offerings("--ultraservers", "2", "--ultraserver-type", SERVER, "-o", "json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found, result.stdout
    assert {
        (o["ultraserver_type"], o["ultraserver_count"], o["instance_count"]) for o in found
    } == {(SERVER, 2, 8)}
    one = json.loads(offerings("--ultraservers", "1", "-o", "json").stdout)
    assert {(o["ultraserver_count"], o["instance_count"]) for o in one} == {(1, 4)}
    table = offerings("--ultraservers", "2")
    assert table.exit_code == 0, table.output
    assert f"Capacity Block offerings: 2 UltraServers of {TRN2U}, 24 h" in table.stdout
    # Another UltraServer type: none of this one's offerings.
    other = offerings("--ultraservers", "1", "--ultraserver-type", "u-p6e-gb200x72")
    assert f"No Capacity Block offerings for 1 UltraServer (u-p6e-gb200x72) of {TRN2U}" in (
        other.stdout + other.stderr
    )


def test_count_and_ultraservers_are_one_or_the_other(servers: Any) -> None:
    result = offerings("--count", "4", "--ultraservers", "1")
    assert result.exit_code == 2
    assert "--count or --ultraservers" in result.output


def test_an_ultraserver_offering_is_bought_by_the_terms_it_was_found_by(servers: Any) -> None:
    [offer, *_] = json.loads(offerings("--ultraservers", "1", "-o", "json").stdout)
    preview = offerings("--ultraservers", "1", "--purchase", offer["offering_id"])
    assert preview.exit_code == 2, preview.output
    assert "commits you to 4 x" in " ".join(preview.output.split())
    bought = offerings("--ultraservers", "1", "--purchase", offer["offering_id"], "--yes")
    assert bought.exit_code == 0, bought.output
    rows = CapacityBroker(regions=["us-east-1"]).capacity(reservation_type="capacity-block")
    assert [(r.instance_type, r.total_capacity) for r in rows] == [(TRN2U, 4)]
