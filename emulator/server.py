"""The emulator as a server on 127.0.0.1 that boto3 reaches through ``AWS_ENDPOINT_URL``.

moto's own WSGI application answers every AWS call (EC2 with the capacity extension, SSM,
CloudFormation, DynamoDB, ...). In front of it sit:

- the door (``Door``): only requests addressed to this server's own loopback address and
  port, and not sent by a web page of another origin, get in (403 otherwise);
- ``/_emulator/...``: the control API (scenario, clock, knobs, call log, pools) as JSON,
  used by ``emulator.remote.RemoteEmulator``;
- optional extra routes (``capacity-broker local`` adds a Lambda ``Invoke`` endpoint);
- the hook that turns a "timeout" fault into a dropped connection.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, ThreadedWSGIServer
from werkzeug.wrappers import Request, Response

from . import install as installer
from . import scenario as scenarios
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


class Refused(Exception):
    """A request this server does not serve to anyone (403)."""


class Door:
    """Who may talk to the server: whoever addresses it by its own loopback address and port.

    A web page cannot call it: a page that points its own domain at 127.0.0.1 (DNS
    rebinding) sends its domain as ``Host``; a page on another origin, even another local
    port, sends its ``Origin`` (and browsers a ``Sec-Fetch-Site`` other than ``same-origin``
    or ``none``, also on the ``GET``s an ``<img>`` makes). botocore, the CLI and ``curl`` send
    the endpoint's own host and port and none of those headers. ``localhost`` is let in with
    the port: no page can make a browser send it for its own domain.
    """

    def __init__(self) -> None:
        self.hosts: frozenset[str] = frozenset()  # none until ``listen``: everything refused

    def listen(self, host: str, port: int) -> None:
        address = f"[{host}]" if ":" in host else host
        self.hosts = frozenset({f"{address}:{port}", f"localhost:{port}"})

    def refusal(self, environ: dict[str, Any]) -> str | None:
        """Why the request is refused, or ``None``."""
        host = str(environ.get("HTTP_HOST", "")).lower()
        mine = " or ".join(sorted(self.hosts)) or "(not listening)"
        if host not in self.hosts:
            return (
                f"refused: Host {host!r} is not this local server ({mine}); a web page that "
                "resolves its own name to 127.0.0.1 sends that name"
            )
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and str(origin).lower() != f"http://{host}":
            return f"refused: a request from the web page origin {origin!r} (this server: {mine})"
        site = environ.get("HTTP_SEC_FETCH_SITE")
        if site is not None and str(site).lower() not in ("same-origin", "none"):
            return f"refused: a {site!r} request from a web page (this server: {mine})"
        return None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """The refusal as a response, or ``None`` to let the request in."""
        why = self.refusal(environ)
        if why is None:
            return None
        body = {"Type": "User", "Message": why, "message": why, "error": why}
        response = Response(
            json.dumps(body),
            status=403,
            mimetype="application/json",
            headers={"x-amzn-ErrorType": "AccessDeniedException"},
        )
        return response(environ, start_response)


class ControlAPI:
    """``/_emulator/<verb>``: the operations of ``emulator.control.Emulator`` over HTTP.

    A scenario is loaded from its content (``{"scenario": {...}}``, as ``RemoteEmulator``
    sends it) or by name: a bundled one (``demo``, ``discovery``...) or the file the server
    was started with. No other file is ever read: the request does not choose a path.
    """

    def __init__(
        self,
        emulator: Emulator,
        scenario: str | Path | None = None,
        after_reset: Callable[[], None] | None = None,
    ) -> None:
        self.emulator = emulator
        # Told after a reset made the roles again (their sessions are new): the server's owner
        # hands them to the functions it runs.
        self.after_reset = after_reset
        self.start_scenario: Path | None = None
        self.start_names: frozenset[str] = frozenset()
        if scenario is not None and Path(scenario).is_file():
            self.start_scenario = Path(scenario).resolve()
            self.start_names = frozenset({str(scenario), str(self.start_scenario)})

    def __call__(self, request: Request) -> Response | None:
        if not request.path.startswith("/_emulator/"):
            return None
        verb = request.path.removeprefix("/_emulator/").strip("/")
        body = request.get_json(silent=True) or {}
        try:
            return self._dispatch(verb, request.method, body, request.args)
        except Refused as error:
            return _json({"error": str(error)}, 403)
        except (KeyError, ValueError, TypeError) as error:
            return _json({"error": str(error)}, 400)

    def scenario_source(self, body: dict[str, Any]) -> dict[str, Any] | Path:
        """What a ``POST /_emulator/scenario`` may load: its content, or a known name."""
        source = body.get("scenario", body.get("path"))
        if isinstance(source, dict):
            return source
        if not isinstance(source, str):
            raise ValueError("scenario: a scenario's content (a mapping) or a bundled one's name")
        bundled = {
            p.stem: p
            for p in scenarios.SCENARIOS.iterdir()
            if p.suffix in (".yaml", ".yml", ".json") and p.is_file()
        }
        if source in bundled:
            return bundled[source]
        if self.start_scenario is not None and source in self.start_names:
            return self.start_scenario
        started = f" or {self.start_scenario}" if self.start_scenario else ""
        raise Refused(
            f"scenario {source!r}: only a bundled scenario ({', '.join(sorted(bundled))})"
            f"{started} loads by name; send any other as its content: "
            '{"scenario": {...}}'
        )

    def _dispatch(self, verb: str, method: str, body: dict[str, Any], args: Any) -> Response:
        emu = self.emulator
        if verb == "health":
            return _json({"ok": True, "now": emu.now()})
        if verb == "reset" and method == "POST":
            # The functions' roles belong to the server (capacity-broker local), not the world.
            emu.reset(keep_roles=True)
            if self.after_reset is not None:
                self.after_reset()
            return _json({"ok": True})
        if verb == "scenario" and method == "POST":
            ids = emu.load_scenario(self.scenario_source(body))
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
        if verb == "dynamodb-bill":
            if method == "DELETE":
                emu.clear_dynamodb_bill()
                return _json({"ok": True})
            return _json(emu.dynamodb_bill())
        if verb == "pools":
            region = body.get("region") or args.get("region", "us-east-1")
            if method == "POST":
                emu.set_pool(
                    region, body["availability_zone"], body["instance_type"], body.get("capacity")
                )
            pools = emu.capacity(region).pools.values()
            return _json([asdict(p) | {"available": p.available} for p in pools])
        return _json({"error": f"unknown control call {method} {verb}"}, 404)


# The hosts whose service the dispatcher keeps (a service per region: a few in practice).
_KEPT_HOSTS = 256


class _Dispatcher(DomainDispatcherApplication):
    """moto's dispatcher of requests to its services, with each host's service looked up
    once. moto looks it up for every request under one lock, listing its package's folders on
    disk each time: in a class of 200 the state table's emulator spent most of its time
    queued on that lock (130 updates a second at most, 5 ms of its CPU each), and the
    shared EC2 budget's (since removed) and the groups' calls waited seconds for it. The hosts
    a server sees are a few (a service per region), and which service serves one never
    changes."""

    def __init__(self, create_app: Callable[..., Any]) -> None:
        super().__init__(create_app)
        self._backends: dict[str | None, Any] = {}

    def get_backend_for_host(self, host: str | None) -> Any:
        # (Called under the dispatcher's lock.) The host is made from what a request says
        # (its signature's scope, its path): kept for the first few hundred only, so requests
        # naming made-up services or regions cannot grow it without end.
        if host in self._backends:
            return self._backends[host]
        found = super().get_backend_for_host(host)
        if len(self._backends) < _KEPT_HOSTS:
            self._backends[host] = found
        return found


class Application:
    """moto's WSGI app behind the door, the control API, extra routes and connection drops."""

    def __init__(
        self,
        emulator: Emulator,
        routes: Iterable[Route] = (),
        scenario: str | Path | None = None,
        after_reset: Callable[[], None] | None = None,
    ) -> None:
        self.moto = _Dispatcher(create_backend_app)
        self.door = Door()
        self.routes: list[Route] = [ControlAPI(emulator, scenario, after_reset), *routes]

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        refused = self.door(environ, start_response)
        if refused is not None:
            return refused
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


class _BurstServer(ThreadedWSGIServer):
    """werkzeug's threaded server with a listen queue as deep as the kernel allows.

    An AWS endpoint accepts every connection a class of containers opens at once. werkzeug
    listens with a queue of 128: when 200 containers open their EC2, DynamoDB and SSM
    connections together, the kernel drops the SYNs beyond it, the clients retry them 1 s,
    3 s, 7 s later, and their connect timeouts end probes that EC2 would have answered (seen
    in issue 23's class of 200). ``listen`` caps the queue at ``net.core.somaxconn``."""

    request_queue_size = 4096


class Server:
    """A threaded server on a loopback address (127.0.0.1); ``port=0`` picks a free port.

    ``scenario``: the scenario file it was started with, which the control API may load
    again by that name (besides the bundled ones). ``after_reset``: called after the control
    API's reset (which makes the functions' roles again, with new sessions).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        routes: Iterable[Route] = (),
        quiet: bool = True,
        scenario: str | Path | None = None,
        after_reset: Callable[[], None] | None = None,
    ) -> None:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"the emulator serves only on a loopback address, not {host!r}")
        installer.install()
        world.mode = "server"
        self.emulator = Emulator()
        application = Application(self.emulator, routes, scenario, after_reset)
        self._server: BaseWSGIServer = _BurstServer(
            host,
            port,
            application,
            handler=QuietHandler if quiet else MotoRequestHandler,
        )
        application.door.listen(*self._server.server_address[:2])
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
