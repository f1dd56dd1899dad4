"""Future-dated On-Demand Capacity Reservations: requesting one, and changing or cancelling it
only after EC2's quote has been shown.

Requesting (``reserve_ahead``) is guarded like a purchase: EC2's terms are checked first
(``domain.ahead.refusals``: nothing is asked of EC2 that it would refuse), the request is tagged
on create with a key derived from its terms and sent with that key as its ClientToken, and a
request already made under the key is answered ``already_requested``. The reservation is the
caller's capacity, not a hold: it carries no purpose tag, so the cleaner never looks at it.

Changing the start date or cancelling inside the commitment costs money, so both take two
steps: without a quote id the broker asks EC2 for its quote
(CreateCapacityReservationDateChangeQuote / CreateCapacityReservationCancellationQuote: they
change nothing) and shows it; with the quote id and the confirmation, that quote (and only it)
is accepted. Only reservations the broker requested (its key tag, this cluster's) are changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from ...adapters.aws import AwsError
from ...adapters.ec2 import Reservation
from ...adapters.ec2.ahead import FutureReservation
from ...domain import ahead as rules
from ...domain import discovery as discovery_rules
from ...domain.errors import ErrorClass
from ...domain.tags import TAG_CLUSTER_ID, TAG_NAME, TAG_PREFIX
from ...models.capacity import CapacityRow
from ...models.discovery import AheadAnswer, AheadQuote
from .. import InvalidInput
from ..capacity import to_row
from .base import DiscoveryBase

# Tag that makes a future-dated request findable again (and marks it as the broker's).
TAG_AHEAD_KEY = f"{TAG_PREFIX}ahead-key"
Action = Literal["request", "change-start", "cancel"]


def ahead_key(
    instance_type: str,
    count: int,
    availability_zone: str,
    start: datetime,
    commitment: timedelta,
    platform: str,
    tenancy: str,
) -> str:
    """Deterministic: the same request gives the same key (and ClientToken)."""
    terms = "|".join(
        [
            instance_type,
            str(count),
            availability_zone,
            start.isoformat(),
            str(int(commitment.total_seconds())),
            platform,
            tenancy,
        ]
    )
    return "ak-" + hashlib.sha256(terms.encode()).hexdigest()[:24]


def region_of(availability_zone: str) -> str:
    """``us-east-1a`` → ``us-east-1``; a Local Zone ``us-east-1-dfw-2a`` → ``us-east-1``."""
    parts = availability_zone.split("-")
    if len(parts) < 3 or not parts[2][:1].isdigit():
        raise InvalidInput([("availability_zone", f"{availability_zone!r} is not a zone name")])
    return "-".join([*parts[:2], parts[2].rstrip("abcdefghijklmnopqrstuvwxyz")])


def quote_of(kind: str, item: Mapping[str, Any]) -> AheadQuote:
    if kind == "cancellation":
        terms = (item.get("CancellationTerms") or [{}])[0]
        return AheadQuote(
            quote_id=item["CapacityReservationCancellationQuoteId"],
            kind="cancellation",
            reservation_id=item.get("CapacityReservationId", ""),
            state=item.get("QuoteState"),
            expires=item.get("ExpirationTime"),
            reservation_state_after=terms.get("ReservationState"),
            committed_instance_count=terms.get("CommittedInstanceCount"),
            charge_hours=terms.get("ChargeCommitmentDurationHours"),
            charge_end_date=terms.get("ChargeEndDate"),
        )
    update = (item.get("ModificationTerms") or {}).get("ReservationUpdate") or {}
    seconds = update.get("NewCommitmentDuration")
    return AheadQuote(
        quote_id=item["CapacityReservationModificationQuoteId"],
        kind="date-change",
        reservation_id=item.get("CapacityReservationId", ""),
        state=item.get("QuoteState"),
        expires=item.get("ExpirationTime"),
        current_start_date=(item.get("CurrentConfiguration") or {}).get("StartDate"),
        new_start_date=update.get("NewStartDate"),
        new_commitment_hours=discovery_rules.tidy(seconds / 3600) if seconds else None,
        new_commitment_end_date=update.get("NewCommitmentEndDate"),
    )


class ReserveAhead(DiscoveryBase):
    """Future-dated ODCRs: request, postpone, cancel."""

    # -- request --------------------------------------------------------------------------

    def check_ahead(
        self,
        instance_type: str,
        count: int,
        availability_zone: str,
        start: datetime,
        commitment_days: float,
    ) -> str:
        """Refuse what EC2 would refuse (``InvalidInput``), then say what the request commits
        to. Reads the type's vCPUs (DescribeInstanceTypes); changes nothing."""
        region = region_of(availability_zone)
        start = rules.requested_start(start)
        commitment = timedelta(days=commitment_days)
        problems = rules.refusals(instance_type, count, None, start, commitment, self.clock())
        if problems:
            raise InvalidInput(problems)
        vcpus = self._vcpus(region, instance_type)
        problems = rules.refusals(instance_type, count, vcpus, start, commitment, self.clock())
        if problems:
            raise InvalidInput(problems)
        return (
            f"{count} x {instance_type} in {availability_zone} from {_at(start)}, committed "
            f"for {commitment_days:g} days once delivered: billed at the On-Demand rate from "
            "delivery, and cancelling or shrinking it inside the commitment is charged"
        )

    def reserve_ahead(
        self,
        instance_type: str,
        count: int,
        availability_zone: str,
        start: datetime,
        commitment_days: float,
        platform: str = "Linux/UNIX",
        tenancy: str = "default",
    ) -> AheadAnswer:
        """Request a future-dated reservation, at most once per request key (``start`` is
        taken to the next whole hour: ``domain.ahead.requested_start``)."""
        start = rules.requested_start(start)
        commitment = timedelta(days=commitment_days)
        self.check_ahead(instance_type, count, availability_zone, start, commitment_days)
        region = region_of(availability_zone)
        key = ahead_key(
            instance_type, count, availability_zone, start, commitment, platform, tenancy
        )
        base: dict[str, Any] = {"action": "request", "region": region, "request_key": key}
        earlier = self._requested(region, key)
        if earlier is not None:
            return AheadAnswer(
                status="already_requested",
                reservation_id=earlier.reservation_id,
                reservation=earlier,
                message=f"Already requested: {earlier.reservation_id} ({earlier.state}) carries "
                f"request key {key}; nothing new was requested.",
                **base,
            )
        tags = {TAG_AHEAD_KEY: key, TAG_NAME: f"capacity-broker-ahead-{key}"}
        if self.lister.cluster_id:
            tags[TAG_CLUSTER_ID] = self.lister.cluster_id
        new = FutureReservation(
            instance_type=instance_type,
            availability_zone=availability_zone,
            platform=platform,
            tenancy=tenancy,
            count=count,
            start=start,
            commitment_seconds=int(commitment.total_seconds()),
            client_token=key,
            tags=tags,
        )
        try:
            made = self.ec2(region).request_ahead(new)
        except AwsError as error:
            if error.code is None or error.error_class is ErrorClass.TRANSIENT:
                again = self._requested(region, key)
                if again is not None:
                    return self._requested_answer(
                        again, base, "(the answer was lost; found by its request key)"
                    )
                return AheadAnswer(
                    status="unknown",
                    error_code=error.code or "RequestTimeout",
                    message="The request failed without a clear answer and no reservation with "
                    f"request key {key} is visible yet. Run the same command again: it never "
                    "requests twice (the key is also its ClientToken).",
                    **base,
                )
            return AheadAnswer(
                status="refused",
                error_code=error.code,
                message=f"EC2 refused the request, nothing was reserved: {error.message}"[:500],
                **base,
            )
        row = to_row(made, {}, self.lister.cluster_id, None, now=self.clock())
        return self._requested_answer(row, base, "")

    def _requested_answer(self, row: CapacityRow, base: dict[str, Any], how: str) -> AheadAnswer:
        return AheadAnswer(
            status="requested",
            reservation_id=row.reservation_id,
            reservation=row,
            message=f"Requested {row.reservation_id} ({row.state}){' ' + how if how else ''}: "
            f"EC2 assesses it (typically within 5 days), then schedules it for "
            f"{_at(row.start_date)} or says it is unsupported.",
            **base,
        )

    def _requested(self, region: str, key: str) -> CapacityRow | None:
        found = self.ec2(region).describe_reservations({f"tag:{TAG_AHEAD_KEY}": [key]})
        rows = [
            to_row(Reservation.from_api(region, raw), raw, self.lister.cluster_id, None)
            for raw in found
            if raw.get("State") not in ("cancelled", "failed")
        ]
        return rows[0] if rows else None

    def _vcpus(self, region: str, instance_type: str) -> int | None:
        try:
            found = self.ec2(region).instance_types(names=[instance_type])
        except AwsError as error:
            if error.code == "InvalidInstanceType":
                raise InvalidInput(
                    [("instance_type", f"EC2 knows no instance type {instance_type}")]
                ) from None
            raise
        facts = [discovery_rules.instance_facts(item) for item in found]
        return facts[0].vcpus if facts and facts[0].vcpus else None

    # -- change ---------------------------------------------------------------------------

    def change_start(
        self,
        reservation_id: str,
        new_start: datetime,
        regions: Sequence[str] | None = None,
        quote_id: str | None = None,
        confirm: bool = False,
    ) -> AheadAnswer:
        """Postpone a scheduled reservation's start: EC2's date-change quote first; with
        ``quote_id`` and ``confirm``, that quote accepted."""
        found = self._ours(reservation_id, regions, "change-start")
        if isinstance(found, AheadAnswer):
            return found
        row, base = found
        if row.state != "scheduled":
            why = (
                "it is still assessing: cancel it (free) and request the new date"
                if row.state == "assessing"
                else f"it is {row.state}; only a scheduled reservation's start can be postponed"
            )
            return AheadAnswer(status="refused", message=f"Not changed: {why}.", **base)
        if quote_id is None or not confirm:
            return self._quote_answer(base, "date-change", quote_id, row, new_start)
        ec2 = self.ec2(row.region)
        accepted = self._accept(
            base,
            "date-change",
            quote_id,
            new_start,
            lambda: ec2.apply_date_change(reservation_id, quote_id),
        )
        if isinstance(accepted, AheadAnswer):
            return accepted
        quote = accepted
        now = self._reread(row)
        return AheadAnswer(
            status="changed",
            quote=quote,
            reservation=now or row,
            message=f"{reservation_id} now starts {_at(quote.new_start_date)} (quote "
            f"{quote.quote_id} accepted; commitment {quote.new_commitment_hours:g} h, until "
            f"{_at(quote.new_commitment_end_date)}).",
            **{k: v for k, v in base.items() if k != "reservation"},
        )

    def cancel_ahead(
        self,
        reservation_id: str,
        regions: Sequence[str] | None = None,
        quote_id: str | None = None,
        confirm: bool = False,
    ) -> AheadAnswer:
        """Cancel a future-dated reservation the broker requested: free while ``assessing``,
        ``delayed`` or past its commitment (``confirm`` is enough); inside it (``scheduled``,
        or delivered and committed) only by accepting EC2's cancellation quote."""
        found = self._ours(reservation_id, regions, "cancel")
        if isinstance(found, AheadAnswer):
            return found
        row, base = found
        if row.state in ("cancelling", "cancelled"):
            # EC2 is already winding it down (or has): there is nothing to cancel and no quote
            # to ask for ("cancelling" is the charged wind-down a cancellation quote sets).
            return AheadAnswer(
                status="cancelled",
                message=f"{reservation_id} is already {row.state}"
                + (
                    f" (charged until {_at(row.commitment_end_date)})"
                    if row.state == "cancelling" and row.commitment_end_date
                    else ""
                )
                + "; nothing was asked of EC2.",
                **base,
            )
        now = self.clock()
        future_dated = row.commitment_end_date is not None or row.state in rules.NOT_DELIVERED
        charged = rules.in_commitment(row.commitment_end_date, future_dated, row.state, now)
        ec2 = self.ec2(row.region)
        if not charged:
            if row.state not in ("assessing", "delayed", "active"):
                return AheadAnswer(
                    status="refused",
                    message=f"Not cancelled: {reservation_id} is {row.state}.",
                    **base,
                )
            if not confirm:
                return AheadAnswer(
                    status="quoted",
                    message=f"Cancelling {reservation_id} ({row.state}) is free now: no "
                    "commitment applies. Confirm to cancel (--yes); nothing was changed.",
                    **base,
                )
            try:
                ec2.cancel_reservation(reservation_id)
            except AwsError as error:
                return self._after_failure(base, None, error, "cancel")
            return AheadAnswer(
                status="cancelled",
                reservation=self._reread(row) or row,
                message=f"Cancelled {reservation_id} (no charge: {row.state}).",
                **{k: v for k, v in base.items() if k != "reservation"},
            )
        if quote_id is None or not confirm:
            return self._quote_answer(base, "cancellation", quote_id, row, None)
        accepted = self._accept(
            base,
            "cancellation",
            quote_id,
            None,
            lambda: ec2.cancel_with_quote(reservation_id, quote_id),
        )
        if isinstance(accepted, AheadAnswer):
            return accepted
        quote = accepted
        return AheadAnswer(
            status="cancelled",
            quote=quote,
            reservation=self._reread(row) or row,
            message=f"Cancelled {reservation_id} with quote {quote.quote_id}: "
            f"{_quote_text(quote)}.",
            **{k: v for k, v in base.items() if k != "reservation"},
        )

    # -- shared ---------------------------------------------------------------------------

    def _ours(
        self, reservation_id: str, regions: Sequence[str] | None, action: Action
    ) -> tuple[CapacityRow, dict[str, Any]] | AheadAnswer:
        """The reservation, when the broker requested it (its key tag, this cluster's), and
        the fields every answer about it carries; else the answer that says why not."""
        if not reservation_id.startswith("cr-"):
            raise InvalidInput([("reservation_id", "must be a Capacity Reservation id (cr-...)")])
        wanted = self._regions(regions)
        row, errors = self.find_reservation(reservation_id, wanted)
        if row is None:
            if errors:
                return AheadAnswer(
                    status="error",
                    action=action,
                    reservation_id=reservation_id,
                    error_code=errors[0].error_code,
                    message="Could not look for the reservation in "
                    + ", ".join(f"{e.region} ({e.error_code})" for e in errors)
                    + "; nothing was changed.",
                )
            return AheadAnswer(
                status="not_found",
                action=action,
                reservation_id=reservation_id,
                message=f"No reservation {reservation_id} in {', '.join(wanted)}.",
            )
        cluster = row.tags.get(TAG_CLUSTER_ID)
        if TAG_AHEAD_KEY not in row.tags or (
            cluster and self.lister.cluster_id and cluster != self.lister.cluster_id
        ):
            return AheadAnswer(
                status="refused",
                action=action,
                reservation_id=reservation_id,
                region=row.region,
                reservation=row,
                message=f"Not changed: {reservation_id} was not requested through this broker "
                "(reserve-ahead); change it with EC2's own tools.",
            )
        return row, {
            "action": action,
            "reservation_id": reservation_id,
            "region": row.region,
            "request_key": row.tags.get(TAG_AHEAD_KEY),
            "reservation": row,
        }

    def _quote_answer(
        self,
        base: dict[str, Any],
        kind: str,
        quote_id: str | None,
        row: CapacityRow,
        new_start: datetime | None,
    ) -> AheadAnswer:
        """EC2's quote (the one named, or a new one): shown, nothing changed."""
        if quote_id is not None:
            quote = self._fetch_quote(row.region, kind, quote_id)
        else:
            ec2 = self.ec2(row.region)
            token = _quote_token(row.reservation_id, kind, new_start, self.clock())
            if kind == "date-change":
                assert new_start is not None
                raw = ec2.date_change_quote(row.reservation_id, new_start, token)
            else:
                raw = ec2.cancellation_quote(row.reservation_id, token)
            quote = quote_of(kind, raw)
        return AheadAnswer(
            status="quoted",
            quote=quote,
            message=f"EC2's quote {quote.quote_id} ({_quote_text(quote)}), valid until "
            f"{_at(quote.expires)}. Accept it with the quote id and the confirmation (--quote "
            f"{quote.quote_id} --yes); nothing was changed.",
            **base,
        )

    def _accept(
        self,
        base: dict[str, Any],
        kind: str,
        quote_id: str,
        new_start: datetime | None,
        apply: Callable[[], Any],
    ) -> AheadQuote | AheadAnswer:
        """Accept the quote ``quote_id`` (``apply``) when it is the one shown: for this
        reservation, still active, for this start; the quote, or the answer that says why not
        (or what EC2 answered instead)."""
        quote = self._fetch_quote(base["region"], kind, quote_id)
        mismatch = _quote_mismatch(quote, base["reservation_id"], new_start)
        if mismatch:
            return AheadAnswer(status="refused", quote=quote, message=mismatch, **base)
        try:
            apply()
        except AwsError as error:
            return self._after_failure(base, quote, error, base["action"])
        return quote

    def _fetch_quote(self, region: str, kind: str, quote_id: str) -> AheadQuote:
        try:
            found = self.ec2(region).quotes(kind, [quote_id])
        except AwsError as error:
            if error.error_class is ErrorClass.TRANSIENT or error.code is None:
                raise
            raise InvalidInput(
                [("quote_id", f"EC2 has no quote {quote_id}: {error.message}")]
            ) from None
        if not found:
            raise InvalidInput([("quote_id", f"EC2 has no quote {quote_id}")])
        return quote_of(kind, found[0])

    def _after_failure(
        self, base: dict[str, Any], quote: AheadQuote | None, error: AwsError, action: Action
    ) -> AheadAnswer:
        row = base["reservation"]
        now = self._reread(row)
        done = now is not None and (
            (action == "cancel" and now.state in ("cancelling", "cancelled"))
            or (
                action == "change-start"
                and quote is not None
                and now.start_date == quote.new_start_date
            )
        )
        fields = {k: v for k, v in base.items() if k != "reservation"}
        if done:
            return AheadAnswer(
                status="cancelled" if action == "cancel" else "changed",
                quote=quote,
                reservation=now,
                message=f"Done (EC2's answer was lost; the reservation shows it): "
                f"{row.reservation_id} is {now.state if now else 'changed'}.",
                **fields,
            )
        unclear = error.code is None or error.error_class is ErrorClass.TRANSIENT
        return AheadAnswer(
            status="error" if unclear else "refused",
            quote=quote,
            reservation=now or row,
            error_code=error.code or "RequestTimeout",
            message=f"EC2 did not accept it, nothing was changed: {error.message}"[:500],
            **fields,
        )

    def _reread(self, row: CapacityRow) -> CapacityRow | None:
        found, _ = self.find_reservation(row.reservation_id, [row.region])
        return found


def _quote_mismatch(quote: AheadQuote, reservation_id: str, new_start: datetime | None) -> str:
    if quote.reservation_id != reservation_id:
        return f"Not changed: quote {quote.quote_id} is for {quote.reservation_id}."
    if quote.state != "active" or (quote.kind == "cancellation" and quote.charge_hours is None):
        return f"Not changed: quote {quote.quote_id} is {quote.state}; ask for a new one."
    if new_start is not None and quote.new_start_date != new_start:
        return (
            f"Not changed: quote {quote.quote_id} moves the start to "
            f"{_at(quote.new_start_date)}, not {_at(new_start)}."
        )
    return ""


def _quote_token(reservation_id: str, kind: str, new_start: datetime | None, now: datetime) -> str:
    """One quote per (reservation, kind, new start) and hour: a retried call gets the same."""
    terms = f"{reservation_id}|{kind}|{new_start.isoformat() if new_start else ''}|{now:%Y%m%d%H}"
    return "aq-" + hashlib.sha256(terms.encode()).hexdigest()[:24]


def _quote_text(quote: AheadQuote) -> str:
    if quote.state == "pending":
        # QuoteState pending (botocore 1.44.5): EC2 has not worked its terms out yet.
        return "pending: EC2 has not given its terms yet; show it again with --quote"
    if quote.kind == "cancellation":
        if quote.charge_hours is None:
            return "EC2 gave no terms: the charge is not known"
        if quote.charge_hours == 0:
            return "no charge"
        return (
            f"{quote.charge_hours} h of {quote.committed_instance_count} committed instances "
            f"charged at the On-Demand rate until {_at(quote.charge_end_date)}; the "
            f"reservation goes {quote.reservation_state_after}"
        )
    hours = f"{quote.new_commitment_hours:g} h" if quote.new_commitment_hours else "unchanged"
    return (
        f"start {_at(quote.current_start_date)} -> {_at(quote.new_start_date)}, commitment "
        f"{hours}, until {_at(quote.new_commitment_end_date)}"
    )


def _at(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment is not None else "an unknown time"
