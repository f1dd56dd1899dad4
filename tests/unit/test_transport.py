"""The client's transport is chosen once, when the broker is made (``client.transport``)."""

from __future__ import annotations

from typing import Any

from capacity_broker.client import CapacityBroker
from capacity_broker.client.deployed import Deployed
from capacity_broker.client.in_process import InProcess


class _Payload:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def read(self) -> bytes:
        return self.body


class _Lambda:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def invoke(self, **call: Any) -> dict[str, Any]:
        self.calls.append(call)
        return {"Payload": _Payload(b'{"status": "ok"}')}


def test_a_direct_broker_runs_in_process_and_a_deployed_one_invokes() -> None:
    direct = CapacityBroker(["us-east-1"], cluster_id="demo")
    assert isinstance(direct.transport, InProcess)
    assert direct.mode == "direct"
    lam = _Lambda()
    deployed = CapacityBroker.deployed("cb-prod", lambda_client=lam, qualifier="live")
    assert isinstance(deployed.transport, Deployed)
    assert deployed.mode == "deployed"
    assert deployed.invoke("cleaner", {"dry_run": True}) == {"status": "ok"}
    assert [(c["FunctionName"], c["Qualifier"]) for c in lam.calls] == [("cb-prod-cleaner", "live")]
