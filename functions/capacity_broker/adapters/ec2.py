"""EC2: subnets, images, Capacity Reservations, launch templates and fleets.

Owns what talking to EC2 takes: the ClientToken on every create, retries of throttling and
5xx under the caller's deadline (reusing the same parameters, so a retry can never create a
second reservation), pacing at EC2's request rates, pagination, and per-container caches of
facts that do not change (a subnet's AZ, an AMI's platform).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import throttle
from .aws import AwsError, RetryPolicy, call, client

RESOURCE_TYPE = "capacity-reservation"


@dataclass(frozen=True)
class Subnet:
    subnet_id: str
    vpc_id: str
    availability_zone: str
    availability_zone_id: str


@dataclass(frozen=True)
class Image:
    image_id: str
    platform_details: str | None
    platform: str | None


@dataclass(frozen=True)
class Reservation:
    """What the broker needs to know of one Capacity Reservation."""

    id: str
    region: str
    instance_type: str
    availability_zone: str
    availability_zone_id: str
    platform: str
    tenancy: str
    total_count: int
    available_count: int
    state: str
    reservation_type: str
    match_criteria: str
    end_date_type: str
    created: datetime | None
    start_date: datetime | None
    end_date: datetime | None
    owner_id: str | None = None
    capacity_block_id: str | None = None
    placement_group_arn: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def used_count(self) -> int:
        return self.total_count - self.available_count

    @classmethod
    def from_api(cls, region: str, data: Mapping[str, Any]) -> Reservation:
        return cls(
            id=data["CapacityReservationId"],
            region=region,
            instance_type=data.get("InstanceType", ""),
            availability_zone=data.get("AvailabilityZone", ""),
            availability_zone_id=data.get("AvailabilityZoneId", ""),
            platform=data.get("InstancePlatform", ""),
            tenancy=data.get("Tenancy", "default"),
            total_count=int(data.get("TotalInstanceCount", 0)),
            available_count=int(data.get("AvailableInstanceCount", 0)),
            state=data.get("State", ""),
            reservation_type=data.get("ReservationType", "default"),
            match_criteria=data.get("InstanceMatchCriteria", ""),
            end_date_type=data.get("EndDateType", "unlimited"),
            created=data.get("CreateDate"),
            start_date=data.get("StartDate"),
            end_date=data.get("EndDate"),
            owner_id=data.get("OwnerId"),
            capacity_block_id=data.get("CapacityBlockId"),
            placement_group_arn=data.get("PlacementGroupArn"),
            tags={t["Key"]: t["Value"] for t in data.get("Tags", [])},
        )


@dataclass(frozen=True)
class NewReservation:
    """A targeted, limited reservation as the broker always makes them."""

    instance_type: str
    availability_zone_id: str
    platform: str
    tenancy: str
    count: int
    end_date: datetime
    client_token: str
    tags: Mapping[str, str]
    placement_group_arn: str | None = None

    def parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "ClientToken": self.client_token,
            "InstanceType": self.instance_type,
            "InstancePlatform": self.platform,
            "AvailabilityZoneId": self.availability_zone_id,
            "Tenancy": self.tenancy,
            "InstanceCount": self.count,
            "InstanceMatchCriteria": "targeted",
            "EndDateType": "limited",
            "EndDate": self.end_date,
            "TagSpecifications": [
                {
                    "ResourceType": RESOURCE_TYPE,
                    "Tags": [{"Key": k, "Value": v} for k, v in self.tags.items()],
                }
            ],
        }
        if self.placement_group_arn:
            params["PlacementGroupArn"] = self.placement_group_arn
        return params


# Facts that never change for an id, shared by every invocation of the container.
_subnets: dict[tuple[str, str], Subnet] = {}
_vpc_tenancy: dict[tuple[str, str], str] = {}
_images: dict[tuple[str, str], Image] = {}
_cache_lock = threading.Lock()


def clear_caches() -> None:
    with _cache_lock:
        _subnets.clear()
        _vpc_tenancy.clear()
        _images.clear()


class Ec2:
    def __init__(self, region: str, retry: RetryPolicy | None = None) -> None:
        self.region = region
        self.retry = retry or RetryPolicy()

    @property
    def _client(self) -> Any:
        return client("ec2", self.region)

    def _call(self, action: str, deadline: float | None = None, **params: Any) -> Any:
        method = getattr(self._client, _snake(action))

        def once() -> Any:
            throttle.pacer.acquire(self.region, action)
            return call(action, method, **params)

        return self.retry.run(action, once, deadline=deadline)

    def _pages(
        self, action: str, key: str, deadline: float | None = None, **params: Any
    ) -> Iterator[Any]:
        token: str | None = None
        while True:
            page = self._call(action, deadline, **params, **({"NextToken": token} if token else {}))
            yield from page.get(key, [])
            token = page.get("NextToken")
            if not token:
                return

    # -- network ------------------------------------------------------------------------
    def subnets(
        self, subnet_ids: Iterable[str], deadline: float | None = None
    ) -> dict[str, Subnet]:
        """Subnet → AZ (name and id), asked of EC2 once per container."""
        wanted = list(dict.fromkeys(subnet_ids))
        missing = [s for s in wanted if (self.region, s) not in _subnets]
        if missing:
            try:
                found = self._call("DescribeSubnets", deadline, SubnetIds=missing)["Subnets"]
            except AwsError as error:
                if error.code != "InvalidSubnetID.NotFound":
                    raise
                found = self._existing_subnets(missing, deadline)
            with _cache_lock:
                for item in found:
                    _subnets[(self.region, item["SubnetId"])] = Subnet(
                        item["SubnetId"],
                        item["VpcId"],
                        item["AvailabilityZone"],
                        item["AvailabilityZoneId"],
                    )
        return {s: _subnets[(self.region, s)] for s in wanted if (self.region, s) in _subnets}

    def _existing_subnets(self, ids: list[str], deadline: float | None) -> list[dict[str, Any]]:
        # One unknown id fails the whole call; ask with a filter to learn which exist.
        return list(
            self._pages(
                "DescribeSubnets",
                "Subnets",
                deadline,
                Filters=[{"Name": "subnet-id", "Values": ids}],
            )
        )

    def vpc_tenancy(self, vpc_id: str, deadline: float | None = None) -> str:
        key = (self.region, vpc_id)
        if key not in _vpc_tenancy:
            vpcs = self._call("DescribeVpcs", deadline, VpcIds=[vpc_id])["Vpcs"]
            with _cache_lock:
                _vpc_tenancy[key] = vpcs[0].get("InstanceTenancy", "default")
        return _vpc_tenancy[key]

    def image(self, image_id: str, deadline: float | None = None) -> Image | None:
        key = (self.region, image_id)
        if key not in _images:
            try:
                images = self._call("DescribeImages", deadline, ImageIds=[image_id])["Images"]
            except AwsError as error:
                if error.code in ("InvalidAMIID.NotFound", "InvalidAMIID.Unavailable"):
                    return None
                raise
            if not images:
                return None
            with _cache_lock:
                _images[key] = Image(
                    image_id, images[0].get("PlatformDetails"), images[0].get("Platform")
                )
        return _images[key]

    # -- Capacity Reservations ----------------------------------------------------------
    def create_reservation(self, new: NewReservation, deadline: float | None = None) -> Reservation:
        """Create (or, for a ClientToken EC2 has seen, get back) one reservation.

        The same parameters object is sent on every retry, so EndDate and ClientToken never
        change between attempts and EC2 answers a retry with the first reservation.
        """
        params = new.parameters()
        data = self._call("CreateCapacityReservation", deadline, **params)
        return Reservation.from_api(self.region, data["CapacityReservation"])

    def cancel_reservation(self, reservation_id: str, deadline: float | None = None) -> None:
        self._call("CancelCapacityReservation", deadline, CapacityReservationId=reservation_id)

    def reservations(
        self,
        ids: Iterable[str] | None = None,
        filters: Mapping[str, Iterable[str]] | None = None,
        deadline: float | None = None,
    ) -> list[Reservation]:
        params: dict[str, Any] = {}
        if ids:
            params["CapacityReservationIds"] = list(ids)
        else:
            params["MaxResults"] = 1000
        if filters:
            params["Filters"] = [{"Name": k, "Values": list(v)} for k, v in filters.items()]
        return [
            Reservation.from_api(self.region, item)
            for item in self._pages(
                "DescribeCapacityReservations", "CapacityReservations", deadline, **params
            )
        ]

    def reservation(self, reservation_id: str, deadline: float | None = None) -> Reservation | None:
        try:
            found = self.reservations(ids=[reservation_id], deadline=deadline)
        except AwsError as error:
            if error.code in (
                "InvalidCapacityReservationId.NotFound",
                "InvalidCapacityReservationId.Malformed",
            ):
                return None
            raise
        return found[0] if found else None


def _snake(action: str) -> str:
    out = []
    for i, ch in enumerate(action):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
