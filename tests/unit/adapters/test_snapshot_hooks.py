"""Lambda SnapStart's runtime hooks (handlers/_runtime.py): what goes into the snapshot (the
API models of the container root's session, nothing unique, no connection) and what each
restored environment renews."""

from __future__ import annotations

import http.server
import random
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import NoCredentialsError
from capacity_broker.adapters import aws as aws_adapter
from capacity_broker.domain.errors import is_retryable
from capacity_broker.handlers import _runtime
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.root import FIRST_CLIENTS, FIRST_CLIENTS_DEFAULT, FLOW_MODULES


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # A container of the test's own: its root (and session) built from this environment, and
    # gone afterwards (it has no emulator behind it).
    monkeypatch.setenv("BROKER_CLUSTER_ID", "snapshots")
    CONTAINER.use(None)
    yield
    CONTAINER.use(None)


def parsed_models(session: botocore.session.Session) -> set[str]:
    """The API models the (botocore) session's loader has parsed and keeps."""
    loader = session.get_component("data_loader")
    return {
        str(key[1]).split("/")[0]
        for key in loader._cache
        if key[0] == "load_data_with_path" and str(key[1]).endswith("/service-2")
    }


def open_connections(client: Any) -> int:
    """How many open connections a client's pools keep (botocore's urllib3 pool managers)."""
    http = client._endpoint.http_session
    managers = [http._manager, *http._proxy_managers.values()]
    return sum(
        1
        for manager in managers
        for key in manager.pools.keys()  # noqa: SIM118 - urllib3's container refuses iteration
        for connection in list(manager.pools[key].pool.queue)
        if connection is not None and connection.sock is not None
    )


@pytest.fixture
def ec2_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A loopback HTTP endpoint that answers every call with an EC2 answer of no zones, kept
    alive: real connections, which the in-process emulator does not open. It yields the
    ``Authorization`` headers of the calls it answered."""
    signed: list[str] = []

    class Answer(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            signed.append(self.headers.get("Authorization", ""))
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = (
                b'<DescribeAvailabilityZonesResponse xmlns="http://ec2.amazonaws.com/doc/'
                b'2016-11-15/"><requestId>r</requestId><availabilityZoneInfo/>'
                b"</DescribeAvailabilityZonesResponse>"
            )
            self.send_response(200)
            self.send_header("Content-Type", "text/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    yield signed
    server.shutdown()
    server.server_close()


def test_before_snapshot_parses_the_models_and_makes_the_first_clients_calling_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
    sent: list[str] = []
    monkeypatch.setattr(
        "botocore.endpoint.Endpoint._send",
        lambda self, request: sent.append(request.url) or pytest.fail("a call before the snapshot"),
    )
    _runtime.before_snapshot()
    root = CONTAINER.built
    assert root is not None  # the hook built the container's root (no AWS call)
    session = root.clients.session
    assert parsed_models(session) >= {"ec2", "ssm", "dynamodb"}
    region = root.settings.region
    # Every first client of every entry, in the settings' region: a restored environment's
    # first invocation makes none of them (``warm_first`` finds them made).
    assert set(root.clients.made()) == {(s, region) for s in root.snapshot_services()}
    # ... and no connection is in the snapshot: nothing was called, no pool was opened.
    assert sent == []
    for service in root.snapshot_services():
        assert open_connections(root.clients.client(service, region)) == 0
    # The flows' modules are imported (the root imports them on first use otherwise).
    for module in FLOW_MODULES:
        assert f"capacity_broker{module}" in sys.modules
    # No flow is built: a flow's objects hold what must differ between restored environments.
    assert root._built == {}
    # The clients read no data file after the restore, nor do their paginators (the flags'
    # read pages with one).
    files = session.get_component("data_loader").file_loader
    reads: list[str] = []
    original = files.load_file

    def counting(path: str) -> Any:
        found = original(path)
        if found is not None:  # (botocore also looks for optional files that do not exist)
            reads.append(str(path))
        return found

    monkeypatch.setattr(files, "load_file", counting)
    root.clients.client("ec2", region).get_paginator("describe_subnets")
    root.clients.client("ssm", region).get_paginator("get_parameters_by_path")
    root.clients.client("ec2", "eu-west-1")  # (another region's client: the models are kept)
    assert reads == []
    listed = session.get_component("data_loader").list_available_services
    monkeypatch.setattr(files, "exists", lambda path: pytest.fail(f"looked for {path}"))
    assert "ec2" in listed("service-2")  # (the services' list is kept too: no directory scan)


def test_the_clients_made_before_the_snapshot_read_credentials_after_the_restore(
    monkeypatch: pytest.MonkeyPatch, ec2_endpoint: list[str]
) -> None:
    """Credentials read before the snapshot would be shared by every environment restored
    from it, and would expire: the clients made before it read none, and sign their first
    call after the restore with the credentials found then."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASNAPSHOTTIME000")  # (the init phase's)
    _runtime.before_snapshot()
    root = CONTAINER.built
    assert root is not None
    region = root.settings.region
    ec2 = root.clients.client("ec2", region)
    assert ("ec2", region) in root.clients.made()
    # The restored environment's credentials (Lambda's, read on the first call).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIARESTOREDAFTER01")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "restored-secret")
    _runtime.after_restore()
    assert ec2.describe_availability_zones()["AvailabilityZones"] == []
    assert len(ec2_endpoint) == 1 and "Credential=AKIARESTOREDAFTER01/" in ec2_endpoint[0]


def test_the_clients_made_before_the_snapshot_fail_as_any_client_without_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    _runtime.before_snapshot()
    root = CONTAINER.built
    assert root is not None
    with pytest.raises(NoCredentialsError) as raised:
        root.clients.client("ec2", root.settings.region).describe_availability_zones()
    # In the broker's words: nothing was sent, so neither a timeout nor retried.
    error = aws_adapter.AwsError.wrap("DescribeAvailabilityZones", raised.value)
    assert error.error_code == aws_adapter.CREDENTIALS_UNAVAILABLE
    assert not is_retryable(error.error_class)


def test_a_session_that_read_its_credentials_already_makes_no_client_ahead() -> None:
    """botocore keeps the credentials a session read, and a client made then would hold them:
    none is made ahead (the clients are made after the restore, as without the hook)."""
    root = CONTAINER.root()
    assert root.clients.session.get_credentials() is not None  # (read before the hook)
    root.prime()
    assert root.clients.made() == []


def test_credentials_read_after_the_restore_expire_when_theirs_do_or_within_the_hour() -> None:
    """What the clients made ahead read on first use is renewed: refreshable credentials (the
    container's) when they expire, static ones an hour later; the account id is kept."""
    from datetime import UTC, datetime, timedelta

    from botocore.credentials import Credentials, RefreshableCredentials

    class Found:
        METHOD = "found"

        def __init__(self, credentials: Any) -> None:
            self.credentials = credentials

        def load(self) -> Any:
            return self.credentials

    ends = datetime.now(UTC) + timedelta(hours=6)
    refreshable = RefreshableCredentials(
        "AKIACONTAINER000001", "s", "t", ends, lambda: {}, "container-role", account_id="1234"
    )
    metadata = aws_adapter._AfterRestore([Found(refreshable)])._fetch()
    assert metadata["access_key"] == "AKIACONTAINER000001" and metadata["account_id"] == "1234"
    assert datetime.fromisoformat(metadata["expiry_time"]) == ends
    static = Credentials("AKIASTATIC000000001", "s", "t")
    metadata = aws_adapter._AfterRestore([Found(static)])._fetch()
    expiry = datetime.fromisoformat(metadata["expiry_time"]) - datetime.now(UTC)
    assert aws_adapter.STATIC_RENEWAL - timedelta(minutes=1) < expiry <= aws_adapter.STATIC_RENEWAL
    with pytest.raises(NoCredentialsError):
        aws_adapter._AfterRestore([Found(None)])._fetch()


def test_before_snapshot_with_settings_that_cannot_run_does_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", "fast")
    _runtime.before_snapshot()  # no import error, no exception: the invocation answers it
    assert CONTAINER.built is None


@pytest.mark.usefixtures("ec2_endpoint")
def test_after_restore_reseeds_random_and_closes_the_connections_made_before() -> None:
    root = CONTAINER.root()
    before = root.clients.client("ec2", "us-east-1")
    before.describe_availability_zones()
    assert open_connections(before) > 0  # a connection the snapshot would hold
    random.seed(42)
    snapshotted = random.getstate()
    _runtime.after_restore()
    # Two environments restored from one snapshot must not draw the same numbers.
    assert random.getstate() != snapshotted
    # ... nor share a connection: the client stays, its pools are emptied, and its next call
    # opens a connection of its own.
    assert root.clients.client("ec2", "us-east-1") is before
    assert open_connections(before) == 0
    assert before.describe_availability_zones()["AvailabilityZones"] == []
    assert open_connections(before) > 0


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
    # A cold probe's first call with a state table is DynamoDB's (the probes' meeting): its
    # model is parsed before the snapshot as EC2's is.
    monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
    _runtime.before_snapshot()
    root = CONTAINER.built
    assert root is not None
    assert set(root.snapshot_services()) == {"ssm", "ec2", "dynamodb"}
    assert parsed_models(root.clients.session) >= {"ssm", "ec2", "dynamodb"}


def test_without_a_state_table_the_snapshot_holds_the_first_clients_models() -> None:
    root = CONTAINER.root()
    firsts = {s for services in FIRST_CLIENTS.values() for s in services}
    assert set(root.snapshot_services()) == firsts | set(FIRST_CLIENTS_DEFAULT)
    assert "dynamodb" not in root.snapshot_services()


def test_prime_imports_every_module_the_root_imports_on_first_use() -> None:
    """``FLOW_MODULES`` is the list ``Root.prime`` imports before a snapshot; every module the
    root imports on a flow's first use (inside its methods) must be loaded once they are, or a
    restored environment imports it on its first invocation again. (In a process of its own:
    this one has imported everything already.)"""
    import ast
    import subprocess
    from pathlib import Path

    from capacity_broker import root as root_module

    tree = ast.parse(Path(root_module.__file__).read_text())
    lazy = sorted(
        {
            f"capacity_broker.{node.module}"
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef)
            for node in ast.walk(function)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        }
    )
    assert lazy, "the root imports nothing lazily: the test reads the wrong file"
    script = (
        "import importlib, sys\n"
        "from capacity_broker import root\n"
        "for module in root.FLOW_MODULES:\n"
        "    importlib.import_module(module, 'capacity_broker')\n"
        f"print(sorted(set({lazy!r}) - set(sys.modules)))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]"
