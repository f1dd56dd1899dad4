"""The Lambda container's roots (handlers/_runtime.py): the shared one, built from the
environment, and a function's own (``capacity-broker local`` serves each function as its own
role, as Lambda runs each in a container of its own)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.metrics import MetricUnit
from capacity_broker.client import InProcessContext
from capacity_broker.config import Settings
from capacity_broker.handlers._runtime import (
    CONTAINER,
    Container,
    Invocation,
    Output,
    lambda_handler,
    observability,
)
from capacity_broker.root import Root


def root_of(cluster_id: str) -> Root:
    return Root(Settings.from_env({"BROKER_CLUSTER_ID": cluster_id}))


def test_a_function_without_a_root_of_its_own_is_served_the_shared_one() -> None:
    container = Container({"BROKER_CLUSTER_ID": "shared"})
    shared = container.root()
    assert container.root_for("probe") is shared
    own = root_of("own")
    assert container.use(own, function="probe") is None
    assert container.root_for("probe") is own
    assert container.root_for("reserve") is shared  # the others keep the shared root
    assert container.root() is shared
    assert container.built is shared


def test_a_functions_root_is_replaced_and_removed_on_its_own() -> None:
    container = Container({"BROKER_CLUSTER_ID": "shared"})
    first, second = root_of("first"), root_of("second")
    container.use(first, function="probe")
    assert container.use(second, function="probe") is first
    assert container.root_for("probe") is second
    # A new shared root leaves the function's own in place...
    container.use(root_of("other shared"))
    assert container.root_for("probe") is second
    # ...and removing the function's own serves it the shared one again.
    assert container.use(None, function="probe") is second
    assert container.root_for("probe").settings.cluster_id == "other shared"
    assert container.use(None, function="probe") is None


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("BROKER_CLUSTER_ID", "shared")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    CONTAINER.use(None)
    yield
    for name in ("first", "second"):
        CONTAINER.use(None, function=name)
    CONTAINER.use(None)


def test_each_handler_serves_its_functions_own_root(served: None) -> None:
    """``lambda_handler(name, ...)`` runs on ``CONTAINER.root_for(name)``: the function's own
    root when it has one, the container's otherwise."""

    def run(event: Any, invocation: Invocation, out: Output) -> dict[str, Any]:
        out.metrics.add_metric(name="Served", unit=MetricUnit.Count, value=1)
        return {"status": "ok", "cluster_id": invocation.settings.cluster_id}

    handlers = {
        name: lambda_handler(name, run, *observability(f"test-{name}"))
        for name in ("first", "second")
    }

    def cluster(name: str) -> str:
        answer = handlers[name]({"request_id": f"r-{name}"}, InProcessContext(name))
        assert answer["status"] == "ok", answer
        return str(answer["cluster_id"])

    assert (cluster("first"), cluster("second")) == ("shared", "shared")
    CONTAINER.use(root_of("first's own"), function="first")
    assert (cluster("first"), cluster("second")) == ("first's own", "shared")
    CONTAINER.use(None, function="first")
    assert cluster("first") == "shared"


def test_a_cold_containers_long_lived_objects_are_kept_out_of_collections(
    served: None,
) -> None:
    """A root built from the environment (a cold container) moves what is alive then out of
    the cyclic collector's way (the imports), and again after its first invocation (the API
    models, clients and caches it made); serving a new root gives them back. Before this, a
    cold probe's first invocation spent 0.2-0.3 s of its 0.5 s of CPU walking them
    (``make bench``: probe, cold container)."""
    import gc

    kept: list[list[int]] = []

    def run(event: Any, invocation: Invocation, out: Output) -> dict[str, Any]:
        # Made during the first invocation, alive after it (as a client or a cache is).
        kept.extend([i] for i in range(1000))
        return {"status": "ok"}

    handler = lambda_handler("kept", run, *observability("test-kept"))
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    CONTAINER.root()
    at_build = gc.get_freeze_count()
    assert at_build > 0
    assert handler({"request_id": "r-kept"}, InProcessContext("kept"))["status"] == "ok"
    assert len(kept) == 1000
    assert gc.get_freeze_count() >= at_build + 1000
    CONTAINER.use(None)
    assert gc.get_freeze_count() == 0
