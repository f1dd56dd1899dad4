"""What every part of the capacity backend shares: the region's zones and pools, quotas,
tags, the reservation by id, and the helpers for EC2's values (platforms, ids, UTC dates).

Every decision that reads and changes capacity runs under ``world.lock``: two concurrent
creates must not both win the last slot of a pool.
"""

from __future__ import annotations

import functools
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from moto.core.utils import get_service_model
from moto.ec2.models import EC2Backend
from moto.ec2.utils import random_id

from ..exceptions import (
    client_error,
    reservation_malformed,
    reservation_not_found,
)
from ..state import world
from .consistency import Lingering, Propagation
from .offerings import Catalogue
from .pools import Pool, Quotas
from .reservations import CapacityReservation
from .tokens import ClientTokens


@functools.cache
def platforms() -> frozenset[str]:
    """EC2's CapacityReservationInstancePlatform values, from botocore's model (one source)."""
    model = get_service_model("ec2")
    return frozenset(model.shape_for("CapacityReservationInstancePlatform").enum)


DEFAULT_PAGE = 1000


def new_reservation_id() -> str:
    return random_id(prefix="cr", size=17)


def new_block_id() -> str:
    return random_id(prefix="cb", size=17)


def utc(value: datetime | None) -> datetime | None:
    """moto's request parser yields naive datetimes; EC2 means UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _utc_dates(params: dict[str, Any]) -> dict[str, Any]:
    return {k: utc(v) if isinstance(v, datetime) else v for k, v in params.items()}


class BackendBase:
    """The state of one account and region, and the look-ups every concept uses."""

    def __init__(self, ec2: EC2Backend) -> None:
        self.ec2 = ec2
        self.account_id: str = ec2.account_id
        self.region: str = ec2.region_name
        self.reservations: dict[str, CapacityReservation] = {}
        self.client_tokens = ClientTokens()
        self.pools: dict[tuple[str, str], Pool] = {}
        self.unsupported: set[tuple[str, str]] = set()
        self.quotas = Quotas()
        self.catalogue = Catalogue(self.region)
        # instance id -> reservation id, or None when it runs on pool capacity
        self.instance_sources: dict[str, str | None] = {}
        self.pool_instances: Counter[tuple[str, str]] = Counter()
        # What was made a moment ago and is still settling (EC2's eventual consistency), and
        # what was given back a moment ago and still counts toward the account's limits.
        self.propagation = Propagation()
        # Capacity Block extension offerings issued (``extensions``), and the cancellation and
        # date-change quotes of future-dated reservations (``future``), by id.
        self.extension_offers: dict[str, Any] = {}
        self.quotes: dict[str, Any] = {}
        self.lingering = Lingering()
        self._zones: dict[str, str] | None = None

    # -- geography ----------------------------------------------------------------------
    @property
    def zones(self) -> dict[str, str]:
        """AZ name -> AZ id for this region (moto's real mapping)."""
        if self._zones is None:
            self._zones = {z.name: z.zone_id for z in self.ec2.describe_availability_zones()}
        return self._zones

    def resolve_az(self, name: str | None, zone_id: str | None) -> tuple[str, str]:
        if name and zone_id:
            raise client_error(
                "InvalidParameterCombination",
                "You can specify either AvailabilityZone or AvailabilityZoneId, not both.",
            )
        if not name and not zone_id:
            raise client_error(
                "MissingParameter",
                "The request must contain the parameter AvailabilityZone or AvailabilityZoneId",
            )
        if name:
            if name not in self.zones:
                raise client_error(
                    "InvalidParameterValue",
                    f"Invalid availability zone: [{name}]",
                )
            return name, self.zones[name]
        by_id = {v: k for k, v in self.zones.items()}
        if zone_id not in by_id:
            raise client_error(
                "InvalidParameterValue", f"Invalid availability zone ID: [{zone_id}]"
            )
        return by_id[zone_id], str(zone_id)

    def offered(self, availability_zone: str, instance_type: str) -> bool:
        if (availability_zone, instance_type) in self.unsupported:
            return False
        if (availability_zone, instance_type) in self.pools:
            return True
        from moto.ec2.models.instance_types import INSTANCE_TYPES

        return instance_type in INSTANCE_TYPES

    def held_or_pooled(self, known_types: Any) -> set[tuple[str, str]]:
        """The (instance type, AZ) pairs this region's scenario gives capacity for, or some
        reservation or Capacity Block of the world holds (EC2 makes reservations only for
        types an AZ offers), among ``known_types``, read under the world's lock: a listing
        runs beside creates and cancels, and reading the reservations while one is added
        failed with "dictionary changed size during iteration" (an HTTP 500)."""
        with world.lock:
            zones = self.zones
            pairs = {
                (instance_type, zone)
                for zone, instance_type in self.pools
                if instance_type in known_types and zone in zones
            }
            pairs |= {
                (r.instance_type, r.availability_zone)
                for r in self.reservations.values()
                if r.availability_zone in zones
            }
            return pairs

    def _pool(self, availability_zone: str, instance_type: str) -> Pool:
        key = (availability_zone, instance_type)
        if key not in self.pools:
            self.pools[key] = Pool(
                self.region, availability_zone, instance_type, world.settings.default_capacity
            )
        return self.pools[key]

    def set_pool(self, availability_zone: str, instance_type: str, capacity: int | None) -> Pool:
        with world.lock:
            pool = self._pool(availability_zone, instance_type)
            pool.capacity = capacity
            return pool

    # -- quotas and tags ----------------------------------------------------------------
    def usage(self) -> dict[str, int]:
        """On-Demand instances held per type: active and pending reservations and instances
        running outside them."""
        held: Counter[str] = Counter()
        for reservation in self.reservations.values():
            if reservation.counts_toward_quota:
                held[reservation.instance_type] += reservation.total_instance_count
        for (_, instance_type), count in self.pool_instances.items():
            held[instance_type] += count
        return dict(held)

    def quota_usage(self) -> dict[str, int]:
        """What a quota check counts now: ``usage`` plus what was given back a moment ago and
        still counts (``consistency.Lingering``). The check itself counts toward that lag."""
        held = Counter(self.usage())
        held.update(self.lingering.counted(world.clock.now()))
        return dict(held)

    def tags_of(self, resource_id: str) -> dict[str, str]:
        return dict(self.ec2.tags.get(resource_id, {}))

    def get(self, reservation_id: str) -> CapacityReservation:
        if not reservation_id.startswith("cr-") or len(reservation_id) < 11:
            raise reservation_malformed(reservation_id)
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            raise reservation_not_found(reservation_id)
        return reservation

    def _tag(self, reservation: CapacityReservation, tags: dict[str, str]) -> None:
        """The caller's tags plus those EC2 sets itself (a block's size and type)."""
        everything = {**tags, **reservation.system_tags()}
        if everything:
            self.ec2.create_tags([reservation.id], everything)
