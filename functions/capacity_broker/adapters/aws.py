"""Clients, errors and the retry loop shared by every adapter."""

from __future__ import annotations

import contextlib
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.utils import parse_timestamp

from ..domain import backoff
from ..domain.errors import ErrorClass, classify, is_retryable, keeps_earlier

T = TypeVar("T")

# We own retries (so a ClientToken is reused and InsufficientInstanceCapacity, an HTTP 500,
# is not retried blindly): botocore makes one attempt per call.
CLIENT_CONFIG = Config(
    retries={"total_max_attempts": 1, "mode": "standard"},
    connect_timeout=3,
    read_timeout=15,
    max_pool_connections=64,
    user_agent_extra="capacity-broker",
)

# Clients per session (the container's, shared by every handler, or a CapacityBroker's own
# ``session=``), per service and region, made on first use.
_clients: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], Any]] = weakref.WeakKeyDictionary()
_clients_lock = threading.Lock()
# One session per container: its loader caches the parsed service models (EC2's alone is
# megabytes of JSON), so a second client costs microseconds instead of a fresh parse.
_session: boto3.session.Session | None = None
# What a call without a session of its own uses instead of the container's: the handlers run
# in process for a client with its own session (``container_session``).
_override: Any = None


def client(service: str, region: str, session: Any = None) -> Any:
    """One client per service, region and session, made on first use and kept (clients are
    thread-safe). Without ``session``: the container's session, shared by every handler."""
    if session is None:
        session = _override if _override is not None else (_session or default_session())
    key = (service, region)
    made = _clients.get(session)
    found = made.get(key) if made is not None else None
    if found is None:
        with _clients_lock:
            made = _clients.setdefault(session, {})
            found = made.get(key)
            if found is None:
                found = made[key] = _make(session, service, region)
    return found


def _container_session() -> boto3.session.Session:
    global _session
    if _session is None:
        _session = boto3.session.Session()
    return _session


def default_session() -> boto3.session.Session:
    """The container's own session (never an override): what a CapacityBroker made without
    ``session=`` uses, so that another broker's override cannot redirect it."""
    with _clients_lock:
        return _container_session()


def _make(session: Any, service: str, region: str) -> Any:
    _fast_timestamps(session)
    return session.client(
        service,
        region_name=region,
        config=CLIENT_CONFIG,
    )


def _parse_timestamp(value: Any) -> datetime:
    """EC2's timestamps are ISO 8601 ("2026-11-21T10:05:00.000Z"): ``fromisoformat`` reads
    them several times faster than botocore's general parser, which stays the fallback. A
    listing of hundreds of reservations parses thousands of them."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    return parse_timestamp(value)


def _fast_timestamps(session: boto3.session.Session) -> None:
    factory = session._session.get_component("response_parser_factory")
    factory.set_parser_defaults(timestamp_parser=_parse_timestamp)


def preload_models(services: tuple[str, ...]) -> None:
    """Parse ``services``' API models into the container session's loader, without making a
    client: no credentials are read and no connection is opened, so this is safe to run
    before a SnapStart snapshot, and the clients made after a restore skip the parse (EC2's
    model is megabytes of JSON)."""
    session = _override if _override is not None else default_session()
    for service in services:
        session._session.get_service_model(service)


def prewarm(services: tuple[str, ...], region: str) -> threading.Thread:
    """Make the clients of ``services`` in ``region``, in that order, on a thread of their own.

    A cold container's first call then overlaps the making of the later clients (EC2's is the
    costly one: its model is parsed and its client built, tens of milliseconds of CPU) with the
    network wait of the first one. Clients are made under the one lock as always (botocore's
    session is not safe to make clients from concurrently), so a caller that needs a client
    the thread is making waits for it instead of making a second. The caller joins the thread
    before its invocation ends: nothing is left running when Lambda freezes the container.
    """
    session = _override if _override is not None else default_session()

    def make() -> None:
        try:
            for service in services:
                client(service, region, session)
        except Exception:  # noqa: BLE001 - the caller's own client() call raises it, in its flow
            return

    thread = threading.Thread(target=make, name="prewarm", daemon=True)
    thread.start()
    return thread


def reset_clients() -> None:
    """Forget cached clients (tests switch endpoints between runs)."""
    with _clients_lock:
        _clients.clear()


@contextlib.contextmanager
def container_session(session: Any) -> Iterator[None]:
    """Inside, calls made without a session of their own (every handler's) use ``session``
    instead of the container's: the Python client runs the handlers in process this way for a
    broker made with ``session=``. Process-wide, not per thread (the handlers' own worker
    threads must see it too): the caller runs one such block at a time, and nothing else
    should call the handlers in this process meanwhile."""
    global _override
    saved = _override
    _override = session
    try:
        yield
    finally:
        _override = saved


class AwsError(Exception):
    """An AWS call that failed, with the code EC2 (or another service) gave."""

    def __init__(
        self, operation: str, code: str | None, message: str, status: int | None = None
    ) -> None:
        super().__init__(f"{operation}: {code or 'no answer'}: {message}")
        self.operation = operation
        self.code = code
        self.message = message
        self.status = status

    @property
    def error_class(self) -> ErrorClass:
        return classify(self.code, self.status)

    @classmethod
    def wrap(cls, operation: str, error: Exception) -> AwsError:
        if isinstance(error, ClientError):
            details = error.response.get("Error", {})
            meta = error.response.get("ResponseMetadata", {})
            return cls(
                operation,
                details.get("Code"),
                details.get("Message", str(error)),
                meta.get("HTTPStatusCode"),
            )
        # Timeouts and dropped connections: the request may have taken effect.
        return cls(operation, None, f"{type(error).__name__}: {error}")


def call(operation: str, fn: Callable[..., T], **kwargs: Any) -> T:
    try:
        return fn(**kwargs)
    except (ClientError, BotoCoreError) as error:
        raise AwsError.wrap(operation, error) from error


@dataclass
class RetryPolicy:
    """Jittered exponential backoff for throttling and 5xx, bounded by a deadline."""

    base: float = 0.2
    cap: float = 5.0
    max_attempts: int = 10

    def run(
        self,
        operation: str,
        fn: Callable[[], T],
        deadline: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> T:
        rng = rng or random.Random()
        budget = backoff.Budget(deadline) if deadline is not None else None
        attempt = 0
        said: AwsError | None = None  # the failure of the try before
        while True:
            try:
                return fn()
            except AwsError as error:
                if said is not None and keeps_earlier(said.error_class, error.error_class):
                    raise said from error  # what AWS answered, not the pacer giving up after
                said = error
                attempt += 1
                if not is_retryable(error.error_class) or attempt >= self.max_attempts:
                    raise
                pause = backoff.delay(attempt - 1, self.base, self.cap, rng)
                if budget is not None and not budget.allows(pause, clock()):
                    raise
                sleep(pause)
