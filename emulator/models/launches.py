"""Launches: where instances take their capacity from (open or targeted reservations, a
Capacity Block, the On-Demand pool), and the bookkeeping that gives it back on termination.

``plan_launch`` decides, ``commit`` takes; callers hold ``world.lock`` across both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any

from ..exceptions import client_error, instance_not_found, insufficient_capacity
from ..state import world
from . import groups
from .consistency import INSTANCE, Seen
from .expiry import Expiry


@dataclass
class Allocation:
    """Where ``count`` launched instances take their capacity from."""

    instance_type: str
    availability_zone: str
    count: int
    reservation_id: str | None = None  # None: the On-Demand pool


@dataclass
class LaunchRequest:
    instance_type: str
    availability_zone: str
    platform: str = "Linux/UNIX"
    tenancy: str = "default"
    preference: str = "open"  # CapacityReservationPreference
    target_id: str | None = None  # CapacityReservationTarget.CapacityReservationId
    group_arn: str | None = None  # CapacityReservationTarget.CapacityReservationResourceGroupArn
    market_type: str | None = None  # InstanceMarketOptions.MarketType


class Launches(Expiry):
    """RunInstances' and CreateFleet's capacity, and the instances' sources."""

    def plan_launch(self, request: LaunchRequest, count: int) -> list[Allocation]:
        """Decide where ``count`` instances would run, or raise EC2's launch error.

        Read-only: ``commit`` takes the capacity. Callers hold ``world.lock`` across both.
        """
        self.refresh()
        if request.target_id:
            return [self._plan_targeted(request, count)]
        if request.group_arn:
            return self._plan_group(request, count)
        if request.market_type in ("capacity-block", "interruptible-capacity-reservation"):
            raise client_error(
                "InvalidParameterCombination",
                f"A launch with MarketType {request.market_type} must target a reservation of "
                "that kind (CapacityReservationTarget).",
            )
        allocations: list[Allocation] = []
        remaining = count
        if request.preference in ("open", "capacity-reservations-only"):
            for reservation in self.reservations.values():
                if remaining == 0:
                    break
                if (
                    reservation.state == "active"
                    and not reservation.is_capacity_block
                    and reservation.instance_match_criteria == "open"
                    and reservation.instance_type == request.instance_type
                    and reservation.availability_zone == request.availability_zone
                    and reservation.tenancy == request.tenancy
                    and reservation.instance_platform == request.platform
                    and reservation.available_instance_count > 0
                ):
                    take = min(reservation.available_instance_count, remaining)
                    allocations.append(
                        Allocation(
                            request.instance_type, request.availability_zone, take, reservation.id
                        )
                    )
                    remaining -= take
        if remaining and request.preference == "capacity-reservations-only":
            raise client_error(
                "ReservationCapacityExceeded",
                "There is not enough capacity in open Capacity Reservations that match the "
                "launch request.",
            )
        if remaining:
            allocations.append(self._plan_on_demand(request, remaining))
        return allocations

    def _plan_group(self, request: LaunchRequest, count: int) -> list[Allocation]:
        """A launch that targets a Capacity Reservation group: "Instances that target a group
        of Capacity Reservations match with any Capacity Reservation in the group that has
        matching attributes (instance type, platform, Availability Zone, and tenancy) and
        available capacity. If the group does not have a Capacity Reservation with matching
        attributes and available capacity, the instances run using On-Demand capacity" (EC2
        User Guide, "Work with Capacity Reservation groups"); with capacity-reservations-only
        "If capacity isn't available, the instance will fail to launch" (API reference,
        CapacityReservationSpecification). The group's reservations are tried in the order
        they joined it (EC2 does not say which it picks first: chosen)."""
        ids = groups.pool_reservation_ids(self.account_id, self.region, str(request.group_arn))
        if ids is None:
            raise client_error(
                "InvalidParameterValue",
                f"The Capacity Reservation resource group {request.group_arn} does not exist "
                "or is not a Capacity Reservation pool (AWS::EC2::CapacityReservationPool).",
            )
        # A Capacity Block's or interruptible market type cannot run On-Demand beside it.
        reserved_market = request.market_type in (
            "capacity-block",
            "interruptible-capacity-reservation",
        )
        allocations: list[Allocation] = []
        remaining = count
        for reservation_id in ids:
            reservation = self.reservations.get(reservation_id)
            if remaining == 0:
                break
            if (
                reservation is not None
                and reservation.state == "active"
                and market_fits(reservation, request.market_type)
                and not reservation.reclaiming(world.clock.now())
                and matches_launch(reservation, request)
                and reservation.available_instance_count > 0
            ):
                take = min(reservation.available_instance_count, remaining)
                allocations.append(
                    Allocation(
                        request.instance_type, request.availability_zone, take, reservation.id
                    )
                )
                remaining -= take
        if remaining and (reserved_market or request.preference == "capacity-reservations-only"):
            raise client_error(
                "ReservationCapacityExceeded",
                "The requested reservation does not have sufficient compatible and available "
                f"capacity for this request (group {request.group_arn}).",
            )
        if remaining:
            allocations.append(self._plan_on_demand(request, remaining))
        return allocations

    def _plan_on_demand(self, request: LaunchRequest, count: int) -> Allocation:
        """``count`` instances from the On-Demand pool, or EC2's launch error."""
        if not self.offered(request.availability_zone, request.instance_type):
            raise client_error(
                "Unsupported",
                f"Your requested instance type ({request.instance_type}) is not supported "
                f"in your requested Availability Zone ({request.availability_zone}).",
            )
        self.quotas.check(request.instance_type, count, self.quota_usage())
        pool = self._pool(request.availability_zone, request.instance_type)
        if not pool.can_take(count):
            raise insufficient_capacity(request.instance_type, request.availability_zone)
        return Allocation(request.instance_type, request.availability_zone, count)

    def _plan_targeted(self, request: LaunchRequest, count: int) -> Allocation:
        reservation = self.get(str(request.target_id))
        if not market_fits(reservation, request.market_type):
            # A Capacity Block takes capacity-block launches only; an On-Demand Capacity
            # Reservation On-Demand ones only (a spot market type cannot use it).
            raise client_error(
                "InvalidParameterCombination",
                "Launches into a Capacity Block need MarketType capacity-block, and only they "
                "may use it; a Capacity Reservation takes On-Demand launches only (an "
                "interruptible one also MarketType interruptible-capacity-reservation).",
            )
        if reservation.waiting_to_start:
            # AWS: launching into a Capacity Block that has not started yet answers
            # "Insufficient Capacity" (EC2 Fleet and Capacity Blocks tutorial).
            raise insufficient_capacity(request.instance_type, request.availability_zone)
        if reservation.state != "active":
            raise client_error(
                "IncorrectState",
                f"The Capacity Reservation {reservation.id} is {reservation.state}, not active.",
            )
        if reservation.reclaiming(world.clock.now()):
            # EC2 is terminating the block's instances ("Thirty minutes before the
            # reservation expires, we begin to terminate any instances that are still running
            # in the Capacity Block"): nothing launched now could run. The emulator used to
            # launch (and terminate at once); EC2 does not say what it answers, the emulator
            # answers as for a block that has not started (the code EC2 documents for that).
            raise insufficient_capacity(request.instance_type, request.availability_zone)
        if (
            reservation.instance_type != request.instance_type
            or reservation.availability_zone != request.availability_zone
            or reservation.instance_platform != request.platform
            or reservation.tenancy != request.tenancy
        ):
            # A reservation is used only by launches whose type, platform, AZ and tenancy
            # match it; EC2 answers a targeted launch that does not match as it answers one
            # too many for it (hashicorp/terraform-provider-aws#32458, an instance type that
            # no longer matched its target: "ReservationCapacityExceeded: The requested
            # reservation does not have sufficient compatible and available capacity for this
            # request."). The emulator used to compare neither platform nor this code.
            raise client_error(
                "ReservationCapacityExceeded",
                "The requested reservation does not have sufficient compatible and available "
                f"capacity for this request ({reservation.id} is for "
                f"{reservation.instance_type}, {reservation.instance_platform}, "
                f"{reservation.availability_zone}, {reservation.tenancy} tenancy; the launch is "
                f"{request.instance_type}, {request.platform}, {request.availability_zone}, "
                f"{request.tenancy} tenancy).",
            )
        if reservation.available_instance_count < count:
            raise client_error(
                "ReservationCapacityExceeded",
                f"The requested number of instances exceeds the available capacity of the "
                f"Capacity Reservation {reservation.id} "
                f"({reservation.available_instance_count} available).",
            )
        return Allocation(request.instance_type, request.availability_zone, count, reservation.id)

    def commit(self, allocations: list[Allocation], instance_ids: list[str]) -> None:
        """Bind launched instances to the capacity they were planned on."""
        now = world.clock.now()
        for instance_id in instance_ids:
            self.propagation.made(instance_id, now, INSTANCE)
            self._stamp_launch(instance_id, now)
        ids = iter(instance_ids)
        for allocation in allocations:
            for _ in range(allocation.count):
                instance_id = next(ids)
                self.instance_sources[instance_id] = allocation.reservation_id
                if allocation.reservation_id:
                    self.reservations[allocation.reservation_id].instances.add(instance_id)
                    self._show_reservation(instance_id, allocation.reservation_id)
                else:
                    key = (allocation.availability_zone, allocation.instance_type)
                    self._pool(*key).take(1)
                    self.pool_instances[key] += 1

    def _stamp_launch(self, instance_id: str, now: Any) -> None:
        """DescribeInstances' ``LaunchTime``, "The time that the instance was launched"
        (botocore's Instance shape), on the emulator's clock: moto stamps the machine's, so a
        test that moves the clock on would see every instance launched in its future. moto's
        serializer reads the member from the instance's attribute of that name (naive UTC,
        as moto keeps it)."""
        instance = self.ec2.get_instance(instance_id)
        instance.launch_time = now.astimezone(UTC).replace(tzinfo=None)

    def _show_reservation(self, instance_id: str, reservation_id: str) -> None:
        """DescribeInstances' ``CapacityReservationId``: "The ID of the Capacity Reservation"
        an instance runs in (botocore's Instance shape); moto's serializer reads the member
        from the instance's attribute of that name."""
        instance = self.ec2.get_instance(instance_id)
        instance.capacity_reservation_id = reservation_id  # type: ignore[attr-defined]

    def named_instances(self, instance_ids: list[str]) -> None:
        """A call naming instances by id (DescribeInstances, TerminateInstances, CreateTags):
        one launched a moment ago may be unknown to it yet, and the whole call fails as EC2's
        does for any unknown id ("Eventual consistency in the Amazon EC2 API": after
        RunInstances, "another command using the instance ID ... might return an
        InvalidInstanceID.NotFound error. This doesn't mean the instance doesn't exist").
        Every settling instance named counts the call."""
        now = world.clock.now()
        with world.lock:
            seen = {i: self.propagation.name(i, now) for i in dict.fromkeys(instance_ids)}
        unknown = [i for i, what in seen.items() if what is Seen.UNKNOWN]
        if unknown:
            raise instance_not_found(unknown)

    def release_instances(self, instance_ids: list[str], types: dict[str, tuple[str, str]]) -> None:
        """Terminated instances give their slot back: to an ODCR at once, to a Capacity Block
        once EC2 has cleaned the instance up (``block_cleanup_seconds``: "When you stop or
        terminate an instance in a Capacity Block, it takes several minutes to clean up your
        instance before you can launch another instance to replace it"), to the pool at once,
        though the account's limits still count it for a while (``consistency.Lingering``)."""
        now = world.clock.now()
        with world.lock:
            for instance_id in instance_ids:
                if instance_id not in self.instance_sources:
                    continue
                source = self.instance_sources.pop(instance_id)
                if source and source in self.reservations:
                    reservation = self.reservations[source]
                    reservation.instances.discard(instance_id)
                    if reservation.is_capacity_block:
                        cleanup = timedelta(seconds=world.settings.block_cleanup_seconds)
                        reservation.cleaning[instance_id] = now + cleanup
                elif instance_id in types:
                    key = types[instance_id]
                    self._pool(*key).give(1)
                    self.pool_instances[key] = max(self.pool_instances[key] - 1, 0)
                    self.lingering.add(key[1], 1, now)


def market_fits(reservation: Any, market_type: str | None) -> bool:
    """A Capacity Block takes capacity-block launches only; an On-Demand Capacity Reservation
    On-Demand ones only (a spot market type cannot use it); an interruptible one On-Demand
    launches or those that say interruptible-capacity-reservation (botocore's MarketType)."""
    if reservation.is_capacity_block:
        return market_type == "capacity-block"
    allowed: tuple[str | None, ...] = (None, "on-demand")
    if reservation.interruptible:
        allowed = (*allowed, "interruptible-capacity-reservation")
    return market_type in allowed


def matches_launch(reservation: Any, request: LaunchRequest) -> bool:
    """ "a reservation is used only by launches whose type, platform, AZ and tenancy match"."""
    return bool(
        reservation.instance_type == request.instance_type
        and reservation.availability_zone == request.availability_zone
        and reservation.instance_platform == request.platform
        and reservation.tenancy == request.tenancy
    )


def loopback_addresses(instances: Iterable[Any]) -> None:
    """With ``Settings.loopback_addresses``: each new instance's primary private address
    moved into 127.0.0.0/8, keeping its subnet address's last three octets (10.10.1.5 becomes
    127.10.1.5), so the addresses of one subnet stay distinct."""
    if not world.settings.loopback_addresses:
        return
    for instance in instances:
        nic = instance.nics[0]
        original = str(nic.private_ip_address)
        moved = "127." + original.split(".", 1)[1]
        nic.private_ip_address = moved
        for entry in nic.private_ip_addresses:
            if entry.get("PrivateIpAddress") == original:
                entry["PrivateIpAddress"] = moved
