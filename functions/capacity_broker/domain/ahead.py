"""Future-dated On-Demand Capacity Reservations: what EC2 accepts, checked before any call, and
what a reservation inside its commitment means.

EC2's terms (botocore 1.44.5 ``CreateCapacityReservation``; EC2 User Guide, "Concepts for
Amazon EC2 Capacity Reservations" and "Reserve compute capacity with EC2 On-Demand Capacity
Reservations", Limitations):

- requested "between 5 and 120 days in advance" (``StartDate``);
- a commitment (``CommitmentDuration``, in seconds) of at least 14 days: "The minimum
  commitment duration is 14 days";
- "an instance count with a minimum of 32 vCPUs" (8 x m5.xlarge);
- instance families C, M, R, I, T and G (botocore's model), to which the User Guide's
  Limitations add U and X: both are accepted here, EC2 has the last word;
- ``targeted`` matching only ("When you request a future-dated Capacity Reservation, you can
  specify only targeted matching criteria"), ``DeliveryPreference`` ``incremental`` ("The only
  supported value is incremental"), no Outpost and no placement group.

During its commitment a reservation "can't decrease the instance count below the committed
instance count, ... or cancel" without EC2's cancellation charge: ``in_commitment`` is the one
test of it, and the cleaner never cancels such a reservation (``domain.cleaner``).

Pure: ``now`` is an argument.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .clock import utc

MIN_LEAD = timedelta(days=5)
MAX_LEAD = timedelta(days=120)
MIN_COMMITMENT = timedelta(days=14)
# CreateCapacityReservation.CommitmentDuration: "range 1..200000000" seconds (botocore).
MAX_COMMITMENT_SECONDS = 200_000_000
MIN_VCPUS = 32
DELIVERY_PREFERENCE = "incremental"
MATCH_CRITERIA = "targeted"
# "You can request future-dated Capacity Reservations for instance types in the C, M, R, I,
# T, and G instance families only" (botocore 1.44.5, CreateCapacityReservation.InstanceType).
# The letters an instance type's family starts with, before its generation digit: c7i -> c,
# im4gn -> im, gr6 -> gr. inf2 (Inferentia), trn1 (Trainium) and mac2 are other families, not
# I, T or M; U (u-6tb1) and X (x2idn) are not among them.
FAMILIES = frozenset({"c", "m", "r", "i", "im", "is", "t", "g", "gr"})
FAMILY_LETTERS = "C, M, R, I, T and G"
# States of a future-dated reservation before it is delivered (botocore's
# CapacityReservationState: "(Future-dated Capacity Reservations)").
NOT_DELIVERED = frozenset({"assessing", "scheduled", "delayed", "unsupported"})


def family(instance_type: str) -> str:
    """The letters before the generation digit: ``c7i`` → ``c``, ``u-6tb1`` → ``u``."""
    letters = []
    for char in instance_type.lower():
        if not ("a" <= char <= "z"):
            break
        letters.append(char)
    return "".join(letters)


def requested_start(start: datetime) -> datetime:
    """The start a request is made for: the next whole hour (UTC), so that ``+30d`` asked
    twice in the same hour is the same request (its key and ClientToken), not two."""
    start = utc(start, "start")
    whole = start.replace(minute=0, second=0, microsecond=0)
    return whole if whole == start else whole + timedelta(hours=1)


def refusals(
    instance_type: str,
    count: int,
    vcpus: int | None,
    start: datetime,
    commitment: timedelta,
    now: datetime,
) -> list[tuple[str, str]]:
    """Every term of a future-dated request EC2 would refuse, as (field, why); empty when
    none. ``vcpus``: the type's vCPUs (``None``: unknown, left to EC2)."""
    problems: list[tuple[str, str]] = []
    if family(instance_type) not in FAMILIES:
        problems.append(
            (
                "instance_type",
                f"{instance_type} is not in a family EC2 reserves ahead for ({FAMILY_LETTERS})",
            )
        )
    if not 1 <= count <= 1000:
        problems.append(("instance_count", "must be between 1 and 1000"))
    elif vcpus is not None and count * vcpus < MIN_VCPUS:
        need = -(-MIN_VCPUS // vcpus)
        problems.append(
            (
                "instance_count",
                f"{count} x {instance_type} is {count * vcpus} vCPUs; a future-dated "
                f"reservation needs at least {MIN_VCPUS} ({need} instances)",
            )
        )
    lead = utc(start, "start") - utc(now)
    if not MIN_LEAD <= lead <= MAX_LEAD:
        problems.append(
            (
                "start",
                f"must be between {MIN_LEAD.days} and {MAX_LEAD.days} days ahead "
                f"({lead.total_seconds() / 86400:.1f} days given)",
            )
        )
    if commitment < MIN_COMMITMENT:
        problems.append(("commitment_days", f"must be at least {MIN_COMMITMENT.days} days"))
    elif commitment.total_seconds() > MAX_COMMITMENT_SECONDS:
        problems.append(("commitment_days", f"must be at most {MAX_COMMITMENT_SECONDS} seconds"))
    return problems


def in_commitment(
    commitment_end: datetime | None,
    future_dated: bool,
    state: str,
    now: datetime,
) -> bool:
    """Whether a reservation is inside its commitment: delivered and before its commitment
    end, or a future-dated one scheduled for delivery (a cancellation is charged).
    ``assessing`` and ``delayed`` are free to cancel (EC2 User Guide, "Cancel a Capacity
    Reservation"), ``unsupported`` will never be delivered."""
    if commitment_end is not None and utc(now) < utc(commitment_end, "commitment_end"):
        return True
    return future_dated and commitment_end is None and state == "scheduled"
