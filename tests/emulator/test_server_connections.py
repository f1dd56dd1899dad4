"""The served emulator's connections (``emulator.server._Handler``): kept open between requests,
as AWS's endpoints keep them and botocore pools them, so a client's calls after its first set up
no connection. werkzeug's server closed each after one answer: in the SnapStart class of 200 the
state table's emulator accepted a connection and started a thread for every call
(docs/performance.md)."""

from __future__ import annotations

import http.client
import json
import socketserver
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from emulator.server import Server


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Server, list[object]]]:
    """A server, and the connections it accepted (counted where the socket server accepts)."""
    accepted: list[object] = []
    accept = socketserver.TCPServer.get_request

    def counted(self: Any) -> Any:
        request = accept(self)
        accepted.append(request)
        return request

    monkeypatch.setattr(socketserver.TCPServer, "get_request", counted)
    with Server() as server:
        yield server, accepted


def _client(server: Server, service: str, **config: Any) -> Any:
    client: Any = boto3.client  # (any service by its name)
    return client(
        service,
        region_name="us-east-1",
        endpoint_url=server.endpoint,
        config=Config(retries={"mode": "standard", "max_attempts": 3}, **config),
    )


def _connection(server: Server) -> http.client.HTTPConnection:
    host, port = server.endpoint.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=10)


def test_one_client_s_calls_share_one_connection(served: tuple[Server, list[object]]) -> None:
    server, accepted = served
    table = _client(server, "dynamodb")
    answers = [table.list_tables() for _ in range(3)]
    ec2 = _client(server, "ec2")
    answers.append(ec2.describe_regions())
    answers.append(ec2.describe_regions())
    # One connection per client, as against AWS: none closed after its answer.
    assert len(accepted) == 2
    assert server.accepted == 2
    for answer in answers:
        headers = answer["ResponseMetadata"]["HTTPHeaders"]
        assert headers.get("connection", "").lower() != "close"


def test_without_keep_alive_each_call_has_its_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Server(keep_alive=False) as server:
        table = _client(server, "dynamodb")
        for _ in range(3):
            answer = table.list_tables()
            assert answer["ResponseMetadata"]["HTTPHeaders"]["connection"] == "close"
        assert server.accepted == 3


def test_a_dropped_connection_is_a_timeout_and_is_not_used_again(
    served: tuple[Server, list[object]],
) -> None:
    """The "timeout" fault drops the connection after EC2 acted: the client hears nothing on
    it, retries on a new one, and the calls after go on that new one."""
    server, accepted = served
    ec2 = _client(server, "ec2")
    ec2.describe_regions()
    assert len(accepted) == 1
    server.emulator.fail("DescribeRegions", mode="timeout", times=1)
    answer = ec2.describe_regions()
    assert answer["ResponseMetadata"]["RetryAttempts"] == 1
    assert len(accepted) == 2
    ec2.describe_regions()
    ec2.describe_regions()
    assert len(accepted) == 2
    outcomes = [call.outcome for call in server.emulator.calls("DescribeRegions")]
    assert outcomes.count("timeout") == 1


def test_a_body_the_answer_did_not_read_does_not_become_the_next_request(
    served: tuple[Server, list[object]],
) -> None:
    """The door refuses a request without reading its body; the next request on the same
    connection is read from where that body ends."""
    server, accepted = served
    connection = _connection(server)
    body = json.dumps({"advance": 5}) + " " * 5000
    connection.request("POST", "/_emulator/clock", body=body, headers={"Host": "evil.example"})
    refused = connection.getresponse()
    assert refused.status == 403
    refused.read()
    connection.request("GET", "/_emulator/health")
    health = connection.getresponse()
    assert health.status == 200
    assert json.loads(health.read())["ok"] is True
    assert health.getheader("Connection") is None
    assert len(accepted) == 1
    connection.close()


def test_a_request_whose_end_is_not_known_closes_its_connection(
    served: tuple[Server, list[object]],
) -> None:
    """A chunked body, and a client that says ``Connection: close``: answered, then closed."""
    server, _ = served
    chunked = _connection(server)
    chunked.request("POST", "/_emulator/clock", body=iter([b'{"advance"', b": 1}"]))
    answer = chunked.getresponse()
    assert answer.status == 200
    assert answer.getheader("Connection") == "close"
    assert "now" in json.loads(answer.read())
    chunked.close()
    closing = _connection(server)
    closing.request("GET", "/_emulator/health", headers={"Connection": "close"})
    answer = closing.getresponse()
    assert answer.status == 200
    assert answer.getheader("Connection") == "close"
    answer.read()
    closing.close()


def test_stopping_the_server_ends_its_kept_connections() -> None:
    server = Server().start()
    connection = _connection(server)
    connection.request("GET", "/_emulator/health")
    connection.getresponse().read()
    server.stop()
    connection.request("GET", "/_emulator/health")
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        connection.getresponse()
    connection.close()
