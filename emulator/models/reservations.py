"""Capacity Reservations (ODCRs and Capacity Blocks) and their life cycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

# States in which a reservation holds capacity and can be launched into (or will be).
HOLDING_STATES = frozenset({"active", "pending", "scheduled", "payment-pending"})
# An ODCR takes capacity from its AZ's pool only once delivered (a future-dated one that is
# ``scheduled`` has none yet: "The total instance count remains 0 ... in the scheduled state").
ODCR_HOLDING_STATES = frozenset({"active", "pending"})
# A future-dated reservation before delivery (botocore's CapacityReservationState,
# "(Future-dated Capacity Reservations)"), and the states that count toward the On-Demand
# quota: "Capacity Reservations in the assessing, scheduled, pending, active, and delayed state
# count towards your On-Demand Instance quota" (EC2 User Guide, ODCRs, Quotas).
FUTURE_WAITING_STATES = frozenset({"assessing", "scheduled", "delayed"})
QUOTA_STATES = frozenset({"assessing", "scheduled", "pending", "active", "delayed"})
FINAL_STATES = frozenset({"cancelled", "expired", "failed", "payment-failed", "unsupported"})
# A Capacity Block before its start: bought (or being paid for) but not usable yet.
BLOCK_WAITING_STATES = frozenset({"payment-pending", "scheduled"})
# Tags EC2 itself puts on a Capacity Block (EC2 User Guide, "View Capacity Blocks": "Before a
# Capacity Block reservation begins, the available capacity appears as zero. You can see how
# many instances will be available in your Capacity Block by the tag value for the tag key
# aws:ec2capacityreservation:incrementalRequestedQuantity").
BLOCK_SIZE_TAG = "aws:ec2capacityreservation:incrementalRequestedQuantity"
BLOCK_TYPE_TAG = "aws:ec2capacityreservation:capacityReservationType"
# "Thirty minutes before the reservation expires, we begin to terminate any instances that are
# still running in the Capacity Block" (EC2 User Guide, "Work with Capacity Blocks").
BLOCK_RECLAIM_BEFORE_END = timedelta(minutes=30)
# UltraServer blocks: chosen. AWS's pages at hand say thirty minutes for every block; only a
# third party (dev.classmethod.jp, "ec2-capacity-blocks-for-ml-instance-cb-vs-ultraserver-cb",
# summarising the P6e-GB200 UltraServer terms) says users must have terminated 60 minutes
# before the end. ``Settings.ultraserver_reclaim_minutes`` (60 by default, 30 reads AWS's own
# sentence for every block). The types EC2 sells only in UltraServers (botocore 1.44.5's
# InstanceType enum) count as such when a scenario names no UltraServer type.
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
    # A Capacity Block: its interconnect as DescribeCapacityBlockStatus reports it (None: ok
    # once started, insufficient-data before), instances failing their status checks, and
    # the extensions bought for it (``models.extensions``).
    interconnect: str | None = None
    unavailable_count: int = 0
    extensions: list[Any] = field(default_factory=list)
    # A future-dated ODCR (``models.future``): its commitment, the start first asked for, when
    # the assessment ends and what it concludes, when it was delivered, and the charged
    # wind-down of a cancellation inside the commitment.
    commitment_seconds: int | None = None
    committed_count: int | None = None
    delivery_preference: str | None = None
    original_start: datetime | None = None
    assessed_at: datetime | None = None
    assessment: str = "scheduled"
    delivered_at: datetime | None = None
    commitment_end: datetime | None = None
    cancelling_until: datetime | None = None
    adjustment_status: str | None = None
    adjustment_details: dict[str, Any] | None = None
    # A Capacity Block's terminated instances EC2 is still cleaning up: id -> when the slot is
    # free again.
    cleaning: dict[str, datetime] = field(default_factory=dict)
    # An interruptible Capacity Reservation (``models.interruptible``): the source ODCR it was
    # allocated from, and what it does when its allocation is reduced to zero.
    interruptible: bool = False
    source_id: str | None = None
    zero_size_preference: str | None = None
    # A source ODCR: the instances lent to its interruptible allocation (not available to
    # its own launches) and that allocation as DescribeCapacityReservations shows it.
    lent: int = 0
    allocation: dict[str, Any] | None = None
    # An interruptible reservation being reclaimed: the count it shrinks to, and when (after
    # the interruption notice) EC2 terminates what runs beyond it.
    reclaim_to: int | None = None
    reclaim_at: datetime | None = None

    @property
    def arn(self) -> str:
        return f"arn:aws:ec2:{self.region}:{self.owner_id}:capacity-reservation/{self.id}"

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == "capacity-block"

    @property
    def kind(self) -> str:
        """The fleet's reservation type (botocore's FleetReservationType)."""
        if self.is_capacity_block:
            return "capacity-block"
        if self.interruptible:
            return "interruptible-capacity-reservation"
        return "on-demand-capacity-reservation"

    @property
    def is_future_dated(self) -> bool:
        return not self.is_capacity_block and self.commitment_seconds is not None

    @property
    def delivered(self) -> bool:
        return not self.is_future_dated or self.delivered_at is not None

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
        is in the BLOCK_SIZE_TAG tag until then) and for a future-dated ODCR not delivered
        yet, the reserved count otherwise."""
        if self.waiting_to_start or not self.delivered:
            return 0
        return self.total_instance_count

    @property
    def available_instance_count(self) -> int:
        if not self.holding or self.waiting_to_start or not self.delivered:
            return 0
        total = self.total_instance_count if self.reclaim_to is None else self.reclaim_to
        return max(total - self.used_instance_count - self.lent, 0)

    @property
    def reclaim_lead(self) -> timedelta:
        from ..state import world  # the settings of the running world (no cycle at import)

        ultra = self.ultraserver_type or self.instance_type.split(".", 1)[0] in ULTRASERVER_FAMILIES
        if ultra:
            return timedelta(minutes=world.settings.ultraserver_reclaim_minutes)
        return BLOCK_RECLAIM_BEFORE_END

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
    def holding(self) -> bool:
        """Holds capacity now (or, for a bought block, will at its start)."""
        if self.is_capacity_block:
            return self.state in HOLDING_STATES
        return self.state in ODCR_HOLDING_STATES

    @property
    def holds_pool_capacity(self) -> bool:
        """ODCRs draw from the On-Demand pool; Capacity Blocks bring their own capacity, an
        interruptible reservation its source's."""
        return not self.is_capacity_block and not self.interruptible and self.holding

    @property
    def counts_toward_quota(self) -> bool:
        return not self.is_capacity_block and not self.interruptible and self.state in QUOTA_STATES

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
            assessed = self.assessed_at is not None and now >= self.assessed_at
            if self.state == "assessing" and assessed:
                self.state = self.assessment
            wound_down = self.cancelling_until is not None and now >= self.cancelling_until
            if self.state == "cancelling" and wound_down:
                self.state = "cancelled"
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
        if self.is_future_dated:
            commitment: dict[str, Any] = {
                "CommittedInstanceCount": self.committed_count or self.total_instance_count,
                "CommitmentDuration": self.commitment_seconds,
            }
            if self.commitment_end is not None:
                commitment["CommitmentEndDate"] = self.commitment_end
            data["CommitmentInfo"] = commitment
            data["DeliveryPreference"] = self.delivery_preference or "incremental"
            if self.original_start is not None:
                data["OriginalStartDate"] = self.original_start
            if not self.delivered:
                # Capacity that is promised, not delivered: AllocationType "future" (botocore's
                # AllocationType enum); nothing used, nothing available yet.
                data["CapacityAllocations"] = [
                    {"AllocationType": "future", "Count": self.total_instance_count}
                ]
        data["Interruptible"] = self.interruptible
        if self.interruptible:
            data["InterruptionInfo"] = {
                "SourceCapacityReservationId": self.source_id,
                "InterruptionType": "adhoc",
            }
            data["ZeroSizePreference"] = self.zero_size_preference or "default"
        if self.allocation is not None:
            data["InterruptibleCapacityAllocation"] = dict(self.allocation)
        if self.adjustment_status is not None:
            data["AdjustmentStatus"] = self.adjustment_status
            if self.adjustment_details:
                data["AdjustmentDetails"] = dict(self.adjustment_details)
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
