"""Capacity Reservations: create (targeted, limited, tagged, with a ClientToken), cancel, list."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...domain.tags import tag_dict
from ..aws import AwsError
from .base import Ec2Base
from .filters import Filters, Wanted

if TYPE_CHECKING:  # requested by ``capacity-broker ahead`` only: no handler builds one
    from .ahead import FutureReservation

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
    # A future-dated reservation (CommitmentInfo): the end of its commitment once delivered,
    # its length in seconds and the instances committed.
    commitment_end: datetime | None = None
    commitment_seconds: int | None = None
    committed_count: int | None = None
    delivery_preference: str | None = None
    # An interruptible Capacity Reservation (EC2: ``Interruptible``): its owner may reclaim
    # the capacity, terminating the instances in it.
    interruptible: bool = False

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

        return reserved_size(
            self.reservation_type, self.total_count, self.tags, self.committed_count, self.state
        )

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
        commitment = data.get("CommitmentInfo") or {}
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
            tags=tag_dict(data.get("Tags")),
            commitment_end=commitment.get("CommitmentEndDate"),
            commitment_seconds=_int_or_none(commitment.get("CommitmentDuration")),
            committed_count=_int_or_none(commitment.get("CommittedInstanceCount")),
            delivery_preference=data.get("DeliveryPreference"),
            interruptible=bool(data.get("Interruptible", False)),
        )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


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

    # -- future-dated reservations ----------------------------------------------------------

    def request_ahead(self, new: FutureReservation, deadline: float | None = None) -> Reservation:
        """Request a future-dated reservation (or, for a ClientToken EC2 has seen, get back
        the one it made): the same parameters on every retry."""
        data = self._call("CreateCapacityReservation", deadline, **new.parameters())
        return Reservation.from_api(self.region, data["CapacityReservation"])

    def cancellation_quote(
        self, reservation_id: str, client_token: str, deadline: float | None = None
    ) -> dict[str, Any]:
        """EC2's terms for cancelling a reservation inside its commitment (valid 24 hours)."""
        data = self._call(
            "CreateCapacityReservationCancellationQuote",
            deadline,
            CapacityReservationId=reservation_id,
            ClientToken=client_token,
        )
        return dict(data["CapacityReservationCancellationQuote"])

    def date_change_quote(
        self,
        reservation_id: str,
        new_start: datetime,
        client_token: str,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """EC2's terms for postponing a scheduled reservation's start (valid 24 hours)."""
        data = self._call(
            "CreateCapacityReservationDateChangeQuote",
            deadline,
            CapacityReservationId=reservation_id,
            NewStartDate=new_start,
            ClientToken=client_token,
        )
        return dict(data["CapacityReservationModificationQuote"])

    def quotes(
        self, kind: str, quote_ids: Iterable[str], deadline: float | None = None
    ) -> list[dict[str, Any]]:
        """Quotes by id: ``kind`` ``cancellation`` or ``date-change``."""
        if kind == "cancellation":
            action, key, ids = (
                "DescribeCapacityReservationCancellationQuotes",
                "CapacityReservationCancellationQuotes",
                "CapacityReservationCancellationQuoteIds",
            )
        else:
            action, key, ids = (
                "DescribeCapacityReservationDateChangeQuotes",
                "CapacityReservationModificationQuotes",
                "CapacityReservationModificationQuoteIds",
            )
        return list(self._pages(action, key, deadline, **{ids: list(quote_ids)}))

    def cancel_with_quote(self, reservation_id: str, quote_id: str) -> None:
        """Accept a cancellation quote: EC2 charges its wind-down. Sent once (a repeat would
        meet a quote already used); the caller reads the reservation to know."""
        self._call_once(
            "CancelCapacityReservation",
            CapacityReservationId=reservation_id,
            QuoteId=quote_id,
            ApplyCancellationCharges="commitment-wind-down",
        )

    def apply_date_change(self, reservation_id: str, quote_id: str) -> dict[str, Any]:
        """Accept a date-change quote (ModifyCapacityReservation); sent once."""
        return dict(
            self._call_once(
                "ModifyCapacityReservation",
                CapacityReservationId=reservation_id,
                QuoteId=quote_id,
                AcceptModificationTerms=True,
            )
        )

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
