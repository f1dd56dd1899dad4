"""Capacity Reservations: create (targeted, limited, tagged, with a ClientToken), cancel, list."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..aws import AwsError
from .base import Ec2Base
from .filters import Filters, Wanted

RESOURCE_TYPE = "capacity-reservation"


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

    @property
    def size(self) -> int:
        """The instances it is for, also while a Capacity Block has not started (EC2 then
        reports TotalInstanceCount 0 and tags the block with its size)."""
        # Imported here: the discovery rules are the capacity listing's; the other entry
        # points need only this one, and only for Capacity Blocks (cold import, issue 16).
        from ...domain.discovery import reserved_size

        return reserved_size(self.reservation_type, self.total_count, self.tags)

    def filter_fields(self) -> dict[str, str | None]:
        """What the ``DescribeCapacityReservations`` filters the broker sends compare."""
        return {
            "capacity-reservation-id": self.id,
            "instance-type": self.instance_type,
            "state": self.state,
            "availability-zone": self.availability_zone,
            "instance-platform": self.platform,
            "tenancy": self.tenancy,
            "reservation-type": self.reservation_type,
            "owner-id": self.owner_id,
        }

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


class ReservationsMixin(Ec2Base):
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
        filters: Mapping[str, Iterable[Wanted]] | None = None,
        deadline: float | None = None,
    ) -> list[Reservation]:
        """The reservations named, or listed; ``filters`` match exactly (``filters.Filters``):
        their values are escaped, and what EC2 answers is compared with them again."""
        params: dict[str, Any] = {}
        if ids:
            params["CapacityReservationIds"] = list(ids)
        else:
            params["MaxResults"] = 1000
        wanted = Filters(filters)
        if wanted:
            params["Filters"] = wanted.params()
        found = [
            Reservation.from_api(self.region, item)
            for item in self._pages(
                "DescribeCapacityReservations", "CapacityReservations", deadline, **params
            )
        ]
        return [r for r in found if wanted.admit(r.tags, r.filter_fields())]

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
