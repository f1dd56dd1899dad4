"""Where a request may run: its instance types, subnets (with AZ name and id), platform and
tenancy, checked against EC2 before anything is reserved. Shared by probe and reserve."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..adapters.ec2 import Ec2, Subnet
from ..adapters.ssm import ImageParameters
from ..domain.catalog import unknown_types
from ..domain.platform import DEFAULT_PLATFORM, UnsupportedPlatform, reservation_platform
from ..models.placement import PlacementFields
from . import InvalidInput

if TYPE_CHECKING:  # a reserve's template version (``from_template``): a probe never loads it
    from ..domain.templates import Version

# A launch template may name its image by a Systems Manager parameter (EC2 User Guide, "Use a
# Systems Manager parameter instead of an AMI ID"): resolve:ssm:<name>[:<version or label>].
IMAGE_PARAMETER = "resolve:ssm:"


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
    named = [name for _, name in request.named_types]
    if ec2.knows_subnets(subnet_ids) and ec2.knows_offered(named):
        # A warm container: the region's instance types and the subnets (and their VPCs) are
        # known; at most the image is asked.
        _types(ec2, request, deadline)
        subnets = _ordered(ec2, ec2.subnets(subnet_ids, deadline), subnet_ids)
        return Placement(
            subnets, _platform(ec2, request, deadline), _tenancy(ec2, request, subnets, deadline)
        )
    # A cold one asks everything it will need at once: the region's instance types, the
    # subnets, the image, and (for a default-tenancy request) every VPC's tenancy, since the
    # subnets' VPCs are not known before their answer. One round trip instead of several in a
    # row. Leaving the block waits for every lookup, also when one failed: nothing keeps
    # running after the answer.
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="placement") as pool:
        types = pool.submit(_types, ec2, request, deadline)
        vpcs = (
            pool.submit(ec2.learn_vpc_tenancies, deadline) if request.tenancy == "default" else None
        )
        image = pool.submit(_platform, ec2, request, deadline)
        found = ec2.subnets(subnet_ids, deadline)
    # The same order of complaints as one lookup after the other: types, subnets, image, VPCs.
    types.result()
    subnets = _ordered(ec2, found, subnet_ids)
    platform = image.result()
    if vpcs is not None:
        vpcs.result()
    return Placement(subnets, platform, _tenancy(ec2, request, subnets, deadline))


def _types(ec2: Ec2, request: PlacementFields, deadline: float) -> None:
    """A type EC2 does not offer anywhere in the region is a mistake, not a shortage (contract
    v3): refused by name before anything is held. One offered elsewhere than the subnets' AZs
    stays an honest ``unavailable``/``unsupported`` (EC2 answers that per AZ). The request's
    types are asked by name; the region's whole list only when one is not offered (the
    refusal names the nearest)."""
    named = [name for _, name in request.named_types]
    if len(ec2.offers(named, deadline)) == len(set(named)):
        return
    problems = unknown_types(request.named_types, ec2.offered_types(deadline), [ec2.region])
    if problems:
        raise InvalidInput(problems)


def _ordered(ec2: Ec2, found: dict[str, Subnet], subnet_ids: list[str]) -> list[Subnet]:
    unknown = [(i, s) for i, s in enumerate(subnet_ids) if s not in found]
    if unknown:
        raise InvalidInput(
            [(f"subnet_ids.{i}", f"subnet {s} does not exist in {ec2.region}") for i, s in unknown]
        )
    return [found[s] for s in subnet_ids]


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


def from_template(
    ec2: Ec2,
    parameters: ImageParameters,
    place: Placement,
    version: Version,
    deadline: float,
) -> Placement:
    """``place`` with the platform the template version's launches bill as.

    A reservation is used only by launches whose platform matches it (EC2 User Guide, "Work
    with Capacity Reservations"; "Your instance can't launch using an AMI with a different
    platform than the platform for your Capacity Block"), and a launch's platform is its
    image's (its ``PlatformDetails``). So a job that names neither ``image_id`` nor
    ``instance_platform`` holds for the platform of the image its template launches: a RHEL
    template held as Linux/UNIX could never launch into its hold. A ``resolve:ssm:`` image is
    the AMI its parameter holds now, as EC2 reads it at launch. A version without an image
    keeps the default (the launch then names its image itself).
    """
    image = version.data.get("ImageId")
    if not isinstance(image, str) or not image:
        return replace(place, platform=DEFAULT_PLATFORM)
    shown = image
    if image.startswith(IMAGE_PARAMETER):
        name = image[len(IMAGE_PARAMETER) :]
        resolved = parameters.value(name, deadline)
        if resolved is None:
            raise InvalidInput(
                [
                    (
                        "launch_template",
                        f"its image {image[:300]} names a Systems Manager parameter that does "
                        "not exist",
                    )
                ]
            )
        image, shown = resolved, f"{resolved} ({image[:300]})"
    found = ec2.image(image, deadline)
    if found is None:
        raise InvalidInput(
            [("launch_template", f"its image {shown} does not exist or is not available")]
        )
    try:
        platform = reservation_platform(found.platform_details, found.platform)
    except UnsupportedPlatform as error:
        raise InvalidInput([("launch_template", f"its image {shown}: {error}")]) from None
    return replace(place, platform=platform)
