"""Physical capacity: how many instances of a type an AZ can still hold, and account quotas."""

from __future__ import annotations

from dataclasses import dataclass, field

from moto.ec2.models.instance_types import INSTANCE_TYPES

from ..exceptions import client_error


@dataclass
class Pool:
    """Free On-Demand capacity for one (region, AZ, instance type).

    ``capacity`` None means unlimited (moto's behaviour where a scenario says nothing).
    ``used`` counts what reservations and instances outside reservations hold.
    """

    region: str
    availability_zone: str
    instance_type: str
    capacity: int | None
    used: int = 0

    @property
    def available(self) -> int | None:
        if self.capacity is None:
            return None
        return max(self.capacity - self.used, 0)

    def can_take(self, count: int) -> bool:
        return self.capacity is None or self.used + count <= self.capacity

    def take(self, count: int) -> None:
        self.used += count

    def give(self, count: int) -> None:
        self.used = max(self.used - count, 0)


# EC2's On-Demand vCPU quota classes (Running On-Demand <class> instances), keyed by the
# family letters that start an instance type. "U" is the High Memory class: the first
# generation's u-6tb1.metal … and the seventh's u7i-12tb.224xlarge, u7in-, u7ib-, u7inh-
# alike (EC2 instance quotas page: "Running On-Demand High Memory instances"); the emulator
# used to count the u7i family as Standard.
_QUOTA_CLASS_BY_PREFIX = {
    "dl": "DL",
    "f": "F",
    "g": "G",
    "vt": "G",
    "hpc": "HPC",
    "inf": "Inf",
    "p": "P",
    "trn": "Trn",
    "x": "X",
    "u": "HighMem",
}


def quota_class(instance_type: str) -> str:
    family = instance_type.split(".", 1)[0]
    for prefix in sorted(_QUOTA_CLASS_BY_PREFIX, key=len, reverse=True):
        if family.startswith(prefix):
            rest = family[len(prefix) :]
            # the generation follows the letters (p5, trn2), or "-" (u-6tb1, dl1 has a digit)
            if not rest or rest[0].isdigit() or rest[0] == "-":
                return _QUOTA_CLASS_BY_PREFIX[prefix]
    return "Standard"


def vcpus(instance_type: str) -> int:
    info = INSTANCE_TYPES.get(instance_type) or {}
    return int((info.get("VCpuInfo") or {}).get("DefaultVCpus") or 1)


@dataclass
class Quotas:
    """Per-region account limits: instance counts per type and vCPUs per quota class."""

    instances: dict[str, int] = field(default_factory=dict)
    vcpus: dict[str, int] = field(default_factory=dict)

    def check(
        self, instance_type: str, count: int, usage: dict[str, int], reservation: bool = False
    ) -> None:
        """Raise EC2's quota error if ``count`` more instances of the type would exceed a limit.

        ``usage`` maps instance type to instances held (active reservations plus instances
        running outside them), the way EC2 counts On-Demand usage. A Capacity Reservation
        (``reservation``) over the vCPU limit is ``InstanceLimitExceeded``: "This error can
        occur if you are launching an instance or if you are creating a Capacity Reservation.
        Capacity Reservations count towards your On-Demand Instance limits" ("Error codes for
        the Amazon EC2 API"); ``VcpuLimitExceeded`` is the running instances' ("vCPUs ...
        assigned to the running instances in your account").
        """
        limit = self.instances.get(instance_type)
        if limit is not None and usage.get(instance_type, 0) + count > limit:
            raise client_error(
                "InstanceLimitExceeded",
                f"You have requested more instances ({usage.get(instance_type, 0) + count}) "
                f"than your current instance limit of {limit} allows for the specified "
                f"instance type. Please visit http://aws.amazon.com/contact-us/ec2-request to "
                f"request an adjustment to this limit.",
            )
        klass = quota_class(instance_type)
        vcpu_limit = self.vcpus.get(klass)
        if vcpu_limit is not None:
            held = sum(vcpus(t) * n for t, n in usage.items() if quota_class(t) == klass)
            wanted = vcpus(instance_type) * count
            if held + wanted > vcpu_limit and reservation:
                raise client_error(
                    "InstanceLimitExceeded",
                    f"You have requested more instances than your current On-Demand Instance "
                    f"limit of {vcpu_limit} vCPUs allows for the instance bucket that the "
                    f"specified instance type belongs to. Capacity Reservations count towards "
                    f"your On-Demand Instance limits.",
                )
            if held + wanted > vcpu_limit:
                raise client_error(
                    "VcpuLimitExceeded",
                    f"You have requested more vCPU capacity than your current vCPU limit of "
                    f"{vcpu_limit} allows for the instance bucket that the specified instance "
                    f"type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request "
                    f"to request an adjustment to this limit.",
                )
