"""Process-wide emulator state: the clock, the knobs and the lock around capacity.

Per-region capacity (pools, reservations, the Capacity Block catalogue) lives with moto's own
EC2 backend for that account and region (``emulator.models.capacity_backend``), so moto's
reset also resets it. What is not per region lives here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .clock import Clock
from .faults import Hub


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
    # EC2's eventual consistency ("Eventual consistency in the Amazon EC2 API"), on by default:
    # a reservation or instance made a moment ago is *settling*. Deterministic, so tests stay
    # fast: it settles after the calls counted below, or once it is ``lag_seconds`` old on the
    # emulator clock (a frozen clock leaves the counts to decide). ``models.consistency``.
    eventual_consistency: bool = True
    # Calls naming a new reservation by id (Describe by id, Cancel, Modify, CreateTags…) that
    # answer InvalidCapacityReservationId.NotFound.
    lag_unknown_calls: int = 1
    # The calls after those that still see it `pending` (not cancellable, not modifiable).
    lag_pending_calls: int = 1
    # Listing describes (no ids) that miss it when they filter by tag; one without a tag filter
    # shows it without its tags. Reservations and instances alike.
    lag_listing_calls: int = 2
    lag_seconds: float = 2.0
    # EC2 refuses what botocore's model does not document for the operation: filter names,
    # enum values, parameters (``emulator.documented``). False: served as before (what was
    # undocumented is still recorded in ``documented.heard``).
    refuse_undocumented: bool = True


class World:
    def __init__(self) -> None:
        self.clock = Clock()
        self.hub = Hub()
        self.settings = Settings()
        # One lock for every capacity decision: concurrent creates must not both win the
        # last slot of a pool.
        self.lock = threading.RLock()
        # "in-process" (moto's mock; faults surface as botocore exceptions) or "server".
        self.mode = "in-process"

    def reset(self) -> None:
        """Back to defaults (moto's own reset clears the per-region capacity)."""
        self.clock.reset()
        self.hub.reset()
        self.settings = Settings()


world = World()
