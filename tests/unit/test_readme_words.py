"""What the README says ``CapacityBroker()`` does is what it does (issue 42: the README said it
calls AWS directly, but after the README's own ``eval`` it invokes the functions)."""

from __future__ import annotations

from pathlib import Path

import pytest
from capacity_broker import CapacityBroker

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_the_readme_says_capacity_broker_reads_the_function_prefix() -> None:
    said = " ".join(README.split())
    assert "`CapacityBroker()` calls AWS directly" not in said
    assert (
        "`CapacityBroker()` reads `CAPACITY_BROKER_FUNCTION_PREFIX`: when it is set (the `eval` "
        "above sets it), its actions invoke those functions too" in said
    )
    assert "when it is not, it runs the functions' code in this process" in said


def test_capacity_broker_invokes_the_functions_when_the_prefix_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAPACITY_BROKER_FUNCTION_PREFIX", "capacity-broker-local")
    assert CapacityBroker(regions=["us-east-1"]).transport.mode == "deployed"
    monkeypatch.delenv("CAPACITY_BROKER_FUNCTION_PREFIX")
    assert CapacityBroker(regions=["us-east-1"]).transport.mode == "direct"
