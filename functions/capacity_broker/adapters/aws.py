"""Clients, errors and the retry loop shared by every adapter."""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import botocore.session
from botocore.config import Config
from botocore.credentials import (
    CredentialProvider,
    CredentialResolver,
    DeferredRefreshableCredentials,
)
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    DataNotFoundError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.utils import parse_timestamp

from ..domain import backoff
from ..domain.errors import ErrorClass, classify, is_retryable, keeps_earlier
from ..domain.failures import BrokerFailure

T = TypeVar("T")

# The broker's code for a call that could not be signed (no credentials found, or their
# source failed): nothing was sent.
CREDENTIALS_UNAVAILABLE = "CredentialsUnavailable"
# How long static credentials read after a SnapStart restore are kept before they are read
# again (``_AfterRestore``).
STATIC_RENEWAL = timedelta(hours=1)

# We own retries (so a ClientToken is reused and InsufficientInstanceCapacity, an HTTP 500,
# is not retried blindly): botocore makes one attempt per call.
CLIENT_CONFIG = Config(
    retries={"total_max_attempts": 1, "mode": "standard"},
    connect_timeout=3,
    read_timeout=15,
    max_pool_connections=64,
    user_agent_extra="capacity-broker",
)
# The state table is advice (contract v4): a call to it answers within about a second or not
# at all (a table that hangs must not hold a probe for botocore's 15 s read timeout), and the
# table's adapters stop asking a table that failed for a while.
STATE_TABLE_CONFIG = CLIENT_CONFIG.merge(Config(connect_timeout=1, read_timeout=1))
_CONFIGS = {"dynamodb": STATE_TABLE_CONFIG}
# A call with less time left than its client's read timeout uses a client whose timeout fits
# (the largest of these at most the time left, 1 s at least): a socket that hangs must not hold
# an invocation past its deadline (Lambda ends it there without running ``finally``).
SHORTER_READ_TIMEOUTS = (8.0, 4.0, 2.0, 1.0)
# API models that the sessions ``Clients`` makes read before botocore's own: EC2's, trimmed to
# the operations the broker calls (``adapters/ec2/operations.py``, written by
# ``make ec2-model``). Parsing botocore's full EC2 model and building a client of its 830
# operations was most of a cold container's first EC2 client (docs/performance.md, "A smaller
# EC2 model"). Everything not here (other services, paginators, endpoint rules, partitions) is
# found further down the search path, in botocore's own data.
BOTOCORE_DATA = Path(__file__).resolve().parent / "botocore_data"


class Clients:
    """One AWS session and the clients made from it, one per service and region, made on
    first use and kept (clients are thread-safe). The session is the caller's (a boto3
    session: the CLI's, the client library's, the Slurm programs'), else a botocore session
    made here, so a handler's import does not load boto3 (docs/performance.md, cold imports).
    Every adapter of a root asks this object, so a root's calls all go through the session it
    was given.

    Without a session, one is made on first use, whose EC2 model is trimmed to the broker's
    operations (``BOTOCORE_DATA``); its loader caches the parsed service models, so a second
    client costs microseconds instead of a fresh parse. Nothing here is process-wide: two
    roots with two sessions never share a client.
    """

    def __init__(self, session: Any = None) -> None:
        self._session = session
        self._made: dict[tuple[Any, ...], Any] = {}
        # botocore's session is not safe to make clients from concurrently: one lock for both.
        self._lock = threading.Lock()
        self._warmed = False

    @property
    def session(self) -> Any:
        """The session (the one given, else a botocore session made now and kept)."""
        with self._lock:
            return self._session_locked()

    def _session_locked(self) -> Any:
        if self._session is None:
            # botocore's own session, not boto3's: boto3 adds nothing the broker's clients use,
            # and importing it loads s3transfer and multiprocessing (about 40 ms of a cold
            # container's CPU, docs/performance.md).
            session = botocore.session.get_session()
            # Its EC2 clients know only the operations the broker calls (``BOTOCORE_DATA``).
            # A caller's session is left as it is: its clients may be asked anything. Set as
            # the session's data path (AWS_DATA_PATH's setting: a path it names still
            # follows), which its loader, made on first use, searches before botocore's data.
            given = session.get_config_variable("data_path")
            paths = [str(BOTOCORE_DATA), *([given] if given else [])]
            session.set_config_variable("data_path", os.pathsep.join(paths))
            self._session = session
        return self._session

    def client(self, service: str, region: str, within: float | None = None) -> Any:
        """The client of ``service`` in ``region``; ``within``: the seconds the caller has left,
        for a client whose read timeout fits in them (``SHORTER_READ_TIMEOUTS``)."""
        timeout = _fitting(service, within)
        key = (service, region) if timeout is None else (service, region, timeout)
        found = self._made.get(key)
        if found is None:
            with self._lock:
                found = self._made.get(key)
                if found is None:
                    session = self._session_locked()
                    found = self._made[key] = _make(session, service, region, timeout)
        return found

    def made(self) -> list[tuple[str, str]]:
        """The (service, region) pairs with a client, in the order they were made."""
        with self._lock:
            return list(dict.fromkeys((k[0], k[1]) for k in self._made))

    def make_ahead(self, services: tuple[str, ...], region: str) -> None:
        """Make the clients of ``services`` in ``region`` now, before a SnapStart snapshot.
        Making a client calls nothing and opens no connection; it is most of what a restored
        environment's first invocation spent on the CPU after the models' parse (botocore
        builds a class with a method per operation), and in a class of desktops restored at
        once that CPU is what every arrival waits for.

        A client keeps the credentials it is made with, and credentials must not be read
        before the snapshot: every environment restored from it would share them, and they
        expire (AWS: "Handling uniqueness with Lambda SnapStart"). So the session's
        credentials are first made deferred (``_AfterRestore``): the clients hold an object
        that reads the session's usual credential chain on its first use, after the
        restore, and again when what it read expires."""
        with self._lock:
            session = _core(self._session_locked())
            if getattr(session, "_credentials", None) is not None:
                # The session has read its credentials already (botocore keeps them, and a
                # client made now would hold them): no client is made ahead.
                return
            resolver = session.get_component("credential_provider")
            if not any(isinstance(p, _AfterRestore) for p in resolver.providers):
                resolver.providers.insert(0, _AfterRestore(list(resolver.providers)))
        for service in services:
            self.client(service, region)

    def drop_connections(self) -> None:
        """Close every client's connections (after a SnapStart restore: no connection may be
        shared by the environments restored from one snapshot, and one opened before it is not
        guaranteed to work after it). The clients stay: each opens new connections on its
        next call (botocore's ``close`` empties the pools, which refill on demand)."""
        with self._lock:
            made = list(self._made.values())
        for client in made:
            client.close()

    def preload_models(self, services: tuple[str, ...]) -> None:
        """Parse what making a client of ``services`` reads from botocore's data files into
        the session, without making a client: no credentials are read and no connection is
        opened, so this is safe to run before a SnapStart snapshot, and the clients made after
        a restore read no file. That is each service's API model, endpoint rules and
        paginators, the partitions' endpoints (the session's endpoint resolver) and the list of
        services: about 90% of a cold client's CPU (0.2 s for SSM, EC2 and DynamoDB, 15 ms
        after). (A first paginator read its model, and scanned every service's directory for
        it, in each container: 7 ms of a restored probe's CPU, the flags' read among them.)"""
        session: Any = _core(self.session)
        loader = session.get_component("data_loader")
        # The list of services is read (a directory scan) by every client made, and per kind
        # of model by the first of that kind.
        loader.list_available_services("service-2")
        loader.list_available_services("paginators-1")
        for service in services:
            model = session.get_service_model(service)
            loader.load_service_model(service, "endpoint-rule-set-1", model.api_version)
            with contextlib.suppress(DataNotFoundError):  # (a service with no paginators)
                loader.load_service_model(service, "paginators-1", model.api_version)
        loader.load_data("partitions")  # (the endpoint rules' partitions)
        loader.load_data("sdk-default-configuration")  # (the defaults mode's settings)
        # (A private component of botocore's session: made on a client's first use otherwise.)
        session._get_internal_component("endpoint_resolver")

    def prewarm(self, services: tuple[str, ...], region: str) -> threading.Thread:
        """Make the clients of ``services`` in ``region``, in that order, on a thread of their
        own.

        A cold container's first call then overlaps the making of the later clients (EC2's is
        the costly one: its model is parsed and its client built, tens of milliseconds of CPU)
        with the network wait of the first one. Clients are made under the one lock as always,
        so a caller that needs a client the thread is making waits for it instead of making a
        second. The caller joins the thread before its invocation ends: nothing is left running
        when Lambda freezes the container.
        """

        def make() -> None:
            try:
                for service in services:
                    self.client(service, region)
            except Exception:  # noqa: BLE001 - the caller's own client() call raises it, in its flow
                return

        thread = threading.Thread(target=make, name="prewarm", daemon=True)
        thread.start()
        return thread

    def warm_first(self, services: tuple[str, ...], region: str) -> threading.Thread | None:
        """On the first call only (a cold root): ``prewarm``; None afterwards."""
        with self._lock:
            if self._warmed:
                return None
            self._warmed = True
        return self.prewarm(services, region)


class _AfterRestore(CredentialProvider):
    """The first of a session's credential providers once its clients are made before a
    SnapStart snapshot (``Clients.make_ahead``): credentials read from the rest of the chain
    (the environment's keys, Lambda's container credentials, ...) on first use, not when the
    clients are made, and read again when they expire (static keys: every
    ``STATIC_RENEWAL``)."""

    METHOD = "capacity-broker-after-restore"
    CANONICAL_NAME = "custom-capacity-broker-after-restore"

    def __init__(self, rest: list[Any]) -> None:
        super().__init__()
        self._rest = CredentialResolver(providers=rest)

    def load(self) -> DeferredRefreshableCredentials:
        return DeferredRefreshableCredentials(self._fetch, self.METHOD)

    def _fetch(self) -> dict[str, Any]:
        found = self._rest.load_credentials()
        if found is None:
            raise NoCredentialsError()
        frozen = found.get_frozen_credentials()
        # Refreshable credentials (the container's) expire when they say; static ones are
        # read again after a while (a rotated key is then picked up too).
        expiry = getattr(found, "_expiry_time", None) or (datetime.now(UTC) + STATIC_RENEWAL)
        return {
            "access_key": frozen.access_key,
            "secret_key": frozen.secret_key,
            "token": frozen.token,
            "account_id": frozen.account_id,  # (DynamoDB's account-based endpoints)
            "expiry_time": expiry.isoformat(),
        }


def _fitting(service: str, within: float | None) -> float | None:
    """The shorter read timeout a call with ``within`` seconds left needs (None: the client's
    own fits)."""
    own = float(getattr(_CONFIGS.get(service, CLIENT_CONFIG), "read_timeout", 60))
    if within is None or within >= own:
        return None
    return next((t for t in SHORTER_READ_TIMEOUTS if t <= within and t < own), None) or (
        1.0 if own > 1.0 else None
    )


def _make(session: Any, service: str, region: str, read_timeout: float | None = None) -> Any:
    _fast_timestamps(session)
    config = _CONFIGS.get(service, CLIENT_CONFIG)
    if read_timeout is not None:
        config = config.merge(Config(read_timeout=read_timeout))
    if isinstance(session, botocore.session.Session):
        return session.create_client(service, region_name=region, config=config)
    # A boto3 session given by the caller (the CLI's, the client library's, the Slurm
    # programs' with their endpoints): its ``client`` keeps what the caller set on it.
    return session.client(service, region_name=region, config=config)


def _core(session: Any) -> botocore.session.Session:
    """The botocore session under ``session`` (a boto3 session wraps one)."""
    if isinstance(session, botocore.session.Session):
        return session
    core: botocore.session.Session = session._session
    return core


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


def _fast_timestamps(session: Any) -> None:
    factory = _core(session).get_component("response_parser_factory")
    factory.set_parser_defaults(timestamp_parser=_parse_timestamp)


class TableHealth:
    """Whether the state table answered lately: one per root, shared by everything of the root
    that asks the table (the probes' meeting, the capacity memory). The table is advice
    (contract v4): a call that found it failing (no answer, a refusal, a 5xx, throttling)
    marks it down, and while it is down nothing of the root asks it, so a table that hangs
    costs a container one bounded call, not one per request."""

    DOWN_SECONDS = 30.0

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._down_until = -float("inf")

    @property
    def up(self) -> bool:
        with self._lock:
            return self._monotonic() >= self._down_until

    def failed(self) -> None:
        with self._lock:
            self._down_until = self._monotonic() + self.DOWN_SECONDS


class AwsError(BrokerFailure):
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

    @property
    def error_code(self) -> str:
        # No code: no answer at all (a timeout or a dropped connection).
        return self.code or "RequestTimeout"

    @property
    def detail(self) -> str:
        return self.message

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
        if isinstance(
            error, (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError)
        ):
            # Nothing was sent: the session found no credentials to sign with, or their source
            # failed. Not a timeout (no "may have taken effect", no retry), and not AWS's word.
            return cls(operation, CREDENTIALS_UNAVAILABLE, f"{type(error).__name__}: {error}")
        # Timeouts and dropped connections: the request may have taken effect.
        return cls(operation, None, f"{type(error).__name__}: {error}")


def failed_item(error: AwsError) -> dict[str, Any] | None:
    """The item DynamoDB returned with a failed condition
    (``ReturnValuesOnConditionCheckFailure``), if any."""
    response = getattr(error.__cause__, "response", None)
    item = response.get("Item") if isinstance(response, dict) else None
    return item if isinstance(item, dict) else None


def call(operation: str, fn: Callable[..., T], **kwargs: Any) -> T:
    try:
        return fn(**kwargs)
    except (ClientError, BotoCoreError) as error:
        raise AwsError.wrap(operation, error) from error


@dataclass(frozen=True)
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
