"""What every entry point shares: the one entry function (``serve``: settings checked, the
time budget, the promise that a caller always gets a structured answer), where its log lines
and metrics go (``Output``), and the Lambda container's one cached root (``CONTAINER``).

A Lambda handler is ``lambda_handler(name, run, logger, metrics)``: the container's root
(built from the environment on the first invocation; ``capacity-broker local`` may give each
function one of its own) + the flow's ``run``, with Powertools' JSON logs and EMF metrics.
The in-process client and the Slurm programs call ``serve`` with a root of their own and
``PLAIN`` output: the same entry, no environment, no process lock.

Tracing: Powertools' Tracer loads the X-Ray SDK (~300 ms) when it is created, which would add
to every cold start. Lambda's active tracing already records each invocation; the broker adds
its subsegments (and the boto3 ones) only for invocations X-Ray sampled, and creates the Tracer
on the first of those, so unsampled invocations and the init phase never pay for it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import wraps
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from ..config import InvalidConfiguration, Settings
from ..logic import InvalidInput
from ..models import request_id_from
from ..root import Root

NAMESPACE = "CapacityBroker"
# The Lambda runtime's per-invocation trace header; "Sampled=1" when X-Ray records this one.
TRACE_HEADER = "_X_AMZN_TRACE_ID"
# Where the functions' warnings and errors go when a caller runs them in its own process:
# plain records of the standard logger "capacity-broker" (a Python program sees them as text
# on stderr unless it configures logging; the CLI prints them as "warning: ..."). Not a logger
# under "capacity_broker": the Lambda's Powertools setup takes that tree over (JSON lines).
FUNCTION_LOG = logging.getLogger("capacity-broker")


class Container:
    """What one Lambda container keeps between invocations: its root, built from the
    environment on the first invocation that needs it (settings that cannot run the broker
    are answered, never kept: Lambda's environment does not change under a container), and
    the X-Ray tracer. The only state a module of the broker holds (``CONTAINER``).

    A deployed Lambda container runs one function. ``capacity-broker local`` runs all five in
    one process, each as its own container would: it gives each function a root of its own
    (``use(root, function=...)``, e.g. one whose session signs as that function's role), and
    a function without one is served the shared root (``root_for``)."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self._environ = environ
        self._root: Root | None = None
        # Entry point (probe, reserve...) -> the root its handler is served from instead.
        self._roots: dict[str, Root] = {}
        self._tracer: Any = None
        self._lock = threading.Lock()
        # The root of the local container serving this thread's invocation (``serving_from``).
        self._local = threading.local()
        # Lambda invocations under way in this process: the library's log records are JSON
        # lines only during one (see ``observability``).
        self._serving = 0
        # The root built from the environment whose first invocation has not ended yet, and
        # whether the collector was told to leave the container's long-lived objects alone
        # (``_keep_out_of_collections``).
        self._first: Root | None = None
        self._froze = False

    def root(self) -> Root:
        """The container's root (``InvalidConfiguration`` when the environment cannot make
        one)."""
        with self._lock:
            if self._root is None:
                self._root = self._first = Root(Settings.from_env(self._environ))
                # What is alive now (the modules imported at init) lives as long as the
                # container: the cold invocation's collections need not walk it.
                self._keep_out_of_collections()
            return self._root

    def root_for(self, function: str) -> Root:
        """The root the handler of entry point ``function`` (``lambda_handler``'s name) is
        served from: the root of the local container serving this thread's invocation, else
        its own if it was given one, else the container's (``root``)."""
        serving: Root | None = getattr(self._local, "root", None)
        if serving is not None:
            return serving
        with self._lock:
            own = self._roots.get(function)
        return own if own is not None else self.root()

    @property
    def built(self) -> Root | None:
        """The root if it was built (the snapshot hooks touch nothing they would build)."""
        return self._root

    def use(self, root: Root | None, function: str | None = None) -> Root | None:
        """Serve the handlers from ``root`` from now on (``None``: build one from the
        environment on the next invocation); the root served until now. With ``function`` (an
        entry point: probe, reserve...): serve only that function from ``root`` (``None``:
        from the shared root again); the function's own root until now, if any. A Lambda
        never calls this: ``capacity-broker local`` and tests do, to run the real handlers on
        roots of their own."""
        with self._lock:
            if function is None:
                previous, self._root = self._root, root
                if previous is not root:
                    # A new container, as far as the handlers are concerned: what the last
                    # one kept out of collections may be garbage now.
                    self._first = None
                    self._give_back_to_collections()
            else:
                previous = self._roots.pop(function, None)
                if root is not None:
                    self._roots[function] = root
        return previous

    @contextlib.contextmanager
    def serving_from(self, root: Root | None) -> Iterator[None]:
        """Serve the invocation this thread runs from ``root``. ``capacity-broker local`` runs a
        function's concurrent invocations on threads, each in a container of its own as Lambda
        runs them (``local.LambdaInvoke``): each thread is handed its container's root here. A
        Lambda never calls this."""
        previous = getattr(self._local, "root", None)
        self._local.root = root
        try:
            yield
        finally:
            self._local.root = previous

    def tracer(self) -> Any:
        """The Powertools Tracer, created on first use (see the module docstring)."""
        with self._lock:
            if self._tracer is None:
                from aws_lambda_powertools import Tracer

                self._tracer = Tracer(patch_modules=("botocore",))
            return self._tracer

    def _keep_out_of_collections(self) -> None:
        """Move every object alive now out of the cyclic collector's way (``gc.freeze``), for
        the container's life. Called with the lock held.

        Why: a full collection walks every object the collector tracks, and a cold container's
        first invocation triggers one. It parses botocore's API models (EC2's alone is hundreds
        of thousands of dicts and lists), and that many allocations start a full collection
        that walks the whole heap: 0.2-0.3 s of a cold probe's 0.5 s of CPU in ``make bench``
        (whose process also holds the emulator's objects), every one of them alive for the
        container's life. Moved to the collector's permanent generation, they are not walked
        again: once when the root is built (the modules imported at init), once when its first
        invocation ends or before a SnapStart snapshot (the models, clients and caches).
        Reference counting still frees everything that becomes garbage; only a reference cycle
        that was garbage already at that moment stays in memory, until a new root is served
        (``use``: ``gc.unfreeze``)."""
        gc.freeze()
        self._froze = True

    def _give_back_to_collections(self) -> None:
        """Undo ``_keep_out_of_collections`` (called with the lock held)."""
        if self._froze:
            gc.unfreeze()
            self._froze = False

    def prime(self) -> None:
        """Before a SnapStart snapshot: the container root's ``prime`` (the API models, the
        flows' modules, the first clients), then what it made kept out of collections (it
        lives as long as every environment restored from the snapshot)."""
        self.root().prime()
        with self._lock:
            self._keep_out_of_collections()

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        with self._lock:
            self._serving += 1
        try:
            yield
        finally:
            with self._lock:
                self._serving -= 1
                if self._serving == 0 and self._first is not None and self._first is self._root:
                    # The first invocation of a root built here is over: the models it
                    # parsed and the clients and caches it made live as long as the container.
                    self._first = None
                    self._keep_out_of_collections()

    @property
    def invoked(self) -> bool:
        """A Lambda invocation is under way in this process."""
        return self._serving > 0


CONTAINER = Container()


def sampled() -> bool:
    """Whether X-Ray samples this invocation: the Lambda runtime says so per invocation in
    the environment (``_X_AMZN_TRACE_ID``), not a setting of the broker's."""
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() == "true":
        return False
    return "Sampled=1" in os.environ.get(TRACE_HEADER, "")


@dataclass(frozen=True)
class Invocation:
    """What a flow needs to know about the invocation it runs in."""

    root: Root
    request_id: str
    deadline: float  # on the root's monotonic clock: stop starting new work after this
    hard_deadline: float  # likewise: the function is killed shortly after
    context: Any = None  # Lambda's context object

    @property
    def settings(self) -> Settings:
        return self.root.settings


def deadlines(
    context: Any, margin: float, monotonic: Callable[[], float] = time.monotonic
) -> tuple[float, float]:
    """The invocation's (soft, hard) deadlines on ``monotonic``, the clock its root's flows
    compare them with."""
    now = monotonic()
    remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
    remaining = remaining_ms() / 1000.0 if callable(remaining_ms) else 60.0
    hard = now + max(remaining - 0.5, 0.5)
    return min(now + max(remaining - margin, 0.5), hard), hard


def invalid_input(error: InvalidInput, request_id: str) -> dict[str, Any]:
    """``invalid_request`` for a request that parsed but names what does not exist."""
    return {
        "status": "invalid_request",
        "request_id": request_id,
        "errors": [{"field": field, "message": message} for field, message in error.errors],
        "message": f"The request was not accepted: {error}"[:500],
    }


class _Text:
    """What the flows see instead of a text event (see ``serve``): not an object."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<text event>"


TEXT_EVENT = _Text()

# -- the cold path (docs/performance.md, docs/deploy.md) ---------------------------------------


def before_snapshot() -> None:
    """Before Lambda snapshots a published version: work that is the same for every restored
    environment and calls nothing (``Root.prime``: the API models, the flows' modules and the
    first clients, in the container root), done once instead of per cold start. Settings that
    cannot make a root: nothing to do (the first invocation answers the error)."""
    try:
        CONTAINER.prime()
    except InvalidConfiguration:
        return


def after_restore() -> None:
    """After a restore: nothing unique may be shared by the environments restored from one
    snapshot (AWS: "Handling uniqueness with Lambda SnapStart"). The root makes its flows,
    pacer buckets and retry jitter generators on first use, after the restore; this re-seeds
    the module-level ``random`` and closes any connection the clients made before the
    snapshot hold (``before_snapshot`` opens none; a later change that did could not carry a
    stale one)."""
    random.seed()
    root = CONTAINER.built
    if root is not None:
        root.clients.drop_connections()


def register_snapshot_hooks() -> bool:
    """Register the hooks with Lambda's Snapshot Restore for Python (part of the managed
    Python runtimes since 3.12); elsewhere there is no snapshot and nothing to register."""
    try:
        from snapshot_restore_py import (  # type: ignore[import-not-found]
            register_after_restore,
            register_before_snapshot,
        )
    except ImportError:
        return False
    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore)
    return True


register_snapshot_hooks()


# -- where log lines and metrics go -------------------------------------------------------------


class _PlainLog:
    """An entry's own log lines for a caller in its own process: warnings and errors as plain
    records of ``FUNCTION_LOG``; nothing below a warning; no per-invocation keys."""

    def append_keys(self, **_: Any) -> None:
        return None

    def info(self, *_: Any, **__: Any) -> None:
        return None

    def warning(self, message: str, *, extra: Mapping[str, Any] | None = None) -> None:
        FUNCTION_LOG.warning(message, extra=_safe_extra(extra))

    def error(self, message: str, *, extra: Mapping[str, Any] | None = None) -> None:
        FUNCTION_LOG.error(message, extra=_safe_extra(extra))

    def exception(self, message: str) -> None:
        FUNCTION_LOG.exception(message)


_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def _safe_extra(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    # A plain LogRecord refuses extra keys that are its own attributes.
    return {k: v for k, v in (extra or {}).items() if k not in _RECORD_FIELDS}


class _NoMetrics:
    """Metrics for a caller in its own process: none (EMF lines would mix with its output)."""

    def add_metric(self, **_: Any) -> None:
        return None


@dataclass(frozen=True)
class Output:
    """Where an entry's log lines and metrics go, chosen by its caller: the Lambda's
    Powertools Logger and Metrics (JSON lines, EMF), or ``PLAIN``."""

    logger: Any  # Powertools Logger, or _PlainLog
    metrics: Any  # Powertools Metrics, or _NoMetrics
    service: str = ""
    emf: bool = False  # also write the per-type and per-AZ EMF documents (``_spending``)
    tracing: bool = False  # add X-Ray subsegments when the invocation is sampled

    def document(self, dimensions: Mapping[str, str], values: Mapping[str, float]) -> None:
        """One EMF document of its own (a dimension set of its own), written now."""
        if not self.emf:
            return
        document = EphemeralMetrics(
            namespace=NAMESPACE, service=os.environ.get("POWERTOOLS_SERVICE_NAME", self.service)
        )
        for dimension, where in dimensions.items():
            document.add_dimension(name=dimension, value=where)
        for name, value in sorted(values.items()):
            unit = MetricUnit.Seconds if name.endswith("Seconds") else MetricUnit.Count
            document.add_metric(name=name, unit=unit, value=value)
        document.flush_metrics()


PLAIN = Output(_PlainLog(), _NoMetrics())


class _OutsideInvocations(logging.Filter):
    """On the functions' JSON log handler: outside a Lambda invocation (a caller running an
    entry in its own process, the client's look-ups) nothing is written as JSON; warnings and
    errors go on to ``FUNCTION_LOG`` as the plain records they are (once: a handler shared
    with that logger must not send a record round again)."""

    def __init__(self) -> None:
        super().__init__()
        self._passing = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        if CONTAINER.invoked:
            return True
        if getattr(self._passing, "record", None) is record:
            return False
        if record.levelno >= logging.WARNING:
            self._passing.record = record
            try:
                FUNCTION_LOG.handle(record)
            finally:
                self._passing.record = None
        return False


def observability(service: str) -> tuple[Logger, Metrics]:
    """A handler module's Powertools Logger and Metrics (its Lambda output)."""
    logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", service))
    # The adapters and flows log with the standard library; give them this logger's JSON
    # format, level and keys (request and cluster id on every line) during invocations.
    copy_config_to_registered_loggers(source_logger=logger, include={"capacity_broker"})
    for handler in logging.getLogger("capacity_broker").handlers + logger._logger.handlers:
        if not any(isinstance(f, _OutsideInvocations) for f in handler.filters):
            handler.addFilter(_OutsideInvocations())
    metrics = Metrics(
        namespace=NAMESPACE, service=os.environ.get("POWERTOOLS_SERVICE_NAME", service)
    )
    return logger, metrics


# -- the entry ----------------------------------------------------------------------------------

Run = Callable[[Any, Invocation, Output], dict[str, Any]]

# A metric of its own for a configuration error, besides ``InvalidConfiguration``: the
# cleaner's alarm watches CleanerErrors (a sweep that cannot run is what it is for).
CONFIGURATION_ERROR_METRICS: Mapping[str, str] = {"cleaner": "CleanerErrors"}


def configuration_error(
    name: str, request_id: str, problem: InvalidConfiguration, out: Output
) -> dict[str, Any]:
    """The answer of a function deployed with settings it cannot run with: one structured
    error naming every wrong variable; nothing was asked of AWS."""
    out.logger.append_keys(request_id=request_id)
    out.logger.error("invalid configuration", extra={"problems": [p for p, _ in problem.problems]})
    out.metrics.add_metric(name="InvalidConfiguration", unit=MetricUnit.Count, value=1)
    if name in CONFIGURATION_ERROR_METRICS:
        out.metrics.add_metric(
            name=CONFIGURATION_ERROR_METRICS[name], unit=MetricUnit.Count, value=1
        )
    # Imported here: a function deployed with bad settings is the rare path (its model is
    # built then, as ``invalid_request``'s on the first bad request).
    from ..models.invalid import ErrorResponse

    return ErrorResponse(
        request_id=request_id, error_code="InvalidConfiguration", message=str(problem)
    ).to_json_dict()


def serve(
    name: str,
    run: Run,
    event: Any,
    context: Any,
    root: Callable[[], Root],
    out: Output,
) -> dict[str, Any]:
    """One entry point's answer to ``event``: ``run`` on the root ``root()`` gives (its
    ``InvalidConfiguration`` answered as such), under the context's time budget, with a
    structured answer even for an unexpected failure."""
    request_id = request_id_from(event) or f"{name}-{uuid.uuid4().hex}"
    try:
        built = root()
    except InvalidConfiguration as problem:
        return configuration_error(name, request_id, problem, out)
    config = built.settings
    out.logger.append_keys(cluster_id=config.cluster_id, request_id=request_id)
    soft, hard = deadlines(context, config.safety_margin, built.monotonic)
    invocation = Invocation(built, request_id, soft, hard, context)
    if isinstance(event, str | bytes | bytearray):
        # Requests are JSON objects (contract). Powertools' parse() would decode a JSON *text*
        # and accept the object inside, answered under a generated request id although the
        # text carried its own (a retried reserve then held twice). The flows' models refuse
        # anything that is not an object: invalid_request.
        event = TEXT_EVENT
    warming = built.clients.warm_first(built.first_clients(name), config.region)
    try:
        if out.tracing and sampled():
            with CONTAINER.tracer().provider.in_subsegment(f"## {name}") as subsegment:
                subsegment.put_annotation("cluster_id", config.cluster_id)
                subsegment.put_annotation("request_id", request_id)
                answer = run(event, invocation, out)
                subsegment.put_annotation("status", str(answer.get("status")))
        else:
            answer = run(event, invocation, out)
    except Exception:
        out.logger.exception("unexpected failure")
        out.metrics.add_metric(name="UnexpectedErrors", unit=MetricUnit.Count, value=1)
        answer = {
            "status": "error",
            "request_id": request_id,
            "error_code": "InternalError",
            "message": "The broker failed unexpectedly; nothing further was started. "
            "Reservations it created are cancelled by their EndDate and the cleaner.",
        }
    finally:
        if warming is not None:
            warming.join()
    out.logger.info("answered", extra={"status": answer.get("status")})
    return answer


def lambda_handler(name: str, run: Run, logger: Logger, metrics: Metrics) -> Callable[..., Any]:
    """``run`` as a Lambda handler: the container's root, Powertools' JSON logs (context on
    every line) and EMF metrics (flushed once), tracing when X-Ray samples."""
    out = Output(logger, metrics, service=name, emf=True, tracing=True)

    @wraps(run)
    def handler(event: Any, context: Any) -> dict[str, Any]:
        with CONTAINER.serving():
            return serve(name, run, event, context, lambda: CONTAINER.root_for(name), out)

    return logger.inject_lambda_context(clear_state=True)(metrics.log_metrics(handler))
