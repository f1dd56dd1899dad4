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
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2, NewReservation, Reservation, Subnet
from ..domain import tags as tagging
from ..domain.ahead import in_commitment
from ..domain.errors import ErrorClass, no_longer_holds, not_seen_yet
from ..domain.failures import BrokerFailure
from ..domain.tokens import (
    CHANGED_REQUEST,
    CHANGED_REQUEST_CODE,
    client_token,
    end_date,
    next_generation,
    token_nonce,
)

if TYPE_CHECKING:
    from .pool import Spared

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
# How long EC2 may show a reservation made a moment ago without its tags (Eventual consistency
# in the Amazon EC2 API: back off "up to a few minutes").
TAGS_LAG = timedelta(minutes=5)
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
    # moment ago: looked at again this many times (about half a second). A longer wait only
    # with evidence that something is there (``look_again_until(expected=True)``): every
    # "nothing found" would pay for it.
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
    # A grouped probe's hold: its group's id, tagged so every member can find it.
    group_id: str | None = None


@dataclass(frozen=True)
class Held:
    """A reservation this request holds, since when it bills, and its ClientToken generation."""

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
        spares: Callable[[Reservation], Spared | None] | None = None,
    ) -> None:
        self.ec2 = ec2
        self.cluster_id = cluster_id
        # The cluster's reserved pool (issue 43): a reservation it names is never the broker's,
        # whatever tags it carries (``ReservedPool.why_spared``).
        self.spares = spares
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
            group_id=spec.group_id,
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
            if reservation.state == "failed":
                raise _failed_create(reservation)
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

    def committed(self, reservation: Reservation) -> bool:
        """Inside a future-dated reservation's commitment (``domain.ahead.in_commitment``)."""
        return in_commitment(
            reservation.commitment_end,
            reservation.commitment_seconds is not None,
            reservation.state,
            self.clock(),
        )

    def owns(self, reservation: Reservation) -> bool:
        return (
            reservation.reservation_type != "capacity-block"
            and not reservation.interruptible
            and tagging.is_owned(reservation.tags, self.cluster_id)
            and self.spared(reservation) is None
        )

    def spared(self, reservation: Reservation) -> Spared | None:
        """Why the deployment's reserved pool keeps ``reservation`` from every cancel."""
        return self.spares(reservation) if self.spares is not None else None

    def release(
        self,
        reservation: Reservation,
        deadline: float | None = None,
        patience: float | None = None,
    ) -> None:
        """Cancel one of OUR reservations; returns only when EC2 confirmed it no longer holds.

        Confirmed: EC2 accepted the cancel, or shows the reservation cancelled, expired or
        failed. Asked until the deadline (or for ``patience`` seconds, 0: no pause), then
        ``AwsError``, and the caller says ``cancelled: false`` / ``cleanup: pending`` / reports
        the error.

        One cancel, once EC2 can take it. A reservation EC2 last showed ``pending`` (what a
        create answers) is not cancellable yet, and right after its create EC2 may not even
        know its id (``domain.errors.not_seen_yet``): a cancel then is refused, and every
        refusal is a call from EC2's mutating bucket (50 burst, 5/s per account and region,
        the one every create of every container draws from). So such a reservation is first
        looked at by id (``DescribeCapacityReservations``, the non-mutating bucket: 100, 20/s)
        until EC2 shows it in another state: at once again when a look shows progress (the
        id known, still ``pending``), after growing pauses otherwise; then it is cancelled. A
        cancel EC2 still refuses (its calls need not catch up together; or the answer to an
        earlier try of it was lost and it is done) is followed by a look at once, then by
        looking as above. When time or looks run out before EC2 showed it cancellable, one
        cancel is still tried: its refusal is the error.

        The ownership check lives here, in front of the only cancel call the broker makes, so
        no flow can cancel a reservation it does not own or a Capacity Block; and so does the
        commitment check: a future-dated reservation inside its commitment is never cancelled
        (``CommittedError``).
        """
        if not self.owns(reservation):
            raise NotOwnedError(reservation.id)
        if self.committed(reservation):
            raise CommittedError(reservation.id, reservation.commitment_end)
        limit = self._limit(deadline)
        if patience is not None:
            limit = min(limit, self.monotonic() + patience)
        looks = 0
        ready = reservation.state != "pending"
        known = 0  # how far looks by id have shown it: 0 not yet, 1 pending
        refused: AwsError | None = None
        again = False  # a refused cancel was asked again at once since the last pause
        while True:
            if ready:
                refusal = self._cancel(reservation.id, deadline)
                if refusal is None:
                    return
                refused = refusal
            # A look: also right after a refused cancel, which may have been done already (an
            # earlier try whose answer was lost).
            seen = self.ec2.reservation(reservation.id, deadline)
            if seen is not None and no_longer_holds(seen.state):
                return
            shown = 0 if seen is None else 1 if seen.state == "pending" else 2
            if shown == 2 and not (ready and again):
                # Cancellable now: cancel at once (a refused one, once between pauses).
                again, ready = again or ready, True
                continue
            ready = False
            if shown > known:
                known = shown  # EC2 moved on (it knows the id now): look again at once
                continue
            if not self._pause(looks, limit):
                break
            looks += 1
            again = False
        if refused is None:
            # Never cancelled: EC2 still shows it pending (or does not know it yet).
            refused = self._cancel(reservation.id, deadline)
            if refused is None:
                return
        raise AwsError(
            "CancelCapacityReservation",
            refused.code,
            f"EC2 did not confirm the cancel of {reservation.id} in time (a "
            f"reservation made a moment ago may not be known or cancellable yet): "
            f"{refused.message}",
            refused.status,
        )

    def _cancel(self, reservation_id: str, deadline: float | None) -> AwsError | None:
        """One cancel: None when EC2 accepted it; its refusal when EC2 does not show the
        reservation (cancellable) yet (``not_seen_yet``); any other failure raises."""
        try:
            self.ec2.cancel_reservation(reservation_id, deadline)
        except AwsError as error:
            if not not_seen_yet(error.error_class):
                raise
            return error
        return None

    def look_again_until(
        self,
        look: Callable[[], T],
        enough: Callable[[T], bool],
        deadline: float | None = None,
        expected: bool = False,
    ) -> T:
        """``look()``, looked at again until ``enough`` of it, inside the deadline:
        ``Patience.empty_looks`` times at most, or with ``expected`` (there is reason to
        believe it is there: EC2 is only slow to show it) the whole ``Patience.looks``. The
        last look's answer."""
        limit = self._limit(deadline)
        most = self.patience.looks if expected else self.patience.empty_looks
        looks = 0
        while True:
            found = look()
            if enough(found) or looks >= most:
                return found
            if not self._pause(looks, limit):
                return found
            looks += 1

    def look_again_while_empty(
        self, look: Callable[[], list[T]], deadline: float | None = None, expected: bool = False
    ) -> list[T]:
        """``look()``, looked at again while it finds nothing: EC2's listings can miss what was
        made a moment ago, and an empty answer is the one that cannot tell."""
        return self.look_again_until(look, bool, deadline, expected)

    def look_again_while_untagged(
        self, look: Callable[[], list[Reservation]], deadline: float | None = None
    ) -> list[Reservation]:
        """A listing by tag (``look``), looked at again while it finds nothing; and with the
        whole patience while EC2 lists a holding reservation made in the last few minutes
        without any tags. The broker tags every hold on create, but EC2 can show one made a
        moment ago without its tags, and a listing by tag then misses it (eventual
        consistency, "up to a few minutes"): the job's hold may be that one (a release, or a
        stack's event, right after the reserve). One more listing, only when the answer by
        tag was empty."""
        found = self.look_again_while_empty(look, deadline)
        if found:
            return found
        recent = self.clock() - TAGS_LAG
        holding = self.ec2.reservations(filters={"state": list(HOLDING_STATES)}, deadline=deadline)
        untagged = [
            r for r in holding if not r.tags and r.created is not None and r.created >= recent
        ]
        if not untagged:
            return found
        return self.look_again_while_empty(look, deadline, expected=True)

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


def _failed_create(reservation: Reservation) -> AwsError:
    """EC2 answered the create with a reservation in state ``failed``: "The Capacity
    Reservation request has failed. A request might fail due to invalid request parameters,
    capacity constraints, or instance limit constraints" (DescribeCapacityReservations, state
    filter). The request's parameters were valid (EC2 refuses invalid ones with an error) and
    a quota is answered with its own error, so it is an answer about capacity in this place: it
    holds nothing, and asking again under a new ClientToken (which the broker used to do, up to
    four times) would only make more failed reservations."""
    return AwsError(
        "CreateCapacityReservation",
        "InsufficientInstanceCapacity",
        f"EC2 answered with Capacity Reservation {reservation.id} in state failed (its "
        "capacity constraints, or a limit); it holds nothing",
    )


class NotOwnedError(BrokerFailure):
    """Refused: the reservation is not this cluster's (or is a Capacity Block)."""

    @property
    def error_code(self) -> str:
        return "NotOwned"

    def __init__(self, reservation_id: str) -> None:
        super().__init__(f"{reservation_id} is not owned by this broker")
        self.reservation_id = reservation_id


class CommittedError(BrokerFailure):
    """Refused: the reservation is inside its commitment (a future-dated reservation)."""

    @property
    def error_code(self) -> str:
        return "InCommitment"

    def __init__(self, reservation_id: str, until: datetime | None) -> None:
        when = f" until {until:%Y-%m-%d %H:%M} UTC" if until is not None else ""
        super().__init__(f"{reservation_id} is inside its commitment{when}: never cancelled")
        self.reservation_id = reservation_id
        self.until = until
