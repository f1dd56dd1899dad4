"""The broker's handlers against the in-process emulator."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from capacity_broker.config import Settings
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.root import Root

CLUSTER = "demo-cluster"


@dataclass
class LambdaContext:
    """Enough of Lambda's context object for the handlers."""

    function_name: str = "capacity-broker-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = (
        "arn:aws:lambda:us-east-1:123456789012:function:capacity-broker-test"
    )
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    remaining_ms: int = 30_000
    log_group_name: str = "/aws/lambda/test"
    log_stream_name: str = "test"
    extra: dict[str, Any] = field(default_factory=dict)

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def context() -> LambdaContext:
    return LambdaContext()


class Container:
    """The Lambda container the handlers run in, in a test (``CONTAINER``). Fresh, its root is
    built from the test's environment on the first invocation, as a new Lambda container
    builds it; ``build`` makes one now with the test's own clocks, sleep, retry policy or
    pacer. Either way the handlers serve from that root until the test ends."""

    def __init__(self) -> None:
        self.knobs: dict[str, Any] = {}

    @property
    def root(self) -> Root:
        """The root the handlers run on (built now from the environment if not yet)."""
        return CONTAINER.root()

    def fresh(self) -> None:
        """A new container: its root is built from the environment on first use."""
        self.close()
        self.knobs = {}

    def build(self, **knobs: Any) -> Root:
        self.close()
        self.knobs = knobs
        root = Root(Settings.from_env(os.environ), **knobs)
        CONTAINER.use(root)
        return root

    def rebuild(self, **more: Any) -> None:
        """A new container after the test changed a variable, with the knobs of the last
        ``build`` (and ``more``)."""
        knobs = self.knobs | more
        if knobs:
            self.build(**knobs)
        else:
            self.fresh()

    def close(self) -> None:
        previous = CONTAINER.use(None)
        if previous is not None:
            previous.close()


@pytest.fixture
def container() -> Iterator[Container]:
    built = Container()
    yield built
    built.close()


@pytest.fixture
def broker(emu: Any, monkeypatch: pytest.MonkeyPatch, container: Container) -> Iterator[Any]:
    """The emulator plus a broker configured for CLUSTER, on a root of its own."""
    monkeypatch.setenv("BROKER_CLUSTER_ID", CLUSTER)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CapacityBroker")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.delenv("BROKER_PARAMETER_PREFIX", raising=False)
    monkeypatch.delenv("BROKER_REGIONS", raising=False)
    container.fresh()
    yield emu
    container.close()
