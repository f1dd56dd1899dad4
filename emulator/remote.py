"""Drive an emulator server from another process (demo, CLI, benchmarks)."""

from __future__ import annotations

import json
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from . import scenario as scenarios


class RemoteEmulator:
    """The control API of ``emulator.server`` with the method names of ``Emulator``."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint.rstrip("/")

    def _call(self, verb: str, method: str = "GET", body: Any = None, query: str = "") -> Any:
        data = None if body is None else json.dumps(body, default=str).encode()
        request = urllib.request.Request(  # noqa: S310 - a local http endpoint we started
            f"{self.endpoint}/_emulator/{verb}{query}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return json.loads(response.read() or b"null")

    def reset(self) -> None:
        self._call("reset", "POST", {})

    def load_scenario(self, source: str | Path | dict[str, Any]) -> dict[str, dict[str, str]]:
        result: dict[str, dict[str, str]] = self._call(
            "scenario", "POST", {"scenario": scenarios.read(source)}
        )
        return result

    def now(self) -> datetime:
        return datetime.fromisoformat(self._call("clock")["now"])

    def advance(self, seconds: float) -> datetime:
        return datetime.fromisoformat(self._call("clock", "POST", {"advance": seconds})["now"])

    def freeze(self) -> datetime:
        """Stop the emulator's clock where it is; ``advance`` still moves it."""
        return datetime.fromisoformat(self._call("clock", "POST", {"freeze": True})["now"])

    def reset_clock(self) -> datetime:
        return datetime.fromisoformat(self._call("clock", "POST", {"reset": True})["now"])

    def configure(self, **settings: Any) -> None:
        self._call("settings", "POST", settings)

    def latency(self, seconds: float, actions: dict[str, float] | None = None) -> None:
        self._call("latency", "POST", {"seconds": seconds, "actions": actions})

    def throttle(self, enabled: bool = True, **options: Any) -> None:
        self._call("throttle", "POST", {"enabled": enabled, **options})

    def fail(self, action: str, code: str | None = None, **options: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "faults", "POST", {"action": action, "code": code, **options}
        )
        return result

    def clear_faults(self) -> None:
        self._call("faults", "DELETE")

    def calls(self, action: str | None = None, service: str = "ec2") -> list[dict[str, Any]]:
        query = f"?service={service}" + (f"&action={action}" if action else "")
        result: list[dict[str, Any]] = self._call("calls", query=query)
        return result

    def clear_calls(self) -> None:
        self._call("calls", "DELETE")

    def dynamodb_bill(self) -> dict[str, Any]:
        """DynamoDB's capacity units so far (``Emulator.dynamodb_bill``)."""
        result: dict[str, Any] = self._call("dynamodb-bill")
        return result

    def clear_dynamodb_bill(self) -> None:
        self._call("dynamodb-bill", "DELETE")

    def pools(self, region: str = "us-east-1") -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("pools", query=f"?region={region}")
        return result

    def set_pool(
        self, region: str, availability_zone: str, instance_type: str, capacity: int | None
    ) -> None:
        self._call(
            "pools",
            "POST",
            {
                "region": region,
                "availability_zone": availability_zone,
                "instance_type": instance_type,
                "capacity": capacity,
            },
        )
