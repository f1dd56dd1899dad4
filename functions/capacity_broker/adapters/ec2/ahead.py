"""Future-dated Capacity Reservations as the broker requests them (``capacity-broker ahead``,
``logic.discovery.ahead``); ``ReservationsMixin.request_ahead`` sends one.

A module of its own beside ``reservations``: no Lambda handler requests one, so none builds
this record at its cold import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...domain.ahead import DELIVERY_PREFERENCE, MATCH_CRITERIA
from .reservations import RESOURCE_TYPE


@dataclass(frozen=True)
class FutureReservation:
    """A future-dated ODCR as the broker requests one: targeted (the only matching EC2 allows
    for them), incremental delivery, no end date, tagged on create, with a ClientToken."""

    instance_type: str
    availability_zone: str
    platform: str
    tenancy: str
    count: int
    start: datetime
    commitment_seconds: int
    client_token: str
    tags: Mapping[str, str]

    def parameters(self) -> dict[str, Any]:
        return {
            "ClientToken": self.client_token,
            "InstanceType": self.instance_type,
            "InstancePlatform": self.platform,
            "AvailabilityZone": self.availability_zone,
            "Tenancy": self.tenancy,
            "InstanceCount": self.count,
            "InstanceMatchCriteria": MATCH_CRITERIA,
            "EndDateType": "unlimited",
            "StartDate": self.start,
            "CommitmentDuration": self.commitment_seconds,
            "DeliveryPreference": DELIVERY_PREFERENCE,
            "TagSpecifications": [
                {
                    "ResourceType": RESOURCE_TYPE,
                    "Tags": [{"Key": k, "Value": v} for k, v in self.tags.items()],
                }
            ],
        }
