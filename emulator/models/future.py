"""Future-dated On-Demand Capacity Reservations: requested weeks ahead, assessed, scheduled,
delivered (or delayed), committed to; and the quotes EC2 gives before a date change or a
cancellation inside the commitment. moto has none of it.

Sources (each behaviour has its row in docs/fidelity.md):

- botocore 1.44.5 ``CreateCapacityReservation``: ``StartDate``, ``CommitmentDuration`` and
  ``DeliveryPreference`` are "Required for future-dated Capacity Reservations only"; "between
  5 and 120 days in advance"; C, M, R, I, T and G families; "a minimum of 32 vCPUs";
  ``DeliveryPreference``: "The only supported value is incremental"; ``OutpostArn`` and
  ``PlacementGroupArn``: "Not supported for future-dated Capacity Reservations".
- EC2 User Guide, "Concepts for Amazon EC2 Capacity Reservations": "The minimum commitment
  duration is 14 days"; the assessment "is typically completed within 5 days"; ``assessing``,
  then ``scheduled`` or ``unsupported``; "The total instance count remains 0 ... in the
  scheduled state"; only ``targeted`` matching; the commitment "starts as soon as the Capacity
  Reservation is provisioned". The Limitations add the U and X families.
- "Cancel a Capacity Reservation": ``assessing`` and ``delayed`` cancel free; ``scheduled`` and
  ``active`` inside the commitment need a cancellation quote (``CancelCapacityReservation``
  ``QuoteId`` + ``ApplyCancellationCharges=commitment-wind-down``); the rates table (no charge
  8 weeks or more before the original start, 25% of the commitment 2 to 8 weeks before, 50%
  within 2 weeks, 50% of the rest after delivery); charged cancellations go ``cancelling``
  until the charge ends, then ``cancelled``; "you can't cancel it while instances are still
  running"; quotes are valid 24 hours.
- "Modify a Capacity Reservation", "Change dates of a future-dated Capacity Reservation": a
  date-change quote (``CreateCapacityReservationDateChangeQuote``) accepted with
  ``ModifyCapacityReservation`` ``QuoteId`` + ``AcceptModificationTerms``; "up to 30 cumulative
  days from OriginalStartDate"; not "less than one hour away"; one additional day of commitment
  per day postponed within two weeks of the start, none before; quotes valid 24 hours and
  "always expire at least one hour before the start date" (botocore); ``AdjustmentStatus``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..exceptions import client_error
from ..state import world
from .base import _utc_dates
from .capacity_reservations import CapacityReservations
from .pools import vcpus
from .reservations import CapacityReservation

FUTURE_PARAMETERS = ("StartDate", "CommitmentDuration", "DeliveryPreference")
MIN_LEAD = timedelta(days=5)
MAX_LEAD = timedelta(days=120)
MIN_COMMITMENT = timedelta(days=14)
# botocore 1.44.5, CreateCapacityReservation.InstanceCount: "You can request future-dated
# Capacity Reservations for an instance count with a minimum of 32 vCPUs".
MIN_VCPUS = 32
# botocore 1.44.5, CreateCapacityReservation.InstanceType: "You can request future-dated
# Capacity Reservations for instance types in the C, M, R, I, T, and G instance families only"
# (a family is the letters before the generation digit: im4gn -> im, gr6 -> gr).
FAMILIES = frozenset({"c", "m", "r", "i", "im", "is", "t", "g", "gr"})
QUOTE_LIFE = timedelta(hours=24)
MAX_PUSHOUT = timedelta(days=30)
NO_POSTPONE_WITHIN = timedelta(hours=1)
EXTRA_COMMITMENT_WITHIN = timedelta(weeks=2)
# Cancellation rates (EC2 User Guide, "Cancel a Capacity Reservation", Cancellation rates).
FREE_CANCEL_BEFORE = timedelta(weeks=8)
QUARTER_RATE_BEFORE = timedelta(weeks=2)
_FAMILY = re.compile(r"([a-z]+)")


def is_future_request(params: dict[str, Any]) -> bool:
    return any(params.get(name) is not None for name in FUTURE_PARAMETERS)


@dataclass
class Quote:
    """A cancellation (``crcq-``) or date-change (``crmq-``) quote."""

    id: str
    kind: str  # "cancellation" | "date-change"
    reservation_id: str
    created: datetime
    expires: datetime
    instance_count: int
    reservation_state: str
    terms: dict[str, Any] = field(default_factory=dict)
    start_date: datetime | None = None
    original_start: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    used: bool = False
    # botocore 1.44.5 CapacityReservationCancellationQuoteState: pending | active | expired.
    # Until ``ready_at`` the quote is ``pending``: no terms yet, and it cannot be accepted
    # (chosen: AWS does not say how long a quote is pending; ``Settings.quote_pending_seconds``).
    ready_at: datetime | None = None

    def state(self, now: datetime) -> str:
        if self.used or now >= self.expires:
            return "expired"
        if self.ready_at is not None and now < self.ready_at:
            return "pending"
        return "active"

    def to_dict(self, now: datetime) -> dict[str, Any]:
        cancellation = self.kind == "cancellation"
        current: dict[str, Any] = {
            "InstanceCount": self.instance_count,
            "ReservationState": self.reservation_state,
        }
        if not cancellation:
            current.update(StartDate=self.start_date, OriginalStartDate=self.original_start)
        terms: dict[str, Any] = (
            {"CancellationTerms": [dict(self.terms)]}
            if cancellation
            else {"ModificationTerms": {"ReservationUpdate": dict(self.terms)}}
        )
        if self.state(now) == "pending":
            terms = {}  # the terms are not worked out yet (chosen: the model makes them optional)
        quote_id = (
            "CapacityReservationCancellationQuoteId"
            if cancellation
            else "CapacityReservationModificationQuoteId"
        )
        return {
            quote_id: self.id,
            "CapacityReservationId": self.reservation_id,
            "CreateTime": self.created,
            "ExpirationTime": self.expires,
            "QuoteState": self.state(now),
            "CurrentConfiguration": current,
            **terms,
            "Tags": [{"Key": k, "Value": v} for k, v in self.tags.items()],
        }


def _quote_id(prefix: str, reservation_id: str, now: datetime, serial: int) -> str:
    digest = hashlib.sha256(f"{reservation_id}|{now.isoformat()}|{serial}".encode())
    return f"{prefix}-{digest.hexdigest()[:17]}"


class FutureReservations(CapacityReservations):
    """CreateCapacityReservation with a start date, its life on the clock, and its quotes."""

    # -- create -------------------------------------------------------------------------

    def _create(self, params: dict[str, Any], tags: dict[str, str], now: datetime) -> str:
        if not is_future_request(params):
            return super()._create(params, tags, now)
        reservation = self._validate_future(params, now)
        if not self.offered(reservation.availability_zone, reservation.instance_type):
            raise client_error(
                "Unsupported",
                f"Your requested instance type ({reservation.instance_type}) is not "
                f"supported in your requested Availability Zone "
                f"({reservation.availability_zone}).",
            )
        # "assessing, scheduled, pending, active, and delayed ... count towards your On-Demand
        # Instance quota" (EC2 User Guide): checked now, as for an immediate reservation.
        self.quotas.check(reservation.instance_type, reservation.total_instance_count, self.usage())
        pool = self._pool(reservation.availability_zone, reservation.instance_type)
        # EC2 assesses against its forecast supply; the emulator's forecast is the AZ pool's
        # size (unlimited unless the scenario says otherwise).
        fits = pool.capacity is None or pool.capacity >= reservation.total_instance_count
        reservation.assessment = "scheduled" if fits else "unsupported"
        self.reservations[reservation.id] = reservation
        if tags:
            self.ec2.create_tags([reservation.id], tags)
        self.propagation.made(reservation.id, now)
        return reservation.id

    def _validate_future(self, params: dict[str, Any], now: datetime) -> CapacityReservation:
        for name in FUTURE_PARAMETERS:
            if params.get(name) is None:
                raise client_error(
                    "MissingParameter",
                    f"The request must contain the parameter {name} for a future-dated "
                    "Capacity Reservation",
                )
        for name in ("OutpostArn", "PlacementGroupArn"):
            if params.get(name):
                raise client_error(
                    "InvalidParameterCombination",
                    f"{name} is not supported for future-dated Capacity Reservations.",
                )
        if params["DeliveryPreference"] != "incremental":
            raise client_error(
                "InvalidParameterValue",
                f"Value ({params['DeliveryPreference']}) for parameter DeliveryPreference is "
                "invalid. The only supported value is incremental.",
            )
        if (params.get("InstanceMatchCriteria") or "targeted") != "targeted":
            raise client_error(
                "InvalidParameterValue",
                "Future-dated Capacity Reservations support only targeted instance matching.",
            )
        start: datetime = params["StartDate"]
        if not MIN_LEAD <= start - now <= MAX_LEAD:
            raise client_error(
                "InvalidParameterValue",
                "You can request a future-dated Capacity Reservation between 5 and 120 days "
                "in advance.",
            )
        commitment = timedelta(seconds=int(params["CommitmentDuration"]))
        if commitment < MIN_COMMITMENT:
            raise client_error(
                "InvalidParameterValue",
                "The minimum commitment duration is 14 days (1209600 seconds).",
            )
        instance_type = params["InstanceType"]
        found = _FAMILY.match(instance_type)
        if (found.group(1) if found else "") not in FAMILIES:
            raise client_error(
                "InvalidParameterValue",
                f"Future-dated Capacity Reservations are not supported for {instance_type}: "
                "use an instance type in the C, M, R, I, T or G families.",
            )
        count = int(params["InstanceCount"])
        if 1 <= count <= 1000 and count * vcpus(instance_type) < MIN_VCPUS:
            raise client_error(
                "InvalidParameterValue",
                f"A future-dated Capacity Reservation needs at least {MIN_VCPUS} vCPUs; "
                f"{count} x {instance_type} is {count * vcpus(instance_type)}.",
            )
        end = params.get("EndDate")
        if end is not None and end < start + commitment:
            raise client_error(
                "InvalidParameterValue",
                "The end date cannot be within the commitment duration.",
            )
        reservation = self._validate_new(
            {**params, "InstanceMatchCriteria": "targeted", "StartDate": None}, now
        )
        reservation.state = "assessing"
        reservation.active_at = None
        reservation.start_date = start
        reservation.original_start = start
        reservation.commitment_seconds = int(commitment.total_seconds())
        reservation.committed_count = count
        reservation.delivery_preference = "incremental"
        reservation.assessed_at = now + timedelta(seconds=world.settings.future_assessment_seconds)
        return reservation

    # -- the clock ------------------------------------------------------------------------

    def _deliver(self, reservation: CapacityReservation, now: datetime) -> None:
        """At its start (plus the delivery delay knob) a scheduled reservation takes its
        capacity from the AZ's pool and becomes active; while the pool cannot hold it, it is
        ``delayed`` ("unable to deliver the requested capacity by the requested start date")."""
        if reservation.state not in ("scheduled", "delayed") or now < reservation.start_date:
            return
        due = reservation.start_date + timedelta(
            seconds=world.settings.future_delivery_delay_seconds
        )
        pool = self._pool(reservation.availability_zone, reservation.instance_type)
        if now >= due and pool.can_take(reservation.total_instance_count):
            pool.take(reservation.total_instance_count)
            reservation.state = "active"
            reservation.delivered_at = max(due, reservation.start_date)
            assert reservation.commitment_seconds is not None
            reservation.commitment_end = reservation.delivered_at + timedelta(
                seconds=reservation.commitment_seconds
            )
        else:
            reservation.state = "delayed"

    def _in_commitment(self, reservation: CapacityReservation, now: datetime) -> bool:
        if reservation.state == "scheduled":
            return True
        return (
            reservation.state == "active"
            and reservation.commitment_end is not None
            and now < reservation.commitment_end
        )

    # -- cancel -----------------------------------------------------------------------------

    def cancel_capacity_reservation(
        self, reservation_id: str, quote_id: str | None = None, charges: str | None = None
    ) -> None:
        now = world.clock.now()
        with world.lock:
            # Peeked, not named: a call names a reservation once (eventual consistency counts
            # each naming), and the ODCR's own cancel below names it.
            peeked = self.reservations.get(reservation_id)
            if peeked is None or not peeked.is_future_dated:
                if quote_id or charges:
                    raise client_error(
                        "InvalidParameterCombination",
                        f"The Capacity Reservation {reservation_id} has no commitment: cancel "
                        "it without a quote.",
                    )
                return super().cancel_capacity_reservation(reservation_id)
            self.refresh(now)
            reservation, _ = self.named(reservation_id)
            if reservation.state in ("assessing", "delayed"):
                reservation.state = "cancelled"  # free: nothing delivered, nothing held
                return None
            if not self._in_commitment(reservation, now):
                if reservation.state != "active":
                    raise client_error(
                        "IncorrectState",
                        f"The Capacity Reservation {reservation_id} is in the "
                        f"'{reservation.state}' state and cannot be cancelled.",
                    )
                return super().cancel_capacity_reservation(reservation_id)
            if not quote_id:
                raise client_error(
                    "MissingParameter",
                    f"The Capacity Reservation {reservation_id} is inside its commitment: "
                    "cancelling it needs a cancellation quote (QuoteId) and "
                    "ApplyCancellationCharges.",
                )
            if charges != "commitment-wind-down":
                raise client_error(
                    "MissingParameter",
                    "The request must contain the parameter ApplyCancellationCharges "
                    "(commitment-wind-down) to accept the cancellation charges.",
                )
            if reservation.used_instance_count:
                raise client_error(
                    "IncorrectState",
                    f"The Capacity Reservation {reservation_id} has running instances: stop or "
                    "terminate them before cancelling it inside its commitment.",
                )
            quote = self._quote(quote_id, "cancellation", reservation_id, now)
            held = reservation.holding
            quote.used = True
            if quote.terms["ReservationState"] == "cancelling":
                reservation.state = "cancelling"
                reservation.cancelling_until = quote.terms["ChargeEndDate"]
                reservation.commitment_end = quote.terms["ChargeEndDate"]
            else:
                reservation.state = "cancelled"
            if held:
                self._release_hold(reservation)
            return None

    def create_cancellation_quote(
        self, reservation_id: str, client_token: str | None, tags: dict[str, str]
    ) -> Quote:
        now = world.clock.now()
        with world.lock:
            self.refresh(now)
            reservation, _ = self.named(reservation_id)
            if not reservation.is_future_dated or not self._in_commitment(reservation, now):
                raise client_error(
                    "IncorrectState",
                    f"The Capacity Reservation {reservation_id} is not inside a commitment: "
                    "it can be cancelled without a quote.",
                )
            params = {"CapacityReservationId": reservation_id}
            quote_id, _ = self.client_tokens.once(
                "CreateCapacityReservationCancellationQuote",
                client_token,
                params,
                lambda: self._new_cancellation_quote(reservation, tags, now),
            )
            return self._stored(quote_id)

    def _new_cancellation_quote(
        self, reservation: CapacityReservation, tags: dict[str, str], now: datetime
    ) -> str:
        assert reservation.commitment_seconds is not None
        if reservation.state == "scheduled":
            ahead = (reservation.original_start or reservation.start_date) - now
            rate = 0.5
            if ahead >= FREE_CANCEL_BEFORE:
                rate = 0.0
            elif ahead >= QUARTER_RATE_BEFORE:
                rate = 0.25
            hours = rate * reservation.commitment_seconds / 3600
        else:
            assert reservation.commitment_end is not None
            hours = 0.5 * (reservation.commitment_end - now).total_seconds() / 3600
        charged = round(hours)
        terms = {
            "CancellationType": "commitment-wind-down",
            "ReservationState": "cancelling" if charged else "cancelled",
            "CommittedInstanceCount": reservation.committed_count
            or reservation.total_instance_count,
            "ChargeCommitmentDurationHours": charged,
            "ChargeEndDate": now + timedelta(hours=charged),
        }
        quote = Quote(
            id=_quote_id("crcq", reservation.id, now, len(self.quotes)),
            kind="cancellation",
            reservation_id=reservation.id,
            created=now,
            expires=now + QUOTE_LIFE,
            instance_count=reservation.total_instance_count,
            reservation_state=reservation.state,
            terms=terms,
            tags=dict(tags),
            ready_at=now + timedelta(seconds=world.settings.quote_pending_seconds),
        )
        self.quotes[quote.id] = quote
        return quote.id

    # -- date change --------------------------------------------------------------------------

    def create_date_change_quote(
        self,
        reservation_id: str,
        new_start: datetime,
        client_token: str | None,
        tags: dict[str, str],
    ) -> Quote:
        now = world.clock.now()
        new_start = _utc_dates({"d": new_start})["d"]
        with world.lock:
            self.refresh(now)
            reservation, _ = self.named(reservation_id)
            if not reservation.is_future_dated or reservation.state != "scheduled":
                raise client_error(
                    "IncorrectState",
                    f"The Capacity Reservation {reservation_id} is in the "
                    f"'{reservation.state}' state: only a scheduled future-dated Capacity "
                    "Reservation can have its start date postponed (one that is assessing can "
                    "be cancelled for free and requested again).",
                )
            original = reservation.original_start or reservation.start_date
            if new_start <= reservation.start_date:
                raise client_error(
                    "InvalidParameterValue",
                    "The new start date must be later than the current start date.",
                )
            if new_start > original + MAX_PUSHOUT:
                raise client_error(
                    "InvalidParameterValue",
                    "You can postpone the start date up to 30 cumulative days from the "
                    "original start date.",
                )
            if reservation.start_date - now < NO_POSTPONE_WITHIN:
                raise client_error(
                    "IncorrectState",
                    "You can't postpone a start date that is less than one hour away.",
                )
            params = {"CapacityReservationId": reservation_id, "NewStartDate": new_start}
            quote_id, _ = self.client_tokens.once(
                "CreateCapacityReservationDateChangeQuote",
                client_token,
                params,
                lambda: self._new_date_change_quote(reservation, new_start, tags, now),
            )
            return self._stored(quote_id)

    def _new_date_change_quote(
        self,
        reservation: CapacityReservation,
        new_start: datetime,
        tags: dict[str, str],
        now: datetime,
    ) -> str:
        assert reservation.commitment_seconds is not None
        extra = timedelta(0)
        if reservation.start_date - now <= EXTRA_COMMITMENT_WITHIN:
            extra = new_start - reservation.start_date  # a day of commitment per day postponed
        commitment = timedelta(seconds=reservation.commitment_seconds) + extra
        quote = Quote(
            id=_quote_id("crmq", reservation.id, now, len(self.quotes)),
            kind="date-change",
            reservation_id=reservation.id,
            created=now,
            expires=min(now + QUOTE_LIFE, reservation.start_date - NO_POSTPONE_WITHIN),
            instance_count=reservation.total_instance_count,
            reservation_state=reservation.state,
            start_date=reservation.start_date,
            original_start=reservation.original_start,
            terms={
                "NewStartDate": new_start,
                "NewCommitmentDuration": int(commitment.total_seconds()),
                "NewCommitmentEndDate": new_start + commitment,
            },
            tags=dict(tags),
            ready_at=now + timedelta(seconds=world.settings.quote_pending_seconds),
        )
        self.quotes[quote.id] = quote
        return quote.id

    def modify_capacity_reservation(self, params: dict[str, Any]) -> None:
        now = world.clock.now()
        params = _utc_dates(params)
        with world.lock:
            quote_id = params.get("QuoteId")
            # Peeked, not named (see cancel): the ODCR's own modify names it once.
            peeked = self.reservations.get(params["CapacityReservationId"])
            if peeked is None or not peeked.is_future_dated:
                if quote_id or params.get("StartDate"):
                    raise client_error(
                        "InvalidParameterCombination",
                        f"The Capacity Reservation {params['CapacityReservationId']} is not "
                        "future-dated.",
                    )
                return super().modify_capacity_reservation(params)
            self.refresh(now)
            reservation, _ = self.named(params["CapacityReservationId"])
            if reservation.state in ("scheduled",):
                return self._modify_scheduled(reservation, params, now)
            if reservation.state != "active":
                raise client_error(
                    "IncorrectState",
                    f"The Capacity Reservation {reservation.id} is in the "
                    f"'{reservation.state}' state and cannot be modified.",
                )
            if self._in_commitment(reservation, now):
                count = params.get("InstanceCount")
                committed = reservation.committed_count or reservation.total_instance_count
                if count is not None and int(count) < committed:
                    raise client_error(
                        "InvalidParameterValue",
                        "You can't decrease the instance count below the committed instance "
                        f"count ({committed}) during the commitment duration.",
                    )
                end = params.get("EndDate")
                assert reservation.commitment_end is not None
                if end is not None and end < reservation.commitment_end:
                    raise client_error(
                        "InvalidParameterValue",
                        "You can't set an end date within the commitment duration.",
                    )
            return super().modify_capacity_reservation(params)

    def _modify_scheduled(
        self, reservation: CapacityReservation, params: dict[str, Any], now: datetime
    ) -> None:
        """``scheduled``: "You can modify the tags, postpone the start date, and change the end
        date"; postponing takes a date-change quote."""
        if params.get("InstanceCount") is not None or params.get("InstanceMatchCriteria"):
            raise client_error(
                "IncorrectState",
                f"The Capacity Reservation {reservation.id} is scheduled: only its start date "
                "(with a quote) and its end date can be changed.",
            )
        quote_id = params.get("QuoteId")
        if params.get("StartDate") is not None and not quote_id:
            raise client_error(
                "MissingParameter",
                "Postponing the start date needs a date-change quote (QuoteId) with "
                "AcceptModificationTerms.",
            )
        if quote_id:
            if not params.get("AcceptModificationTerms"):
                raise client_error(
                    "MissingParameter",
                    "The request must contain AcceptModificationTerms=true to apply the quote.",
                )
            quote = self._quote(quote_id, "date-change", reservation.id, now)
            quote.used = True
            terms = quote.terms
            reservation.start_date = terms["NewStartDate"]
            reservation.commitment_seconds = int(terms["NewCommitmentDuration"])
            reservation.adjustment_status = "applied"
            reservation.adjustment_details = {
                "StartDate": terms["NewStartDate"],
                "CommitmentDuration": terms["NewCommitmentDuration"],
                "CommitmentEndDate": terms["NewCommitmentEndDate"],
                "EndDateType": reservation.end_date_type,
            }
        end = params.get("EndDate")
        if end is not None:
            assert reservation.commitment_seconds is not None
            if end < reservation.start_date + timedelta(seconds=reservation.commitment_seconds):
                raise client_error(
                    "InvalidParameterValue",
                    "You can't set an end date within the commitment duration.",
                )
            reservation.end_date = end
            reservation.end_date_type = "limited"

    # -- quotes ---------------------------------------------------------------------------

    def _stored(self, quote_id: str) -> Quote:
        found = self.quotes[quote_id]
        assert isinstance(found, Quote)
        return found

    def _quote(self, quote_id: str, kind: str, reservation_id: str, now: datetime) -> Quote:
        quote = self.quotes.get(quote_id)
        if not isinstance(quote, Quote) or quote.kind != kind:
            raise client_error(
                "InvalidParameterValue", f"The quote ID '{quote_id}' does not exist."
            )
        if quote.reservation_id != reservation_id:
            raise client_error(
                "InvalidParameterValue",
                f"The quote {quote_id} is for {quote.reservation_id}, not {reservation_id}.",
            )
        state = quote.state(now)
        if state == "pending":
            raise client_error(
                "IncorrectState",
                f"The quote {quote_id} is pending: its terms are not ready yet.",
            )
        if state != "active":
            raise client_error(
                "InvalidParameterValue",
                f"The quote {quote_id} is expired or was already used: generate a new quote.",
            )
        return quote

    def describe_quotes(self, kind: str, ids: list[str]) -> list[Quote]:
        with world.lock:
            mine = [q for q in self.quotes.values() if isinstance(q, Quote) and q.kind == kind]
            if not ids:
                return mine
            by_id = {q.id: q for q in mine}
            for quote_id in ids:
                if quote_id not in by_id:
                    raise client_error(
                        "InvalidParameterValue", f"The quote ID '{quote_id}' does not exist."
                    )
            return [by_id[i] for i in dict.fromkeys(ids)]
