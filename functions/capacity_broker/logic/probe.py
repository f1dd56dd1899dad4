"""probe: is there capacity for this instance type in one of these subnets, right now?

Every subnet is tried at once (bounded); each attempt that wins a reservation cancels it in
the same breath, so a reservation lives about one EC2 round trip. The answer is the first
subnet in the caller's order that had capacity. A quota or permission error stops attempts
that have not started (other subnets cannot help); throttling and 5xx are retried with
jittered backoff under the invocation's time budget, always with the same ClientToken.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2, Subnet
from ..adapters.ssm import Flags, FlagValues
from ..domain.errors import Outcome, attempt_outcome, stops_everything
from ..domain.flags import FlagError
from ..domain.probe import probe_status
from ..domain.tags import Purpose
from ..models import Attempt, ProbeRequest, ProbeResponse
from . import placement
from .reservations import HoldSpec, NotOwnedError, ReservationCore


@dataclass
class ProbeStats:
    """Facts for the metrics the handler emits."""

    reservation_seconds: float = 0.0
    cancel_failures: int = 0
    created: int = 0


@dataclass
class _Shared:
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    winner: int | None = None

    def won(self, index: int) -> None:
        with self.lock:
            if self.winner is None or index < self.winner:
                self.winner = index

    def pointless(self, index: int) -> bool:
        """An attempt after an earlier subnet already won cannot change the answer."""
        with self.lock:
            return self.stop.is_set() or (self.winner is not None and self.winner < index)


class Prober:
    def __init__(
        self,
        ec2: Ec2,
        flags: Flags,
        core: ReservationCore,
        max_concurrency: int = 16,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ec2 = ec2
        self.flags = flags
        self.core = core
        self.max_concurrency = max_concurrency
        self.monotonic = monotonic

    def probe(
        self,
        request: ProbeRequest,
        request_id: str,
        deadline: float,
        hard_deadline: float,
    ) -> tuple[ProbeResponse, ProbeStats]:
        stats = ProbeStats()
        base = {"request_id": request_id, "instance_type": request.instance_type}
        try:
            flags: FlagValues = self.flags.read(deadline)
        except FlagError as error:
            return ProbeResponse(
                status="error", error_code="InvalidConfiguration", message=str(error), **base
            ), stats
        except AwsError as error:
            return ProbeResponse(
                status="error",
                error_code=error.code or "ParameterStoreUnavailable",
                message=f"Could not read the feature flags: {error.message}",
                **base,
            ), stats
        if not flags.enable:
            return ProbeResponse(
                status="skipped",
                subnet_id=request.subnet_ids[0],
                message="EnableCapacityReservation is false: no probe was made; "
                "launch in the first subnet.",
                **base,
            ), stats

        try:
            place = placement.resolve(self.ec2, request, request.subnet_ids, deadline)
        except AwsError as error:
            return _failed(base, error, "Could not look up the subnets, image or VPC"), stats
        platform = place.platform

        ordered = place.subnets
        shared = _Shared()
        stats_lock = threading.Lock()

        def attempt(index: int, subnet: Subnet) -> Attempt:
            where = {
                "subnet_id": subnet.subnet_id,
                "availability_zone": subnet.availability_zone,
                "availability_zone_id": subnet.availability_zone_id,
            }
            if shared.pointless(index) or self.monotonic() >= deadline:
                return Attempt(outcome=Outcome.NOT_TRIED, **where)
            spec = HoldSpec(
                purpose=Purpose.PROBE,
                request_id=request_id,
                instance_type=request.instance_type,
                subnet=subnet,
                count=request.instance_count,
                platform=platform,
                tenancy=place.tenancy,
                extra_tags=request.tags,
            )
            try:
                held = self.core.hold(spec, deadline)
            except AwsError as error:
                error_class = error.error_class
                if stops_everything(error_class):
                    shared.stop.set()
                return Attempt(
                    outcome=attempt_outcome(error_class),
                    error_code=error.code or "RequestTimeout",
                    message=error.message[:300],
                    **where,
                )
            shared.won(index)
            # Cancel at once: the probe only needed EC2 to say yes.
            cancelled = True
            try:
                self.core.release(held.reservation, hard_deadline)
            except (AwsError, NotOwnedError):
                cancelled = False
            with stats_lock:
                stats.created += 0 if held.reused else 1
                stats.reservation_seconds += self.monotonic() - held.since
                stats.cancel_failures += 0 if cancelled else 1
            return Attempt(
                outcome=Outcome.AVAILABLE,
                reservation_id=held.reservation.id,
                cancelled=cancelled,
                **where,
            )

        workers = max(1, min(len(ordered), self.max_concurrency))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="probe") as pool:
            attempts = list(pool.map(attempt, range(len(ordered)), ordered))
        return _answer(base, request, attempts), stats


def _failed(base: dict[str, str], error: AwsError, what: str) -> ProbeResponse:
    return ProbeResponse(
        status="error",
        error_code=error.code or "RequestTimeout",
        message=f"{what}: {error.message}"[:500],
        **base,
    )


def _answer(base: dict[str, str], request: ProbeRequest, attempts: list[Attempt]) -> ProbeResponse:
    status = probe_status([a.outcome for a in attempts])
    pending = any(a.cancelled is False for a in attempts)
    winner = next((a for a in attempts if a.outcome == Outcome.AVAILABLE), None)
    failure = next(
        (
            a
            for a in attempts
            if a.outcome
            not in (
                Outcome.AVAILABLE,
                Outcome.INSUFFICIENT_CAPACITY,
                Outcome.UNSUPPORTED,
                Outcome.NOT_TRIED,
            )
        ),
        None,
    )
    if status == "available" and winner is not None:
        message = (
            f"{request.instance_type} has capacity for {request.instance_count} in "
            f"{winner.subnet_id} ({winner.availability_zone})"
        )
        response = ProbeResponse(
            status=status,
            subnet_id=winner.subnet_id,
            availability_zone=winner.availability_zone,
            availability_zone_id=winner.availability_zone_id,
            attempts=attempts,
            message=message,
            **base,
        )
    elif status == "error" and failure is not None:
        response = ProbeResponse(
            status=status,
            error_code=failure.error_code,
            attempts=attempts,
            message=f"Stopped in {failure.subnet_id}: {failure.error_code} "
            f"({failure.outcome}); other subnets cannot help with that.",
            **base,
        )
    elif status == "error":
        # Nothing failed: subnets were left untried because the time budget ran out.
        response = ProbeResponse(
            status=status,
            error_code="TimeBudgetExceeded",
            attempts=attempts,
            message="The time budget ran out before every subnet was tried",
            **base,
        )
    else:
        response = ProbeResponse(
            status=status,
            attempts=attempts,
            message=f"No capacity for {request.instance_count} × {request.instance_type} in "
            f"any of the {len(attempts)} subnets",
            **base,
        )
    if pending:
        response.cleanup = "pending"
        response.message += (
            "; a probe reservation could not be cancelled: its EndDate and the cleaner will "
            "remove it"
        )
    return response
