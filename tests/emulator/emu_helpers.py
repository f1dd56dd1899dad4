"""Helpers for the emulator's own tests (``tests/emulator/conftest.py`` puts this on sys.path)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-east-1"
# A fixed "now" for the emulator clock (a Saturday, before the daily 11:30 UTC block start).
NOW = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})
SUBNET_A = "subnet-0a00000000000001"
SUBNET_B = "subnet-0b00000000000002"
SUBNET_C = "subnet-0c00000000000003"


def error_of(exc: pytest.ExceptionInfo[ClientError] | ClientError) -> tuple[str, int]:
    """(error code, HTTP status) of a botocore ClientError."""
    error = exc.value if isinstance(exc, pytest.ExceptionInfo) else exc
    return error.response["Error"]["Code"], error.response["ResponseMetadata"]["HTTPStatusCode"]


@dataclass
class Api:
    """Small conveniences over the boto3 client; every call still goes through botocore."""

    emu: Any
    ec2: Any

    def reserve(
        self,
        instance_type: str = "c5.large",
        availability_zone: str = "us-east-1a",
        count: int = 1,
        **extra: Any,
    ) -> dict[str, Any]:
        response = self.ec2.create_capacity_reservation(
            InstanceType=instance_type,
            InstancePlatform=extra.pop("InstancePlatform", "Linux/UNIX"),
            AvailabilityZone=availability_zone,
            InstanceCount=count,
            **extra,
        )
        return response["CapacityReservation"]

    def reserve_until(self, minutes: float = 5, **kwargs: Any) -> dict[str, Any]:
        end = self.emu.now() + timedelta(minutes=minutes)
        return self.reserve(EndDateType="limited", EndDate=end, **kwargs)

    def get(self, reservation_id: str) -> dict[str, Any]:
        found = self.ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
        [reservation] = found["CapacityReservations"]
        return reservation

    def all(self, **kwargs: Any) -> list[dict[str, Any]]:
        paginator = self.ec2.get_paginator("describe_capacity_reservations")
        return [r for page in paginator.paginate(**kwargs) for r in page["CapacityReservations"]]

    def ids(self, **kwargs: Any) -> set[str]:
        return {r["CapacityReservationId"] for r in self.all(**kwargs)}

    def pool(self, availability_zone: str, instance_type: str) -> dict[str, Any]:
        return self.emu.pool(REGION, availability_zone, instance_type)

    def free(self, availability_zone: str, instance_type: str) -> int | None:
        return self.pool(availability_zone, instance_type)["available"]

    def run(
        self, subnet_id: str = SUBNET_A, instance_type: str = "c5.large", count: int = 1, **extra
    ) -> list[str]:
        response = self.ec2.run_instances(
            ImageId=extra.pop("ImageId", "ami-0aaaaaaaaaaaaaaa1"),
            InstanceType=instance_type,
            MinCount=extra.pop("MinCount", count),
            MaxCount=extra.pop("MaxCount", count),
            SubnetId=subnet_id,
            **extra,
        )
        return [i["InstanceId"] for i in response["Instances"]]

    def run_in_block(
        self,
        block_id: str,
        count: int = 1,
        instance_type: str = "p5.48xlarge",
        subnet_id: str = SUBNET_B,
    ) -> list[str]:
        """A launch into a Capacity Block: market type capacity-block, targeting the block."""
        return self.run(
            subnet_id,
            instance_type,
            count,
            InstanceMarketOptions={"MarketType": "capacity-block"},
            CapacityReservationSpecification={
                "CapacityReservationTarget": {"CapacityReservationId": block_id}
            },
        )
