"""Giving a hold back: cancelling one (a loser, an extra earlier hold), dropping the kept one
after the template or fleet step (and telling the memory how long it was held), and undoing a
failed step. Every path that ends a hold goes through here, so a failed cancel is always
counted and answered as ``cleanup: pending``."""

from __future__ import annotations

import time

from ...adapters.aws import AwsError
from ...adapters.ec2 import Reservation
from ...domain.memory import MemoryKey, Observation
from ...models import ReserveResponse
from ..reservations import NotOwnedError
from .answer import Answer, Chosen
from .base import ReserverBase, ReserveStats


class GiveBack(ReserverBase):
    """Cancel, drop and undo: how reserve lets go of what it holds."""

    def _undo(
        self,
        answer: Answer,
        chosen: Chosen,
        hard_deadline: float,
        stats: ReserveStats,
        step: str,
        error: Exception,
    ) -> ReserveResponse:
        """A step after the hold failed: give the hold back before answering."""
        code = error.code if isinstance(error, AwsError) else "TimeBudgetExceeded"
        detail = error.message if isinstance(error, AwsError) else str(error)
        response = answer.error(code, f"The {step} step failed: {detail}"[:400])
        if chosen.owned:
            if self._drop(chosen, hard_deadline, stats):
                response.message += "; the hold is cancelled"
            else:
                response.cleanup = "pending"
                response.message += (
                    f"; hold {chosen.reservation.id} could not be cancelled: its EndDate and "
                    "the cleaner will"
                )
        return response

    def _drop(self, chosen: Chosen, hard_deadline: float, stats: ReserveStats) -> bool:
        """Give the kept hold back after the template or fleet step (launched, or failed)."""
        ok = self._cancel(chosen.reservation, hard_deadline)
        if chosen.since is not None:
            held = chosen.reservation
            spent = Observation(
                MemoryKey(held.region, held.availability_zone_id, held.instance_type),
                time.time(),
                reservation_seconds=max(0.0, self.monotonic() - chosen.since),
            )
            stats.observations.append(spent)
            if self.memory is not None:
                self.memory.remember([spent], write=False)
        stats.cancel_failures += 0 if ok else 1
        return ok

    def _cancel(self, reservation: Reservation, hard_deadline: float) -> bool:
        try:
            self.core.release(reservation, hard_deadline)
        except (AwsError, NotOwnedError):
            return False
        return True
