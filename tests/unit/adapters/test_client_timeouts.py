"""Every network call is bounded by the invocation's deadline (contract v4): the state table's
client answers within about a second, and an EC2 call with less time left than its client's
15 s read timeout goes through a client whose timeout fits in what is left."""

from __future__ import annotations

import boto3
import pytest
from capacity_broker.adapters.aws import Clients


@pytest.mark.parametrize(
    ("service", "within", "timeout"),
    [
        ("ec2", None, 15),
        ("ec2", 20.0, 15),
        ("ec2", 9.0, 8),
        ("ec2", 3.0, 2),
        ("ec2", 0.2, 1),  # (a second at least: a call with nothing left is refused earlier)
        ("dynamodb", None, 1),
        ("dynamodb", 0.2, 1),
    ],
)
def test_a_call_s_client_reads_no_longer_than_the_time_left(
    service: str, within: float | None, timeout: float
) -> None:
    clients = Clients(boto3.session.Session())
    client = clients.client(service, "us-east-1", within)
    assert client.meta.config.read_timeout == timeout
    assert client.meta.config.retries["total_max_attempts"] == 1  # the adapters' own retries


def test_the_shorter_clients_are_made_once_and_listed_as_the_service_s() -> None:
    clients = Clients(boto3.session.Session())
    first = clients.client("ec2", "us-east-1", 3.0)
    assert clients.client("ec2", "us-east-1", 2.5) is first  # the same 2 s client
    clients.client("ec2", "us-east-1")
    assert clients.made() == [("ec2", "us-east-1")]
