"""A cluster's reserved pool: the reservations the account already pays for that a cluster's
jobs may launch into, and the ladder a ``reserved-first`` job climbs (pool, then a hold of
what the pool does not cover).

The pool is named by the operator, never by the broker's own tags: a Capacity Reservation
resource group (its members, ``ListGroupResources``) and/or one tag ``key=value``. The broker
never creates, modifies or cancels a pool reservation; it only launches into one, through a
template version that targets it. How the operator names the pool (``PoolSpec``) is
``domain.pool_spec``. Pure: no AWS here, only the rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .clock import utc
from .pool_spec import DEFAULT_PRIORITY, Rung
from .tags import (
    TAG_PREFIX,
    is_owned,
    other_cluster,
    purpose_of,
)

# The tag every instance of one ladder carries (its value: the job's request id), so that the
# whole ladder's nodes are found by one exact tag, whichever rung launched them.
TAG_LADDER = f"{TAG_PREFIX}ladder"
# Which rung launched an instance (a pool reservation's id, ``hold`` or ``on-demand``).
TAG_RUNG = f"{TAG_PREFIX}rung"
# The ladder's "done" record: written on every node of the ladder (``LADDER_DONE``) before
# reserve answers ``provisioned``. A ladder whose nodes lack it was left half-done (its
# invocation died, or failed to undo it), and the cleaner ends it once no invocation of it can
# still be running (``domain.cleaner.abandoned_ladders``).
TAG_LADDER_STATE = f"{TAG_PREFIX}ladder-state"
LADDER_DONE = "done"

# EventBridge detail-types that warn a node will be stopped under it, matched by prefix (EC2
# names them "EC2 Capacity Reservation Instance Interruption Warning" for an interruptible
# reservation's nodes, "EC2 Spot Instance Interruption Warning" for Spot's): a new wording of the
# same warning still matches, and the rule that routes them (infra/events.py) uses these.
INTERRUPTION_PREFIXES: tuple[str, ...] = (
    "EC2 Capacity Reservation Instance Interruption",
    "EC2 Spot Instance Interruption",
)


def is_interruption_warning(detail_type: str) -> bool:
    return detail_type.startswith(INTERRUPTION_PREFIXES)


# Hours in the cleaner's schedule (every 5 minutes): what one sweep's count of unused pool
# instances stands for, in instance-hours.
SWEEP_HOURS = 5 / 60


@dataclass(frozen=True)
class PoolReservation:
    """One reservation of the pool as the ladder needs it (read from EC2)."""

    id: str
    kind: Rung
    instance_type: str
    availability_zone: str
    availability_zone_id: str
    platform: str
    tenancy: str
    total: int
    available: int
    state: str
    start_date: datetime | None = None
    end_date: datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


def kind_of(reservation_type: str, interruptible: bool) -> Rung:
    if reservation_type == "capacity-block":
        return Rung.CAPACITY_BLOCK
    return Rung.INTERRUPTIBLE if interruptible else Rung.ODCR


def excluded(
    reservation: PoolReservation,
    cluster_id: str,
    now: datetime,
    runtime: timedelta | None = None,
) -> str | None:
    """Why a reservation the pool names is not launched into now, or ``None``.

    A broker hold (probe or hold purpose) is never part of a pool, whoever's it is: holds are
    the ladder's last rung, made and given back by the broker. Another cluster's reservation is
    refused as ``capacity_reservation_id`` refuses it (contract v3, "Other clusters"). A block
    is used only while a run can finish before EC2 begins stopping its instances."""
    if reservation.state != "active":
        return f"state {reservation.state}"
    if is_owned(reservation.tags, cluster_id) or purpose_of(reservation.tags) is not None:
        return "a broker hold, not a pool reservation"
    other = other_cluster(reservation.tags, cluster_id)
    if other is not None:
        return f"tagged for cluster {other!r}"
    if reservation.kind is Rung.CAPACITY_BLOCK and reservation.end_date is not None:
        # Imported here: only a Capacity Block needs the blocks' rules (and the discovery
        # rules under them; cold import, issue 44).
        from . import blocks

        left = blocks.usable_seconds(
            reservation.start_date, reservation.end_date, reservation.instance_type, utc(now)
        )
        if left <= (runtime.total_seconds() if runtime else 0):
            return "the block ends before the run could finish"
    return None


@dataclass(frozen=True)
class Use:
    """``count`` of the job's instances from one pool reservation."""

    reservation: PoolReservation
    count: int


@dataclass(frozen=True)
class PoolPlan:
    """Where the pool covers the job: the subnet (index in the request's order; ``None`` when
    the pool covers nothing), what each reservation gives, and the shortfall left to hold."""

    subnet_index: int | None
    uses: tuple[Use, ...]
    shortfall: int

    @property
    def covered(self) -> int:
        return sum(u.count for u in self.uses)


def plan(
    reservations: Sequence[PoolReservation],
    instance_types: Sequence[str],
    zone_ids: Sequence[str],
    platform: str,
    tenancy: str,
    count: int,
    priority: Sequence[Rung] = DEFAULT_PRIORITY,
) -> PoolPlan:
    """The pool's part of a job of ``count`` in one AZ.

    EC2 uses a reservation only for launches whose type, platform, AZ and tenancy match it
    (EC2 User Guide, "Capacity Reservations": "instance attributes must match"). A job's nodes
    stay in one AZ (as a hold's do), so each subnet's AZ is counted on its own and the one the
    pool covers most is taken, the request's order breaking ties. Within it the reservations
    are taken in the operator's priority of kinds, then the job's order of types, then the
    larger free count first (fewer launches), then by id (the same plan every time)."""
    best = PoolPlan(None, (), count)
    for index, zone in enumerate(zone_ids):
        matching = [
            r
            for r in reservations
            if r.availability_zone_id == zone
            and r.instance_type in instance_types
            and r.platform == platform
            and r.tenancy == tenancy
            and r.available > 0
            and r.kind in priority
        ]
        matching.sort(
            key=lambda r: (
                list(priority).index(r.kind),
                list(instance_types).index(r.instance_type),
                -r.available,
                r.id,
            )
        )
        uses: list[Use] = []
        left = count
        for reservation in matching:
            if left == 0:
                break
            take = min(reservation.available, left)
            uses.append(Use(reservation, take))
            left -= take
        if count - left > best.covered:
            best = PoolPlan(index, tuple(uses), left)
    return best


def unused(reservations: Iterable[PoolReservation]) -> int:
    """The pool's instances paid for and idle now (active reservations only)."""
    return sum(r.available for r in reservations if r.state == "active")
