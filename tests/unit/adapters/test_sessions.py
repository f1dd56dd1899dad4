"""Which session a client comes from: each ``Clients`` (a root's) has its own session and
keeps one client per service and region; two of them never share a client, whatever their
sessions. Making a client calls nothing."""

from __future__ import annotations

import threading
from typing import Any

import boto3
from capacity_broker.adapters.aws import Clients


def session(name: str) -> boto3.session.Session:
    return boto3.session.Session(
        aws_access_key_id=f"AKIA{name.upper():0<16}",
        aws_secret_access_key=name,
        region_name="us-east-1",
    )


def key_of(client: Any) -> str:
    return str(client._request_signer._credentials.access_key)


def test_one_session_and_one_client_per_service_and_region() -> None:
    clients = Clients()
    first = clients.client("ec2", "us-east-1")
    assert clients.client("ec2", "us-east-1") is first
    assert clients.client("ec2", "us-west-2") is not first
    assert clients.session is clients.session
    assert clients.made() == [("ec2", "us-east-1"), ("ec2", "us-west-2")]


def test_a_session_of_its_own_gets_its_own_clients() -> None:
    a, b = Clients(session("alpha")), Clients(session("bravo"))
    on_a = a.client("ec2", "us-east-1")
    on_b = b.client("ec2", "us-east-1")
    assert key_of(on_a) == "AKIAALPHA00000000000"
    assert key_of(on_b) == "AKIABRAVO00000000000"
    # kept, and making b's redirected nothing: neither a's nor one made without a session
    assert a.client("ec2", "us-east-1") is on_a
    default = Clients().client("ec2", "us-east-1")
    assert default not in (on_a, on_b)
    assert key_of(default) not in (key_of(on_a), key_of(on_b))


def test_threads_get_the_same_client() -> None:
    clients = Clients(session("alpha"))
    seen: list[Any] = []
    workers = [
        threading.Thread(target=lambda: seen.append(clients.client("ec2", "us-east-1")))
        for _ in range(8)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(seen) == 8 and all(c is seen[0] for c in seen)


def test_dropping_connections_keeps_every_client_and_the_session() -> None:
    clients = Clients(session("alpha"))
    before = clients.client("ec2", "us-east-1")
    kept = clients.session
    clients.drop_connections()
    assert clients.client("ec2", "us-east-1") is before
    assert clients.session is kept
