"""The composition root: the one place that builds the broker's flows and what they share.

A ``Root`` is made from validated ``Settings`` (``config``) and, optionally, what its caller
owns: a boto3 session (else ``Clients`` makes a botocore one), an EC2 pacer, a capacity
memory, clocks. It builds every flow (probe, reserve, release, cleaner, capacity; ``history``
reads its ``memory``) once, on first use, from one set of adapters: one ``Clients`` (the
session and its clients), one ``Pacer`` (EC2's request buckets, as this process sees them),
one EC2 adapter per region (with its subnet, VPC and image caches). Every cache belongs to one
of these objects; nothing is kept in a module.

Who makes a root:

- a Lambda container: the handlers' ``CONTAINER`` (``handlers._runtime``) builds one from the
  environment on the first invocation and keeps it for the container's life;
- the Python client (direct mode) and so the CLI and the Slurm programs: each
  ``CapacityBroker`` builds its own from its settings and session (``client.base``);
- a test: whatever the test needs (its clocks, a sleep, a fast retry policy).

Every root runs the same entry function (``handlers._runtime.serve``). Which pacer, session or
memory a call uses is therefore always "its root's": follow ``Root.__init__`` (and
``Root.memory``).

As Karpenter's ``pkg/operator/operator.go`` builds its providers, each with its caches, and
Powertools' ``IdempotencyHandler`` is handed its persistence layer: the flows are handed
their adapters here and never reach for one of their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from .adapters.aws import Clients, RetryPolicy, TableHealth
from .adapters.ec2 import Ec2, Pricing, Reservation
from .adapters.throttle import Pacer
from .config import Settings
from .domain.pool_spec import PoolSpec

if TYPE_CHECKING:  # the flows are imported where they are built: a probe Lambda never
    # imports the cleaner's modules (cold starts), a release none of the capacity memory's.
    from .adapters.cloudformation import CloudFormation
    from .adapters.dynamodb import RequestRecords
    from .adapters.ec2.launches import Launches
    from .adapters.resource_groups import ResourceGroups
    from .adapters.ssm import Flags
    from .logic.capacity import CapacityLister
    from .logic.cleaner import Cleaner
    from .logic.discovery import Discovery
    from .logic.grouping import Coalescer
    from .logic.memory import CapacityMemory
    from .logic.pool import ReservedPool, Spared
    from .logic.probe import Prober
    from .logic.release import Releaser
    from .logic.reservations import Patience, ReservationCore
    from .logic.reserve import Reserver

T = TypeVar("T")


class Adapters:
    """The AWS side of a root: one session's clients, one EC2 pacer, one EC2 adapter per
    region (each with its caches of subnets, VPC tenancies and images) and, beside it, one
    for its launch templates and launches, one Price List adapter. The Python client builds
    these first (discovery needs no cluster id) and hands them to the root its actions run
    on, so both draw from one pacer."""

    def __init__(
        self,
        session: Any = None,
        pacer: Pacer | None = None,
        retry: RetryPolicy | None = None,
        *,
        rate_scale: float = 1.0,
    ) -> None:
        self.clients = Clients(session)
        self.pacer = pacer or Pacer(scale=rate_scale)
        # Every adapter's retry policy (None: each its own default RetryPolicy).
        self.retry = retry
        self._ec2: dict[str, Ec2] = {}
        self._launches: dict[str, Launches] = {}
        self._stacks: dict[str, CloudFormation] = {}
        self._pricing: Pricing | None = None
        self._groups: dict[str, ResourceGroups] = {}
        self._lock = threading.Lock()

    def ec2(self, region: str) -> Ec2:
        """The EC2 adapter of ``region``: one per region, made on first use."""
        with self._lock:
            found = self._ec2.get(region)
            if found is None:
                found = self._ec2[region] = Ec2(region, self.clients, self.pacer, self.retry)
            return found

    def launches(self, region: str) -> Launches:
        """The launch templates and launches of ``region`` (reserve's, release's, the
        cleaner's): one per region, made on first use, on the clients and pacer of the
        region's EC2 adapter."""
        from .adapters.ec2.launches import Launches

        with self._lock:
            found = self._launches.get(region)
            if found is None:
                found = self._launches[region] = Launches(
                    region, self.clients, self.pacer, self.retry
                )
            return found

    def stacks(self, region: str) -> CloudFormation:
        """The CloudFormation adapter of ``region`` (the cleaner's stack lookups)."""
        from .adapters.cloudformation import CloudFormation

        with self._lock:
            found = self._stacks.get(region)
            if found is None:
                found = self._stacks[region] = CloudFormation(region, self.clients, self.retry)
            return found

    def resource_groups(self, region: str) -> ResourceGroups:
        """The Resource Groups adapter of ``region`` (a reserved pool's group members)."""
        from .adapters.resource_groups import ResourceGroups

        with self._lock:
            found = self._groups.get(region)
            if found is None:
                found = self._groups[region] = ResourceGroups(region, self.clients, self.retry)
            return found

    @property
    def pricing(self) -> Pricing:
        """The AWS Price List (On-Demand prices for discovery's savings)."""
        with self._lock:
            if self._pricing is None:
                self._pricing = Pricing(self.clients)
            return self._pricing


# The clients an entry point's first invocation needs, in the order they are made: probe and
# reserve read the flags (SSM) beside their first EC2 calls (the look-ups of their places), so
# SSM's client, the cheap one, is made first and its call is on its way while EC2's, the
# costly one, is built; the others start with EC2.
FIRST_CLIENTS: Mapping[str, tuple[str, ...]] = {"probe": ("ssm", "ec2"), "reserve": ("ssm", "ec2")}
FIRST_CLIENTS_DEFAULT: tuple[str, ...] = ("ec2",)

# The modules of the flows and adapters a root imports on first use (below, and their own
# imports): ``Root.prime`` imports them before a SnapStart snapshot.
FLOW_MODULES: tuple[str, ...] = (
    ".adapters.cloudformation",
    ".adapters.dynamodb",
    ".adapters.dynamodb_group",
    ".adapters.dynamodb_group_items",
    ".adapters.dynamodb_memory",
    ".adapters.ec2.launches",
    ".adapters.resource_groups",
    ".adapters.ssm",
    ".logic.capacity",
    ".logic.cleaner",
    ".logic.discovery",
    ".logic.grouping",
    ".logic.memory",
    ".logic.pool",
    ".logic.probe",
    ".logic.release",
    ".logic.reservations",
    ".logic.reserve",
)


class Root:
    """Every flow of one broker, built once from validated settings (see the module)."""

    def __init__(
        self,
        settings: Settings,
        *,
        session: Any = None,
        pacer: Pacer | None = None,
        memory: CapacityMemory | None = None,
        adapters: Adapters | None = None,
        clock: Callable[[], datetime] | None = None,
        cleaner_clock: Callable[[], datetime] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        retry: RetryPolicy | None = None,
        patience: Patience | None = None,
    ) -> None:
        if adapters is not None and (session, pacer, retry) != (None, None, None):
            raise ValueError("a root is given its adapters, or what to make them of: not both")
        self.settings = settings
        self.adapters = adapters or Adapters(
            session,
            pacer,
            retry,
            rate_scale=settings.ec2_rate_scale,
        )
        # Whether the state table answered lately: one for everything of this root that asks
        # it (the probes' meeting, the capacity memory), so a table found down is not asked.
        self.table_health = TableHealth(monotonic)
        # The capacity memory the caller owns (None: this root's own, made on first use).
        self._memory = memory
        # The flows' "now" (None: each flow's own, the wall clock in UTC); the cleaner's, which
        # it compares with EC2's dates (default: ``clock``); the monotonic clock of deadlines;
        # the reservation core's pauses. Tests hand the emulator's.
        self.clock = clock
        self.cleaner_clock = cleaner_clock or clock
        self.monotonic = monotonic
        self.sleep = sleep
        self.patience = patience
        self._built: dict[str, Any] = {}
        self._lock = threading.RLock()

    # -- what the flows share ---------------------------------------------------------------
    @property
    def clients(self) -> Clients:
        return self.adapters.clients

    @property
    def pacer(self) -> Pacer:
        return self.adapters.pacer

    def ec2(self, region: str) -> Ec2:
        return self.adapters.ec2(region)

    def _once(self, name: str, build: Callable[[], T]) -> T:
        """``build()``'s result, made once (thread-safe: the client calls from many threads)."""
        with self._lock:
            if name not in self._built:
                self._built[name] = build()
            found: T = self._built[name]
            return found

    @property
    def memory(self) -> CapacityMemory:
        """The capacity memory probe and reserve learn into and ``history`` reads: the
        caller's, else the state table's when there is one (every container's), else this
        root's own; made on first use (release, the cleaner and the listing never use it)."""
        if self._memory is not None:
            return self._memory
        from .adapters.dynamodb_memory import MemoryTable
        from .logic.memory import CapacityMemory

        config = self.settings
        return self._once(
            "memory",
            lambda: CapacityMemory(
                MemoryTable(
                    config.state_table, config.region, self.clients, health=self.table_health
                )
                if config.state_table
                else None
            ),
        )

    def _clocks(self) -> dict[str, Any]:
        return {"clock": self.clock} if self.clock is not None else {}

    @property
    def flags(self) -> Flags:
        """The feature flags (SSM, cached 60 s) of the settings' prefix and region."""
        from .adapters.ssm import Flags

        config = self.settings
        return self._once(
            "flags",
            lambda: Flags(
                config.parameter_prefix, config.region, self.clients, self.adapters.retry
            ),
        )

    @property
    def core(self) -> ReservationCore:
        """The one path that creates and cancels reservations, in the settings' region."""
        from .logic.reservations import ReservationCore

        config = self.settings
        return self._once(
            "core",
            lambda: ReservationCore(
                self.ec2(config.region),
                config.cluster_id,
                monotonic=self.monotonic,
                sleep=self.sleep,
                patience=self.patience,
                spares=self._spares(config.region),
                **self._clocks(),
            ),
        )

    def _spares(self, region: str) -> Callable[[Reservation], Spared | None] | None:
        """The guard that keeps every cancel off the deployment's reserved pool (none
        configured: none)."""
        if self.settings.pool.empty:
            return None
        return lambda reservation: self.pool(region=region).why_spared(reservation)

    def _placement(self) -> dict[str, Any]:
        """What probe and reserve are both made of: the region's EC2 adapter, the flags, the
        reservation core, the fan-out's width, the deadlines' clock and the memory."""
        config = self.settings
        return {
            "ec2": self.ec2(config.region),
            "flags": self.flags,
            "core": self.core,
            "max_concurrency": config.max_concurrency,
            "monotonic": self.monotonic,
            "memory": self.memory,
        }

    def snapshot_services(self) -> tuple[str, ...]:
        """The services whose API models a SnapStart snapshot should hold: every entry
        point's first clients (``first_clients``) and, with a state table, DynamoDB's (the
        probes' meetings are a cold probe's first calls).
        Parsing them is most of a cold client's CPU; a snapshot does it once for every
        environment restored from it."""
        firsts = {s for services in FIRST_CLIENTS.values() for s in services}
        firsts.update(FIRST_CLIENTS_DEFAULT)
        if self.settings.state_table:
            firsts.add("dynamodb")
        return tuple(sorted(firsts))

    def prime(self) -> None:
        """Before a SnapStart snapshot: what every environment restored from it would
        otherwise do first, the same in each, done once. The API models are parsed, the
        flows' modules imported (the root imports them on a flow's first use), and the first
        clients made in the settings' region (``Clients.make_ahead``: no call, no connection,
        credentials read on first use; ``Clients.drop_connections`` after the restore). No
        flow is built: a flow's objects hold what must differ between environments (jitter
        generators, pacer buckets)."""
        import importlib

        services = self.snapshot_services()
        self.clients.preload_models(services)
        for module in FLOW_MODULES:
            importlib.import_module(module, __package__)
        self.clients.make_ahead(services, self.settings.region)

    def first_clients(self, entry: str) -> tuple[str, ...]:
        """The clients ``entry``'s first invocation makes on a thread of their own as it
        starts (``Clients.warm_first``), in the order they are made. A probe that meets the
        probes of other containers (in the state table) makes its EC2 client itself (its
        look-ups' first call) once it knows it is not a group's member: a member asks EC2
        nothing, and EC2's client is the costly one to make (its model's parse). Its arrival,
        a call to the table, is its first call, so DynamoDB's client is made first: clients
        are made one at a time, and an arrival that waited for SSM's client started the EC2
        client (the lone probe's critical path) some 80 ms later in a cold container. (A
        meeting in memory answers at once: there the client is made beside the flags' read as
        for any entry.)"""
        services = FIRST_CLIENTS.get(entry, FIRST_CLIENTS_DEFAULT)
        grouping = self.probe.grouping if entry == "probe" else None
        if grouping is not None:
            # Imported here: only a probe groups; no other entry's first invocation loads the
            # grouped probes' modules.
            from .logic.grouping import MemoryStore

            if not isinstance(grouping.meeting.store, MemoryStore):
                return ("dynamodb", *(s for s in services if s not in ("ec2", "dynamodb")))
        return services

    # -- the flows --------------------------------------------------------------------------
    @property
    def probe(self) -> Prober:
        from .logic.probe import Prober

        return self._once("probe", lambda: Prober(**self._placement(), grouping=self._coalescer()))

    def _coalescer(self) -> Coalescer | None:
        """Grouped probes of this root (None when the settings turn grouping off): they meet
        in the state table when there is one (every container's probes), else in this
        process's memory; one protocol either way (``logic.grouping``)."""
        from .logic.grouping import Coalescer, GroupStore, Meeting, MemoryStore

        config = self.settings
        if not config.probe_grouping:
            return None
        store: GroupStore
        if config.state_table:
            from .adapters.dynamodb_group import TableStore

            clock = self.clock
            store = TableStore(
                config.state_table,
                config.region,
                self.clients,
                monotonic=self.monotonic,
                wall=(lambda: clock().timestamp()) if clock is not None else time.time,
                sleep=self.sleep,
                retry=self.adapters.retry,
                health=self.table_health,
            )
        else:
            store = MemoryStore()
        meeting = Meeting(
            store,
            window=config.probe_group_window_seconds,
            max_window=config.probe_group_max_window_seconds,
            now=self.monotonic,
            pause=self.sleep,
        )
        return Coalescer(self.core, meeting, monotonic=self.monotonic)

    @property
    def reserve(self) -> Reserver:
        from .logic.reserve import Reserver

        return self._once(
            "reserve",
            lambda: Reserver(
                **self._placement(),
                **self._clocks(),
                launches=self.adapters.launches(self.settings.region),
                pools=self.pool,
                pool=self.settings.pool,
                pricing=self.adapters.pricing,
            ),
        )

    def pool(self, spec: PoolSpec | None = None, region: str | None = None) -> ReservedPool:
        """A reserved pool's reader (issue 43): ``spec`` (default: the deployment's) in
        ``region`` (default: the settings'). The deployment's pool of each region is kept
        (its group members are cached for a minute), another spec is read afresh."""
        from .logic.pool import ReservedPool

        config = self.settings
        where = region or config.region
        wanted = spec if spec is not None else config.pool

        def build() -> ReservedPool:
            return ReservedPool(
                wanted, self.ec2(where), self.adapters.resource_groups(where), self.monotonic
            )

        if wanted == config.pool:
            return self._once(f"pool:{where}", build)
        return build()

    @property
    def records(self) -> RequestRecords | None:
        """reserve's request records in the state table (None: no table; the flow finds its
        earlier work by the request-id tag instead)."""
        from .adapters.dynamodb import RequestRecords

        config = self.settings
        return self._once(
            "records",
            lambda: (
                RequestRecords(config.state_table, config.region, "reserve", self.clients)
                if config.state_table
                else None
            ),
        )

    @property
    def release(self) -> Releaser:
        from .logic.release import Releaser

        config = self.settings
        return self._once(
            "release",
            lambda: Releaser(
                self.ec2(config.region),
                self.adapters.launches(config.region),
                self.core,
                config.max_concurrency,
            ),
        )

    @property
    def cleaner(self) -> Cleaner:
        from .logic.cleaner import Cleaner

        config = self.settings
        return self._once(
            "cleaner",
            lambda: Cleaner(
                config.cluster_id,
                config.graces,
                ec2_for=self.ec2,
                launches_for=self.adapters.launches,
                stacks_for=self.adapters.stacks,
                max_concurrency=config.max_concurrency,
                monotonic=self.monotonic,
                pool_for=(None if config.pool.empty else (lambda region: self.pool(region=region))),
                **({"clock": self.cleaner_clock} if self.cleaner_clock is not None else {}),
            ),
        )

    @property
    def capacity(self) -> CapacityLister:
        from .logic.capacity import CapacityLister

        config = self.settings
        return self._once(
            "capacity",
            lambda: CapacityLister(
                config.cluster_id,
                config.regions,
                max_workers=config.max_concurrency,
                ec2_for=self.ec2,
                **self._clocks(),
            ),
        )

    def close(self, timeout: float | None = None) -> None:
        """Write what the memory still holds for the table (a process about to end, a test
        switching worlds), waiting up to ``timeout`` seconds (default: the memory's
        ``WRITE_SECONDS``). A memory never made holds nothing."""
        memory = self._memory or self._built.get("memory")
        if memory is None:
            return
        from .logic.memory import WRITE_SECONDS

        memory.flush(timeout=WRITE_SECONDS if timeout is None else timeout, everything=True)


def discovery(
    adapters: Adapters, default_regions: list[str], cluster_id: str | None, max_workers: int
) -> Discovery:
    """The client's look-ups (offerings, search, az, spot, plan, capacity) on ``adapters``:
    they need no cluster id (it only marks what the broker owns), so no root."""
    from .logic.discovery import Discovery

    return Discovery(
        default_regions,
        cluster_id=cluster_id,
        max_workers=max_workers,
        ec2_for=adapters.ec2,
        pricing=adapters.pricing,
    )
