"""Capacity Reservations (ODCRs and Capacity Blocks) and their life cycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

# States in which a reservation holds capacity and can be launched into (or will be).
HOLDING_STATES = frozenset({"active", "pending", "scheduled", "payment-pending"})
FINAL_STATES = frozenset({"cancelled", "expired", "failed", "payment-failed"})
# A Capacity Block before its start: bought (or being paid for) but not usable yet.
BLOCK_WAITING_STATES = frozenset({"payment-pending", "scheduled"})
# Tags EC2 itself puts on a Capacity Block (EC2 User Guide, "View Capacity Blocks": "Before a
# Capacity Block reservation begins, the available capacity appears as zero. You can see how
# many instances will be available in your Capacity Block by the tag value for the tag key
# aws:ec2capacityreservation:incrementalRequestedQuantity").
BLOCK_SIZE_TAG = "aws:ec2capacityreservation:incrementalRequestedQuantity"
BLOCK_TYPE_TAG = "aws:ec2capacityreservation:capacityReservationType"
BLOCK_RECLAIM_BEFORE_END = timedelta(minutes=30)
# UltraServer blocks: an hour (the P6e-GB200 UltraServer terms); the types EC2 sells only in
# UltraServers count as such when a scenario names no UltraServer type.
ULTRASERVER_RECLAIM_BEFORE_END = timedelta(minutes=60)
ULTRASERVER_FAMILIES = frozenset({"p6e-gb200", "trn2u"})


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
    # A Capacity Block in payment-pending: when its payment clears (None: it does not).
    paid_at: datetime | None = None
    # A Capacity Block's terminated instances EC2 is still cleaning up: id -> when the slot is
    # free again.
    cleaning: dict[str, datetime] = field(default_factory=dict)

    @property
    def arn(self) -> str:
        return f"arn:aws:ec2:{self.region}:{self.owner_id}:capacity-reservation/{self.id}"

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == "capacity-block"

    @property
    def used_instance_count(self) -> int:
        return len(self.instances) + self.seeded_used + len(self.cleaning)

    @property
    def waiting_to_start(self) -> bool:
        """A Capacity Block that has not started: EC2 shows it with no capacity yet."""
        return self.is_capacity_block and self.state in BLOCK_WAITING_STATES

    @property
    def reported_total(self) -> int:
        """TotalInstanceCount as EC2 reports it: 0 for a block that has not started (its size
        is in the BLOCK_SIZE_TAG tag until then), the reserved count otherwise."""
        return 0 if self.waiting_to_start else self.total_instance_count

    @property
    def available_instance_count(self) -> int:
        if self.state not in HOLDING_STATES or self.waiting_to_start:
            return 0
        return max(self.total_instance_count - self.used_instance_count, 0)

    @property
    def reclaim_lead(self) -> timedelta:
        ultra = self.ultraserver_type or self.instance_type.split(".", 1)[0] in ULTRASERVER_FAMILIES
        return ULTRASERVER_RECLAIM_BEFORE_END if ultra else BLOCK_RECLAIM_BEFORE_END

    def reclaiming(self, now: datetime) -> bool:
        """An active Capacity Block in its last 30 minutes (60 for UltraServers): "Thirty
        minutes before the reservation expires, we begin to terminate any instances that are
        still running in the Capacity Block" (EC2 User Guide, "Work with Capacity Blocks")."""
        return (
            self.is_capacity_block
            and self.state == "active"
            and self.end_date is not None
            and now >= self.end_date - self.reclaim_lead
        )

    @property
    def holds_pool_capacity(self) -> bool:
        """ODCRs draw from the On-Demand pool; Capacity Blocks bring their own capacity."""
        return not self.is_capacity_block and self.state in HOLDING_STATES

    def advance(
        self, now: datetime, default_lag: float = 0.0, payment_timeout: float | None = None
    ) -> str | None:
        """Move the state along the clock; return the old state when it changed.

        ``payment_timeout``: seconds after its purchase a block still unpaid becomes
        ``payment-failed`` (None: never)."""
        old = self.state
        self.cleaning = {i: at for i, at in self.cleaning.items() if now < at}
        if self.state in FINAL_STATES:
            return None
        if self.is_capacity_block:
            unpaid = self.state == "payment-pending" and (
                self.paid_at is None or now < self.paid_at
            )
            if self.end_date is not None and now >= self.end_date:
                self.state = "expired"
            elif (
                unpaid
                and payment_timeout is not None
                and (now >= self.create_date + timedelta(seconds=payment_timeout))
            ):
                self.state = "payment-failed"
            elif unpaid:
                pass  # EC2 shows the block payment-pending until its upfront fee is paid
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
            "TotalInstanceCount": self.reported_total,
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
            # A block that has not started has no allocations yet (as EC2 describes one).
            "CapacityAllocations": []
            if self.waiting_to_start
            else [{"AllocationType": "used", "Count": self.used_instance_count}],
        }
        if self.end_date is not None:
            data["EndDate"] = self.end_date
        if self.placement_group_arn:
            data["PlacementGroupArn"] = self.placement_group_arn
        if self.capacity_block_id:
            data["CapacityBlockId"] = self.capacity_block_id
        return data

    def system_tags(self) -> dict[str, str]:
        """The ``aws:`` tags EC2 puts on a Capacity Block when it is bought (none on ODCRs)."""
        if not self.is_capacity_block:
            return {}
        return {
            BLOCK_SIZE_TAG: str(self.total_instance_count),
            BLOCK_TYPE_TAG: "capacity-block",
        }

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
