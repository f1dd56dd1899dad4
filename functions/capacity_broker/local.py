"""``capacity-broker local``: the whole broker on 127.0.0.1, no AWS account, no Docker.

One server answers both:

- the capacity emulator (moto's server app: EC2 with Capacity Reservations and Blocks, SSM,
  CloudFormation, DynamoDB, and the emulator's ``/_emulator`` control API), and
- a Lambda ``Invoke`` endpoint (``POST /2015-03-31/functions/<name>/invocations``) for the five
  functions ``<prefix>-probe``, ``-reserve``, ``-release``, ``-cleaner``, ``-capacity``, which
  run in this process with ``BROKER_CLUSTER_ID`` set and ``AWS_ENDPOINT_URL`` pointing back
  at the same server.

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
``DryRun`` invocations, and 404 ``ResourceNotFoundException`` for an unknown function.

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
import os
import re
import threading
import traceback
from collections.abc import Mapping, Sequence
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


def _error(status: int, error_type: str, message: str) -> Any:
    from werkzeug.wrappers import Response

    return Response(
        json.dumps({"Type": "User", "Message": message, "message": message}),
        status=status,
        mimetype="application/json",
        headers={"x-amzn-ErrorType": error_type},
    )


class LambdaInvoke:
    """The Invoke route: ``route(request)`` answers Lambda invocations, ``None`` otherwise."""

    def __init__(
        self,
        prefix: str = DEFAULT_PREFIX,
        region: str = DEFAULT_REGION,
        timeout_ms: int = 300_000,
        snapstart: SnapStart | None = None,
    ) -> None:
        self.prefix = prefix
        self.region = region
        self.timeout_ms = timeout_ms
        self.snapstart = snapstart or SnapStart()
        self.functions = function_names(prefix)
        # One invocation at a time per function, as one warm Lambda container would run it.
        self._locks = {name: threading.Lock() for name in self.functions}
        self.invocations: list[tuple[str, str]] = []  # (function name, invocation type)
        self._background: list[threading.Thread] = []

    def arn(self, name: str) -> str:
        return f"arn:aws:lambda:{self.region}:{ACCOUNT_ID}:function:{name}"

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
        match = _INVOKE_PATH.match(request.path)
        if match is None:
            return None
        from werkzeug.wrappers import Response

        if request.method != "POST":
            return _error(405, "InvalidRequestContentException", "Invoke is a POST")
        name = self.resolve(match["name"], request.args.get("Qualifier"))
        if name is None:
            return _error(
                404,
                "ResourceNotFoundException",
                f"Function not found: {self.arn(unquote(match['name']))}",
            )
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
            worker = threading.Thread(
                target=self._run, args=(name, event), daemon=True, name=f"event-{name}"
            )
            self._background = [t for t in self._background if t.is_alive()] + [worker]
            worker.start()
            return Response(status=202, headers={"X-Amz-Executed-Version": "$LATEST"})
        payload, failed = self._run(name, event)
        headers = {"X-Amz-Executed-Version": "$LATEST"}
        if failed:
            headers["X-Amz-Function-Error"] = "Unhandled"
        if request.headers.get("X-Amz-Log-Type") == "Tail":
            headers["X-Amz-Log-Result"] = base64.b64encode(b"").decode()
        return Response(payload, status=200, mimetype="application/json", headers=headers)

    def wait(self, timeout: float = 30.0) -> None:
        """Let asynchronous (``Event``) invocations finish."""
        for worker in list(self._background):
            worker.join(timeout)

    def _run(self, name: str, event: Any) -> tuple[bytes, bool]:
        entry = self.functions[name]
        with self._locks[name]:
            try:
                answer = invoke_in_process(
                    entry, event, name, self.region, self.timeout_ms, ACCOUNT_ID
                )
                return json.dumps(answer).encode(), False
            except EntryPointUnavailable as error:
                return _failure("Runtime.ImportModuleError", str(error), []), True
            except Exception as error:  # noqa: BLE001 - reported as Lambda reports it
                return (
                    _failure(
                        type(error).__name__,
                        str(error),
                        traceback.format_tb(error.__traceback__),
                    ),
                    True,
                )


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
        self.route = LambdaInvoke(prefix, region, snapstart=snapstart)
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
        a root: none, and the shared root answers each invocation the error, as deployed."""
        import boto3

        from .config import InvalidConfiguration, Settings
        from .handlers._runtime import CONTAINER
        from .root import Root

        try:
            settings = Settings.from_env(os.environ)
        except InvalidConfiguration:
            self._forget_roles()
            return
        for entry in ENTRY_POINTS:
            credentials = self.server.emulator.role_credentials(entry)
            if credentials is None:
                CONTAINER.use(None, function=entry)
                continue
            key, secret, token = credentials
            session = boto3.session.Session(
                aws_access_key_id=key,
                aws_secret_access_key=secret,
                aws_session_token=token,
                region_name=self.region,
            )
            CONTAINER.use(Root(settings, session=session), function=entry)

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
