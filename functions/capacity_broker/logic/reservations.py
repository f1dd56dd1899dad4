"""The reservation core that probe, reserve, release and the cleaner share.

One place creates reservations the way the contract demands (targeted, limited, UTC
EndDate, ownership tags on create, deterministic ClientToken) and one place cancels them
(done only when EC2 confirms it).

EC2 is eventually consistent ("Eventual consistency in the Amazon EC2 API"): a reservation made
a moment ago can be unknown to the next calls that name it, show ``pending`` (not cancellable)
for a while, and be missing from listings filtered by tag. None of that means it is gone, so
this core looks again, with growing pauses, until EC2 shows it or the caller's deadline comes:
a cancel is confirmed by EC2 (accepted, or the reservation shown in a final state), never
inferred from NotFound; an earlier invocation's reservation is waited for, never replaced.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2, NewReservation, Reservation, Subnet
from ..domain import tags as tagging
from ..domain.errors import ErrorClass, no_longer_holds, not_seen_yet
from ..domain.tokens import (
    CHANGED_REQUEST,
    CHANGED_REQUEST_CODE,
    client_token,
    end_date,
    next_generation,
    token_nonce,
)

T = TypeVar("T")

# How many ClientTokens one ``hold`` call may try: an IdempotentParameterMismatch (another
# invocation of the same request used the token with another EndDate) or a reservation that no
# longer holds moves it to the next generation (domain.tokens.token_nonce). The generation
# itself is not bounded: a request can use many over its life (a fan-out gives a hold back to
# make room and holds again, each time with the next one; a retried request skips over every
# generation EC2 shows as spent, ``domain.tokens.next_generation``). One call needs one try,
# two when an earlier invocation spent its token; more only while a listing lags behind.
MAX_TOKEN_GENERATIONS = 4
# States in which a reservation holds capacity.
HOLDING_STATES = ("active", "pending")
# A cancel or look-up without a deadline of its own waits at most this long.
DEFAULT_SETTLE_SECONDS = 10.0


def utcnow() -> datetime:
    return datetime.now(UTC)


def _changed(spec: HoldSpec) -> AwsError:
    return AwsError(
        "CreateCapacityReservation",
        CHANGED_REQUEST_CODE,
        f"request_id {spec.request_id} {CHANGED_REQUEST}; nothing new was made",
    )


def changed_request(reservation: Reservation, digest: str | None) -> bool:
    """Whether an earlier hold of a request id was made for another request than the one
    whose identity is ``digest`` (a hold made before holds carried the digest says nothing)."""
    made_for = reservation.tags.get(tagging.TAG_REQUEST_DIGEST)
    return digest is not None and made_for is not None and made_for != digest


@dataclass(frozen=True)
class Patience:
    """How the broker waits for EC2 to show what was made a moment ago.

    Pauses double from ``base`` up to ``cap`` seconds (half of each fixed, half jittered), and
    always end inside the caller's deadline. EC2 advises backing off from "a couple of seconds"
    for long waits; a probe answers within seconds, so the first looks come sooner.
    """

    base: float = 0.1
    cap: float = 2.0
    # What must be there (our cancel, an earlier invocation's hold) is looked at again this
    # many times at most (about 10 s with the defaults), the deadline permitting.
    looks: int = 10
    # An empty answer may be the truth (nothing there) or EC2 not showing yet what was made a
    # moment ago: looked at again this many times (about half a second). A longer lag is left
    # to the cleaner and the EndDate: every "nothing found" would pay for a longer wait.
    empty_looks: int = 3


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
    # The request's identity (``domain.tokens.identity_digest``), tagged on a hold: an
    # earlier invocation's hold is taken over only when it was made for the same request.
    request_digest: str | None = None


@dataclass(frozen=True)
class Held:
    reservation: Reservation
    # monotonic time the create answered: the reservation bills from about then
    since: float
    reused: bool = False
    # The ClientToken generation of this attempt known to be spent (by this hold, or by the
    # earlier invocation's hold it took over): a new hold of the same attempt after this one
    # is given back starts at the next (``hold(first_generation=...)``).
    generation: int = 0


class ReservationCore:
    def __init__(
        self,
        ec2: Ec2,
        cluster_id: str,
        clock: Callable[[], datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        patience: Patience | None = None,
    ) -> None:
        self.ec2 = ec2
        self.cluster_id = cluster_id
        self.clock = clock
        self.monotonic = monotonic
        self.sleep = sleep
        self.patience = patience or Patience()
        self._rng = random.Random()

    def tags_for(self, spec: HoldSpec) -> dict[str, str]:
        return tagging.ownership_tags(
            cluster_id=self.cluster_id,
            purpose=spec.purpose,
            request_id=spec.request_id,
            subnet_id=spec.subnet.subnet_id,
            job_id=spec.job_id,
            stack_name=spec.stack_name,
            extra=spec.extra_tags,
            request_digest=spec.request_digest,
        )

    def hold(
        self,
        spec: HoldSpec,
        deadline: float | None = None,
        given_back: Callable[[], None] | None = None,
        first_generation: int = 0,
    ) -> Held:
        """Reserve ``spec.count`` instances in the subnet's AZ, or raise ``AwsError``.

        ``first_generation``: the first ClientToken generation to use; a caller that gave back
        its own hold of this attempt (``Held.generation``) asks for the next one, because EC2
        answers the spent token with the reservation it made then (or a mismatch).
        ``given_back`` is called when EC2 shows that an earlier invocation of this request
        made this attempt's reservation and has given it back: that invocation got this far
        and may have gone further (a fleet whose nodes a listing made a moment after does not
        show yet), whatever this attempt ends in."""
        generation = first_generation
        for _ in range(MAX_TOKEN_GENERATIONS):
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
                # The next generation only once EC2 shows that none of them holds.
                earlier, seen = self._earlier(spec, generation, deadline)
                if earlier is not None:
                    spent = max(generation, seen - 1)
                    return Held(earlier, self.monotonic(), reused=True, generation=spent)
                if given_back is not None:
                    given_back()
                generation = next_generation(spec.purpose, generation, seen)
                continue
            if changed_request(reservation, spec.request_digest):
                # EC2 answered the token with a hold an earlier invocation made for another
                # request under this id (the two differ in what EC2 does not compare).
                raise _changed(spec)
            if reservation.state not in HOLDING_STATES:
                # EC2 answers a ClientToken it has seen (same parameters) with the reservation
                # it made then; an earlier invocation of this request has since cancelled it
                # (or it expired). That is no hold: a fresh token asks EC2 again.
                if given_back is not None:
                    given_back()
                generation = next_generation(spec.purpose, generation)
                continue
            return Held(reservation, self.monotonic(), generation=generation)
        raise AwsError(
            "CreateCapacityReservation",
            "IdempotentParameterMismatch",
            f"{MAX_TOKEN_GENERATIONS} ClientToken generations for this attempt were already "
            "used by earlier invocations of the request",
        )

    def earlier(
        self, spec: HoldSpec, generation: int = 0, deadline: float | None = None
    ) -> Reservation | None:
        """This request's live reservation for the same type and subnet (found by its tags),
        or None when EC2 shows that none of them holds any more.

        EC2 refused ClientToken ``generation`` as used with other parameters, and this
        attempt's tokens are used in order: an earlier invocation made one reservation with
        each of the tokens 0…``generation``. So EC2 has at least ``generation + 1`` of them,
        whatever a listing made a moment after shows; until it shows them all, look again (a
        tag listing can miss a new reservation for a while). Not seen before the deadline:
        ``AwsError`` (IdempotentParameterMismatch), and no second reservation is made.
        """
        return self._earlier(spec, generation, deadline)[0]

    def _earlier(
        self, spec: HoldSpec, generation: int, deadline: float | None
    ) -> tuple[Reservation | None, int]:
        """``earlier``, and how many of the attempt's reservations EC2 showed."""
        limit = self._limit(deadline)
        looks = 0
        while True:
            found = self.ec2.reservations(
                filters={
                    f"tag:{tagging.TAG_CLUSTER_ID}": [self.cluster_id],
                    f"tag:{tagging.TAG_REQUEST_ID}": [spec.request_id],
                    f"tag:{tagging.TAG_SUBNET_ID}": [spec.subnet.subnet_id],
                    f"tag:{tagging.TAG_PURPOSE}": [str(spec.purpose)],
                    "instance-type": [spec.instance_type],
                },
                deadline=deadline,
            )
            if any(changed_request(r, spec.request_digest) for r in found):
                raise _changed(spec)
            live = [r for r in found if r.state in HOLDING_STATES]
            if live:
                return live[0], len(found)
            if len(found) > generation:
                return None, len(found)
            if not self._pause(looks, limit):
                raise AwsError(
                    "DescribeCapacityReservations",
                    "IdempotentParameterMismatch",
                    f"EC2 refused this attempt's ClientToken as used by an earlier invocation "
                    f"of request {spec.request_id}, and does not show that reservation yet; "
                    "nothing new was made",
                )
            looks += 1

    def owns(self, reservation: Reservation) -> bool:
        return reservation.reservation_type != "capacity-block" and tagging.is_owned(
            reservation.tags, self.cluster_id
        )

    def release(
        self,
        reservation: Reservation,
        deadline: float | None = None,
        patience: float | None = None,
    ) -> None:
        """Cancel one of OUR reservations; returns only when EC2 confirmed it no longer holds.

        Confirmed: EC2 accepted the cancel, or shows the reservation cancelled, expired or
        failed. NotFound or IncorrectState right after a create is EC2 not showing it yet
        (``domain.errors.not_seen_yet``): asked again until the deadline (or for ``patience``
        seconds, 0: no pause), then ``AwsError``, and the caller says ``cancelled: false`` /
        ``cleanup: pending`` / reports the error.

        The ownership check lives here, in front of the only cancel call the broker makes, so
        no flow can cancel a reservation it does not own or a Capacity Block.
        """
        if not self.owns(reservation):
            raise NotOwnedError(reservation.id)
        limit = self._limit(deadline)
        if patience is not None:
            limit = min(limit, self.monotonic() + patience)
        looks = 0
        at_once = False
        while True:
            try:
                self.ec2.cancel_reservation(reservation.id, deadline)
                return
            except AwsError as error:
                if not not_seen_yet(error.error_class):
                    raise
                refused = error
            if refused.error_class is ErrorClass.INCORRECT_STATE:
                shown = self.ec2.reservation(reservation.id, deadline)
                if shown is not None and no_longer_holds(shown.state):
                    return
                if shown is not None and shown.state == "active" and not at_once:
                    at_once = True  # EC2 shows it cancellable now: ask again without a pause
                    continue
            at_once = False
            if not self._pause(looks, limit):
                raise AwsError(
                    "CancelCapacityReservation",
                    refused.code,
                    f"EC2 did not confirm the cancel of {reservation.id} in time (a "
                    f"reservation made a moment ago may not be known or cancellable yet): "
                    f"{refused.message}",
                    refused.status,
                )
            looks += 1

    def look_again_until(
        self, look: Callable[[], T], enough: Callable[[T], bool], deadline: float | None = None
    ) -> T:
        """``look()``, looked at again until ``enough`` of it (``Patience.empty_looks`` times
        at most, inside the deadline): the last look's answer."""
        limit = self._limit(deadline)
        looks = 0
        while True:
            found = look()
            if enough(found) or looks >= self.patience.empty_looks:
                return found
            if not self._pause(looks, limit):
                return found
            looks += 1

    def look_again_while_empty(
        self, look: Callable[[], list[T]], deadline: float | None = None
    ) -> list[T]:
        """``look()``, looked at again while it finds nothing: EC2's listings can miss what was
        made a moment ago, and an empty answer is the one that cannot tell."""
        return self.look_again_until(look, bool, deadline)

    def find(
        self, reservation_id: str, deadline: float | None = None, settled: bool = False
    ) -> Reservation | None:
        """A reservation by id, or None when EC2 does not know it. One made a moment ago
        (by this broker or by the caller) can be unknown to the next calls, and show
        ``pending`` for a while: a NotFound (and with ``settled``, a pending ODCR) is looked at
        again for a moment before it is believed."""

        def enough(found: Reservation | None) -> bool:
            return found is not None and not (settled and found.state == "pending")

        return self.look_again_until(
            lambda: self.ec2.reservation(reservation_id, deadline), enough, deadline
        )

    # -- waiting for EC2 to show what it has --------------------------------------------
    def _limit(self, deadline: float | None) -> float:
        return deadline if deadline is not None else self.monotonic() + DEFAULT_SETTLE_SECONDS

    def _pause(self, looks: int, limit: float) -> bool:
        """Sleep before the next look; False (no sleep) when it would end past ``limit`` or
        the looks are used up."""
        if looks >= self.patience.looks:
            return False
        half = min(self.patience.cap, self.patience.base * 2 ** min(looks, 16)) / 2
        pause = half + self._rng.uniform(0.0, half)
        if self.monotonic() + pause >= limit:
            return False
        self.sleep(pause)
        return True


class NotOwnedError(Exception):
    """Refused: the reservation is not this cluster's (or is a Capacity Block)."""

    def __init__(self, reservation_id: str) -> None:
        super().__init__(f"{reservation_id} is not owned by this broker")
        self.reservation_id = reservation_id
