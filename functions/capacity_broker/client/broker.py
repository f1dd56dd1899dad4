"""``CapacityBroker``: one interface over the two transports (``in_process``, ``deployed``).

Discovery (``capacity``, ``offerings``, ``search``, ``az``, ``spot``, ``plan``) reads AWS with
this broker's session; a deployed broker's ``capacity`` asks the ``<prefix>-capacity``
function instead. The actions (``probe``, ``reserve``, ``release``, ``clean``) go through the
transport: the handlers in this process, or the deployed functions.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..adapters import aws
from ..adapters.dynamodb_memory import MemoryTable
from ..adapters.ec2 import Ec2, Pricing
from ..adapters.regions import enabled_regions
from ..logic import InvalidInput
from ..logic.capacity import Listing, Progress
from ..logic.discovery import Discovery
from ..logic.memory import CapacityMemory, lent
from ..models.capacity import (
    AzRow,
    BlockOffering,
    CapacityRequest,
    CapacityResponse,
    CapacityRow,
    InstanceTypeRow,
    PlanAnswer,
    PurchaseAnswer,
    SpotPriceRow,
)
from ..models.cleaner import CleanerResponse
from ..models.history import HistoryRow
from ..models.probe import ProbeResponse
from ..models.release import ReleaseResponse
from ..models.reserve import ReserveResponse
from . import regions as where
from .deployed import invoke_function, lambda_client
from .in_process import DEFAULT_REGION, run_function
from .results import (
    BrokerError,
    InvalidArguments,
    RegionsFailed,
    ReservationType,
    Results,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class CapacityBroker:
    def __init__(
        self,
        regions: Sequence[str] | None = None,
        session: Any = None,
        *,
        cluster_id: str | None = None,
        max_workers: int = 32,
        state_table: str | None = None,
    ) -> None:
        # Each broker calls AWS with its own session (``None``: the process's default one).
        self.session = session
        # Refused here, before any call, when AWS has no such region.
        self._regions = where.check(where.region_list(regions))
        self.cluster_id = cluster_id or os.environ.get("BROKER_CLUSTER_ID") or None
        self.max_workers = max_workers
        self.function_prefix: str | None = None
        self.function_qualifier: str | None = None
        self._lambda: Any = None
        self._discovery: Discovery | None = None
        self._enabled: list[str] | None = None
        # The broker's state table (contract: ``BROKER_STATE_TABLE``): where the capacity
        # memory is kept; without one, this broker's own memory for its life.
        self.state_table = state_table or os.environ.get("BROKER_STATE_TABLE") or None
        self._memory: CapacityMemory | None = None

    @classmethod
    def deployed(
        cls,
        function_prefix: str | None = None,
        session: Any = None,
        regions: Sequence[str] | None = None,
        *,
        lambda_client: Any = None,
        qualifier: str | None = None,
        state_table: str | None = None,
    ) -> CapacityBroker:
        """Invoke the deployed functions ``<function_prefix>-<entry point>`` (the stack's
        ``FunctionPrefix`` output; ``CAPACITY_BROKER_FUNCTION_PREFIX`` when not given),
        through the alias ``qualifier`` (the stack's ``FunctionQualifier`` output when it
        publishes versions; ``CAPACITY_BROKER_FUNCTION_QUALIFIER`` when not given).
        ``state_table`` (the stack's ``StateTableName`` output; ``BROKER_STATE_TABLE`` when not
        given): where ``history`` reads the functions' capacity memory."""
        prefix = function_prefix or os.environ.get("CAPACITY_BROKER_FUNCTION_PREFIX")
        if not prefix:
            raise InvalidArguments([("function_prefix", "is required for a deployed broker")])
        broker = cls(regions=regions, session=session, state_table=state_table)
        broker.function_prefix = prefix.rstrip("-")
        broker.function_qualifier = (
            qualifier or os.environ.get("CAPACITY_BROKER_FUNCTION_QUALIFIER") or None
        )
        broker._lambda = lambda_client
        return broker

    # -- where ----------------------------------------------------------------------------
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
        """The regions discovery looks at when a call names none: the client's, else
        ``BROKER_REGIONS``, else every region enabled for the account."""
        return self.resolve_regions(None)

    def resolve_regions(self, regions: Sequence[str] | str | None) -> list[str]:
        """The regions a discovery call looks at (see ``client.regions``): ``regions``, else
        the client's, else ``BROKER_REGIONS``, else every enabled region; ``all`` is every
        enabled region (DescribeRegions). Unknown names are refused before any call."""
        wanted = where.check(where.region_list(regions)) or self._regions or where.configured()
        if not wanted or where.EVERY_REGION in wanted:
            return self.enabled_regions()
        return where.check(wanted)

    def enabled_regions(self) -> list[str]:
        """Every region enabled for the account, asked once per broker."""
        if self._enabled is None:
            self._enabled = enabled_regions(self.home_region, self._aws_session())
        return list(self._enabled)

    @property
    def function_regions(self) -> list[str]:
        """``BROKER_REGIONS`` of a function run in this process: the client's regions, else
        ``BROKER_REGIONS``, else the function's own region (the Lambdas' default)."""
        if where.EVERY_REGION in self._regions:
            return self.enabled_regions()
        return self._regions or where.configured() or [self.home_region]

    def _explicit(self, regions: Sequence[str] | str | None) -> list[str] | None:
        """Regions a deployed function is asked for: those given (or the client's), expanded;
        ``None`` leaves the choice to the function's ``BROKER_REGIONS``."""
        given = where.check(where.region_list(regions)) or self._regions
        return self.resolve_regions(given) if given else None

    @property
    def discovery(self) -> Discovery:
        if self._discovery is None:
            self._discovery = Discovery(
                # Every call passes its regions; this default is never used for a look-up.
                self._regions or [self.home_region],
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

    # -- transports -----------------------------------------------------------------------
    def _lambda_client(self) -> Any:
        if self._lambda is None:
            self._lambda = lambda_client(self.session, self.home_region)
        return self._lambda

    def invoke(self, entry: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """One entry point's raw answer: the deployed function, or the handler in process."""
        if self.function_prefix:
            return invoke_function(
                self._lambda_client, self.function_prefix, entry, event, self.function_qualifier
            )
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
        regions = self.function_regions
        # The handlers run here remember what they learn in this broker's memory, which
        # outlives each run (an in-process run starts a fresh container).
        with lent(self.memory):
            return run_function(
                entry,
                event,
                cluster_id=self.cluster_id,
                region=self.function_region,
                regions=regions,
                session=self.session,
            )

    @property
    def function_region(self) -> str:
        """The region of a function run in this process: the client's first region when it
        was given some, else its home region."""
        return self.function_regions[0] if self._regions else self.home_region

    @property
    def memory(self) -> CapacityMemory:
        """The capacity memory this broker's probes and reserves use and ``history`` reads:
        the state table's when there is one, else this broker's own."""
        if self._memory is None:
            table = (
                MemoryTable(self.state_table, self.function_region, session=self._aws_session)
                if self.state_table
                else None
            )
            self._memory = CapacityMemory(table)
        return self._memory

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
        types = [t.lower() for t in where.names(instance_types)]
        if types:
            fields["instance_types"] = types
        if self.function_prefix:
            explicit = self._explicit(regions)
            if explicit:
                fields["regions"] = explicit
            fields["request_id"] = f"client-{uuid.uuid4().hex}"
            response = self._typed(CapacityResponse, self.invoke("capacity", fields))
            if response.status == "error":
                raise (
                    RegionsFailed(response.errors)
                    if response.errors
                    else BrokerError(response.message, response.to_json_dict())
                )
        else:
            fields["regions"] = self.resolve_regions(regions)
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
                where.names(azs),
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
            subnet_ids=where.names(subnet_ids),
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
            instance_types=where.names(instance_types),
            subnet_ids=where.names(subnet_ids),
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
        return _event(
            action="sweep",
            dry_run=dry_run,
            regions=self._explicit(regions),
            request_id=request_id or f"clean-{uuid.uuid4().hex[:20]}",
        )

    # -- what the broker learned ------------------------------------------------------------
    def history(
        self,
        instance_types: Sequence[str] | str | None = None,
        regions: Sequence[str] | str | None = None,
        since: datetime | timedelta | None = None,
    ) -> list[HistoryRow]:
        """The capacity memory, one row per (region, AZ id, instance type): what the broker's
        attempts found there and the reservation-seconds it spent (contract: ``history``).
        Read from the state table when there is one (every container's and client's memory),
        else this broker's own. ``since``: a moment, or how long ago (default: all kept)."""
        if isinstance(since, timedelta):
            since = datetime.now(UTC) - since
        if since is not None and since.tzinfo is None:
            raise InvalidArguments([("since", "must be timezone-aware (UTC)")])
        if self.function_prefix and not self.state_table:
            raise InvalidArguments(
                [
                    (
                        "state_table",
                        "the deployed functions keep their memory in the state table: pass "
                        "state_table= (the stack's StateTableName output; CLI: --state-table) "
                        "or set BROKER_STATE_TABLE",
                    )
                ]
            )
        wanted = where.check(where.region_list(regions))
        memory = self.memory
        # What this process learnt after its last answers goes to the table first.
        memory.flush(everything=True)
        try:
            return memory.history(
                instance_types=where.names(instance_types) or None,
                regions=None if not wanted or where.EVERY_REGION in wanted else wanted,
                since=since.timestamp() if since is not None else None,
            )
        except aws.AwsError as error:
            raise BrokerError(f"Could not read the capacity memory: {error.message}") from None


# -- helpers ---------------------------------------------------------------------------------


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
