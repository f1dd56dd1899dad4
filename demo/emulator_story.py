"""Act 1: the emulator answers a real capacity story through boto3."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from rich.console import Console

from emulator.remote import RemoteEmulator

SUBNET_A = "subnet-01a0000000000000a"
SUBNET_B = "subnet-01b0000000000000b"


def run(console: Console, emu: RemoteEmulator) -> None:
    # No SDK retries: show EC2's first answer, not botocore's third.
    ec2 = boto3.client(
        "ec2", region_name="us-east-1", config=Config(retries={"total_max_attempts": 1})
    )
    subnets = ec2.describe_subnets(SubnetIds=[SUBNET_A, SUBNET_B])["Subnets"]
    for subnet in subnets:
        console.print(
            f"  subnet {subnet['SubnetId']} is in {subnet['AvailabilityZone']} "
            f"({subnet['AvailabilityZoneId']})"
        )
    now = emu.now()
    try:
        ec2.create_capacity_reservation(
            InstanceType="g6.xlarge",
            InstancePlatform="Linux/UNIX",
            AvailabilityZone="us-east-1a",
            InstanceCount=1,
            EndDateType="limited",
            EndDate=now + timedelta(minutes=2),
            InstanceMatchCriteria="targeted",
        )
        raise SystemExit("expected us-east-1a to be out of g6.xlarge")
    except ClientError as error:
        status = error.response["ResponseMetadata"]["HTTPStatusCode"]
        code = error.response["Error"]["Code"]
        console.print(f"  [red]✗[/] g6.xlarge in us-east-1a: {code} (HTTP {status})")
    before = _free(emu, "us-east-1b", "g6.xlarge")
    made = ec2.create_capacity_reservation(
        InstanceType="g6.xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1b",
        InstanceCount=2,
        EndDateType="limited",
        EndDate=now + timedelta(minutes=2),
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]
    during = _free(emu, "us-east-1b", "g6.xlarge")
    console.print(
        f"  [green]✓[/] reserved 2 × g6.xlarge in us-east-1b as {made['CapacityReservationId']} "
        f"(pool {before} → {during} free)"
    )
    _cancel_when_ec2_lets(console, ec2, made["CapacityReservationId"])
    console.print(
        f"  [green]✓[/] cancelled it: pool back to {_free(emu, 'us-east-1b', 'g6.xlarge')} free"
    )
    left = ec2.create_capacity_reservation(
        InstanceType="g6.xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1c",
        InstanceCount=1,
        EndDateType="limited",
        EndDate=now + timedelta(minutes=2),
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]
    rid = left["CapacityReservationId"]
    emu.advance(60)
    console.print(f"  [green]✓[/] {rid} left alone, a minute later: '{_state(ec2, rid)}'")
    emu.advance(2 * 60)
    state = _state(ec2, rid)
    console.print(
        f"  [yellow]![/] at its EndDate (2 min) EC2 ended it: '{state}'. EC2 ends a limited "
        "reservation within an hour of its EndDate, and may at once: a hold is never counted "
        "on past it"
    )
    assert state == "expired", state
    emu.reset_clock()  # back to the present for the broker's acts


def _cancel_when_ec2_lets(console: Console, ec2: Any, reservation_id: str) -> None:
    """EC2 is eventually consistent: a reservation made a moment ago may be unknown to the next
    call, then show `pending`, which CancelCapacityReservation refuses. Ask again until EC2
    accepts (the broker does the same, within its time budget)."""
    for pause in (0.1, 0.2, 0.4, 0.8, 1.6):
        try:
            ec2.cancel_capacity_reservation(CapacityReservationId=reservation_id)
            return
        except ClientError as error:
            code = error.response["Error"]["Code"]
            if code not in ("InvalidCapacityReservationId.NotFound", "IncorrectState"):
                raise
            why = "not known yet" if code.endswith("NotFound") else "still pending"
            console.print(f"  [yellow]…[/] cancel at once: {code} (EC2: {why}); asking again")
        time.sleep(pause)
    ec2.cancel_capacity_reservation(CapacityReservationId=reservation_id)


def _free(emu: RemoteEmulator, az: str, instance_type: str) -> int | None:
    for pool in emu.pools("us-east-1"):
        if pool["availability_zone"] == az and pool["instance_type"] == instance_type:
            return pool["available"]  # type: ignore[no-any-return]
    return None


def _state(ec2: object, reservation_id: str) -> str:
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])  # type: ignore[attr-defined]
    return str(found["CapacityReservations"][0]["State"])
