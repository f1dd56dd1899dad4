"""Capacity Reservations (ODCRs and Capacity Blocks) and their life cycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

# States in which a reservation holds capacity and can be launched into (or will be).
HOLDING_STATES = frozenset({"active", "pending", "scheduled"})
FINAL_STATES = frozenset({"cancelled", "expired", "failed"})


@dataclass
class CapacityReservation:
    id: str
    owner_id: str
    region: str
    availability_zone: str
    availability_zone_id: str
    instance_type: str
    instance_platform: str
    tenancy: str
    total_instance_count: int
    create_date: datetime
    start_date: datetime
    end_date: datetime | None
    end_date_type: str
    instance_match_criteria: str
    reservation_type: str = "default"
    ebs_optimized: bool = False
    ephemeral_storage: bool = False
    placement_group_arn: str | None = None
    capacity_block_id: str | None = None
    ultraserver_type: str | None = None
    network_nodes: list[str] = field(default_factory=list)
    state: str = "active"
    # Instance ids launched into this reservation and still running.
    instances: set[str] = field(default_factory=set)
    # Usage seeded by a scenario without real instances behind it.
    seeded_used: int = 0
    # When a pending reservation becomes active (None: it already is).
    active_at: datetime | None = None
    # Seconds EC2 may keep a limited reservation alive past its EndDate (None: the
    # emulator's current expiry_lag_seconds setting).
    expiry_lag: float | None = None

    @property
    def arn(self) -> str:
        return f"arn:aws:ec2:{self.region}:{self.owner_id}:capacity-reservation/{self.id}"

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == "capacity-block"

    @property
    def used_instance_count(self) -> int:
        return len(self.instances) + self.seeded_used

    @property
    def available_instance_count(self) -> int:
        if self.state not in HOLDING_STATES:
            return 0
        return max(self.total_instance_count - self.used_instance_count, 0)

    @property
    def holds_pool_capacity(self) -> bool:
        """ODCRs draw from the On-Demand pool; Capacity Blocks bring their own capacity."""
        return not self.is_capacity_block and self.state in HOLDING_STATES

    def advance(self, now: datetime, default_lag: float = 0.0) -> str | None:
        """Move the state along the clock; return the old state when it changed."""
        old = self.state
        if self.state in FINAL_STATES:
            return None
        if self.is_capacity_block:
            if self.end_date is not None and now >= self.end_date:
                self.state = "expired"
            elif now >= self.start_date:
                self.state = "active"
            else:
                self.state = "scheduled"
        else:
            if self.state == "pending" and self.active_at is not None and now >= self.active_at:
                self.state = "active"
            lag = default_lag if self.expiry_lag is None else self.expiry_lag
            if (
                self.end_date_type == "limited"
                and self.end_date is not None
                and now >= self.end_date + timedelta(seconds=lag)
            ):
                self.state = "expired"
        return old if old != self.state else None

    def to_dict(self, tags: dict[str, str], state: str | None = None) -> dict[str, Any]:
        """The API shape; ``state`` is what the call sees when that is not yet the truth
        (``models.consistency``)."""
        data: dict[str, Any] = {
            "CapacityReservationId": self.id,
            "OwnerId": self.owner_id,
            "CapacityReservationArn": self.arn,
            "AvailabilityZoneId": self.availability_zone_id,
            "InstanceType": self.instance_type,
            "InstancePlatform": self.instance_platform,
            "AvailabilityZone": self.availability_zone,
            "Tenancy": self.tenancy,
            "TotalInstanceCount": self.total_instance_count,
            "AvailableInstanceCount": self.available_instance_count,
            "EbsOptimized": self.ebs_optimized,
            "EphemeralStorage": self.ephemeral_storage,
            "State": state or self.state,
            "StartDate": self.start_date,
            "EndDateType": self.end_date_type,
            "InstanceMatchCriteria": self.instance_match_criteria,
            "CreateDate": self.create_date,
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            "ReservationType": self.reservation_type,
            "CapacityAllocations": [
                {"AllocationType": "used", "Count": self.used_instance_count},
            ],
        }
        if self.end_date is not None:
            data["EndDate"] = self.end_date
        if self.placement_group_arn:
            data["PlacementGroupArn"] = self.placement_group_arn
        if self.capacity_block_id:
            data["CapacityBlockId"] = self.capacity_block_id
        return data

    def fingerprint(self) -> tuple[Any, ...]:
        return (self.instance_type, self.availability_zone, self.total_instance_count)


@dataclass(frozen=True)
class Shown:
    """A reservation as one API call sees it: its state and tags may still be settling."""

    reservation: CapacityReservation
    state: str
    tags: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return self.reservation.to_dict(self.tags, state=self.state)


def filter_value(
    reservation: CapacityReservation, name: str, tags: dict[str, str], state: str | None = None
) -> Any:
    """The value(s) a DescribeCapacityReservations filter compares against."""
    if name.startswith("tag:"):
        key = name[4:]
        return tags.get(key)
    simple = {
        "instance-type": reservation.instance_type,
        "owner-id": reservation.owner_id,
        "instance-platform": reservation.instance_platform,
        "availability-zone": reservation.availability_zone,
        "availability-zone-id": reservation.availability_zone_id,
        "tenancy": reservation.tenancy,
        "state": state or reservation.state,
        "end-date-type": reservation.end_date_type,
        "instance-match-criteria": reservation.instance_match_criteria,
        "placement-group-arn": reservation.placement_group_arn,
        "reservation-type": reservation.reservation_type,
        "capacity-reservation-id": reservation.id,
    }
    if name in simple:
        return simple[name]
    if name == "tag-key":
        return list(tags)
    if name == "tag-value":
        return list(tags.values())
    if name == "start-date":
        return reservation.start_date
    if name == "end-date":
        return reservation.end_date
    raise KeyError(name)
