"""A region AWS does not have: no endpoint to connect to, as with the real thing."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

pytestmark = pytest.mark.emulator

ONE_TRY = Config(retries={"total_max_attempts": 1})


@pytest.mark.parametrize("service", ["ec2", "ssm", "cloudformation"])
def test_an_unknown_region_cannot_be_reached(emu: Any, service: str) -> None:
    client = boto3.client(service, region_name="zz-fake-9", config=ONE_TRY)
    call = {
        "ec2": lambda: client.describe_capacity_reservations(),
        "ssm": lambda: client.get_parameters_by_path(Path="/x"),
        "cloudformation": lambda: client.describe_stacks(),
    }[service]
    with pytest.raises(EndpointConnectionError):
        call()


def test_known_regions_still_answer(emu: Any) -> None:
    for region in ("us-east-1", "eu-west-1", "cn-north-1"):
        client = boto3.client("ec2", region_name=region, config=ONE_TRY)
        assert client.describe_capacity_reservations()["CapacityReservations"] == []
