"""The baseline: the sequential way (as SOCA checks capacity), written honestly.

One place after another, in the caller's order: create a reservation; if EC2 says yes,
confirm it (describe it, check it is active); then cancel it (probe) or keep it (reserve), and
stop. It uses the same boto3 client as the broker (its root's ``Clients``, ``bench.harness.client``:
same session, same config, botocore retries off) against the same emulator, sends the same
create parameters the broker sends (targeted, limited EndDate, ownership tags, a ClientToken),
and knows the subnets' AZs beforehand, as a warm broker container does.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from .harness import CLUSTER

NO_CAPACITY = {
    "InsufficientInstanceCapacity",
    "InsufficientReservedInstanceCapacity",
    "Unsupported",
}


@dataclass(frozen=True)
class Place:
    instance_type: str
    subnet_id: str
    availability_zone_id: str


@dataclass
class Outcome:
    place: Place | None = None
    reservation_id: str | None = None
    calls: int = 0
    tried: list[str] = field(default_factory=list)


def _create_parameters(place: Place, count: int, purpose: str, request_id: str) -> dict[str, Any]:
    lifetime = timedelta(minutes=2 if purpose == "probe" else 5)
    end = (datetime.now(UTC) + lifetime).replace(microsecond=0)
    tags = {
        "capacity-broker:cluster-id": CLUSTER,
        "capacity-broker:purpose": purpose,
        "capacity-broker:request-id": request_id,
        "capacity-broker:subnet-id": place.subnet_id,
        "Name": f"capacity-broker-{purpose}-{request_id}",
    }
    return {
        "ClientToken": f"seq-{uuid.uuid4().hex}",
        "InstanceType": place.instance_type,
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZoneId": place.availability_zone_id,
        "Tenancy": "default",
        "InstanceCount": count,
        "InstanceMatchCriteria": "targeted",
        "EndDateType": "limited",
        "EndDate": end,
        "TagSpecifications": [
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            }
        ],
    }


def first_with_capacity(
    ec2: Any,
    places: Sequence[Place],
    count: int,
    purpose: str,
    request_id: str,
    keep: bool,
) -> Outcome:
    """Try ``places`` one after another; stop at the first that has capacity."""
    outcome = Outcome()
    for place in places:
        outcome.calls += 1
        try:
            made = ec2.create_capacity_reservation(
                **_create_parameters(place, count, purpose, request_id)
            )["CapacityReservation"]
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            outcome.tried.append(f"{place.instance_type}@{place.subnet_id}:{code}")
            if code in NO_CAPACITY:
                continue
            raise
        reservation_id = made["CapacityReservationId"]
        outcome.calls += 1
        confirmed = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
        state = confirmed["CapacityReservations"][0]["State"]
        if state not in ("active", "pending"):
            raise RuntimeError(f"{reservation_id} is {state} right after its create")
        if not keep:
            outcome.calls += 1
            ec2.cancel_capacity_reservation(CapacityReservationId=reservation_id)
        outcome.place = place
        outcome.reservation_id = reservation_id
        return outcome
    return outcome


def floor(ec2: Any, place: Place, count: int, purpose: str) -> tuple[float, float]:
    """One create and one cancel where there is capacity: the least any probe can cost.
    Returns the two calls' wall times (seconds) as the client sees them."""
    import time

    started = time.perf_counter()
    made = ec2.create_capacity_reservation(
        **_create_parameters(place, count, purpose, f"floor-{uuid.uuid4().hex[:8]}")
    )["CapacityReservation"]
    middle = time.perf_counter()
    ec2.cancel_capacity_reservation(CapacityReservationId=made["CapacityReservationId"])
    return middle - started, time.perf_counter() - middle
