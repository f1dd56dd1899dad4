"""Giving a hold back: cancelling one (a loser, an extra earlier hold), dropping the kept one
after the template or fleet step (and telling the memory how long it was held), and undoing a
failed step. Every path that ends a hold goes through here, so a failed cancel is always
counted and answered as ``cleanup: pending``."""

from __future__ import annotations

import time
from collections.abc import Callable

from ...adapters.ec2 import Reservation
from ...domain.failures import BrokerFailure
from ...domain.memory import MemoryKey, Observation
from ...models import ReserveResponse
from ..memory import CapacityMemory
from ..reservations import ReservationCore
from .answer import Answer, Chosen, ReserveStats

# The message of a step that failed after the hold, before what became of the hold is added.
STEP_MESSAGE = 400


class GiveBack:
    """Cancel, drop and undo: how reserve lets go of what it holds."""

    def __init__(
        self,
        core: ReservationCore,
        monotonic: Callable[[], float],
        memory: CapacityMemory | None,
    ) -> None:
        self.core = core
        self.monotonic = monotonic
        self.memory = memory

    def undo(
        self,
        answer: Answer,
        chosen: Chosen,
        what: str,
        failure: BrokerFailure,
        hard_deadline: float,
        stats: ReserveStats,
    ) -> ReserveResponse:
        """A step after the hold (``what`` says which) failed: give the hold back before
        answering."""
        response = answer.failed(failure)
        response.message = f"{what}: {response.message}"[:STEP_MESSAGE]
        if chosen.owned:
            if self.drop(chosen, hard_deadline, stats):
                response.message += "; the hold is cancelled"
            else:
                response.cleanup = "pending"
                response.message += (
                    f"; hold {chosen.reservation.id} could not be cancelled: its EndDate and "
                    "the cleaner will"
                )
        return response

    def drop(self, chosen: Chosen, hard_deadline: float, stats: ReserveStats) -> bool:
        """Give the kept hold back after the template or fleet step (launched, or failed)."""
        ok = self.cancel(chosen.reservation, hard_deadline)
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

    def cancel(self, reservation: Reservation, hard_deadline: float) -> bool:
        """Cancel one hold; False when EC2 did not confirm it (AWS's error, or not ours)."""
        try:
            self.core.release(reservation, hard_deadline)
        except BrokerFailure:
            return False
        return True
