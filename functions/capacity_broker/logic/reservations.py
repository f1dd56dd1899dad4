"""The reservation core that probe, reserve, release and the cleaner share.

One place creates reservations the way the contract demands (targeted, limited, UTC
EndDate, ownership tags on create, deterministic ClientToken) and one place cancels them
(retried; "already gone" counts as done).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2, NewReservation, Reservation, Subnet
from ..domain import tags as tagging
from ..domain.errors import ErrorClass, cancel_is_done
from ..domain.tokens import client_token, end_date, token_nonce

# How many tokens one attempt may try: an IdempotentParameterMismatch (an earlier invocation
# of the same request used the token with another EndDate) or a reservation that no longer
# holds moves it to the next (domain.tokens.token_nonce).
MAX_TOKEN_GENERATIONS = 3
# States in which a reservation holds capacity.
HOLDING_STATES = ("active", "pending")


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class HoldSpec:
    """What to reserve, and for whom (the ownership tags follow from it)."""

    purpose: tagging.Purpose
    request_id: str
    instance_type: str
    subnet: Subnet
    count: int
    platform: str
    tenancy: str = "default"
    job_id: str | None = None
    stack_name: str | None = None
    placement_group_arn: str | None = None
    extra_tags: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Held:
    reservation: Reservation
    # monotonic time the create answered: the reservation bills from about then
    since: float
    reused: bool = False


class ReservationCore:
    def __init__(
        self,
        ec2: Ec2,
        cluster_id: str,
        clock: Callable[[], datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ec2 = ec2
        self.cluster_id = cluster_id
        self.clock = clock
        self.monotonic = monotonic

    def tags_for(self, spec: HoldSpec) -> dict[str, str]:
        return tagging.ownership_tags(
            cluster_id=self.cluster_id,
            purpose=spec.purpose,
            request_id=spec.request_id,
            subnet_id=spec.subnet.subnet_id,
            job_id=spec.job_id,
            stack_name=spec.stack_name,
            extra=spec.extra_tags,
        )

    def hold(self, spec: HoldSpec, deadline: float | None = None) -> Held:
        """Reserve ``spec.count`` instances in the subnet's AZ, or raise ``AwsError``."""
        for generation in range(MAX_TOKEN_GENERATIONS):
            end = end_date(self.clock(), spec.purpose)
            new = NewReservation(
                instance_type=spec.instance_type,
                availability_zone_id=spec.subnet.availability_zone_id,
                platform=spec.platform,
                tenancy=spec.tenancy,
                count=spec.count,
                end_date=end,
                client_token=client_token(
                    spec.purpose,
                    spec.request_id,
                    spec.instance_type,
                    spec.subnet.subnet_id,
                    nonce=token_nonce(spec.purpose, generation, end),
                ),
                tags=self.tags_for(spec),
                placement_group_arn=spec.placement_group_arn,
            )
            try:
                reservation = self.ec2.create_reservation(new, deadline)
            except AwsError as error:
                if error.error_class is not ErrorClass.IDEMPOTENCY:
                    raise
                # An earlier invocation of this request made this attempt with another
                # EndDate. If its reservation still holds, it is ours: use it, never a second.
                earlier = self.earlier(spec, deadline)
                if earlier is not None:
                    return Held(earlier, self.monotonic(), reused=True)
                continue
            if reservation.state not in HOLDING_STATES:
                # EC2 answers a ClientToken it has seen (same parameters) with the reservation
                # it made then; an earlier invocation of this request has since cancelled it
                # (or it expired). That is no hold: a fresh token asks EC2 again.
                continue
            return Held(reservation, self.monotonic())
        raise AwsError(
            "CreateCapacityReservation",
            "IdempotentParameterMismatch",
            "every ClientToken generation for this attempt is already used",
        )

    def earlier(self, spec: HoldSpec, deadline: float | None = None) -> Reservation | None:
        """This request's live reservation for the same type and subnet, found by its tags."""
        found = self.ec2.reservations(
            filters={
                f"tag:{tagging.TAG_CLUSTER_ID}": [self.cluster_id],
                f"tag:{tagging.TAG_REQUEST_ID}": [spec.request_id],
                f"tag:{tagging.TAG_SUBNET_ID}": [spec.subnet.subnet_id],
                f"tag:{tagging.TAG_PURPOSE}": [str(spec.purpose)],
                "instance-type": [spec.instance_type],
                "state": ["active", "pending"],
            },
            deadline=deadline,
        )
        return found[0] if found else None

    def owns(self, reservation: Reservation) -> bool:
        return reservation.reservation_type != "capacity-block" and tagging.is_owned(
            reservation.tags, self.cluster_id
        )

    def release(self, reservation: Reservation, deadline: float | None = None) -> None:
        """Cancel one of OUR reservations; one already cancelled or gone counts as done.

        The ownership check lives here, in front of the only cancel call the broker makes, so
        no flow can cancel a reservation it does not own or a Capacity Block.
        """
        if not self.owns(reservation):
            raise NotOwnedError(reservation.id)
        try:
            self.ec2.cancel_reservation(reservation.id, deadline)
        except AwsError as error:
            if not cancel_is_done(error.error_class):
                raise


class NotOwnedError(Exception):
    """Refused: the reservation is not this cluster's (or is a Capacity Block)."""

    def __init__(self, reservation_id: str) -> None:
        super().__init__(f"{reservation_id} is not owned by this broker")
        self.reservation_id = reservation_id
