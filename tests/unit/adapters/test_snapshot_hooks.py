"""Lambda SnapStart's runtime hooks (handlers/_runtime.py): what goes into the snapshot (the
API models of the container root's session, nothing unique, no connection) and what each
restored environment renews."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from capacity_broker.handlers import _runtime
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.root import FIRST_CLIENTS, FIRST_CLIENTS_DEFAULT


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # A container of the test's own: its root (and session) built from this environment, and
    # gone afterwards (it has no emulator behind it).
    monkeypatch.setenv("BROKER_CLUSTER_ID", "snapshots")
    CONTAINER.use(None)
    yield
    CONTAINER.use(None)


def parsed_models(session: boto3.session.Session) -> set[str]:
    """The API models the session's loader has parsed and keeps."""
    loader = session._session.get_component("data_loader")
    return {
        str(key[1]).split("/")[0]
        for key in loader._cache
        if key[0] == "load_data_with_path" and str(key[1]).endswith("/service-2")
    }


def test_before_snapshot_parses_the_models_without_a_client_or_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    _runtime.before_snapshot()
    root = CONTAINER.built
    assert root is not None  # the hook built the container's root (no AWS call)
    session = root.clients.session
    assert parsed_models(session) >= {"ec2", "ssm"}
    assert root.clients.made() == []  # no client, so no connection in the snapshot
    # The client made after the restore reuses the parsed model: no file read for it.
    files = session._session.get_component("data_loader").file_loader
    reads: list[str] = []
    original = files.load_file

    def counting(path: str) -> Any:
        found = original(path)
        if found is not None:  # (botocore also looks for optional files that do not exist)
            reads.append(str(path))
        return found

    monkeypatch.setattr(files, "load_file", counting)
    ec2 = root.clients.client("ec2", "us-east-1")
    ssm = root.clients.client("ssm", "us-east-1")
    # The API model, the endpoint rules and the partitions' endpoints are in the session:
    # the client made after the restore reads no data file at all, nor do its paginators
    # (the flags' read pages with one).
    ec2.get_paginator("describe_subnets")
    ssm.get_paginator("get_parameters_by_path")
    assert reads == []
    listed = session._session.get_component("data_loader").list_available_services
    monkeypatch.setattr(files, "exists", lambda path: pytest.fail(f"looked for {path}"))
    assert "ec2" in listed("service-2")  # (the services' list is kept too: no directory scan)


def test_before_snapshot_with_settings_that_cannot_run_does_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", "fast")
    _runtime.before_snapshot()  # no import error, no exception: the invocation answers it
    assert CONTAINER.built is None


def test_after_restore_reseeds_random_and_drops_clients_made_before() -> None:
    root = CONTAINER.root()
    before = root.clients.client("ec2", "us-east-1")
    random.seed(42)
    snapshotted = random.getstate()
    _runtime.after_restore()
    # Two environments restored from one snapshot must not draw the same numbers.
    assert random.getstate() != snapshotted
    assert root.clients.client("ec2", "us-east-1") is not before


def test_hooks_register_with_lambdas_library_when_present(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered: dict[str, Callable[[], None]] = {}
    library = types.ModuleType("snapshot_restore_py")
    library.register_before_snapshot = lambda f: registered.setdefault("before", f)  # type: ignore[attr-defined]
    library.register_after_restore = lambda f: registered.setdefault("after", f)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", library)
    assert _runtime.register_snapshot_hooks() is True
    assert registered == {"before": _runtime.before_snapshot, "after": _runtime.after_restore}


def test_without_lambdas_library_there_is_nothing_to_register(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import raises ImportError
    assert _runtime.register_snapshot_hooks() is False


def test_a_containers_first_invocation_makes_its_clients_once_on_a_thread() -> None:
    clients = CONTAINER.root().clients
    warming = clients.warm_first(FIRST_CLIENTS["probe"], "eu-west-1")
    assert warming is not None
    warming.join()
    made = clients.made()
    # The flags' client first (the first call), then EC2's.
    assert made == [("ssm", "eu-west-1"), ("ec2", "eu-west-1")]
    # Later invocations find them made; a new container (root) warms again.
    assert clients.warm_first(FIRST_CLIENTS["probe"], "eu-west-1") is None
    CONTAINER.use(None)
    other = CONTAINER.root().clients
    assert other is not clients
    warming = other.warm_first(FIRST_CLIENTS_DEFAULT, "eu-west-1")
    assert warming is not None
    warming.join()
    assert other.made() == [("ec2", "eu-west-1")]


def test_a_probe_that_meets_in_the_table_makes_dynamodbs_client_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a state table a probe's first call is its arrival at the table: DynamoDB's client
    is made first (clients are made one at a time, and an arrival behind SSM's client started
    the lone probe's EC2 client later), then the flags' client; EC2's only once the probe
    knows it asks EC2 (not a member). Without a table, the flags' client and EC2's."""
    assert CONTAINER.root().first_clients("probe") == FIRST_CLIENTS["probe"]
    CONTAINER.use(None)
    monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
    root = CONTAINER.root()
    assert root.first_clients("probe") == ("dynamodb", "ssm")
    assert root.first_clients("reserve") == FIRST_CLIENTS["reserve"]
    CONTAINER.use(None)
    monkeypatch.setenv("BROKER_PROBE_GROUPING", "false")
    assert CONTAINER.root().first_clients("probe") == FIRST_CLIENTS["probe"]


def test_with_a_state_table_the_snapshot_holds_dynamodbs_model_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A cold probe's first calls with a state table are DynamoDB's (the shared EC2 budget's
    # leases, the probes' meeting): its model is parsed before the snapshot as EC2's is.
    monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
    _runtime.before_snapshot()
    root = CONTAINER.built
    assert root is not None
    assert set(root.snapshot_services()) == {"ssm", "ec2", "dynamodb"}
    assert parsed_models(root.clients.session) >= {"ssm", "ec2", "dynamodb"}
    assert root.clients.made() == []


def test_without_a_state_table_the_snapshot_holds_the_first_clients_models() -> None:
    root = CONTAINER.root()
    firsts = {s for services in FIRST_CLIENTS.values() for s in services}
    assert set(root.snapshot_services()) == firsts | set(FIRST_CLIENTS_DEFAULT)
    assert "dynamodb" not in root.snapshot_services()
