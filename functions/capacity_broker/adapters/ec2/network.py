"""Subnets, VPCs and images: facts the broker looks up once per EC2 adapter (one per region
of a root: once per Lambda container)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..aws import AwsError
from .base import Ec2Base


@dataclass(frozen=True)
class Subnet:
    """A subnet: its VPC and Availability Zone (name and id)."""

    subnet_id: str
    vpc_id: str
    availability_zone: str
    availability_zone_id: str


@dataclass(frozen=True)
class Image:
    """An AMI's platform, as DescribeImages has it (what a reservation's platform must match)."""

    image_id: str
    platform_details: str | None
    platform: str | None


class NetworkMixin(Ec2Base):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Facts that never change for an id, kept for this adapter's life (a root keeps one
        # adapter per region: every invocation of a container shares them).
        self._subnets: dict[tuple[str, str], Subnet] = {}
        self._vpc_tenancy: dict[tuple[str, str], str] = {}
        self._images: dict[tuple[str, str], Image] = {}
        self._cache_lock = threading.Lock()

    def subnets(
        self, subnet_ids: Iterable[str], deadline: float | None = None
    ) -> dict[str, Subnet]:
        """Subnet → AZ (name and id), asked of EC2 once per adapter."""
        wanted = list(dict.fromkeys(subnet_ids))
        missing = [s for s in wanted if (self.region, s) not in self._subnets]
        if missing:
            try:
                found = self._call("DescribeSubnets", deadline, SubnetIds=missing)["Subnets"]
            except AwsError as error:
                if error.code != "InvalidSubnetID.NotFound":
                    raise
                found = self._existing_subnets(missing, deadline)
            with self._cache_lock:
                for item in found:
                    self._subnets[(self.region, item["SubnetId"])] = Subnet(
                        item["SubnetId"],
                        item["VpcId"],
                        item["AvailabilityZone"],
                        item["AvailabilityZoneId"],
                    )
        return {
            s: self._subnets[(self.region, s)] for s in wanted if (self.region, s) in self._subnets
        }

    def knows_subnets(self, subnet_ids: Iterable[str]) -> bool:
        """Whether every one of these subnets is already known to this adapter."""
        return all((self.region, s) in self._subnets for s in subnet_ids)

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
        if key not in self._vpc_tenancy:
            vpcs = self._call("DescribeVpcs", deadline, VpcIds=[vpc_id])["Vpcs"]
            with self._cache_lock:
                self._vpc_tenancy[key] = vpcs[0].get("InstanceTenancy", "default")
        return self._vpc_tenancy[key]

    def learn_vpc_tenancies(self, deadline: float | None = None) -> None:
        """Every VPC of the region with its tenancy, in one listing (1,000 a page), cached.

        A cold container asks this at the same time as it asks for the subnets, which it
        otherwise must wait for to learn which VPCs to ask about: one round trip fewer on the
        path a user waits on (an account has few VPCs: 5 a region by default). A VPC made
        after the listing is still asked about on its own (``vpc_tenancy``).
        """
        found = list(self._pages("DescribeVpcs", "Vpcs", deadline, MaxResults=1000))
        with self._cache_lock:
            for vpc in found:
                self._vpc_tenancy[(self.region, vpc["VpcId"])] = vpc.get(
                    "InstanceTenancy", "default"
                )

    def image(self, image_id: str, deadline: float | None = None) -> Image | None:
        key = (self.region, image_id)
        if key not in self._images:
            try:
                images = self._call("DescribeImages", deadline, ImageIds=[image_id])["Images"]
            except AwsError as error:
                if error.code in ("InvalidAMIID.NotFound", "InvalidAMIID.Unavailable"):
                    return None
                raise
            if not images:
                return None
            with self._cache_lock:
                self._images[key] = Image(
                    image_id, images[0].get("PlatformDetails"), images[0].get("Platform")
                )
        return self._images[key]
