"""reserve: hold a job's whole node count in one place, point its launch template at the
hold, optionally launch the nodes, and never leave a hold behind on the way.

(instance type × subnet) pairs are tried type-major in preference order, each attempt a hold
of the whole count in one AZ; the answer is the best-preferred pair that has capacity now, as
trying them one at a time would find, also when the quota has room for one hold at a time.
When each pair is tried is the fan-out's choice (``logic.attempts``): the best hold so far is
kept, every other is given back as soon as it is known to lose. A reservation the job brings
(ODCR or Capacity Block) is validated, used, and never cancelled by any path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ...adapters.aws import AwsError
from ...adapters.ec2 import Ec2, FleetResult, Reservation, TemplateVersion
from ...adapters.ssm import Flags
from ...domain import placement as pairing
from ...domain.backoff import retry_after_seconds
from ...domain.errors import is_retryable
from ...domain.fanout import DecisionKind
from ...domain.flags import FlagError
from ...domain.memory import MemoryKey, Observation
from ...domain.reserve import (
    ExistingReservation,
    Rejected,
    ReserveStatus,
    WaitForStart,
    Wanted,
    possible_pairs,
    validate_existing,
    verdict,
)
from ...domain.tags import (
    TAG_CLUSTER_ID,
    TAG_JOB_ID,
    TAG_PURPOSE,
    TAG_REQUEST_ID,
    TAG_SUBNET_ID,
    Purpose,
)
from ...domain.templates import Version
from ...domain.tokens import client_token
from ...models import Attempt, LaunchTemplateInfo, ReservationInfo, ReserveRequest, ReserveResponse
from .. import InvalidInput, placement
from ..attempts import Attempts, Place, Ran, Spending
from ..memory import CapacityMemory, Recall
from ..reservations import Held, HoldSpec, NotOwnedError, ReservationCore, utcnow
from ..templates import Templates

# What the handler's metrics are made of (every create's answer, every give-back's seconds).
ReserveStats = Spending


@dataclass(frozen=True)
class Chosen:
    """The capacity the job will use: our hold, or the reservation it brought."""

    reservation: Reservation
    owned: bool
    subnet_ids: list[str]
    since: float | None = None
    # An earlier invocation of this request got as far as a hold and gave it back: it may have
    # launched the job's nodes (see ``Reserver._launch``).
    earlier_work: bool = False


_TEMPLATE_UNREADABLE = "Could not check the job's launch template (nothing was held): "


class Reserver:
    def __init__(
        self,
        ec2: Ec2,
        flags: Flags,
        core: ReservationCore,
        max_concurrency: int = 16,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], datetime] = utcnow,
        memory: CapacityMemory | None = None,
    ) -> None:
        self.ec2 = ec2
        self.flags = flags
        self.core = core
        self.max_concurrency = max_concurrency
        self.monotonic = monotonic
        self.clock = clock
        self.memory = memory
        self.templates = Templates(ec2, core.cluster_id)

    # -- the flow -----------------------------------------------------------------------
    def reserve(
        self, request: ReserveRequest, request_id: str, deadline: float, hard_deadline: float
    ) -> tuple[ReserveResponse, ReserveStats]:
        stats = ReserveStats(instance_count=request.instance_count)
        response = self._reserve(request, request_id, deadline, hard_deadline, stats)
        response.reservation_seconds = round(stats.reservation_seconds, 3)
        return response, stats

    def _reserve(
        self,
        request: ReserveRequest,
        request_id: str,
        deadline: float,
        hard_deadline: float,
        stats: ReserveStats,
    ) -> ReserveResponse:
        answer = _Answer(request, request_id)
        # The memory's read overlaps the look-ups (subnets, flags, earlier work); the decision
        # takes whatever has arrived by then.
        recall = (
            self.memory.recall(self.ec2.region, request.instance_types, deadline)
            if self.memory is not None and not request.capacity_reservation_id
            else None
        )
        try:
            place = placement.resolve(self.ec2, request, request.subnet_ids, deadline)
        except AwsError as error:
            return answer.error(error.code, f"Could not look up the job's places: {error.message}")
        # The job's template is checked while the flow goes on, and before anything is held:
        # a template that does not exist must not cost a hold.
        template = _Background(self._template_source, request, deadline)

        if request.capacity_reservation_id:
            try:
                outcome = self._bring_your_own(request, place, answer, deadline)
            except AwsError as error:
                return answer.error(error.code, f"Could not check the reservation: {error.message}")
            if isinstance(outcome, ReserveResponse):
                return outcome
            chosen, attempts = outcome, list[Attempt]()
            try:
                source = template.result()
            except AwsError as error:
                return answer.error(error.code, _TEMPLATE_UNREADABLE + error.message)
        else:
            try:
                flags = self.flags.read(deadline)
            except FlagError as error:
                return answer.error("InvalidConfiguration", str(error))
            except AwsError as error:
                return answer.error(
                    error.code, f"Could not read the feature flags: {error.message}"
                )
            if not flags.enable:
                return answer.unchanged(
                    ReserveStatus.SKIPPED,
                    "EnableCapacityReservation is false: placement unchanged, no hold made",
                )
            strict = flags.strict if request.strict is None else request.strict
            try:
                earlier = self._earlier_hold(request_id, request, deadline, hard_deadline)
            except AwsError as error:
                return answer.error(error.code, f"Could not look for earlier work: {error.message}")
            try:
                source = template.result()
            except AwsError as error:
                return answer.error(error.code, _TEMPLATE_UNREADABLE + error.message)
            # An earlier hold of this request enters as the one to beat: only better places
            # are tried, and it is given back if one of them wins.
            ran = self._attempts(
                request, request_id, place, recall, deadline, hard_deadline, stats, earlier
            )
            attempts = ran.attempts
            kept = ran.result.kept
            if kept is None and ran.earlier_work and request.provision:
                # Its own nodes may be what took the capacity: the answer was lost, and the
                # request is asked again.
                found = self._earlier_nodes(request, request_id, deadline)
                if len(found) == request.instance_count:
                    return answer.provisioned_before(found, attempts)
            if kept is None or ran.result.kept_index is None:
                return self._no_winner(request, answer, ran, strict)
            subnet_id = ran.places[ran.result.kept_index].subnet.subnet_id
            chosen = Chosen(kept.reservation, True, [subnet_id], kept.since, ran.earlier_work)

        answer.chosen(chosen, attempts)
        response = self._use(
            request, request_id, chosen, source, answer, deadline, hard_deadline, stats
        )
        if response.cleanup != "pending" and stats.cancel_failures:
            # A losing hold whose cancel failed still holds capacity (as in probe).
            response.cleanup = "pending"
            response.message += (
                "; a losing hold could not be cancelled: its EndDate and the cleaner will"
            )
        return response

    def _earlier_hold(
        self, request_id: str, request: ReserveRequest, deadline: float, hard_deadline: float
    ) -> tuple[int, Held] | None:
        """The live hold an earlier invocation of this request made (found by its tags), with
        its place's preference: a retry takes it over instead of holding twice. If that
        invocation died mid-race and left several, the best-preferred one is kept and the
        others are given back now.

        The listing can miss a hold made a moment ago (EC2 is eventually consistent); that
        costs no second hold: the race's attempt at that place meets its ClientToken, and
        ``ReservationCore.hold`` waits for EC2 to show the earlier hold and takes it over."""
        if request.request_id is None:
            return None  # a request id generated for this invocation has no earlier work
        preference = {
            (p.instance_type, p.subnet_id): p.index
            for p in pairing.pairs(request.instance_types, request.subnet_ids)
        }
        found = [
            (preference[key], reservation)
            for reservation in self.ec2.reservations(
                filters={
                    f"tag:{TAG_CLUSTER_ID}": [self.core.cluster_id],
                    f"tag:{TAG_REQUEST_ID}": [request_id],
                    f"tag:{TAG_PURPOSE}": [Purpose.HOLD.value],
                    "state": ["active", "pending"],
                },
                deadline=deadline,
            )
            for key in [(reservation.instance_type, reservation.tags.get(TAG_SUBNET_ID, ""))]
            if self.core.owns(reservation)
            and key in preference
            and reservation.total_count == request.instance_count
        ]
        if not found:
            return None
        found.sort(key=lambda item: item[0])
        for _, extra in found[1:]:
            self._cancel(extra, hard_deadline)
        index, best = found[0]
        return index, Held(best, self.monotonic(), reused=True)

    # -- bring your own reservation -----------------------------------------------------
    def _bring_your_own(
        self,
        request: ReserveRequest,
        place: placement.Placement,
        answer: _Answer,
        deadline: float,
    ) -> Chosen | ReserveResponse:
        rid = str(request.capacity_reservation_id)
        # One made a moment ago may be unknown to EC2's next calls, or still show pending:
        # looked at again first.
        found = self.core.find(rid, deadline, settled=True)
        if found is None:
            return answer.unchanged(
                ReserveStatus.REJECTED, f"{rid} does not exist", reason=f"{rid} does not exist"
            )
        existing = ExistingReservation(
            id=found.id,
            state=found.state,
            reservation_type=found.reservation_type,
            instance_type=found.instance_type,
            availability_zone_id=found.availability_zone_id,
            platform=found.platform,
            tenancy=found.tenancy,
            available_count=found.available_count,
            start_date=found.start_date,
            owner=found.owner_id,
            owned_by_broker=self.core.owns(found),
            size=found.size,
        )
        wanted = Wanted(
            instance_types=request.instance_types,
            availability_zone_ids=[s.availability_zone_id for s in place.subnets],
            platform=place.platform,
            tenancy=place.tenancy,
            instance_count=request.instance_count,
        )
        check = validate_existing(existing, wanted, self.clock())
        if isinstance(check, Rejected):
            return answer.unchanged(ReserveStatus.REJECTED, check.reason, reason=check.reason)
        if isinstance(check, WaitForStart):
            response = answer.unchanged(
                ReserveStatus.NO_CAPACITY, check.reason, reason=check.reason
            )
            response.retry_after_seconds = check.retry_after_seconds
            return response
        subnets = [
            s.subnet_id
            for s in place.subnets
            if s.availability_zone_id == found.availability_zone_id
        ]
        return Chosen(found, False, subnets)

    # -- the attempts -------------------------------------------------------------------
    def _attempts(
        self,
        request: ReserveRequest,
        request_id: str,
        place: placement.Placement,
        recall: Recall | None,
        deadline: float,
        hard_deadline: float,
        stats: ReserveStats,
        earlier: tuple[int, Held] | None = None,
    ) -> Ran:
        """Every pair tried as the fan-out decides; the best that holds is kept."""
        places = [
            Place(p.instance_type, place.subnet(p.subnet_id))
            for p in pairing.pairs(request.instance_types, request.subnet_ids)
        ]

        def spec_of(where: Place) -> HoldSpec:
            return HoldSpec(
                purpose=Purpose.HOLD,
                request_id=request_id,
                instance_type=where.instance_type,
                subnet=where.subnet,
                count=request.instance_count,
                platform=place.platform,
                tenancy=place.tenancy,
                job_id=request.job_id,
                stack_name=request.stack_name,
                placement_group_arn=request.placement_group_arn,
                extra_tags=request.tags,
            )

        attempts = Attempts(
            self.core,
            keep=True,
            max_concurrency=self.max_concurrency,
            monotonic=self.monotonic,
            memory=self.memory,
        )
        return attempts.run(
            places,
            spec_of,
            recall,
            deadline,
            hard_deadline,
            stats,
            earlier,
        )

    def _no_winner(
        self, request: ReserveRequest, answer: _Answer, ran: Ran, strict: bool
    ) -> ReserveResponse:
        attempts = ran.attempts
        if not ran.only_no_capacity:
            # Stopped (quota for the request alone, permissions), a place that failed for
            # another reason than capacity, or the time budget: the question stays open.
            failure = ran.failure()
            timed_out = ran.decision.kind is DecisionKind.TIMED_OUT or failure is None
            response = answer.error(
                "TimeBudgetExceeded" if timed_out or failure is None else failure.error_code,
                "The time budget ran out before every place was tried"
                if timed_out or failure is None
                else f"Stopped by {failure.error_code} ({failure.outcome}) in "
                f"{failure.instance_type} / {failure.subnet_id}",
            )
            response.attempts = attempts
            return response
        pair_count = possible_pairs(a.outcome for a in attempts)
        status = verdict(False, strict, pair_count)
        if status is ReserveStatus.NO_CAPACITY:
            response = answer.unchanged(
                status,
                f"No single place can hold {request.instance_count} × "
                f"{'/'.join(request.instance_types)} now; the job stays queued"
                + (" (strict)" if strict and pair_count > 1 else ""),
            )
            response.retry_after_seconds = retry_after_seconds(request.attempt)
        else:
            response = answer.unchanged(
                status,
                "No single place can hold the whole job; proceeding with the original "
                "placement, without a guarantee",
            )
        response.attempts = attempts
        return response

    # -- template and fleet -------------------------------------------------------------
    def _use(
        self,
        request: ReserveRequest,
        request_id: str,
        chosen: Chosen,
        source: Version | None,
        answer: _Answer,
        deadline: float,
        hard_deadline: float,
        stats: ReserveStats,
    ) -> ReserveResponse:
        response = answer.response
        if request.launch_template is None:
            return response
        reservation = chosen.reservation
        subnet_id = chosen.subnet_ids[0]
        try:
            if self.monotonic() >= deadline:
                raise _OutOfTime("before the launch template version")
            template = self._template_version(
                request, request_id, reservation, subnet_id, source, deadline
            )
        except (AwsError, _OutOfTime) as error:
            return self._undo(answer, chosen, hard_deadline, stats, "launch template", error)
        response.launch_template = LaunchTemplateInfo(
            id=template.template_id, version=template.version
        )
        response.message += (
            f"; launch template {template.template_id} version {template.version} targets it"
        )
        if not request.provision:
            return response
        try:
            if self.monotonic() >= deadline:
                raise _OutOfTime("before the fleet")
            fleet = self._launch(
                request,
                request_id,
                template,
                reservation,
                subnet_id,
                deadline,
                hard_deadline,
                chosen.earlier_work,
            )
        except _FleetUnknown as unknown:
            return self._unknown_fleet(answer, chosen, unknown)
        except (AwsError, _OutOfTime) as error:
            return self._undo(answer, chosen, hard_deadline, stats, "fleet", error)
        return self._after_fleet(request, chosen, fleet, answer, hard_deadline, stats)

    @staticmethod
    def _unknown_fleet(answer: _Answer, chosen: Chosen, unknown: _FleetUnknown) -> ReserveResponse:
        """Every answer to CreateFleet was lost: EC2 may have launched the nodes. The hold is
        kept (cancelling it would let a retry make a new hold, a new version and a second
        fleet); the retry of this request takes it over and asks EC2 with the same
        ClientToken, which returns the fleet if there is one."""
        error = unknown.error
        response = answer.error(
            error.code,
            f"The fleet's answer was lost ({error.code or 'no answer'}: {error.message}"[:200]
            + "); EC2 may have launched the nodes: ask again with the same request_id, which "
            "gets the same fleet back instead of launching a second one",
        )
        response.instances = list(unknown.seen)
        if chosen.owned:
            response.cleanup = "pending"
            response.message += (
                f"; hold {chosen.reservation.id} is kept for that retry (its EndDate and the "
                "cleaner end it otherwise)"
            )
        return response

    def _earlier_nodes(
        self, request: ReserveRequest, request_id: str, deadline: float, patient: bool = True
    ) -> list[str]:
        """The nodes an earlier invocation of this request launched (they carry the request
        id). A listing can miss instances launched a moment ago: ``patient`` (an earlier
        invocation is known to have given its hold back, so it may have launched) looks again
        for a short, bounded while until it shows the request's count; otherwise one look."""

        def look() -> list[str]:
            return self.ec2.request_instances(request_id, deadline)

        if not patient:
            return look()
        return self.core.look_again_until(
            look, lambda found: len(found) >= request.instance_count, deadline
        )

    def _launch(
        self,
        request: ReserveRequest,
        request_id: str,
        template: TemplateVersion,
        reservation: Reservation,
        subnet_id: str,
        deadline: float,
        hard_deadline: float,
        earlier_work: bool = False,
    ) -> FleetResult:
        """One all-or-nothing fleet per hold, under a ClientToken: a retry of CreateFleet with
        that token gets the first fleet back (EC2 "Ensuring idempotency"), never a second.

        Nodes an earlier invocation launched and EC2 already shows (they carry the request
        id) are not launched again. A fleet whose answer was lost is asked for again with the
        same token until the time budget ends; what DescribeInstances shows then is taken as
        a confirmation, and nothing shown proves nothing (EC2 is eventually consistent):
        ``_FleetUnknown``, and the hold stays for the retry of the request to find.
        """
        if request.request_id is not None:
            earlier = self._earlier_nodes(request, request_id, deadline, earlier_work)
            if earlier:
                return FleetResult(None, earlier)
        token = client_token(
            Purpose.HOLD,
            request_id,
            reservation.instance_type,
            subnet_id,
            # One fleet per hold: a retry that had to make a new hold (the old one was given
            # back) launches from a new version, which the old token would refuse.
            nonce=f"fleet:{reservation.id}",
        )

        def create(until: float) -> FleetResult:
            return self.ec2.create_instant_fleet(
                template,
                reservation.instance_type,
                subnet_id,
                request.instance_count,
                "capacity-block"
                if reservation.reservation_type == "capacity-block"
                else "on-demand",
                token,
                {TAG_JOB_ID: request.job_id, TAG_REQUEST_ID: request_id, **(request.tags or {})},
                until,
            )

        try:
            return create(deadline)
        except AwsError as error:
            if not is_retryable(error.error_class):
                raise
            lost = error
        # No answer (timeouts, 5xx) after the adapter's retries: EC2 may have launched the
        # fleet. The same token once more, within what is left for finishing the request.
        if self.monotonic() < hard_deadline:
            try:
                return create(hard_deadline)
            except AwsError as error:
                if not is_retryable(error.error_class):
                    raise
                lost = error
        # Still no answer: the fleet's nodes carry the request id. A listing can miss instances
        # launched a moment ago, so it is looked at again until it shows them all.
        try:
            seen = self.core.look_again_until(
                lambda: self.ec2.request_instances(request_id, hard_deadline),
                lambda found: len(found) == request.instance_count,
                hard_deadline,
            )
        except AwsError:
            seen = []
        if len(seen) == request.instance_count:
            return FleetResult(None, seen)
        raise _FleetUnknown(lost, seen)

    def _template_source(self, request: ReserveRequest, deadline: float) -> Version | None:
        """The version the new template version builds on (``$Latest`` and ``$Default``
        resolved once per request id: see ``Templates.source``), or ``InvalidInput`` when the
        job's template or version does not exist."""
        if request.launch_template is None:
            return None
        try:
            return self.templates.source(
                request.launch_template.id, request.launch_template.version, deadline
            )
        except AwsError as error:
            if error.code and error.code.startswith("InvalidLaunchTemplate"):
                field = (
                    "launch_template.version" if "Version" in error.code else "launch_template.id"
                )
                raise InvalidInput([(field, f"{error.code}: {error.message}"[:300])]) from None
            raise

    def _template_version(
        self,
        request: ReserveRequest,
        request_id: str,
        reservation: Reservation,
        subnet_id: str,
        source: Version | None,
        deadline: float,
    ) -> TemplateVersion:
        assert request.launch_template is not None
        assert source is not None
        return self.templates.make(
            request.launch_template.id,
            source,
            reservation,
            request_id,
            request.job_id,
            request.stack_name,
            # One version per hold: its data names the reservation, so a retry with a new hold
            # needs a new token (EC2 answers a reused one with IdempotentParameterMismatch).
            client_token(
                Purpose.HOLD,
                request_id,
                reservation.instance_type,
                subnet_id,
                nonce=f"template:{reservation.id}",
            ),
            deadline,
        )

    def _after_fleet(
        self,
        request: ReserveRequest,
        chosen: Chosen,
        fleet: FleetResult,
        answer: _Answer,
        hard_deadline: float,
        stats: ReserveStats,
    ) -> ReserveResponse:
        response = answer.response
        launched = len(fleet.instance_ids) == request.instance_count
        cleaned = self._drop(chosen, hard_deadline, stats) if chosen.owned else True
        if launched:
            response.status = ReserveStatus.PROVISIONED
            response.instances = fleet.instance_ids
            response.message = (
                f"Launched {len(fleet.instance_ids)} × {chosen.reservation.instance_type} in "
                f"{chosen.reservation.availability_zone} from the reservation"
                + ("; the hold is released" if chosen.owned else "")
            )
        else:
            first = fleet.errors[0] if fleet.errors else None
            response.status = ReserveStatus.ERROR
            response.error_code = first.code if first else "FleetIncomplete"
            response.instances = fleet.instance_ids
            details = "; ".join(f"{e.code}: {e.message}" for e in fleet.errors)[:400]
            response.message = (
                f"The fleet could not launch all {request.instance_count} nodes at once "
                f"({len(fleet.instance_ids)} launched): {details or 'no error given'}"
                + ("; the hold is cancelled" if chosen.owned else "")
            )
        if not cleaned:
            response.cleanup = "pending"
            response.message += (
                "; the hold could not be cancelled: its EndDate and the cleaner will"
            )
        return response

    def _undo(
        self,
        answer: _Answer,
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


class _Background:
    """One look-up running beside the flow; ``result()`` waits for it (and re-raises)."""

    def __init__(self, fn: Callable[..., Version | None], *args: object) -> None:
        self._value: Version | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = fn(*args)
            except BaseException as error:  # noqa: BLE001 - handed to the waiting flow
                self._error = error

        self._thread = threading.Thread(target=run, name="reserve-template", daemon=True)
        self._thread.start()

    def result(self) -> Version | None:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


class _FleetUnknown(Exception):
    """CreateFleet never answered: whether the fleet exists is not known."""

    def __init__(self, error: AwsError, seen: list[str]) -> None:
        super().__init__(str(error))
        self.error = error
        self.seen = seen


class _OutOfTime(Exception):
    def __init__(self, where: str) -> None:
        super().__init__(f"the invocation's time budget ran out {where}")


class _Answer:
    """Builds the reserve answer: the contract's fields, filled as the flow goes."""

    def __init__(self, request: ReserveRequest, request_id: str) -> None:
        self.request = request
        self.response = ReserveResponse(
            status=ReserveStatus.ERROR,
            request_id=request_id,
            job_id=request.job_id,
            instance_types=list(request.instance_types),
            subnet_ids=list(request.subnet_ids),
            message="",
        )

    def error(self, code: str | None, message: str) -> ReserveResponse:
        self.response.status = ReserveStatus.ERROR
        self.response.error_code = code or "RequestTimeout"
        self.response.message = message[:500]
        return self.response

    def unchanged(
        self, status: ReserveStatus, message: str, reason: str | None = None
    ) -> ReserveResponse:
        self.response.status = status
        self.response.message = message
        self.response.reason = reason
        return self.response

    def provisioned_before(self, instances: list[str], attempts: list[Attempt]) -> ReserveResponse:
        """An earlier invocation of this request launched the job's nodes (its answer was
        lost): the same outcome, the nodes it launched; nothing new was held or launched."""
        self.response.status = ReserveStatus.PROVISIONED
        self.response.instances = list(instances)
        self.response.attempts = attempts
        self.response.message = (
            f"{len(instances)} nodes of request {self.response.request_id} were launched by an "
            "earlier invocation of it; nothing was launched again"
        )
        return self.response

    def chosen(self, chosen: Chosen, attempts: list[Attempt]) -> None:
        r = chosen.reservation
        self.response.status = ReserveStatus.RESERVED
        self.response.reservation = ReservationInfo(
            id=r.id,
            type="capacity-block" if r.reservation_type == "capacity-block" else "default",
            owned=chosen.owned,
            instance_type=r.instance_type,
            availability_zone=r.availability_zone,
            availability_zone_id=r.availability_zone_id,
            instance_count=r.total_count,
            start_date=r.start_date if r.reservation_type == "capacity-block" else None,
            end_date=r.end_date,
        )
        self.response.instance_types = [r.instance_type]
        self.response.subnet_ids = chosen.subnet_ids
        self.response.attempts = attempts
        kind = "holds" if chosen.owned else "uses your reservation"
        self.response.message = (
            f"{r.id} {kind} {self.request.instance_count} × {r.instance_type} in "
            f"{r.availability_zone} ({', '.join(chosen.subnet_ids)})"
        )
