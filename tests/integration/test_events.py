"""Every sample event in events/ is answered by its entry point against the demo world."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EVENTS = sorted((Path(__file__).resolve().parents[2] / "events").glob("*.json"))
ENTRY_POINTS = ("probe", "reserve", "release", "cleaner", "capacity")


def entry_point(path: Path) -> str:
    return next(name for name in ENTRY_POINTS if path.stem.startswith(name))


def test_there_is_an_event_for_every_entry_point() -> None:
    assert {entry_point(p) for p in EVENTS} == set(ENTRY_POINTS)


@pytest.mark.parametrize("path", EVENTS, ids=lambda p: p.stem)
def test_the_sample_event_is_understood(
    path: Path, broker: Any, container: Any, context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROKER_CLUSTER_ID", "demo")
    container.rebuild()
    broker.load_scenario("demo")
    handler = importlib.import_module(f"capacity_broker.handlers.{entry_point(path)}").handler
    answer: dict[str, Any] = handler(json.loads(path.read_text()), context)
    assert answer["status"] not in ("invalid_request", "error"), answer
    json.dumps(answer)
