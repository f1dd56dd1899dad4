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
    # Seconds a new ODCR stays `pending` before it turns `active`.
    pending_seconds: float = 0.0
    # Capacity of a (AZ, type) pool that no scenario declared; None is unlimited.
    default_capacity: int | None = None
    # EC2's versions per launch template (quota); None lifts the limit.
    launch_template_version_limit: int | None = 10_000
    # An instant fleet with use-capacity-reservations-first does not use a launch template that
    # targets a Capacity Reservation (EC2 User Guide; Karpenter's designs/odcr.md). False: it
    # launches from such a template as if the strategy were not set.
    fleet_skips_reservation_targets: bool = True


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
