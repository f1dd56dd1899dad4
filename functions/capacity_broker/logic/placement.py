"""Where a request may run: its subnets (with AZ name and id), platform and tenancy, checked
against EC2 before anything is reserved. Shared by probe and reserve."""

from __future__ import annotations

from dataclasses import dataclass

from ..adapters.ec2 import Ec2, Subnet
from ..domain.platform import UnsupportedPlatform, reservation_platform
from ..models.common import PlacementFields
from . import InvalidInput


@dataclass(frozen=True)
class Placement:
    subnets: list[Subnet]  # in the request's order
    platform: str
    tenancy: str

    def subnet(self, subnet_id: str) -> Subnet:
        return next(s for s in self.subnets if s.subnet_id == subnet_id)


def resolve(
    ec2: Ec2, request: PlacementFields, subnet_ids: list[str], deadline: float
) -> Placement:
    """Look the request's places up; raise ``InvalidInput`` for what does not exist or fit.

    Raises ``AwsError`` when EC2 cannot be asked.
    """
    found = ec2.subnets(subnet_ids, deadline)
    unknown = [(i, s) for i, s in enumerate(subnet_ids) if s not in found]
    if unknown:
        raise InvalidInput(
            [(f"subnet_ids.{i}", f"subnet {s} does not exist in {ec2.region}") for i, s in unknown]
        )
    subnets = [found[s] for s in subnet_ids]
    return Placement(
        subnets, _platform(ec2, request, deadline), _tenancy(ec2, request, subnets, deadline)
    )


def _platform(ec2: Ec2, request: PlacementFields, deadline: float) -> str:
    if request.image_id is None:
        return request.platform or "Linux/UNIX"
    image = ec2.image(request.image_id, deadline)
    if image is None:
        raise InvalidInput(
            [("image_id", f"image {request.image_id} does not exist or is not available")]
        )
    try:
        return reservation_platform(image.platform_details, image.platform)
    except UnsupportedPlatform as error:
        raise InvalidInput([("image_id", str(error))]) from None


def _tenancy(ec2: Ec2, request: PlacementFields, subnets: list[Subnet], deadline: float) -> str:
    """Instances in a dedicated VPC run dedicated: a default reservation would never match."""
    if request.tenancy == "default":
        for vpc_id in sorted({s.vpc_id for s in subnets}):
            if ec2.vpc_tenancy(vpc_id, deadline) == "dedicated":
                raise InvalidInput(
                    [
                        (
                            "tenancy",
                            f"VPC {vpc_id} has dedicated instance tenancy; "
                            "ask for tenancy 'dedicated'",
                        )
                    ]
                )
    return request.tenancy
