"""What every ``CapacityBroker`` call shares: how it was made (``CapacityBroker(...)`` or
``CapacityBroker.deployed(...)``), where it looks (its regions, session and ``Discovery``),
the transport its actions go through (the handlers in this process, or the deployed
functions), its capacity memory, and the shaping of answers into typed results or errors.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar

from pydantic import BaseModel

from ..adapters.dynamodb_memory import MemoryTable
from ..adapters.regions import enabled_regions
from ..domain.discovery import Verdict
from ..logic import InvalidInput
from ..logic.capacity import Listing
from ..logic.discovery import Discovery
from ..logic.memory import CapacityMemory
from ..root import Adapters, Root, discovery
from . import regions as where
from . import when
from .deployed import Deployed, Patience, lambda_client
from .in_process import InProcess
from .results import (
    InvalidArguments,
    RegionsFailed,
    Results,
    typed,
    validated,
)
from .settings import ENV_FUNCTION_PREFIX, ClientSettings
from .transport import Transport

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class BrokerBase:
    """A broker's construction, transport and answer shaping (the mixins build on it).

    What a broker calls AWS with, and which pacer and memory its calls use, is its own:
    ``adapters`` (its session's clients, its EC2 pacer and per-region adapters) from the
    start, and, for the actions of a direct broker, a ``root`` of its own built on them on the
    first action (``root.Root``). Nothing is shared with another broker or with the Lambda
    handlers of the process, so brokers with different sessions or clusters run side by side,
    and one broker can be used from many threads at once.
    """

    def __init__(
        self,
        regions: Sequence[str] | None = None,
        session: Any = None,
        *,
        cluster_id: str | None = None,
        max_workers: int = 32,
        state_table: str | None = None,
        settings: ClientSettings | None = None,
    ) -> None:
        # Read once, here: the arguments, else the process's environment (``settings``).
        self.settings = settings or ClientSettings.resolve(
            os.environ,
            regions=regions,
            session=session,
            cluster_id=cluster_id,
            state_table=state_table,
            max_workers=max_workers,
        )
        # Each broker calls AWS with its own session (``None``: one of its own, made on first
        # use from the AWS SDK's defaults).
        self.session = session
        functions = self.settings.functions
        self.adapters = Adapters(
            session,
            rate_scale=functions.ec2_rate_scale if functions is not None else 1.0,
        )
        self._lambda: Any = None
        # How long a deployed broker keeps asking a throttled Lambda (deployed.Patience).
        self.patience = Patience()
        self._lock = threading.RLock()
        self._root: Root | None = None
        self._discovery: Discovery | None = None
        self._enabled: list[str] | None = None
        self._memory: CapacityMemory | None = None
        # Chosen once: the broker's calls never ask which (``client.transport``).
        self.transport: Transport = (
            Deployed(
                self.settings.function_prefix,
                self.settings.function_qualifier,
                lambda: self._lambda_client(),
                self._explicit,
                lambda: self.patience,
            )
            if self.settings.function_prefix
            else InProcess(lambda: self.root, lambda: self.discovery.lister, self.resolve_regions)
        )

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
        prefix = function_prefix or os.environ.get(ENV_FUNCTION_PREFIX)
        if not prefix:
            raise InvalidArguments([("function_prefix", "is required for a deployed broker")])
        settings = ClientSettings.resolve(
            os.environ,
            regions=regions,
            session=session,
            state_table=state_table,
            function_prefix=prefix,
            function_qualifier=qualifier,
        )
        broker = cls(session=session, settings=settings)
        broker._lambda = lambda_client
        return broker

    # -- how it was made --------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self.transport.mode

    @property
    def cluster_id(self) -> str | None:
        return self.settings.cluster_id

    @property
    def state_table(self) -> str | None:
        return self.settings.state_table

    @property
    def function_prefix(self) -> str | None:
        return self.settings.function_prefix

    @property
    def function_qualifier(self) -> str | None:
        return self.settings.function_qualifier

    @property
    def max_workers(self) -> int:
        return self.settings.max_workers

    @property
    def _regions(self) -> list[str]:
        return list(self.settings.regions)

    # -- where ----------------------------------------------------------------------------
    @property
    def home_region(self) -> str:
        return self.settings.home_region

    @property
    def regions(self) -> list[str]:
        """The regions discovery looks at when a call names none: the client's, else
        ``BROKER_REGIONS``, else every region enabled for the account."""
        return self.resolve_regions(None)

    def resolve_regions(self, regions: Sequence[str] | str | None) -> list[str]:
        """The regions a discovery call looks at (see ``client.regions``): ``regions``, else
        the client's, else ``BROKER_REGIONS``, else every enabled region; ``all`` is every
        enabled region (DescribeRegions). Unknown names are refused before any call."""
        wanted = (
            where.check(where.region_list(regions))
            or self._regions
            or where.check(list(self.settings.configured_regions))
        )
        if not wanted or where.EVERY_REGION in wanted:
            return self.enabled_regions()
        return where.check(wanted)

    def enabled_regions(self) -> list[str]:
        """Every region enabled for the account, asked once per broker."""
        with self._lock:
            if self._enabled is None:
                self._enabled = enabled_regions(self.home_region, self.adapters.clients)
            return list(self._enabled)

    @property
    def function_regions(self) -> list[str]:
        """``BROKER_REGIONS`` of a function run in this process: the client's regions, else
        ``BROKER_REGIONS``, else the function's own region (the Lambdas' default)."""
        if where.EVERY_REGION in self._regions:
            return self.enabled_regions()
        return self._regions or list(self.settings.configured_regions) or [self.home_region]

    def _explicit(self, regions: Sequence[str] | str | None) -> list[str] | None:
        """Regions a deployed function is asked for: those given (or the client's), expanded;
        ``None`` leaves the choice to the function's ``BROKER_REGIONS``."""
        given = where.check(where.region_list(regions)) or self._regions
        return self.resolve_regions(given) if given else None

    @property
    def discovery(self) -> Discovery:
        with self._lock:
            if self._discovery is None:
                self._discovery = discovery(
                    self.adapters,
                    # Every call passes its regions; this default is never used for a look-up.
                    self._regions or [self.home_region],
                    self.cluster_id,
                    self.max_workers,
                )
            return self._discovery

    # -- transports -----------------------------------------------------------------------
    def _lambda_client(self) -> Any:
        with self._lock:
            if self._lambda is None:
                self._lambda = lambda_client(self.session, self.home_region)
            return self._lambda

    def invoke(self, entry: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """One entry point's raw answer, through the broker's transport."""
        return self.transport.invoke(entry, event)

    @property
    def root(self) -> Root:
        """The root this broker's actions run on (direct mode): built on the first action from
        the broker's settings, on its adapters (its session, pacer and caches) and with its
        capacity memory, which outlives each action."""
        with self._lock:
            if self._root is None:
                if not self.cluster_id:
                    raise InvalidArguments(
                        [
                            (
                                "cluster_id",
                                "the broker's actions need its cluster id: pass cluster_id= "
                                "(CLI: --cluster-id) or set BROKER_CLUSTER_ID",
                            )
                        ]
                    )
                self._root = Root(
                    self.settings.function_settings(self.function_region, self.function_regions),
                    adapters=self.adapters,
                    memory=self.memory,
                )
            return self._root

    @property
    def function_region(self) -> str:
        """The region of a function run in this process: the client's first region when it
        was given some, else its home region."""
        return self.function_regions[0] if self._regions else self.home_region

    @property
    def memory(self) -> CapacityMemory:
        """The capacity memory this broker's probes and reserves use and ``history`` reads:
        the state table's when there is one, else this broker's own."""
        with self._lock:
            if self._memory is None:
                table = (
                    MemoryTable(self.state_table, self.function_region, self.adapters.clients)
                    if self.state_table
                    else None
                )
                self._memory = CapacityMemory(table)
            return self._memory

    def _typed(self, model: type[M], answer: Mapping[str, Any]) -> M:
        return typed(model, answer)

    def _results(self, listing: Listing[T], when_found: Verdict | None = None) -> Results[T]:
        if listing.status == "error":
            raise RegionsFailed(listing.errors)
        return Results(listing.items, listing.errors, listing.regions, when_found=when_found)


# -- helpers ---------------------------------------------------------------------------------


def _event(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


_request = validated


@contextlib.contextmanager
def _arguments() -> Iterator[None]:
    try:
        yield
    except InvalidInput as error:
        raise InvalidArguments(error.errors) from None
    except when.BadTime as error:
        raise InvalidArguments([(error.name, error.message)]) from None
