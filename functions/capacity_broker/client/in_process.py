"""The direct transport: the broker's own Lambda handlers, run in this process.

``probe``, ``reserve``, ``release`` and ``clean`` of a direct ``CapacityBroker`` call the
handler of that entry point as Lambda would (a context object, the function's environment),
so the answer is exactly what the deployed function would give. ``capacity-broker local``
serves the same handlers behind a Lambda ``Invoke`` endpoint.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..adapters import aws
from .results import EntryPointUnavailable

ENTRY_POINTS = ("probe", "reserve", "release", "cleaner", "capacity")
DEFAULT_REGION = "us-east-1"
# In-process runs get the time budget of the longest deployed function (the cleaner).
IN_PROCESS_TIMEOUT_MS = 300_000
# Where the functions' warnings and errors go when they run in this process: plain records
# of the standard logger "capacity-broker" (a Python program sees them as text on stderr
# unless it configures logging; the CLI prints them as "warning: ..."). Not a logger under
# "capacity_broker": the functions' Powertools setup takes that tree over (JSON lines).
FUNCTION_LOG = logging.getLogger("capacity-broker")


@dataclass
class InProcessContext:
    """The parts of Lambda's context object the handlers (and Powertools) read."""

    function_name: str
    timeout_ms: int = IN_PROCESS_TIMEOUT_MS
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    region: str = DEFAULT_REGION
    account_id: str = "000000000000"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account_id}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"in-process/{self.aws_request_id}"

    def get_remaining_time_in_millis(self) -> int:
        elapsed = int((time.monotonic() - self.started) * 1000)
        return max(self.timeout_ms - elapsed, 0)


def handler_module(entry: str) -> Any:
    """``capacity_broker.handlers.<entry>``, or :class:`EntryPointUnavailable`."""
    if entry not in ENTRY_POINTS:
        raise EntryPointUnavailable(f"unknown entry point {entry!r}")
    name = f"capacity_broker.handlers.{entry}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != name:
            raise
        raise EntryPointUnavailable(
            f"the {entry} entry point is not part of this installation"
        ) from None


def invoke_in_process(
    entry: str,
    event: Any,
    function_name: str,
    region: str,
    timeout_ms: int,
    account_id: str = "000000000000",
) -> Any:
    """Call ``capacity_broker.handlers.<entry>.handler`` as Lambda would."""
    module = handler_module(entry)
    context = InProcessContext(
        function_name=function_name, timeout_ms=timeout_ms, region=region, account_id=account_id
    )
    return module.handler(event, context)


# One in-process run at a time: the handlers read the process environment.
_env_lock = threading.RLock()


def run_function(
    entry: str,
    event: Mapping[str, Any],
    *,
    cluster_id: str,
    region: str,
    regions: Sequence[str],
    session: Any = None,
) -> dict[str, Any]:
    """One entry point's answer, its handler run here with the function's environment
    (``BROKER_CLUSTER_ID``, ``AWS_REGION``, ``BROKER_REGIONS``) and ``session``'s clients."""
    module = handler_module(entry)
    wanted = {
        "BROKER_CLUSTER_ID": cluster_id,
        "AWS_REGION": region,
        "BROKER_REGIONS": ",".join(regions),
    }
    with _env_lock, process_environment(wanted), _handlers_using(session), _plain_logs(module):
        answer = invoke_in_process(
            entry, dict(event), f"capacity-broker-{entry}", region, IN_PROCESS_TIMEOUT_MS
        )
    return dict(answer)


@contextlib.contextmanager
def process_environment(wanted: Mapping[str, str]) -> Iterator[None]:
    """The handlers read their configuration from the environment once per container: set
    it for the call, and give the process its own back afterwards."""
    from ..handlers._runtime import reset_container

    saved = {k: os.environ.get(k) for k in wanted}
    changed = any(saved[k] != v for k, v in wanted.items())
    if changed:
        os.environ.update(wanted)
        reset_container()
    try:
        yield
    finally:
        if changed:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            reset_container()


class _Forward(logging.Filter):
    """On the functions' JSON log handler: nothing is written as JSON; warnings and errors
    go on to :data:`FUNCTION_LOG` as the plain records they are (once: a handler shared with
    that logger must not send a record round again)."""

    def __init__(self) -> None:
        super().__init__()
        self._passing = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(self._passing, "record", None) is record:
            return False
        if record.levelno >= logging.WARNING:
            self._passing.record = record
            try:
                FUNCTION_LOG.handle(record)
            finally:
                self._passing.record = None
        return False


def _json_handlers(*loggers: logging.Logger) -> list[logging.Handler]:
    """The Powertools JSON handlers among these loggers' handlers (not a test runner's)."""
    from aws_lambda_powertools.logging.formatter import BasePowertoolsFormatter

    found: list[logging.Handler] = []
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler.formatter, BasePowertoolsFormatter) and handler not in found:
                found.append(handler)
    return found


@contextlib.contextmanager
def _plain_logs(module: Any) -> Iterator[None]:
    """In a script or a terminal the handler's JSON log lines and EMF metrics would mix with
    the caller's own output: the log lines become plain records (see ``FUNCTION_LOG``) and
    metrics are not printed."""
    saved_flag = os.environ.get("POWERTOOLS_METRICS_DISABLED")
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    logger = getattr(module, "logger", None)
    # The function's own logger, and "capacity_broker" (the flows and adapters), which the
    # handlers' Powertools setup gave the same JSON handler (copy_config_to_registered_loggers).
    handlers = _json_handlers(
        *([logger._logger] if logger is not None else []), logging.getLogger("capacity_broker")
    )
    forward = _Forward()
    saved_level = logger.log_level if logger is not None else None
    for handler in handlers:
        handler.addFilter(forward)
    if logger is not None:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(forward)
        if logger is not None and saved_level is not None:
            logger.setLevel(saved_level)
        if saved_flag is None:
            os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)
        else:
            os.environ["POWERTOOLS_METRICS_DISABLED"] = saved_flag


@contextlib.contextmanager
def _handlers_using(session: Any) -> Iterator[None]:
    """The handlers make their clients without a session: for a broker with its own, they run
    on it, and start cold before and after (nothing made with one session is kept for the
    other). The caller holds ``_env_lock``."""
    if session is None:
        yield
        return
    from ..handlers._runtime import reset_container

    with aws.container_session(session):
        reset_container()
        try:
            yield
        finally:
            reset_container()
