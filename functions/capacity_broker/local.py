"""``capacity-broker local``: the whole broker on 127.0.0.1, no AWS account, no Docker.

One server answers both:

- the capacity emulator (moto's server app: EC2 with Capacity Reservations and Blocks, SSM,
  CloudFormation, DynamoDB, and the emulator's ``/_emulator`` control API), and
- a Lambda endpoint (``Invoke``: ``POST /2015-03-31/functions/<name>/invocations``;
  ``ListFunctions``, ``GetFunction``, ``GetFunctionConfiguration``) for the five functions
  ``<prefix>-probe``, ``-reserve``, ``-release``, ``-cleaner``, ``-capacity``, which run in this
  process with ``BROKER_CLUSTER_ID`` set and ``AWS_ENDPOINT_URL`` pointing back at the same
  server: invocations that arrive together run at once, each in a container of its own (a
  root), up to a stated concurrency, as Lambda runs them (``LambdaInvoke``).

So a scheduler's own ``boto3.client("lambda").invoke(FunctionName="<prefix>-probe", ...)`` and
``CapacityBroker.deployed(...)`` work unchanged once ``AWS_ENDPOINT_URL`` is exported.

Only requests addressed to the server's own ``127.0.0.1:<port>`` get in (``emulator.server.
Door``): a web page cannot call it, through DNS rebinding or from another origin, and the
control API loads no scenario file but the bundled ones and the one it was started with.

IAM as deployed (``iam=True``, the default): as Lambda runs each function in a container of
its own with its execution role's credentials, each local function is served from a root of
its own (``handlers._runtime.Container.use``) whose session is signed with that function's
role session, and the emulator decides every such call under that role's policies,
synthesized from ``infra/`` for this cluster (``emulator.iam``): what a deployed function may
not do answers ``UnauthorizedOperation`` here too. The cluster id is the scenario's
``cluster_id`` (the one its launch templates are tagged for) unless one is given.

The response follows botocore's Lambda model: the payload as the body, ``X-Amz-Function-Error:
Unhandled`` when the function raised, ``X-Amz-Executed-Version``, 202 for ``Event`` and 204 for
``DryRun`` invocations, 404 ``ResourceNotFoundException`` for an unknown function, 429
``TooManyRequestsException`` beyond the concurrency, and ``X-Amz-Log-Result`` (the last 4 KB of
the invocation's log, base64) for ``LogType=Tail``.

SnapStart (``SnapStart``, ``--snapstart-asleep``/``--snapstart-timeouts``): the functions may
answer as a SnapStart version Lambda is waking up does. For ``asleep_seconds`` of the
emulator's clock from the start every invoke is refused 409 ``SnapStartNotReadyException``
(a version not invoked for 14 days, or recycled, re-initializes); then the next
``restore_timeouts`` invokes are refused 408 ``SnapStartTimeoutException`` (a restore that did
not finish in time). Neither runs the function, as in Lambda. On the emulator's clock, so a
test freezes it and wakes the version by moving it, whatever the machine's speed.
"""

from __future__ import annotations

import base64
import importlib
import json
import logging
import math
import os
import platform
import re
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .client import ENTRY_POINTS, EntryPointUnavailable, invoke_in_process

DEFAULT_PREFIX = "capacity-broker-local"
DEFAULT_CLUSTER_ID = "local"
DEFAULT_REGION = "us-east-1"
DEFAULT_PORT = 5055
ACCOUNT_ID = "123456789012"  # moto's default account
# Lambda's payload limit for synchronous invocations.
MAX_PAYLOAD = 6 * 1024 * 1024
_INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations/?$")
_FUNCTIONS = "/2015-03-31/functions"
_FUNCTION_PATH = re.compile(
    r"^/2015-03-31/functions/(?P<name>[^/]+)(?P<configuration>/configuration)?/?$"
)
# Lambda's default quota of concurrent executions per account and Region ("Lambda quotas").
DEFAULT_CONCURRENCY = 1000
# What the functions are told they have (the in-process context's memory size).
LOCAL_MEMORY_MB = 1024
# LogType=Tail: "the last 4 KB of the execution log" (Invoke, API Reference).
TAIL_BYTES = 4096
_ARN = re.compile(
    r"^arn:aws[a-z-]*:lambda:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):function:"
    r"(?P<name>[A-Za-z0-9_-]+)(?::(?P<qualifier>[A-Za-z0-9$_-]+))?$"
)
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}


def state_table_name(prefix: str) -> str:
    """The local state table: what the stack's ``StateTableName`` output names when deployed."""
    return f"{prefix}-state"


def make_state_table(name: str, region: str, endpoint: str) -> None:
    """The broker's state table as the stack makes it (``infra/state.py``): key ``id``, items
    expiring at ``expiration``. Request records and the capacity memory live there."""
    import boto3

    dynamodb = boto3.client("dynamodb", region_name=region, endpoint_url=endpoint)
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"},
    )


def function_names(prefix: str) -> dict[str, str]:
    """Function name → entry point."""
    return {f"{prefix}-{entry}": entry for entry in ENTRY_POINTS}


# Lambda's words (Invoke, Errors: "Lambda is initializing your function. You can invoke the
# function when the function state becomes Active." and "Lambda couldn't restore the snapshot
# within the timeout limit.").
NOT_READY_MESSAGE = (
    "Lambda is initializing your function. You can invoke the function when the function "
    "state becomes Active."
)
RESTORE_TIMEOUT_MESSAGE = "Lambda couldn't restore the snapshot within the timeout limit."


class SnapStart:
    """How the local functions answer as a SnapStart version waking up (module docstring).
    ``now`` gives the emulator's clock (seconds); ``start()`` puts the version to sleep."""

    def __init__(self, asleep_seconds: float = 0.0, restore_timeouts: int = 0) -> None:
        if asleep_seconds < 0 or restore_timeouts < 0:
            raise ValueError("SnapStart: asleep_seconds and restore_timeouts must be >= 0")
        self.asleep_seconds = asleep_seconds
        self.restore_timeouts = restore_timeouts
        self._lock = threading.Lock()
        self._wakes_at: float | None = None
        self._timeouts_left = restore_timeouts
        self._now: Any = None

    @property
    def on(self) -> bool:
        return self.asleep_seconds > 0 or self.restore_timeouts > 0

    def start(self, now: Any) -> None:
        with self._lock:
            self._now = now
            self._wakes_at = now() + self.asleep_seconds
            self._timeouts_left = self.restore_timeouts

    def refusal(self) -> tuple[int, str, str] | None:
        """The refusal this invoke gets (status, Lambda's error type, message), or None."""
        with self._lock:
            if self._wakes_at is None or self._now is None:
                return None
            if self._now() < self._wakes_at:
                return 409, "SnapStartNotReadyException", NOT_READY_MESSAGE
            if self._timeouts_left > 0:
                self._timeouts_left -= 1
                return 408, "SnapStartTimeoutException", RESTORE_TIMEOUT_MESSAGE
        return None


def _error(status: int, error_type: str, message: str, reason: str | None = None) -> Any:
    from werkzeug.wrappers import Response

    body = {"Type": "User", "Message": message, "message": message}
    if reason is not None:
        body["Reason"] = reason
    return Response(
        json.dumps(body),
        status=status,
        mimetype="application/json",
        headers={"x-amzn-ErrorType": error_type},
    )


class LambdaInvoke:
    """The Lambda routes: ``route(request)`` answers ``Invoke``, ``GetFunction``,
    ``GetFunctionConfiguration`` and ``ListFunctions`` for the local functions, ``None``
    otherwise.

    Each function runs as Lambda runs it: an invocation is served by a container of the
    function's that is free, and a new container starts when none is, up to ``concurrency``
    containers at once (Lambda's account limit is 1,000 concurrent executions by default);
    beyond it an invocation is throttled (429 ``TooManyRequestsException``), as Lambda throttles
    it. A container is a root of its own (``make_root``), kept for the invocations that follow:
    so 20 probes sent at once are 20 containers answering together, and they group through the
    state table as deployed ones do.
    """

    def __init__(
        self,
        prefix: str = DEFAULT_PREFIX,
        region: str = DEFAULT_REGION,
        timeout_ms: int = 300_000,
        snapstart: SnapStart | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency: at least 1")
        self.prefix = prefix
        self.region = region
        self.timeout_ms = timeout_ms
        self.snapstart = snapstart or SnapStart()
        self.concurrency = concurrency
        self.functions = function_names(prefix)
        # Entry point -> a new container's root (None: the root the process serves it from).
        self.make_root: Callable[[str], Any] = lambda _entry: None
        self._lock = threading.Lock()
        self._idle: dict[str, list[_Container]] = {name: [] for name in self.functions}
        self._running = 0  # invocations under way, every function (the account's concurrency)
        self.invocations: list[tuple[str, str]] = []  # (function name, invocation type)
        self._background: list[threading.Thread] = []
        self._tail = _Tail()

    def arn(self, name: str) -> str:
        return f"arn:aws:lambda:{self.region}:{ACCOUNT_ID}:function:{name}"

    def forget_containers(self) -> None:
        """Stop every idle container: the next invocations start new ones (with the roots
        ``make_root`` makes now, e.g. with a reset world's new role sessions)."""
        with self._lock:
            for idle in self._idle.values():
                idle.clear()

    def resolve(self, raw: str, qualifier: str | None) -> str | None:
        """A function name, partial or full ARN (optionally ``:qualifier``) → its name."""
        name = unquote(raw)
        match = _ARN.match(name)
        if match:
            name, qualifier = match["name"], match["qualifier"] or qualifier
        elif name.count(":") == 1 and not name.startswith("arn:"):
            name, qualifier = name.split(":", 1)
        elif ":function:" in name:  # partial ARN: 123456789012:function:name
            name = name.split(":function:", 1)[1].split(":", 1)[0]
        if qualifier not in (None, "", "$LATEST"):
            return None  # the local functions have no versions or aliases
        return name if name in self.functions else None

    def __call__(self, request: Any) -> Any:
        if request.path.rstrip("/") == _FUNCTIONS and request.method == "GET":
            return self._list(request)
        match = _FUNCTION_PATH.match(request.path)
        if match is not None and request.method == "GET":
            return self._get(request, match["name"], configuration=bool(match["configuration"]))
        match = _INVOKE_PATH.match(request.path)
        if match is None:
            return None
        if request.method != "POST":
            return _error(405, "InvalidRequestContentException", "Invoke is a POST")
        name = self.resolve(match["name"], request.args.get("Qualifier"))
        if name is None:
            return _not_found(self.arn(unquote(match["name"])))
        return self._invoke(request, name)

    # -- GetFunction, GetFunctionConfiguration, ListFunctions --------------------------------
    def configuration(self, name: str) -> dict[str, Any]:
        """The function's ``FunctionConfiguration`` (Lambda API Reference): what runs it here."""
        entry = self.functions[name]
        return {
            "FunctionName": name,
            "FunctionArn": self.arn(name),
            "Runtime": f"python{sys.version_info.major}.{sys.version_info.minor}",
            "Handler": f"capacity_broker.handlers.{entry}.handler",
            # "The function's execution role": the one the emulator makes for it, named as the
            # function (emulator.iam, ``LocalBroker(iam=True)``), which its calls are signed as.
            "Role": f"arn:aws:iam::{ACCOUNT_ID}:role/{name}",
            "Description": f"capacity-broker {entry} (served by capacity-broker local)",
            "Timeout": self.timeout_ms // 1000,
            "MemorySize": LOCAL_MEMORY_MB,
            "Version": "$LATEST",
            "State": "Active",
            "LastUpdateStatus": "Successful",
            "PackageType": "Zip",
            "Architectures": [platform_architecture()],
        }

    def _get(self, request: Any, raw: str, configuration: bool) -> Any:
        from werkzeug.wrappers import Response

        name = self.resolve(raw, request.args.get("Qualifier"))
        if name is None:
            return _not_found(self.arn(unquote(raw)))
        body: dict[str, Any] = self.configuration(name)
        if not configuration:
            body = {
                "Configuration": body,
                "Concurrency": {"ReservedConcurrentExecutions": self.concurrency},
            }
        return Response(json.dumps(body), status=200, mimetype="application/json")

    def _list(self, request: Any) -> Any:
        from werkzeug.wrappers import Response

        names = sorted(self.functions)
        try:
            # ListFunctions' Marker is the token of the previous page (ours: the next index).
            start = int(request.args.get("Marker") or 0)
            size = int(request.args.get("MaxItems") or 50)
        except ValueError:
            return _error(400, "InvalidParameterValueException", "Invalid Marker or MaxItems")
        if not 1 <= size <= 10_000:
            return _error(400, "InvalidParameterValueException", "MaxItems: 1 to 10000")
        body: dict[str, Any] = {
            "Functions": [self.configuration(n) for n in names[start : start + size]]
        }
        if start + size < len(names):
            body["NextMarker"] = str(start + size)
        return Response(json.dumps(body), status=200, mimetype="application/json")

    # -- Invoke ---------------------------------------------------------------------------
    def _invoke(self, request: Any, name: str) -> Any:
        from werkzeug.wrappers import Response

        body = request.get_data(cache=False)
        if len(body) > MAX_PAYLOAD:
            return _error(
                413,
                "RequestTooLargeException",
                f"Request must be smaller than {MAX_PAYLOAD} bytes for the InvokeFunction "
                "operation",
            )
        try:
            event = json.loads(body) if body.strip() else {}
        except ValueError:
            return _error(
                400,
                "InvalidRequestContentException",
                "Could not parse request body into json: the payload is not valid JSON",
            )
        kind = request.headers.get("X-Amz-Invocation-Type", "RequestResponse")
        refused = self.snapstart.refusal()
        if refused is not None:
            self.invocations.append((name, refused[1]))
            return _error(*refused)
        self.invocations.append((name, kind))
        if kind == "DryRun":
            return Response(status=204, headers={"X-Amz-Executed-Version": "$LATEST"})
        if kind == "Event":
            # Lambda queues an asynchronous invocation and runs it when it can.
            worker = threading.Thread(
                target=self._queued, args=(name, event), daemon=True, name=f"event-{name}"
            )
            self._background = [t for t in self._background if t.is_alive()] + [worker]
            worker.start()
            return Response(status=202, headers={"X-Amz-Executed-Version": "$LATEST"})
        container = self._start(name)
        if container is None:
            return _error(
                429,
                "TooManyRequestsException",
                f"Rate Exceeded. (capacity-broker local runs {self.concurrency} invocations "
                "at once: --concurrency)",
                reason="ConcurrentInvocationLimitExceeded",
            )
        request_id = str(uuid.uuid4())
        payload, failed, log = self._run(name, event, container, request_id)
        headers = {"X-Amz-Executed-Version": "$LATEST", "x-amzn-RequestId": request_id}
        if failed:
            headers["X-Amz-Function-Error"] = "Unhandled"
        if request.headers.get("X-Amz-Log-Type") == "Tail":
            # "The last 4 KB of the execution log, which is base64-encoded" (Invoke, LogResult).
            headers["X-Amz-Log-Result"] = base64.b64encode(log.encode()[-TAIL_BYTES:]).decode()
        return Response(payload, status=200, mimetype="application/json", headers=headers)

    def wait(self, timeout: float = 30.0) -> None:
        """Let asynchronous (``Event``) invocations finish."""
        for worker in list(self._background):
            worker.join(timeout)

    def _start(self, name: str) -> _Container | None:
        """A free container of ``name``'s (a new one if none is); None when ``concurrency``
        invocations already run (Lambda throttles this one)."""
        with self._lock:
            if self._running >= self.concurrency:
                return None
            self._running += 1
            idle = self._idle[name]
            if idle:
                return idle.pop()
        try:
            return _Container(self.make_root(self.functions[name]))
        except Exception:
            with self._lock:
                self._running -= 1
            raise

    def _queued(self, name: str, event: Any) -> None:
        # An asynchronous invocation throttled waits in Lambda's queue and is retried.
        while (container := self._start(name)) is None:
            threading.Event().wait(0.05)
        self._run(name, event, container, str(uuid.uuid4()))

    def _run(
        self, name: str, event: Any, container: _Container, request_id: str
    ) -> tuple[bytes, bool, str]:
        entry = self.functions[name]
        lines = [f"START RequestId: {request_id} Version: $LATEST"]
        started = time.monotonic()
        self._tail.follow(entry)
        self._tail.start()
        from .handlers._runtime import CONTAINER

        try:
            with CONTAINER.serving_from(container.root):
                answer = invoke_in_process(
                    entry, event, name, self.region, self.timeout_ms, ACCOUNT_ID, request_id
                )
            result = json.dumps(answer).encode(), False
        except EntryPointUnavailable as error:
            result = _failure("Runtime.ImportModuleError", str(error), []), True
        except Exception as error:  # noqa: BLE001 - reported as Lambda reports it
            stack = traceback.format_tb(error.__traceback__)
            result = _failure(type(error).__name__, str(error), stack), True
        finally:
            lines += self._tail.stop()
            with self._lock:
                self._running -= 1
                self._idle[name].append(container)
        took = (time.monotonic() - started) * 1000
        lines += [
            f"END RequestId: {request_id}",
            f"REPORT RequestId: {request_id}\tDuration: {took:.2f} ms\tBilled Duration: "
            f"{math.ceil(took)} ms\tMemory Size: {LOCAL_MEMORY_MB} MB",
        ]
        return result[0], result[1], "\n".join(lines) + "\n"


class _Container:
    """One local container of a function: the root its invocations are served from."""

    def __init__(self, root: Any) -> None:
        self.root = root


class _Tail(logging.Handler):
    """The log lines of the invocation this thread runs, as the function writes them (its
    loggers' own format): what ``LogType=Tail`` returns. On the functions' loggers, beside
    their own handlers; lines of other threads (another invocation's) are not this one's."""

    def __init__(self) -> None:
        super().__init__()
        self._lines = threading.local()
        self._followed: set[str] = set()

    def follow(self, entry: str) -> None:
        """Hear the loggers of entry point ``entry`` (its module's Powertools logger, the
        library's), once each."""
        for logger_name in (entry, "capacity_broker"):
            if logger_name in self._followed:
                continue
            logger = logging.getLogger(logger_name)
            logger.addHandler(self)
            self._followed.add(logger_name)

    def start(self) -> None:
        self._lines.items = []

    def stop(self) -> list[str]:
        items: list[str] = getattr(self._lines, "items", None) or []
        self._lines.items = None
        return items

    def emit(self, record: logging.LogRecord) -> None:
        items = getattr(self._lines, "items", None)
        if items is None:
            return
        logger = logging.getLogger(record.name)
        formatter = next(
            (h.formatter for h in logger.handlers if h is not self and h.formatter), None
        )
        try:
            items.append(formatter.format(record) if formatter else record.getMessage())
        except Exception:  # noqa: BLE001 - a line that cannot be formatted is left out
            return


def _not_found(arn: str) -> Any:
    return _error(404, "ResourceNotFoundException", f"Function not found: {arn}")


def platform_architecture() -> str:
    """Lambda's name for this machine's architecture (``x86_64`` or ``arm64``)."""
    return "arm64" if platform.machine().lower() in ("arm64", "aarch64") else "x86_64"


def _failure(kind: str, message: str, stack: list[str]) -> bytes:
    return json.dumps(
        {"errorMessage": message, "errorType": kind, "requestId": "", "stackTrace": stack}
    ).encode()


class LocalBroker:
    """The emulator and the five functions on one local endpoint.

    ``start()`` sets this process's environment for the in-process functions
    (``AWS_ENDPOINT_URL``, ``BROKER_CLUSTER_ID``, region, fake credentials when none are set);
    ``stop()`` puts it back.

    ``cluster_id``: the functions' cluster; ``None`` is the scenario's ``cluster_id``, else
    ``local``. ``iam``: the functions call AWS as their deployed roles and the emulator
    evaluates those roles' policies (module docstring).
    """

    def __init__(
        self,
        scenario: str | Path | Mapping[str, Any] | None = None,
        port: int = 0,
        prefix: str = DEFAULT_PREFIX,
        cluster_id: str | None = None,
        region: str = DEFAULT_REGION,
        regions: Sequence[str] | None = None,
        host: str = "127.0.0.1",
        iam: bool = True,
        snapstart: SnapStart | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        self.scenario = scenario
        self.port = port
        self.prefix = prefix
        self.cluster_id = cluster_id or DEFAULT_CLUSTER_ID
        self._cluster_id_given = cluster_id is not None
        self.iam = iam
        self.region = region
        self.regions = list(regions or ())
        self.host = host
        self.route = LambdaInvoke(prefix, region, snapstart=snapstart, concurrency=concurrency)
        self.route.make_root = self._container_root
        # As deployed: the functions keep request records and the capacity memory in a table
        # (``capacity-broker history`` reads it).
        self.state_table = state_table_name(prefix)
        self.server: Any = None
        self._saved_env: dict[str, str | None] = {}

    @property
    def endpoint(self) -> str:
        if self.server is None:
            raise RuntimeError("the local broker is not started")
        return str(self.server.endpoint)

    @property
    def function_names(self) -> list[str]:
        return list(self.route.functions)

    def start(self) -> LocalBroker:
        # The emulator is the optional "emulator" extra (moto): imported only here.
        scenarios = importlib.import_module("emulator.scenario")
        server = importlib.import_module("emulator.server")
        data: dict[str, Any] | None = None
        if isinstance(self.scenario, Mapping):
            data = dict(self.scenario)
        elif self.scenario:
            data = scenarios.read(self.scenario)
        regions = self.regions or sorted((data or {}).get("regions") or {}) or [self.region]
        self.regions = regions
        declared = (data or {}).get("cluster_id")
        if declared and not self._cluster_id_given:
            self.cluster_id = str(declared)
        self.server = server.Server(
            host=self.host,
            port=self.port,
            routes=[self.route],
            # the control API may load this file again by name (no other file)
            scenario=self.scenario if isinstance(self.scenario, (str, Path)) else None,
            # a fresh world (the control API's reset) makes the roles again, with new sessions
            after_reset=self._serve_roles if self.iam else None,
        )
        self._environment(
            {
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_REGION": self.region,
                "AWS_DEFAULT_REGION": self.region,
                "BROKER_CLUSTER_ID": self.cluster_id,
                "BROKER_REGIONS": ",".join(regions),
                "BROKER_STATE_TABLE": self.state_table,
                # EMF lines on the server's stdout would only be noise locally.
                "POWERTOOLS_METRICS_DISABLED": os.environ.get(
                    "POWERTOOLS_METRICS_DISABLED", "true"
                ),
            }
            | {k: v for k, v in FAKE_CREDENTIALS.items() if not os.environ.get(k)}
        )
        # A fresh world every start (moto keeps its backends per process).
        self.server.emulator.reset()
        if data is not None:
            self.server.emulator.load_scenario(data)
        if self.iam:
            self._use_roles()
        self.server.start()
        make_state_table(self.state_table, self.region, self.endpoint)
        # Asleep from now, on the emulator's clock (a test may freeze it and move it).
        clock = importlib.import_module("emulator.state").world.clock
        self.route.snapstart.start(lambda: clock.now().timestamp())
        return self

    def _use_roles(self) -> None:
        """The functions' roles in the emulator, and each function served as its role."""
        self.server.emulator.enforce_roles(
            self.cluster_id,
            function_prefix=self.prefix,
            region=self.region,
            regions=self.regions,
            state_table=self.state_table,
        )
        self._serve_roles()

    def _serve_roles(self) -> None:
        """Each function served from a root of its own, built from this environment (as a
        Lambda container builds it) with a session signed by the function's role session (as
        Lambda hands a function its execution role's credentials). Settings that cannot make
        a root: none, and the shared root answers each invocation the error, as deployed. The
        containers already started stop: the next invocations start new ones, whose roots
        sign with the roles' sessions of now (a reset world makes new ones)."""
        from .handlers._runtime import CONTAINER

        self.route.forget_containers()
        for entry in ENTRY_POINTS:
            CONTAINER.use(self._container_root(entry), function=entry)

    def _container_root(self, entry: str) -> Any:
        """A new container's root for entry point ``entry``: built from this environment,
        its session signed as the function's role when the emulator enforces roles; None when
        the settings cannot make one (the shared root answers the error, as deployed)."""
        import boto3

        from .config import InvalidConfiguration, Settings
        from .root import Root

        try:
            settings = Settings.from_env(os.environ)
        except InvalidConfiguration:
            return None
        credentials = None
        if self.iam and self.server is not None:
            credentials = self.server.emulator.role_credentials(entry)
        if credentials is None:
            return Root(settings) if not self.iam else None
        key, secret, token = credentials
        session = boto3.session.Session(
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            aws_session_token=token,
            region_name=self.region,
        )
        return Root(settings, session=session)

    def _forget_roles(self) -> None:
        from .handlers._runtime import CONTAINER

        for entry in ENTRY_POINTS:
            CONTAINER.use(None, function=entry)

    def _environment(self, values: Mapping[str, str]) -> None:
        from .handlers._runtime import CONTAINER

        for key, value in values.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value
        # The functions build their root (settings, clients) from this environment on first use.
        CONTAINER.use(None)

    def stop(self) -> None:
        if self.server is not None:
            self.route.wait()
            self.server.stop()
            self.server.emulator.reset()
            self.server = None
        self._forget_roles()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        from .handlers._runtime import CONTAINER

        CONTAINER.use(None)

    def serve_forever(self) -> None:
        """Block until interrupted (the server already runs in its own thread)."""
        stop = threading.Event()
        try:
            stop.wait()
        finally:
            self.stop()

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
