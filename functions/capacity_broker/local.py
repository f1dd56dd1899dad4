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

The response follows botocore's Lambda model: the payload as the body, ``X-Amz-Function-Error:
Unhandled`` when the function raised, ``X-Amz-Executed-Version``, 202 for ``Event`` and 204 for
``DryRun`` invocations, and 404 ``ResourceNotFoundException`` for an unknown function.
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
    ) -> None:
        self.prefix = prefix
        self.region = region
        self.timeout_ms = timeout_ms
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
    """

    def __init__(
        self,
        scenario: str | Path | Mapping[str, Any] | None = None,
        port: int = 0,
        prefix: str = DEFAULT_PREFIX,
        cluster_id: str = DEFAULT_CLUSTER_ID,
        region: str = DEFAULT_REGION,
        regions: Sequence[str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.scenario = scenario
        self.port = port
        self.prefix = prefix
        self.cluster_id = cluster_id
        self.region = region
        self.regions = list(regions or ())
        self.host = host
        self.route = LambdaInvoke(prefix, region)
        # As deployed: the functions keep request records and the capacity memory in a table
        # (``capacity-broker history`` reads it).
        self.state_table = state_table_name(prefix)
        self.server: Any = None
        self.scenario_ids: dict[str, dict[str, str]] = {}
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
        self.server = server.Server(
            host=self.host,
            port=self.port,
            routes=[self.route],
            # the control API may load this file again by name (no other file)
            scenario=self.scenario if isinstance(self.scenario, (str, Path)) else None,
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
            self.scenario_ids = self.server.emulator.load_scenario(data).to_dict()
        self.server.start()
        make_state_table(self.state_table, self.region, self.endpoint)
        return self

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
