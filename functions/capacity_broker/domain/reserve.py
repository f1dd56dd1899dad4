"""Reserve's decisions: the answer when no pair won, and whether a caller's reservation fits."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from .clock import utc
from .errors import Outcome

CAPACITY_BLOCK = "capacity-block"


class ReserveStatus(StrEnum):
    RESERVED = "reserved"
    PROVISIONED = "provisioned"
    UNRESERVED = "unreserved"
    NO_CAPACITY = "no_capacity"
    SKIPPED = "skipped"
    REJECTED = "rejected"
    ERROR = "error"
    INVALID_REQUEST = "invalid_request"


def verdict(won: bool, strict: bool, pair_count: int) -> ReserveStatus:
    """Contract step 3: a won pair is ``reserved``. Otherwise the job waits (``no_capacity``)
    when the caller insists on a guarantee (strict) or when there was only one place to try
    anyway; with several places and no strictness it proceeds ``unreserved``, because EC2 Fleet
    may still find the capacity spread over several subnets."""
    if pair_count < 1:
        raise ValueError(f"pair_count must be >= 1, got {pair_count}")
    if won:
        return ReserveStatus.RESERVED
    if strict or pair_count == 1:
        return ReserveStatus.NO_CAPACITY
    return ReserveStatus.UNRESERVED


def possible_pairs(outcomes: Iterable[str]) -> int:
    """How many places could have held the job, for ``verdict``: a pair whose type the AZ does
    not offer (``unsupported``) never could. At least 1, so a request whose every pair is
    unsupported waits (``no_capacity``) rather than proceeding unreserved into nothing."""
    return max(1, sum(1 for outcome in outcomes if outcome != Outcome.UNSUPPORTED))


@dataclass(frozen=True)
class ExistingReservation:
    """A caller's ``capacity_reservation_id`` as DescribeCapacityReservations shows it."""

    id: str
    state: str
    reservation_type: str  # "default" (ODCR) or "capacity-block"
    instance_type: str
    availability_zone_id: str
    platform: str
    tenancy: str
    available_count: int
    start_date: datetime | None = None
    owner: str | None = None
    # Carries this broker's ownership tags (a probe, or another job's hold).
    owned_by_broker: bool = False
    # How many instances it is for. A Capacity Block that has not started shows none
    # available (and a TotalInstanceCount of 0) but carries its size in a tag.
    size: int = 0
    end_date: datetime | None = None
    # The other broker cluster it is tagged for (``tags.other_cluster``), if any.
    other_cluster: str | None = None

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == CAPACITY_BLOCK


@dataclass(frozen=True)
class Wanted:
    """What the job needs, from the request (platform already resolved from an image)."""

    instance_types: Collection[str]
    availability_zone_ids: Collection[str]  # of the request's subnets
    platform: str
    tenancy: str
    instance_count: int
    # How long the job will run, when the caller knows (``runtime_seconds``).
    runtime_seconds: int | None = None


@dataclass(frozen=True)
class Rejected:
    """The reservation cannot serve the job: answer ``rejected`` with this reason."""

    reason: str


@dataclass(frozen=True)
class WaitForStart:
    """A scheduled Capacity Block: answer ``no_capacity`` and ask again when it starts."""

    retry_after_seconds: int
    reason: str


@dataclass(frozen=True)
class TooLate:
    """An active Capacity Block with too little time left before EC2 stops its instances:
    answer ``no_capacity`` naming its end (the job stays queued; only another block, or this
    one extended, can take it)."""

    reason: str


@dataclass(frozen=True)
class StillPending:
    """An ODCR EC2 still shows ``pending`` (being provisioned: "up to 5 minutes" for a new
    one, View the state of a Capacity Reservation): answer ``no_capacity`` and ask again
    shortly; it becomes ``active`` (or ``failed``, then rejected)."""

    reason: str


def validate_existing(
    existing: ExistingReservation, wanted: Wanted, now: datetime
) -> Rejected | WaitForStart | TooLate | StillPending | None:
    """``None`` when the reservation can take the job now; otherwise why not.

    Usable states are ``active`` for both kinds. A Capacity Block that has not started
    (``scheduled``, or ``payment-pending`` before that) is worth waiting for when it matches:
    EC2 shows it with 0 available until its start (EC2 User Guide, "View Capacity Blocks"),
    so its size (the ``aws:ec2capacityreservation:incrementalRequestedQuantity`` tag) is what
    must fit, and the answer is to ask again at its start. An ODCR still ``pending`` (made a
    moment ago: EC2 may show that for minutes) is worth asking again for shortly when it
    matches. Anything else is rejected.
    Attributes are checked before the wait so a job is never told to wait for a block it could
    not use.

    A Capacity Block is worth using only while the job can finish in it: EC2 begins
    terminating its instances 30 minutes before its end (60 for UltraServers,
    ``domain.blocks``). A block whose whole usable time is shorter than the job's runtime can
    never take it (``Rejected``); an active one with less than the runtime left (in its last
    30 minutes: nothing left at all) answers ``TooLate``.
    """
    now = utc(now)
    rid = existing.id
    if existing.owned_by_broker:
        # The cleaner and release decide by tags alone: they would cancel it under the job.
        return Rejected(
            f"{rid} is one of this broker's own reservations (a probe or another job's hold), "
            "which the cleaner may cancel at any time; pass a reservation you manage"
        )
    if existing.other_cluster is not None:
        # That cluster's cleaner would cancel it as consumed once this job used it up.
        return Rejected(
            f"{rid} belongs to broker cluster {existing.other_cluster!r} (its "
            "capacity-broker:cluster-id tag), not to this one; pass a reservation of your own"
        )
    # Imported here: the discovery rules cost every entry point's cold import, and only a
    # caller's own Capacity Block needs this one.
    from .discovery import BLOCK_NOT_STARTED

    waiting = existing.is_capacity_block and existing.state in BLOCK_NOT_STARTED
    # A future-dated ODCR EC2 has confirmed (``scheduled``) holds nothing until its start ("The
    # total instance count remains 0 ... in the scheduled state"): like a scheduled block, it
    # is worth waiting for (``plan`` counts it as ready).
    future = not existing.is_capacity_block and existing.state == "scheduled"
    waiting = waiting or future
    provisioning = not existing.is_capacity_block and existing.state == "pending"
    if existing.state != "active" and not (waiting or provisioning):
        kind = "Capacity Block" if existing.is_capacity_block else "Capacity Reservation"
        return Rejected(f"{kind} {rid} is {existing.state}, not active")
    if existing.instance_type not in wanted.instance_types:
        return Rejected(
            f"{rid} is for {existing.instance_type}, which is not among the job's instance types"
        )
    if existing.availability_zone_id not in wanted.availability_zone_ids:
        return Rejected(
            f"{rid} is in {existing.availability_zone_id}, where none of the job's subnets are"
        )
    if existing.platform != wanted.platform:
        return Rejected(f"{rid} is for {existing.platform}, the job needs {wanted.platform}")
    if existing.tenancy != wanted.tenancy:
        return Rejected(
            f"{rid} has {existing.tenancy} tenancy, the job needs {wanted.tenancy} tenancy"
        )
    if (waiting or provisioning) and existing.size < wanted.instance_count:
        kind = "Capacity Block" if existing.is_capacity_block else "Capacity Reservation"
        return Rejected(
            f"{kind} {rid} is for {existing.size} instances, the job needs {wanted.instance_count}"
        )
    if provisioning:
        return StillPending(
            f"Capacity Reservation {rid} is still pending (EC2 is provisioning it); ask again "
            "shortly"
        )
    if not waiting and existing.available_count < wanted.instance_count:
        return Rejected(
            f"{rid} has {existing.available_count} instances available, "
            f"the job needs {wanted.instance_count}"
        )
    if existing.is_capacity_block and existing.end_date is not None:
        late = _block_time(existing, wanted, now)
        if late is not None:
            return late
    if waiting:
        kind = "Capacity Block" if existing.is_capacity_block else "Future-dated reservation"
        if existing.start_date is None:
            return Rejected(f"{kind} {rid} is {existing.state} but has no start date")
        start = utc(existing.start_date, "start_date")
        seconds = (start - now).total_seconds()
        # Still waiting after its start (payment, activation or delivery not through yet):
        # ask again shortly.
        wait = max(1, math.ceil(seconds))
        return WaitForStart(
            wait, f"{kind} {rid} ({existing.state}) starts at {_iso(start)}, in {wait} s"
        )
    return None


# The words of the refusal of a job that runs longer than its block can ever give it: the job's
# own request (another job of the same node set fits), which the Slurm breaker does not count.
_RUNS_PAST = "can run a job for"


def runs_past_block(reason: str) -> bool:
    """Whether ``reason`` is the refusal of a job whose runtime no Capacity Block window
    holds (``_block_time``): "Capacity Block <id> can run a job for <n> s at most ..."."""
    words = reason.split(" ", 3)
    if len(words) < 4 or words[:2] != ["Capacity", "Block"] or not words[2]:
        return False
    rest = words[3]
    if not rest.startswith(_RUNS_PAST + " "):
        return False
    seconds, _, tail = rest[len(_RUNS_PAST) + 1 :].partition(" ")
    return seconds.isdigit() and tail.startswith("s at most ")


def _block_time(
    existing: ExistingReservation, wanted: Wanted, now: datetime
) -> Rejected | TooLate | None:
    """Whether the job can still finish in the block before EC2 stops its instances."""
    # Imported here: only a Capacity Block needs the blocks' rules (and the discovery rules
    # under them); the release and the cleaner use this module for the templates' data, and a
    # reserve without a block never asks (cold import, issues 16 and 44).
    from . import blocks

    assert existing.end_date is not None
    rid = existing.id
    end = utc(existing.end_date, "end_date")
    lead = blocks.reclaim_lead(existing.instance_type)
    until = blocks.usable_until(end, existing.instance_type)
    runtime = wanted.runtime_seconds or 0
    stops = (
        f"it ends at {_iso(end)} and EC2 begins terminating its instances "
        f"{int(lead.total_seconds() // 60)} minutes before, at {_iso(until)}"
    )
    if existing.start_date is not None:
        window = blocks.usable_window_seconds(existing.start_date, end, existing.instance_type)
        if runtime > window:
            return Rejected(
                f"Capacity Block {rid} {_RUNS_PAST} {int(window)} s at most ({stops}); "
                f"the job runs {runtime} s"
            )
    left = blocks.usable_seconds(existing.start_date, end, existing.instance_type, now)
    if left <= 0 or left < runtime:
        need = f"; the job runs {runtime} s" if runtime else ""
        return TooLate(f"Capacity Block {rid} has {int(left)} s left for instances ({stops}){need}")
    return None


def _iso(moment: datetime) -> str:
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class VersionData:
    """A new launch template version: ``data`` on top of the source version (``inherit``),
    or ``data`` alone, complete, when an inherited parameter had to go."""

    data: dict[str, object]
    inherit: bool


def template_version_data(
    reservation_id: str,
    capacity_block: bool,
    tenancy: str,
    placement_group_arn: str | None = None,
    source: Mapping[str, object] | None = None,
) -> VersionData:
    """What the job's new launch template version says, given its source version's data.

    Only this reservation, never On-Demand beside it: EC2 accepts a target together with a
    preference only when the preference is ``capacity-reservations-only``. The market type is
    explicit (contract step 4): ``capacity-block`` for a Capacity Block, and none at all for an
    On-Demand Capacity Reservation, whatever the source said: a ``spot`` or ``capacity-block``
    market type would make every launch into the ODCR fail. A reservation made in a cluster
    placement group serves only launches into that group, so the version names it (with the
    tenancy, as ``Placement`` replaces the source's as a whole).

    A version built with SourceVersion inherits every parameter it does not set, and EC2 has
    no way to unset one ("If you specify additional launch parameters for the new version,
    they overwrite any corresponding launch parameters inherited from the source version"; an
    empty structure never reaches EC2). So when the source has a market type an ODCR cannot
    take, the version is built without SourceVersion, from the source's own data minus
    ``InstanceMarketOptions``.
    """
    changes: dict[str, object] = {
        "CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id},
        }
    }
    if capacity_block:
        changes["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    if placement_group_arn:
        group = placement_group_arn.split(":placement-group/", 1)[-1]
        changes["Placement"] = {"GroupName": group, "Tenancy": tenancy}
    if capacity_block or not source or "InstanceMarketOptions" not in source:
        return VersionData(changes, inherit=True)
    whole = {k: v for k, v in source.items() if k != "InstanceMarketOptions"}
    return VersionData({**whole, **changes}, inherit=False)
