"""The local server's door (``emulator.server.Door``): only what addresses it by its own
loopback address and port gets in. A web page cannot call it, neither by pointing its own
name at 127.0.0.1 (DNS rebinding) nor from another origin (a ``text/plain`` POST or an
``<img>`` GET needs no CORS preflight); and the control API reads no file but the bundled
scenarios and the one the server was started with."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from capacity_broker.local import LocalBroker

pytestmark = pytest.mark.integration

PREFIX = "capacity-broker-local"
INVOKE = f"/2015-03-31/functions/{PREFIX}-probe/invocations"
PROBE = {"instance_type": "g6.xlarge", "subnet_ids": ["subnet-0d1a0000000000e1a"]}
# A scenario file of the user's that no request may name: a template only it makes.
PRIVATE = {
    "regions": {
        "us-east-1": {
            "launch_templates": [{"name": "read-from-a-file", "data": {"InstanceType": "m5.large"}}]
        }
    }
}


@pytest.fixture
def local() -> Iterator[LocalBroker]:
    with LocalBroker(scenario="discovery", cluster_id="discovery-cluster") as broker:
        yield broker


def send(
    endpoint: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One raw HTTP request, headers exactly as given (``Host`` included)."""
    address = urlsplit(endpoint)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        data = {"raw": raw.decode(errors="replace")}
    return response.status, data if isinstance(data, dict) else {"data": data}


def own_host(local: LocalBroker) -> str:
    return urlsplit(local.endpoint).netloc


def subnets(local: LocalBroker) -> list[str]:
    ec2 = boto3.client("ec2", endpoint_url=local.endpoint, region_name="us-east-1")
    return sorted(s["SubnetId"] for s in ec2.describe_subnets()["Subnets"])


def templates(local: LocalBroker) -> list[str]:
    ec2 = boto3.client("ec2", endpoint_url=local.endpoint, region_name="us-east-1")
    found = ec2.describe_launch_templates()["LaunchTemplates"]
    return [t["LaunchTemplateName"] for t in found]


def test_a_page_behind_dns_rebinding_cannot_invoke_a_function(local: LocalBroker) -> None:
    # A page on http://rebind.example:<port>/ whose name now resolves to 127.0.0.1: its
    # fetch(..., {method: "POST", body}) is a "simple" text/plain request, no preflight.
    port = urlsplit(local.endpoint).port
    status, answer = send(
        local.endpoint,
        "POST",
        INVOKE,
        json.dumps(PROBE).encode(),
        {"Host": f"rebind.example:{port}", "Content-Type": "text/plain;charset=UTF-8"},
    )
    assert status == 403
    assert "rebind.example" in answer["message"] and own_host(local) in answer["message"]
    assert local.route.invocations == []
    # the same for the emulator's own API and the control API
    for method, path in (
        ("GET", "/?Action=DescribeCapacityReservations"),
        ("GET", "/_emulator/health"),
    ):
        assert (
            send(local.endpoint, method, path, None, {"Host": f"rebind.example:{port}"})[0] == 403
        )


def test_a_page_of_another_origin_cannot_call_it(local: LocalBroker) -> None:
    body = json.dumps(PROBE).encode()
    host = own_host(local)
    for origin in ("http://127.0.0.1:8888", "https://evil.example", "null"):
        status, answer = send(
            local.endpoint,
            "POST",
            INVOKE,
            body,
            {"Host": host, "Origin": origin, "Content-Type": "text/plain"},
        )
        assert status == 403, origin
        assert origin in answer["message"]
    # A page's form (enctype=text/plain) that wipes the world: even were its Origin left
    # out, browsers say where a request comes from.
    reservations = subnets(local)
    status, _ = send(
        local.endpoint,
        "POST",
        "/_emulator/reset",
        b"x=y",
        {"Host": host, "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
    )
    assert status == 403
    assert local.route.invocations == []
    assert subnets(local) == reservations != []


def test_its_own_address_gets_in(local: LocalBroker) -> None:
    port = urlsplit(local.endpoint).port
    for host in (own_host(local), f"localhost:{port}"):
        for extra in ({}, {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}):
            status, answer = send(
                local.endpoint,
                "POST",
                INVOKE,
                json.dumps(PROBE).encode(),
                {"Host": host, "Content-Type": "application/json", **extra},
            )
            assert (status, answer["status"]) == (200, "available"), (host, extra, answer)
    # the user's own browser, typing the address (Sec-Fetch-Site: none)
    status, _ = send(
        local.endpoint, "GET", "/_emulator/health", None, {"Host": host, "Sec-Fetch-Site": "none"}
    )
    assert status == 200
    assert send(local.endpoint, "GET", "/_emulator/health", None, {})[0] == 403  # no Host


def scenario_post(local: LocalBroker, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return send(
        local.endpoint,
        "POST",
        "/_emulator/scenario",
        json.dumps(body).encode(),
        {"Host": own_host(local), "Content-Type": "application/json"},
    )


def test_the_scenario_endpoint_reads_no_file_a_request_names(
    local: LocalBroker, tmp_path: Path
) -> None:
    private = tmp_path / "private.json"
    private.write_text(json.dumps(PRIVATE))
    for body in (
        {"scenario": str(private)},
        {"path": str(private)},
        {"scenario": "/etc/hostname"},
        {"scenario": "../scenarios/demo"},
        {"scenario": "demo.yaml/../demo"},
    ):
        status, answer = scenario_post(local, body)
        assert status == 403, body
        assert "only a bundled scenario" in answer["error"]
    assert "read-from-a-file" not in templates(local)
    # what RemoteEmulator sends (the content) and a bundled one's name still load
    status, ids = scenario_post(local, {"scenario": PRIVATE})
    assert status == 200 and "read-from-a-file" in ids["launch_templates"]
    status, ids = scenario_post(local, {"scenario": "demo"})
    assert status == 200 and ids["subnets"]


def test_the_file_it_was_started_with_loads_again_by_name(tmp_path: Path) -> None:
    started = tmp_path / "world.json"
    started.write_text(json.dumps(PRIVATE))
    other = tmp_path / "other.json"
    other.write_text(json.dumps(PRIVATE))
    with LocalBroker(scenario=str(started)) as local:
        for name in (str(started), str(started.resolve())):
            local.server.emulator.reset()
            assert scenario_post(local, {"path": name})[0] == 200
            assert templates(local) == ["read-from-a-file"]
        local.server.emulator.reset()
        assert scenario_post(local, {"scenario": str(other)})[0] == 403
        assert templates(local) == []


def test_it_serves_only_on_a_loopback_address() -> None:
    from emulator.server import Server

    for host in ("0.0.0.0", "localhost.example"):  # noqa: S104 - the refused case
        with pytest.raises(ValueError, match="loopback"):
            Server(host=host)
