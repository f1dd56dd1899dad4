"""The quotes of future-dated Capacity Reservations: CreateCapacityReservationCancellationQuote,
CreateCapacityReservationDateChangeQuote and their Describe calls (``models.future``)."""

from __future__ import annotations

from moto.core.responses import ActionResult

from ..exceptions import client_error
from ..models.backend import utc
from ..state import world
from ._base import CapacityResponse


class FutureQuotes(CapacityResponse):
    def create_capacity_reservation_cancellation_quote(self) -> ActionResult:
        tags = self._tags_for("capacity-reservation-cancellation-quote")
        self.error_on_dryrun()
        quote = self.capacity.create_cancellation_quote(
            self._get_param("CapacityReservationId"), self._get_param("ClientToken"), tags
        )
        return ActionResult(
            {"CapacityReservationCancellationQuote": quote.to_dict(world.clock.now())}
        )

    def create_capacity_reservation_date_change_quote(self) -> ActionResult:
        tags = self._tags_for("capacity-reservation-modification-quote")
        self.error_on_dryrun()
        new_start = utc(self._get_param("NewStartDate"))
        assert new_start is not None
        quote = self.capacity.create_date_change_quote(
            self._get_param("CapacityReservationId"),
            new_start,
            self._get_param("ClientToken"),
            tags,
        )
        return ActionResult(
            {"CapacityReservationModificationQuote": quote.to_dict(world.clock.now())}
        )

    def describe_capacity_reservation_cancellation_quotes(self) -> ActionResult:
        return self._describe_quotes(
            "cancellation",
            "CapacityReservationCancellationQuoteIds",
            "CapacityReservationCancellationQuotes",
        )

    def describe_capacity_reservation_date_change_quotes(self) -> ActionResult:
        return self._describe_quotes(
            "date-change",
            "CapacityReservationModificationQuoteIds",
            "CapacityReservationModificationQuotes",
        )

    def _describe_quotes(self, kind: str, ids_param: str, key: str) -> ActionResult:
        # botocore documents no filter names for these operations: none is taken.
        for name in self._filters_from_querystring():
            raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        ids = self._get_param(ids_param, []) or []
        self.error_on_dryrun()
        now = world.clock.now()
        page, next_token = self._page(self.capacity.describe_quotes(kind, ids))
        result: dict[str, object] = {key: [q.to_dict(now) for q in page]}
        if next_token:
            result["NextToken"] = next_token
        return ActionResult(result)
