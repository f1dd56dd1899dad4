"""release: give a job's holds back (by job, by stack, or one reservation).

Only this cluster's holds are cancelled; anything else that matches is reported as skipped
with the reason. Releasing what is already gone is still ``released`` (idempotent).

The launch template versions made for a job without a stack are deleted with its release
(by job id, or by the reservation they target): nothing launches from them any more. A job
with a stack keeps its version until the stack is deleted (the cleaner's stack event and
sweep), since the stack may still reference it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ..adapters.ec2 import Ec2, Reservation
from ..adapters.ec2.launches import Launches
from ..domain.failures import BrokerFailure
from ..domain.tags import TAG_CLUSTER_ID, TAG_JOB_ID, TAG_PURPOSE, TAG_STACK_NAME, Purpose
from ..models import ReleaseRequest, ReleaseResponse
from ..models.item_error import ItemError
from ..models.release import SkippedReservation
from . import InvalidInput
from .failures import failed, item_error, step
from .reservations import ReservationCore
from .templates import Templates

HOLDING = ("active", "pending")


class Releaser:
    def __init__(
        self, ec2: Ec2, launches: Launches, core: ReservationCore, max_concurrency: int = 16
    ) -> None:
        self.ec2 = ec2
        self.core = core
        self.max_concurrency = max_concurrency
        self.templates = Templates(ec2, launches, core.cluster_id)

    def release(
        self, request: ReleaseRequest, request_id: str, deadline: float, hard_deadline: float
    ) -> ReleaseResponse:
        field, value = request.selector
        try:
            with step("Could not list the holds"):
                found = self._matching(field, value, deadline)
        except InvalidInput:
            raise  # the handler's answer: invalid_request, each field's error
        except BrokerFailure as failure:
            return ReleaseResponse(request_id=request_id, **failed(failure))
        # A hold the pool could not be judged about (its group unreadable) is kept, and said
        # so: its job is not released (erring on "not ours" never cancels an operator's
        # reservation, and never reads as "nothing to release" either).
        unjudged = [
            ItemError(id=r.id, error_code=spared.error.error_code, message=spared.reason)
            for r in found
            if r.tags.get(TAG_PURPOSE) == Purpose.HOLD.value
            and (spared := self.core.spared(r)) is not None
            and spared.error is not None
        ]
        skipped = [
            SkippedReservation(id=r.id, reason=_why_not(r, self.core))
            for r in found
            if not self._cancellable(r) and r.id not in {e.id for e in unjudged}
        ]
        mine = [r for r in found if self._cancellable(r)]
        live = [r for r in mine if r.state in HOLDING]

        def cancel(reservation: Reservation) -> ItemError | None:
            try:
                self.core.release(reservation, hard_deadline)
            except BrokerFailure as failure:  # AWS's error; NotOwned (never: filtered above)
                return item_error(failure, reservation.id)
            return None

        errors: list[ItemError] = []
        if live:
            workers = max(1, min(len(live), self.max_concurrency))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="release") as pool:
                errors = [e for e in pool.map(cancel, live) if e is not None]
        failed_ids = {e.id for e in errors}
        cancelled = [r.id for r in live if r.id not in failed_ids]
        errors += unjudged
        versions, version_errors = self._versions(field, value, deadline, hard_deadline)
        what = f"{field.replace('_', ' ')} {value}"
        gone = f"; deleted launch template version(s) {', '.join(versions)}" if versions else ""
        if version_errors:
            gone += "; some launch template versions could not be deleted (the cleaner will)"
        extra = {
            "template_versions_deleted": versions or None,
            "template_version_errors": version_errors or None,
        }
        if errors:
            return ReleaseResponse(
                status="partial",
                request_id=request_id,
                cancelled=cancelled,
                skipped=skipped,
                errors=errors,
                message=f"Released {len(cancelled)} of {len(live) + len(unjudged)} holds for "
                f"{what}; the rest are left to their EndDate and the cleaner{gone}",
                **extra,
            )
        return ReleaseResponse(
            status="released",
            request_id=request_id,
            cancelled=cancelled,
            skipped=skipped,
            message=(
                f"Released {len(cancelled)} hold(s) for {what}"
                if cancelled
                else f"Nothing to release for {what}"
            )
            + gone,
            **extra,
        )

    def _cancellable(self, reservation: Reservation) -> bool:
        return (
            self.core.owns(reservation)
            and reservation.tags.get(TAG_PURPOSE) == Purpose.HOLD.value
            and not self.core.committed(reservation)
        )

    def _versions(
        self, field: str, value: str, deadline: float, hard_deadline: float
    ) -> tuple[list[str], list[ItemError]]:
        """Delete the job's versions that have no stack (what ``Templates.released`` says)."""
        try:
            with step("could not look for the job's launch template versions"):
                done = self.templates.released(field, value, deadline, hard_deadline)
        except BrokerFailure as failure:
            return [], [ItemError(error_code=failure.error_code, message=failure.detail[:500])]
        return [own.ref for own, _ in done.deleted], done.errors

    def _matching(self, field: str, value: str, deadline: float) -> list[Reservation]:
        """What EC2 shows for the selector. A hold made seconds ago may not show yet (unknown
        by id, missing from a tag listing): an empty answer is looked at again before "nothing
        to release" is believed (``ReservationCore.look_again_while_untagged``)."""
        if field == "reservation_id":
            found = self.core.find(value, deadline)
            return [found] if found is not None else []
        tag = TAG_JOB_ID if field == "job_id" else TAG_STACK_NAME
        return self.core.look_again_while_untagged(
            lambda: self.ec2.reservations(
                filters={
                    f"tag:{TAG_CLUSTER_ID}": [self.core.cluster_id],
                    f"tag:{tag}": [value],
                    "state": list(HOLDING),
                },
                deadline=deadline,
            ),
            deadline,
        )


def _why_not(reservation: Reservation, core: ReservationCore) -> str:
    if reservation.reservation_type == "capacity-block":
        return "a Capacity Block: never cancelled by the broker"
    spared = core.spared(reservation)
    if spared is not None:
        return spared.reason
    if not core.owns(reservation):
        return "not owned by this broker"
    if core.committed(reservation):
        return "inside its commitment (a future-dated reservation): never cancelled by the broker"
    return f"a {reservation.tags.get(TAG_PURPOSE)} reservation, not a job's hold"
