"""Process-wide emulator state: the clock, the knobs and the lock around capacity.

Per-region capacity (pools, reservations, the Capacity Block catalogue) lives with moto's own
EC2 backend for that account and region (``emulator.models.capacity_backend``), so moto's
reset also resets it. What is not per region lives here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from . import presets
from .clock import Clock
from .dynamodb_bill import Meter
from .faults import Hub

if TYPE_CHECKING:
    from .iam.enforcement import Roles


@dataclass
class Settings:
    # Seconds EC2 keeps a limited reservation past its EndDate ("within an hour").
    expiry_lag_seconds: float = 0.0
    # Seconds a new ODCR's capacity is really still being provisioned (`pending`, nothing can
    # launch into it). EC2 delivers capacity it has at once; the `pending` a new reservation
    # shows for a while is eventual consistency (below), not this.
    pending_seconds: float = 0.0
    # Capacity of a (AZ, type) pool that no scenario declared; None is unlimited.
    default_capacity: int | None = None
    # EC2's versions per launch template (quota); None lifts the limit.
    launch_template_version_limit: int | None = 10_000
    # An instant fleet with use-capacity-reservations-first does not use a launch template that
    # targets a Capacity Reservation (EC2 User Guide; Karpenter's designs/odcr.md). False: it
    # launches from such a template as if the strategy were not set.
    fleet_skips_reservation_targets: bool = True
    # A reserved-capacity fleet (DefaultTargetCapacityType reserved-capacity) goes through its
    # ReservationTypes in the order listed, each across the overrides in their order
    # ("reservation-types": botocore's ReservationTypes, "an ordered list: EC2 Fleet attempts
    # to launch instances into each Capacity Reservation type in the order that you specify
    # them before moving on to the next type"), or through the overrides in their priority
    # order, each across the types ("override-priority": AllocationStrategy prioritized
    # "launches instances in the priority order that you specify in your launch template
    # overrides"). AWS's two sentences disagree: chosen, docs/fidelity.md.
    reserved_fleet_order: str = "reservation-types"
    # Whether OnDemandOptions.MinTargetCapacity (all or nothing) also binds a reserved-capacity
    # fleet. Nothing says it does (it is "the minimum target capacity for On-Demand
    # Instances"), and such a fleet "launches as many instances as it can": chosen, off.
    reserved_fleet_min_target: bool = False
    # Whether ReservedCapacityFallbackOptions (On-Demand) applies to a fleet whose only
    # ReservationType is interruptible-capacity-reservation. The interruptible tutorial: "EC2
    # Fleet does not fall back to launching On-Demand Instances or Spot Instances"; the
    # multi-type options list the fallback: chosen, off (the tutorial's sentence).
    interruptible_fallback: bool = False
    # Seconds between an interruptible reservation's reclaim and the termination of what runs
    # beyond its new count: "the capacity owner can reclaim the capacity at any time with a
    # 2-minute interruption notice, after which EC2 terminates the instances".
    interruption_notice_seconds: float = 120.0
    # Whether a Capacity Reservation group takes Capacity Blocks and interruptible
    # reservations as members, not only ODCRs. AWS's group pages speak of "Capacity
    # Reservations"; issue 43 reports both accepted since 2026-08-25, no AWS page found says
    # so: chosen, on. False: GroupResources fails them (a Failed entry each).
    groups_take_blocks: bool = True
    # EC2's eventual consistency ("Eventual consistency in the Amazon EC2 API"), on by default:
    # a reservation or instance made a moment ago is *settling*, and capacity given back a
    # moment ago still counts toward the account's limits. Deterministic, so tests stay fast:
    # each lag ends after the calls counted below (None: no count, only the clock), or once it
    # is as many seconds old on the emulator clock (a frozen clock leaves the counts to
    # decide). ``models.consistency``.
    eventual_consistency: bool = True
    # Calls naming a new reservation by id (Describe by id, Cancel, Modify, CreateTags…) that
    # answer InvalidCapacityReservationId.NotFound.
    lag_unknown_calls: int = 1
    # The calls after those that still see it `pending` (not cancellable, not modifiable).
    lag_pending_calls: int | None = 1
    # Listing describes (no ids) that miss it when they filter by tag; one without a tag filter
    # shows it without its tags. Reservations and instances alike.
    lag_listing_calls: int = 2
    # Calls naming an instance just launched by id (DescribeInstances, TerminateInstances,
    # CreateTags) that answer InvalidInstanceID.NotFound (EC2's own example).
    lag_instance_calls: int = 1
    # The clock's bound on every lag above, and each kind's own (None: ``lag_seconds``). EC2
    # shows a new reservation pending "up to 5 minutes".
    lag_seconds: float = 2.0
    lag_pending_seconds: float | None = None
    lag_listing_seconds: float | None = None
    # A cancelled or expired reservation's free slots and a terminated instance keep counting
    # toward the On-Demand limits ("terminated instances count toward your instance limit for
    # a while"): for this many quota checks (None: only the clock) or seconds.
    quota_lag_checks: int | None = 1
    quota_lag_seconds: float = 2.0
    # A terminated (or stopped) instance's slot in a Capacity Block is free again only after
    # EC2 has cleaned it up ("it takes several minutes").
    block_cleanup_seconds: float = 180.0
    # A Capacity Block whose upfront payment has not cleared becomes payment-failed this long
    # after its purchase (12 hours).
    payment_timeout_seconds: float = 12 * 3600.0
    # DescribeCapacityBlockOfferings answers today's two same-day blocks too ("All Capacity
    # Blocks end at 11:30AM UTC, so the blocks starting on the same day will have durations
    # that are the closest match to your desired duration", EC2 User Guide); False: only
    # blocks from 11:30 to 11:30.
    same_day_offerings: bool = True
    # A new cancellation or date-change quote is ``pending`` (no terms, not acceptable) this
    # long before it is ``active`` (botocore's QuoteState: pending | active | expired; how long
    # is not documented: chosen, 0 by default).
    quote_pending_seconds: float = 0.0
    # How long before its end an UltraServer block's instances are ended and launches into it
    # refused: chosen (a third party's 60 minutes; AWS's own page says thirty for every block,
    # ``models.reservations``).
    ultraserver_reclaim_minutes: float = 60.0
    # EC2 refuses what botocore's model does not document for the operation: filter names,
    # enum values, parameters (``emulator.documented``). False: served as before (what was
    # undocumented is still recorded in ``documented.heard``).
    refuse_undocumented: bool = True
    # Filter values read as EC2 documents: "*" and "?" wildcards, a backslash makes the next
    # character literal (``models.filters``). False: backslashes are dropped and wildcards read
    # everywhere, a service that ignored the escapes (to show the broker compares what comes
    # back itself).
    filter_escapes: bool = True
    # IAM: a call signed with a broker function's role session (``Emulator.enforce_roles``)
    # is decided under that role's policies, synthesized from infra/ (``emulator.iam``), as
    # AWS would; False lets every call through unevaluated.
    iam_evaluation: bool = True
    # Seconds until an extension's upfront fee is paid (EC2: "payment-pending until the bill is
    # paid", failed after 12 hours or 35 minutes before the block's end); None: never paid.
    extension_payment_seconds: float | None = 60.0
    # Seconds EC2 takes to assess a future-dated Capacity Reservation ("typically completed
    # within 5 days"), and how late it is delivered after its start (0: on time; EC2 shows a
    # late one ``delayed``).
    future_assessment_seconds: float = 86_400.0
    future_delivery_delay_seconds: float = 0.0
    # Launched instances' private addresses moved into 127.0.0.0/8 (the subnet address's last
    # three octets kept): a local Slurm that reaches its nodes at their NodeAddr never sends a
    # packet off the machine. Not EC2 (a VPC has no loopback addresses); off by default, on in
    # the demo scenario that docs/slurm.md's walkthrough uses.
    loopback_addresses: bool = False
    # DynamoDB serves one partition key at most 1,000 write and 3,000 read units a second and
    # throttles past that (``emulator.dynamodb_bill``); False serves every call (the meter still
    # counts it).
    dynamodb_key_throttling: bool = True


class World:
    def __init__(self) -> None:
        self.clock = Clock()
        self.hub = Hub()
        # DynamoDB's capacity units, per table and per partition key and second.
        self.dynamodb_meter = Meter()
        # The timings' base (``emulator.presets``): "default" is Settings() as it stands.
        self.preset = "default"
        self.settings = Settings()
        # One lock for every capacity decision: concurrent creates must not both win the
        # last slot of a pool.
        self.lock = threading.RLock()
        # "in-process" (moto's mock; faults surface as botocore exceptions) or "server".
        self.mode = "in-process"
        # The broker functions' roles the emulator evaluates calls under (``emulator.iam``).
        self.iam: Roles | None = None

    def reset(self) -> None:
        """Back to the preset's settings (moto's own reset clears the per-region capacity)."""
        self.clock.reset()
        self.hub.reset()
        self.dynamodb_meter = Meter()
        self.settings = self.preset_settings()
        self.iam = None

    def use_preset(self, name: str) -> None:
        """EC2's timings as a preset gives them (``emulator.presets``), kept across resets."""
        presets.settings_of(name)  # an unknown name is refused before anything changes
        self.preset = name
        self.settings = self.preset_settings()

    def preset_settings(self) -> Settings:
        return replace(Settings(), **presets.settings_of(self.preset))


world = World()
