"""The broker's handlers against the in-process emulator."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

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


@pytest.fixture(autouse=True)
def _only_documented_calls(request: pytest.FixtureRequest) -> Iterator[None]:
    """Realism by construction: every filter name, enum value and parameter sent to the EC2
    emulator in this test is one botocore's EC2 model documents for its operation. The
    emulator records each undocumented use (``emulator.documented.heard``), refused or not, so
    a refusal the broker swallowed (``except AwsError: continue``) still fails the test. A test
    that sends one on purpose says so: ``@pytest.mark.undocumented(operation, reason)``."""
    from emulator import documented

    on_purpose = {m.args[0] for m in request.node.iter_markers("undocumented")}
    documented.heard.take()
    yield
    undocumented = sorted(
        {
            (f.operation, f.kind, f.name, f.value or "")
            for f in documented.heard.take()
            if f.operation not in on_purpose
        }
    )
    if undocumented:
        pytest.fail(
            "sent to EC2 but not documented by botocore's model for the operation "
            "(emulator.documented): "
            + "; ".join(
                f"{op} {kind} {name!r}" + (f" = {value!r}" if value else "")
                for op, kind, name, value in undocumented
            )
        )


@pytest.fixture
def context() -> LambdaContext:
    return LambdaContext()


@pytest.fixture
def broker(emu: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The emulator plus a broker configured for CLUSTER, with no state left from other tests."""
    from capacity_broker.handlers._runtime import reset_container

    monkeypatch.setenv("BROKER_CLUSTER_ID", CLUSTER)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CapacityBroker")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.delenv("BROKER_PARAMETER_PREFIX", raising=False)
    monkeypatch.delenv("BROKER_REGIONS", raising=False)
    reset_container()
    yield emu
    reset_container()
