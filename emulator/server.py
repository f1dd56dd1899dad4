"""The emulator as a server on 127.0.0.1 that boto3 reaches through ``AWS_ENDPOINT_URL``.

moto's own WSGI application answers every AWS call (EC2 with the capacity extension, SSM,
CloudFormation, DynamoDB, ...). In front of it sit:

- ``/_emulator/...``: the control API (scenario, clock, knobs, call log, pools) as JSON,
  used by ``emulator.remote.RemoteEmulator``;
- optional extra routes (``capacity-broker local`` adds a Lambda ``Invoke`` endpoint);
- the hook that turns a "timeout" fault into a dropped connection.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

from . import install as installer
from .control import Emulator
from .state import world

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Route = Callable[[Request], Response | None]


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, default=_default), status=status, mimetype="application/json")


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


class ControlAPI:
    """``/_emulator/<verb>``: the operations of ``emulator.control.Emulator`` over HTTP."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator

    def __call__(self, request: Request) -> Response | None:
        if not request.path.startswith("/_emulator/"):
            return None
        verb = request.path.removeprefix("/_emulator/").strip("/")
        body = request.get_json(silent=True) or {}
        try:
            return self._dispatch(verb, request.method, body, request.args)
        except (KeyError, ValueError, TypeError) as error:
            return _json({"error": str(error)}, 400)

    def _dispatch(self, verb: str, method: str, body: dict[str, Any], args: Any) -> Response:
        emu = self.emulator
        if verb == "health":
            return _json({"ok": True, "now": emu.now()})
        if verb == "reset" and method == "POST":
            emu.reset()
            return _json({"ok": True})
        if verb == "scenario" and method == "POST":
            ids = emu.load_scenario(body.get("scenario") or body["path"])
            return _json(ids.to_dict())
        if verb == "clock":
            if method == "POST":
                if "advance" in body:
                    emu.advance(float(body["advance"]))
                if "set" in body:
                    emu.set_time(datetime.fromisoformat(body["set"]))
                if body.get("freeze"):
                    emu.freeze()
                if body.get("reset"):
                    emu.reset_clock()
            return _json({"now": emu.now()})
        if verb == "settings" and method == "POST":
            emu.configure(**body)
            return _json(asdict(world.settings))
        if verb == "latency" and method == "POST":
            emu.latency(float(body.get("seconds", 0)), body.get("actions"))
            return _json({"ok": True})
        if verb == "throttle" and method == "POST":
            buckets = {k: tuple(v) for k, v in (body.get("buckets") or {}).items()} or None
            emu.throttle(
                bool(body.get("enabled", True)),
                buckets,  # type: ignore[arg-type]
                body.get("groups"),
                float(body.get("time_scale", 1.0)),
                float(body.get("raised", 1.0)),
                body.get("others"),
                bool(body.get("emulator_clock", False)),
            )
            return _json({"ok": True})
        if verb == "faults":
            if method == "DELETE":
                emu.clear_faults()
                return _json({"ok": True})
            if method == "POST":
                spec = dict(body)
                fault = emu.fail(spec.pop("action"), spec.pop("code", None), **spec)
                return _json(asdict(fault))
        if verb == "calls":
            if method == "DELETE":
                emu.clear_calls()
                return _json({"ok": True})
            calls = emu.calls(args.get("action"), args.get("service", "ec2"))
            return _json([asdict(c) for c in calls])
        if verb == "pools":
            region = body.get("region") or args.get("region", "us-east-1")
            if method == "POST":
                emu.set_pool(
                    region, body["availability_zone"], body["instance_type"], body.get("capacity")
                )
            pools = emu.capacity(region).pools.values()
            return _json([asdict(p) | {"available": p.available} for p in pools])
        return _json({"error": f"unknown control call {method} {verb}"}, 404)


class Application:
    """moto's WSGI app behind the control API, extra routes and connection drops."""

    def __init__(self, emulator: Emulator, routes: Iterable[Route] = ()) -> None:
        self.moto = DomainDispatcherApplication(create_backend_app)
        self.routes: list[Route] = [ControlAPI(emulator), *routes]

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        for route in self.routes:
            response = route(request)
            if response is not None:
                return response(environ, start_response)
        installer.drop_connection.flag = False
        result = self.moto(environ, start_response)
        if getattr(installer.drop_connection, "flag", False):
            installer.drop_connection.flag = False
            # The action took effect; the caller must not hear back (a timeout after EC2
            # received the request). Closing the socket makes botocore retry.
            sock = environ.get("werkzeug.socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            return [b""]
        return result


class QuietHandler(MotoRequestHandler):
    """No access log: the demo and the CLI print what matters themselves."""

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Server:
    """A threaded server on 127.0.0.1; ``port=0`` picks a free port."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        routes: Iterable[Route] = (),
        quiet: bool = True,
    ) -> None:
        installer.install()
        world.mode = "server"
        self.emulator = Emulator()
        self._server: BaseWSGIServer = make_server(
            host,
            port,
            Application(self.emulator, routes),
            threaded=True,
            request_handler=QuietHandler if quiet else MotoRequestHandler,
        )
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Server:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
