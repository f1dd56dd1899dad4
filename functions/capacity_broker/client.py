"""The Python client: ``from capacity_broker import CapacityBroker, ReservationType``.

Two modes, one interface:

- ``CapacityBroker(regions=None, session=None)`` calls AWS directly with boto3. ``probe``,
  ``reserve``, ``release`` and ``clean`` run the broker's own Lambda handlers in this process
  (they need the cluster id: ``cluster_id=`` or ``BROKER_CLUSTER_ID``).
- ``CapacityBroker.deployed(function_prefix=..., session=None)`` invokes the deployed
  functions ``<prefix>-probe``, ``-reserve``, ``-release``, ``-cleaner`` and ``-capacity``
  with boto3's Lambda client. The read-only look-ups the functions do not serve
  (``offerings``, ``search``, ``az``, ``spot``, ``plan``) call EC2 with the same session.

Every broker calls AWS with its own ``session`` (without one, the process's default session),
whatever other brokers in the process were given.

Listings come back as :class:`Results`: a ``list`` of typed rows (pydantic models with the
contract's field names and the seed documents' names, e.g. ``instance_count``), with
``.errors`` for the regions that could not be asked and, for ``capacity``, ``.summary``.
When every region fails a :class:`RegionsFailed` is raised instead of an empty list that
would read as "no capacity".
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ValidationError

from .adapters import aws
from .adapters.ec2 import Ec2, Pricing
from .logic import InvalidInput
from .logic.capacity import Listing, Progress
from .logic.discovery import Discovery
from .models.capacity import (
    AzRow,
    BlockOffering,
    CapacityRequest,
    CapacityResponse,
    CapacityRow,
    CapacitySummary,
    InstanceTypeRow,
    PlanAnswer,
    PurchaseAnswer,
    SpotPriceRow,
)
from .models.cleaner import CleanerResponse
from .models.common import ItemError
from .models.probe import ProbeResponse
from .models.release import ReleaseResponse
from .models.reserve import ReserveResponse

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

ENTRY_POINTS = ("probe", "reserve", "release", "cleaner", "capacity")
DEFAULT_REGION = "us-east-1"
# Lambda's longest timeout is 15 minutes; the client waits a little longer for an answer.
INVOKE_READ_TIMEOUT = 910
# In-process runs get the time budget of the longest deployed function (the cleaner).
IN_PROCESS_TIMEOUT_MS = 300_000


class ReservationType(StrEnum):
    """Which reservations ``capacity`` lists (EC2's ``ReservationType``)."""

    ODCR = "odcr"
    CAPACITY_BLOCKS = "capacity-block"
    ALL = "all"
    # the singular, as the contract's request field spells it
    CAPACITY_BLOCK = "capacity-block"


class BrokerError(Exception):
    """The broker could not answer (configuration, every region failing, a function error)."""

    def __init__(self, message: str, answer: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.answer = dict(answer) if answer is not None else None


class InvalidArguments(BrokerError, ValueError):
    """The request was refused before anything was done (``invalid_request``)."""

    def __init__(
        self, errors: Sequence[tuple[str, str]], answer: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__("; ".join(f"{f}: {m}" for f, m in errors), answer)
        self.errors = list(errors)


class RegionsFailed(BrokerError):
    """Every region asked for failed; ``errors`` says why, region by region."""

    def __init__(self, errors: Sequence[ItemError]) -> None:
        super().__init__(
            "every region failed: "
            + "; ".join(f"{e.region}: {e.error_code}: {e.message}" for e in errors)
        )
        self.errors = list(errors)


class EntryPointUnavailable(BrokerError):
    """The entry point is not part of this installation (or deployment)."""


class FunctionError(BrokerError):
    """The function raised instead of answering (``X-Amz-Function-Error``)."""


class InvokeFailed(BrokerError):
    """Lambda's ``Invoke`` itself failed, so the function gave no answer: refused
    (``AccessDeniedException``), throttled (``TooManyRequestsException``), unreachable.
    ``code`` is Lambda's error code (``None`` when there was no answer at all)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class Results(list[T]):
    """A listing: the rows, plus what could not be listed.

    ``status`` is ``ok``, or ``partial`` when some regions failed (``errors``).
    """

    def __init__(
        self,
        items: Iterable[T] = (),
        errors: Iterable[ItemError] = (),
        regions: Iterable[str] = (),
        summary: CapacitySummary | None = None,
        message: str = "",
    ) -> None:
        super().__init__(items)
        self.errors = list(errors)
        self.regions = list(regions)
        self.summary = summary
        self.message = message

    @property
    def status(self) -> str:
        return "partial" if self.errors else "ok"


# -- running the handlers in this process ----------------------------------------------------


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


_env_lock = threading.RLock()


@contextlib.contextmanager
def _environment(wanted: Mapping[str, str]) -> Iterator[None]:
    """The handlers read their configuration from the environment once per container: set
    it for the call, and give the process its own back afterwards."""
    from .handlers._runtime import reset_container

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


@contextlib.contextmanager
def _quiet(module: Any) -> Iterator[None]:
    """In a script or a terminal the handler's JSON log lines and EMF metrics would mix with
    the answer on stdout: warnings and errors go to stderr, metrics are not printed."""
    saved_flag = os.environ.get("POWERTOOLS_METRICS_DISABLED")
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    logger = getattr(module, "logger", None)
    handler = getattr(logger, "registered_handler", None)
    saved: tuple[int, Any] | None = None
    if logger is not None and isinstance(handler, logging.StreamHandler):
        saved = (logger.log_level, handler.stream)
        logger.setLevel(logging.WARNING)
        # Not setStream(): it flushes the old stream, which a test runner may have closed.
        handler.stream = sys.stderr
    try:
        yield
    finally:
        if saved is not None and logger is not None and isinstance(handler, logging.StreamHandler):
            logger.setLevel(saved[0])
            handler.stream = saved[1]
        if saved_flag is None:
            os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)
        else:
            os.environ["POWERTOOLS_METRICS_DISABLED"] = saved_flag


# -- the client ------------------------------------------------------------------------------


class CapacityBroker:
    def __init__(
        self,
        regions: Sequence[str] | None = None,
        session: Any = None,
        *,
        cluster_id: str | None = None,
        max_workers: int = 32,
    ) -> None:
        # Each broker calls AWS with its own session (``None``: the process's default one).
        self.session = session
        self._regions = _region_list(regions)
        self.cluster_id = cluster_id or os.environ.get("BROKER_CLUSTER_ID") or None
        self.max_workers = max_workers
        self.function_prefix: str | None = None
        self._lambda: Any = None
        self._discovery: Discovery | None = None

    @classmethod
    def deployed(
        cls,
        function_prefix: str | None = None,
        session: Any = None,
        regions: Sequence[str] | None = None,
        *,
        lambda_client: Any = None,
    ) -> CapacityBroker:
        """Invoke the deployed functions ``<function_prefix>-<entry point>`` (the stack's
        ``FunctionPrefix`` output; ``CAPACITY_BROKER_FUNCTION_PREFIX`` when not given)."""
        prefix = function_prefix or os.environ.get("CAPACITY_BROKER_FUNCTION_PREFIX")
        if not prefix:
            raise InvalidArguments([("function_prefix", "is required for a deployed broker")])
        broker = cls(regions=regions, session=session)
        broker.function_prefix = prefix.rstrip("-")
        broker._lambda = lambda_client
        return broker

    # -- plumbing -----------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return "deployed" if self.function_prefix else "direct"

    @property
    def home_region(self) -> str:
        name = getattr(self.session, "region_name", None)
        return (
            name
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or DEFAULT_REGION
        )

    @property
    def regions(self) -> list[str]:
        """The regions asked when a call names none: the client's, else BROKER_REGIONS,
        else the session's region."""
        if self._regions:
            return self.resolve_regions(self._regions)
        configured = _region_list(os.environ.get("BROKER_REGIONS"))
        return configured or [self.home_region]

    def resolve_regions(self, regions: Sequence[str] | str | None) -> list[str]:
        """``["all"]`` means every region enabled for the account (DescribeRegions)."""
        wanted = _region_list(regions)
        if not wanted:
            return self.regions
        if "all" in wanted:
            ec2 = aws.client("ec2", self.home_region, self._aws_session())
            answer = aws.call("DescribeRegions", ec2.describe_regions)
            return sorted(r["RegionName"] for r in answer.get("Regions", []))
        return wanted

    @property
    def discovery(self) -> Discovery:
        if self._discovery is None:
            self._discovery = Discovery(
                self.regions,
                cluster_id=self.cluster_id,
                max_workers=self.max_workers,
                ec2_for=lambda region: Ec2(region, session=self._aws_session),
                pricing=Pricing(session=self._aws_session),
            )
        return self._discovery

    def _aws_session(self) -> Any:
        """This broker's session: its own, else the process's default one (named, so that
        another broker's in-process handler run cannot redirect this one's calls)."""
        return self.session if self.session is not None else aws.default_session()

    def _lambda_client(self) -> Any:
        if self._lambda is None:
            import boto3
            from botocore.config import Config

            session = self.session or boto3.session.Session()
            self._lambda = session.client(
                "lambda",
                region_name=getattr(session, "region_name", None) or self.home_region,
                config=Config(
                    read_timeout=INVOKE_READ_TIMEOUT,
                    connect_timeout=10,
                    # Safe to retry: every call carries a request id (idempotency key).
                    retries={"mode": "standard", "total_max_attempts": 3},
                    user_agent_extra="capacity-broker-client",
                ),
            )
        return self._lambda

    def invoke(self, entry: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """One entry point's raw answer: the deployed function, or the handler in process."""
        if self.function_prefix:
            return self._invoke_deployed(entry, event)
        return self._invoke_here(entry, event)

    def _invoke_deployed(self, entry: str, event: Mapping[str, Any]) -> dict[str, Any]:
        name = f"{self.function_prefix}-{entry}"
        lam = self._lambda_client()
        try:
            response = lam.invoke(
                FunctionName=name,
                InvocationType="RequestResponse",
                Payload=json.dumps(event).encode(),
            )
        except ClientError as error:
            details = error.response.get("Error", {})
            code = details.get("Code")
            if code == "ResourceNotFoundException":
                raise EntryPointUnavailable(f"function {name} does not exist: {error}") from None
            message = details.get("Message") or str(error)
            raise InvokeFailed(f"could not invoke {name}: {code}: {message}", code) from error
        except BotoCoreError as error:
            # No answer (unreachable, timed out, no credentials): after a timeout the function
            # may still have run, which the same request id again finds.
            raise InvokeFailed(
                f"could not invoke {name}: {type(error).__name__}: {error}"
            ) from error
        body = response["Payload"].read()
        if response.get("FunctionError"):
            raise FunctionError(f"{name} failed: {body.decode(errors='replace')[:1000]}")
        answer = json.loads(body or b"null")
        if not isinstance(answer, dict):
            raise FunctionError(f"{name} answered {str(answer)[:200]!r}, not a JSON object")
        return answer

    def _invoke_here(self, entry: str, event: Mapping[str, Any]) -> dict[str, Any]:
        if not self.cluster_id:
            raise InvalidArguments(
                [
                    (
                        "cluster_id",
                        f"{entry} needs the broker's cluster id: pass cluster_id= (CLI: "
                        "--cluster-id) or set BROKER_CLUSTER_ID",
                    )
                ]
            )
        module = handler_module(entry)
        regions = self.regions
        # The function's own region: the client's first region when it was given some.
        region = regions[0] if self._regions else self.home_region
        wanted = {
            "BROKER_CLUSTER_ID": self.cluster_id,
            "AWS_REGION": region,
            "BROKER_REGIONS": ",".join(regions),
        }
        with _env_lock, _environment(wanted), _handlers_using(self.session), _quiet(module):
            answer = invoke_in_process(
                entry, dict(event), f"capacity-broker-{entry}", region, IN_PROCESS_TIMEOUT_MS
            )
        return dict(answer)

    def _typed(self, model: type[M], answer: Mapping[str, Any]) -> M:
        if answer.get("status") == "invalid_request":
            errors = [
                (str(e.get("field", "request")), str(e.get("message", "")))
                for e in answer.get("errors") or []
            ]
            raise InvalidArguments(errors or [("request", str(answer.get("message")))], answer)
        try:
            return model.model_validate(answer)
        except ValidationError:
            raise BrokerError(str(answer.get("message") or answer), answer) from None

    def _results(self, listing: Listing[T]) -> Results[T]:
        if listing.status == "error":
            raise RegionsFailed(listing.errors)
        return Results(listing.items, listing.errors, listing.regions)

    # -- capacity ---------------------------------------------------------------------------
    def capacity(
        self,
        instance_types: Sequence[str] | str | None = None,
        regions: Sequence[str] | str | None = None,
        reservation_type: ReservationType | str = ReservationType.ODCR,
        gpu_only: bool = False,
        available_only: bool = False,
        min_capacity: int | None = None,
        active_only: bool = True,
        *,
        progress: Progress | None = None,
    ) -> Results[CapacityRow]:
        """ODCRs and/or Capacity Blocks (``reservation_type``), kept apart by EC2's own
        ReservationType. ``active_only`` (default) lists ODCRs that are ``active`` and blocks
        that are ``active`` or ``scheduled``."""
        try:
            kind = ReservationType(reservation_type)
        except ValueError:
            raise InvalidArguments(
                [("reservation_type", "must be odcr, capacity-block or all (ReservationType)")]
            ) from None
        fields: dict[str, Any] = {
            "reservation_type": str(kind.value),
            "gpu_only": bool(gpu_only),
            "available_only": bool(available_only),
            "min_capacity": int(min_capacity or 0),
            "include_inactive": not active_only,
        }
        types = [t.lower() for t in _names(instance_types)]
        if types:
            fields["instance_types"] = types
        explicit = _region_list(regions) or self._regions
        if self.function_prefix:
            if explicit:
                fields["regions"] = self.resolve_regions(explicit)
            fields["request_id"] = f"client-{uuid.uuid4().hex}"
            response = self._typed(CapacityResponse, self.invoke("capacity", fields))
            if response.status == "error":
                raise (
                    RegionsFailed(response.errors)
                    if response.errors
                    else BrokerError(response.message, response.to_json_dict())
                )
            return Results(
                response.reservations,
                response.errors,
                response.regions,
                response.summary,
                response.message,
            )
        fields["regions"] = self.resolve_regions(explicit)
        request = _request(CapacityRequest, fields)
        response = self.discovery.lister.answer(
            request, f"client-{uuid.uuid4().hex}", progress=progress
        )
        if response.status == "error":
            raise RegionsFailed(response.errors)
        return Results(
            response.reservations,
            response.errors,
            response.regions,
            response.summary,
            response.message,
        )

    # -- discovery --------------------------------------------------------------------------
    def offerings(
        self,
        instance_type: str,
        instance_count: int = 1,
        duration_hours: int = 24,
        start_after: datetime | None = None,
        end_before: datetime | None = None,
        regions: Sequence[str] | str | None = None,
        *,
        progress: Progress | None = None,
    ) -> Results[BlockOffering]:
        """Capacity Blocks on sale, cheapest per instance-hour first, then soonest."""
        with _arguments():
            listing = self.discovery.offerings(
                instance_type,
                instance_count,
                duration_hours,
                start_after,
                end_before,
                self.resolve_regions(regions),
                progress,
            )
        return self._results(listing)

    def purchase_capacity_block(
        self,
        offering_id: str,
        instance_type: str,
        instance_count: int = 1,
        duration_hours: int = 24,
        start_after: datetime | None = None,
        end_before: datetime | None = None,
        regions: Sequence[str] | str | None = None,
        instance_platform: str = "Linux/UNIX",
        purchase_key: str | None = None,
    ) -> PurchaseAnswer:
        """Buy one Capacity Block, at most once per offering (see ``Discovery.purchase``).
        Capacity Blocks cannot be cancelled."""
        if not offering_id:
            raise InvalidArguments([("offering_id", "is required")])
        with _arguments():
            return self.discovery.purchase(
                offering_id,
                instance_type,
                instance_count,
                duration_hours,
                start_after,
                end_before,
                self.resolve_regions(regions),
                instance_platform,
                purchase_key,
            )

    def search(
        self,
        pattern: str,
        regions: Sequence[str] | str | None = None,
        architecture: str | None = None,
        min_vcpus: int | None = None,
        min_memory: float | None = None,
        *,
        gpu_only: bool = False,
        progress: Progress | None = None,
    ) -> Results[InstanceTypeRow]:
        """Instance types matching ``pattern`` (``m7i.large``, ``m8g.*``, ``p5``) with at
        least ``min_vcpus`` vCPUs and ``min_memory`` GiB."""
        return self._results(
            self.discovery.search(
                pattern,
                self.resolve_regions(regions),
                architecture,
                min_vcpus,
                min_memory,
                gpu_only,
                progress,
            )
        )

    def az(
        self,
        pattern: str,
        regions: Sequence[str] | str | None = None,
        min_az_count: int | None = None,
        azs: Sequence[str] | str | None = None,
        *,
        progress: Progress | None = None,
    ) -> Results[AzRow]:
        """Which Availability Zones offer each type (``azs``: only these, by name or id)."""
        return self._results(
            self.discovery.az(
                pattern,
                self.resolve_regions(regions),
                min_az_count,
                _names(azs),
                progress,
            )
        )

    def spot(
        self,
        pattern: str,
        regions: Sequence[str] | str | None = None,
        max_price: float | None = None,
        show_savings: bool = False,
        sort_by_price: bool = False,
        *,
        history_hours: float | None = None,
        product_description: str = "Linux/UNIX",
        progress: Progress | None = None,
    ) -> Results[SpotPriceRow]:
        """Current Spot prices per type and AZ. ``show_savings`` adds the On-Demand price from
        the AWS Price List, or says why it is unavailable (never an estimate)."""
        return self._results(
            self.discovery.spot(
                pattern,
                self.resolve_regions(regions),
                max_price,
                show_savings,
                sort_by_price,
                history_hours,
                product_description,
                progress,
            )
        )

    def plan(
        self,
        workload: str,
        instance_type: str,
        instance_count: int,
        days: float | None = None,
        regions: Sequence[str] | str | None = None,
        *,
        progress: Progress | None = None,
    ) -> PlanAnswer:
        """Capacity Blocks or ODCRs for this workload, why, and what is available now."""
        with _arguments():
            return self.discovery.plan(
                workload,
                instance_type,
                instance_count,
                days,
                self.resolve_regions(regions),
                progress=progress,
            )

    def validate_training_capacity(
        self, instance_type: str, count: int, duration_days: int
    ) -> bool:
        """The seeds' pre-training check: a block, else an ODCR, covers the run."""
        return self.plan("training", instance_type, count, duration_days).status == "ready"

    # -- the broker's actions ---------------------------------------------------------------
    def probe(
        self,
        instance_type: str,
        subnet_ids: Sequence[str] | str,
        instance_count: int = 1,
        *,
        request_id: str | None = None,
        instance_platform: str | None = None,
        image_id: str | None = None,
        tenancy: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> ProbeResponse:
        event = _event(
            instance_type=instance_type,
            subnet_ids=_names(subnet_ids),
            instance_count=instance_count,
            request_id=request_id or f"probe-{uuid.uuid4().hex[:20]}",
            instance_platform=instance_platform,
            image_id=image_id,
            tenancy=tenancy,
            tags=dict(tags) if tags else None,
        )
        return self._typed(ProbeResponse, self.invoke("probe", event))

    def reserve(
        self,
        job_id: str,
        instance_types: Sequence[str] | str,
        subnet_ids: Sequence[str] | str,
        instance_count: int,
        *,
        request_id: str | None = None,
        **options: Any,
    ) -> ReserveResponse:
        """``options``: the contract's other reserve fields (``stack_name``,
        ``launch_template``, ``capacity_reservation_id``, ``provision``, ``strict``, ...)."""
        event = _event(
            job_id=job_id,
            instance_types=_names(instance_types),
            subnet_ids=_names(subnet_ids),
            instance_count=instance_count,
            request_id=request_id or f"job-{job_id}-{uuid.uuid4().hex[:12]}",
            **options,
        )
        return self._typed(ReserveResponse, self.invoke("reserve", event))

    def release(
        self,
        job_id: str | None = None,
        stack_name: str | None = None,
        reservation_id: str | None = None,
        *,
        request_id: str | None = None,
    ) -> ReleaseResponse:
        event = _event(
            job_id=job_id,
            stack_name=stack_name,
            reservation_id=reservation_id,
            request_id=request_id or f"release-{uuid.uuid4().hex[:20]}",
        )
        return self._typed(ReleaseResponse, self.invoke("release", event))

    def clean(
        self,
        dry_run: bool = True,
        regions: Sequence[str] | str | None = None,
        *,
        request_id: str | None = None,
    ) -> CleanerResponse:
        """A cleaner sweep; ``dry_run`` (default) reports what would be cancelled."""
        event = self.clean_event(dry_run, regions, request_id=request_id)
        return self._typed(CleanerResponse, self.invoke("cleaner", event))

    def clean_event(
        self,
        dry_run: bool = True,
        regions: Sequence[str] | str | None = None,
        *,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """The cleaner's sweep request: ``regions`` (else the client's own; ``all`` = every
        enabled region) expanded to names, none meaning the function's BROKER_REGIONS."""
        explicit = _region_list(regions) or self._regions
        return _event(
            action="sweep",
            dry_run=dry_run,
            regions=self.resolve_regions(explicit) if explicit else None,
            request_id=request_id or f"clean-{uuid.uuid4().hex[:20]}",
        )


# -- sessions --------------------------------------------------------------------------------


@contextlib.contextmanager
def _handlers_using(session: Any) -> Iterator[None]:
    """The handlers make their clients without a session: for a broker with its own, they run
    on it, and start cold before and after (nothing made with one session is kept for the
    other). The caller holds ``_env_lock``."""
    if session is None:
        yield
        return
    from .handlers._runtime import reset_container

    with aws.container_session(session):
        reset_container()
        try:
            yield
        finally:
            reset_container()


# -- helpers ---------------------------------------------------------------------------------


def _names(value: Sequence[str] | str | None) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` → ``["a", "b"]`` (blank entries dropped)."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(v).strip() for v in items if str(v).strip()]


def _region_list(value: Sequence[str] | str | None) -> list[str]:
    return list(dict.fromkeys(_names(value)))


def _event(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _request(model: type[M], fields: Mapping[str, Any]) -> M:
    try:
        return model.model_validate(dict(fields))
    except ValidationError as error:
        raise InvalidArguments(
            [
                (".".join(str(p) for p in e.get("loc", ())) or "request", str(e.get("msg")))
                for e in error.errors(include_url=False)
            ]
        ) from None


@contextlib.contextmanager
def _arguments() -> Iterator[None]:
    try:
        yield
    except InvalidInput as error:
        raise InvalidArguments(error.errors) from None


__all__ = [
    "BrokerError",
    "CapacityBroker",
    "EntryPointUnavailable",
    "FunctionError",
    "InProcessContext",
    "InvalidArguments",
    "InvokeFailed",
    "RegionsFailed",
    "ReservationType",
    "Results",
]
