"""Which session a client comes from: the container's one (every handler's, shared), a
caller's own (a CapacityBroker's ``session=``), and the in-process override. Making a client
calls nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from capacity_broker.adapters import aws


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The container session these tests make has no emulator behind it: it must not outlive
    # them, or later tests in the process would reach for the real AWS endpoints through it.
    monkeypatch.setattr(aws, "_session", None)
    aws.reset_clients()
    yield
    aws.reset_clients()


def session(name: str) -> boto3.session.Session:
    return boto3.session.Session(
        aws_access_key_id=f"AKIA{name.upper():0<16}",
        aws_secret_access_key=name,
        region_name="us-east-1",
    )


def key_of(client: Any) -> str:
    return str(client._request_signer._credentials.access_key)


def test_the_container_shares_one_session_and_one_client_per_service_and_region() -> None:
    first = aws.client("ec2", "us-east-1")
    assert aws.client("ec2", "us-east-1") is first
    assert aws.client("ec2", "us-west-2") is not first
    # naming the default session is the same thing, same client
    assert aws.client("ec2", "us-east-1", aws.default_session()) is first
    assert aws.default_session() is aws.default_session()


def test_a_session_of_its_own_gets_its_own_clients() -> None:
    a, b = session("alpha"), session("bravo")
    on_a = aws.client("ec2", "us-east-1", a)
    on_b = aws.client("ec2", "us-east-1", b)
    assert key_of(on_a) == "AKIAALPHA00000000000"
    assert key_of(on_b) == "AKIABRAVO00000000000"
    # kept, and making b's redirected nothing: neither a's nor the container's
    assert aws.client("ec2", "us-east-1", a) is on_a
    container = aws.client("ec2", "us-east-1")
    assert container not in (on_a, on_b)
    assert key_of(container) not in (key_of(on_a), key_of(on_b))


def test_the_container_session_override_is_process_wide_and_ends() -> None:
    a = session("alpha")
    container = aws.client("ec2", "us-east-1")
    seen: list[Any] = []
    with aws.container_session(a):
        inside = aws.client("ec2", "us-east-1")
        assert key_of(inside) == "AKIAALPHA00000000000"
        # the handlers' worker threads see it too
        worker = threading.Thread(target=lambda: seen.append(aws.client("ec2", "us-east-1")))
        worker.start()
        worker.join()
        # a caller naming the default session is not redirected
        assert aws.client("ec2", "us-east-1", aws.default_session()) is container
    assert seen == [inside]
    assert aws.client("ec2", "us-east-1") is container


def test_reset_forgets_every_client() -> None:
    a = session("alpha")
    before = (aws.client("ec2", "us-east-1"), aws.client("ec2", "us-east-1", a))
    aws.reset_clients()
    assert aws.client("ec2", "us-east-1") is not before[0]
    assert aws.client("ec2", "us-east-1", a) is not before[1]
