"""The bundled scenarios (emulator/scenarios) keep EC2's EndDate rule: a limited reservation ends
"within an hour" of its EndDate (ModifyCapacityReservation.EndDate, botocore), and may end right
at it. The demo used to let EndDates lag 30 minutes, which hid every path where EC2 ends a hold
at its EndDate."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from botocore.exceptions import ClientError
from emu_helpers import NOW, error_of

from emulator.scenario import SCENARIOS
from emulator.state import Settings

pytestmark = pytest.mark.emulator

EC2_LATEST_END = 3600  # seconds after EndDate


def test_the_default_is_the_earliest_end_ec2_allows() -> None:
    assert Settings().expiry_lag_seconds == 0


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_no_scenario_lets_an_end_date_lag_past_ec2s_hour(path) -> None:
    settings = (yaml.safe_load(path.read_text()) or {}).get("settings") or {}
    assert 0 <= settings.get("expiry_lag_seconds", 0) <= EC2_LATEST_END


@pytest.mark.parametrize("name", ["demo", "discovery", "test_capacity"])
def test_these_scenarios_end_holds_at_their_end_date(name: str) -> None:
    settings = yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())["settings"]
    assert settings["expiry_lag_seconds"] == 0


def test_in_the_demo_a_hold_ends_at_its_end_date(emu, client) -> None:
    emu.freeze(NOW)
    emu.load_scenario("demo")
    ec2 = client("ec2")
    made = ec2.create_capacity_reservation(
        InstanceType="g6.xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1c",
        InstanceCount=1,
        EndDateType="limited",
        EndDate=NOW + timedelta(minutes=2),
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]
    emu.advance(2 * 60)
    (found,) = ec2.describe_capacity_reservations(
        CapacityReservationIds=[made["CapacityReservationId"]]
    )["CapacityReservations"]
    assert found["State"] == "expired"
    # and nothing can be launched into it any more
    with pytest.raises(ClientError) as exc:
        ec2.cancel_capacity_reservation(CapacityReservationId=made["CapacityReservationId"])
    assert error_of(exc)[0] == "IncorrectState"


def test_the_demo_gives_instances_loopback_addresses_and_other_scenarios_do_not(
    emu, client
) -> None:
    """docs/slurm.md's walkthrough makes demo instances Slurm nodes: slurmctld sends to their
    addresses, which must never leave the machine."""
    assert Settings().loopback_addresses is False
    emu.load_scenario("demo")
    ec2 = client("ec2")
    subnet = "subnet-01c0000000000000c"  # 10.10.3.0/24
    launched = ec2.run_instances(
        ImageId=ec2.describe_images()["Images"][0]["ImageId"],
        InstanceType="c7i.48xlarge",
        MinCount=2,
        MaxCount=2,
        SubnetId=subnet,
    )["Instances"]
    addresses = [i["PrivateIpAddress"] for i in launched]
    assert all(a.startswith("127.10.3.") for a in addresses), addresses
    assert len(set(addresses)) == 2
    emu.settle()  # new instance ids are unknown to the next calls for a moment (EC2)
    described = ec2.describe_instances(InstanceIds=[i["InstanceId"] for i in launched])
    for reservation in described["Reservations"]:
        for instance in reservation["Instances"]:
            assert instance["PrivateIpAddress"].startswith("127.10.3.")
            nic = instance["NetworkInterfaces"][0]
            assert nic["PrivateIpAddress"] == instance["PrivateIpAddress"]
            assert nic["PrivateIpAddresses"][0]["PrivateIpAddress"] == instance["PrivateIpAddress"]
