"""What every ``CapacityBroker`` call shares: how it was made (``CapacityBroker(...)`` or
``CapacityBroker.deployed(...)``), where it looks (its regions, session and ``Discovery``),
the transport its actions go through (the handlers in this process, or the deployed
functions), its capacity memory, and the shaping of answers into typed results or errors.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ValidationError

from ..adapters import aws
from ..adapters.dynamodb_memory import MemoryTable
from ..adapters.ec2 import Ec2, Pricing
from ..adapters.regions import enabled_regions
from ..domain.discovery import Verdict
from ..logic import InvalidInput
from ..logic.capacity import Listing
from ..logic.discovery import Discovery
from ..logic.memory import CapacityMemory, lent
from . import regions as where
from . import when
from .deployed import invoke_function, lambda_client
from .in_process import DEFAULT_REGION, run_function
from .results import (
    BrokerError,
    InvalidArguments,
    RegionsFailed,
    Results,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class BrokerBase:
    """A broker's construction, transport and answer shaping (the mixins build on it)."""

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
    ) -> Self:
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

    def _results(self, listing: Listing[T], when_found: Verdict | None = None) -> Results[T]:
        if listing.status == "error":
            raise RegionsFailed(listing.errors)
        return Results(listing.items, listing.errors, listing.regions, when_found=when_found)


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
    except when.BadTime as error:
        raise InvalidArguments([(error.name, error.message)]) from None
