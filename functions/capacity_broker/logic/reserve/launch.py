"""The launch on the chosen capacity: a launch template version that targets it, then (when
the job asks for it) one all-or-nothing EC2 Fleet under a ClientToken. Also what a lost
CreateFleet answer leaves (the hold kept for the retry), and the nodes an earlier invocation
of the request already launched, which are never launched twice."""

from __future__ import annotations

from collections.abc import Callable

from ...adapters.aws import AwsError
from ...adapters.ec2 import Ec2
from ...adapters.ec2.fleets import FleetError, FleetResult, LaunchSpec
from ...adapters.ec2.launches import Launches, TemplateVersion
from ...adapters.ssm import ImageParameters
from ...domain.errors import is_retryable, launch_asks_again
from ...domain.failures import BrokerFailure
from ...domain.reserve import (
    ReserveStatus,
)
from ...domain.tags import (
    TAG_CLUSTER_ID,
    TAG_JOB_ID,
    TAG_REQUEST_ID,
    Purpose,
)
from ...domain.templates import Version
from ...domain.tokens import client_token
from ...models import LaunchTemplateInfo, ReserveRequest, ReserveResponse
from .. import InvalidInput, placement
from ..reservations import ReservationCore
from ..templates import Templates
from .answer import Answer, Chosen, ReserveStats
from .giveback import GiveBack

# Launches asked again after a transient failure: pauses doubling from LAUNCH_PAUSE to
# LAUNCH_PAUSE_CAP seconds, at most LAUNCH_TRIES launches (about 12 s of pauses), always
# within the time budget: the hold bills meanwhile, and a failure that outlasts that is no
# longer "a moment ago".
LAUNCH_PAUSE = 0.25
LAUNCH_PAUSE_CAP = 2.0
LAUNCH_TRIES = 8


class FleetUnknown(BrokerFailure):
    """CreateFleet never answered: whether the fleet exists is not known. The answer says so
    and keeps the hold for the retry of the request (``seen``: the nodes a listing showed)."""

    def __init__(self, error: AwsError, seen: list[str]) -> None:
        super().__init__(
            f"The fleet's answer was lost ({error.code or 'no answer'}: {error.message}"[:200]
            + "); EC2 may have launched the nodes: ask again with the same request_id, which "
            "gets the same fleet back instead of launching a second one"
        )
        self.error = error
        self.seen = seen

    @property
    def error_code(self) -> str:
        return self.error.error_code


class OutOfTime(BrokerFailure):
    """The invocation's time budget ran out before a step after the hold."""

    def __init__(self, where: str) -> None:
        super().__init__(f"the invocation's time budget ran out {where}")

    @property
    def error_code(self) -> str:
        return "TimeBudgetExceeded"


class Launch:
    """The job's launch template, and the template version and fleet on the chosen capacity."""

    def __init__(
        self,
        ec2: Ec2,
        launches: Launches,
        core: ReservationCore,
        give_back: GiveBack,
        monotonic: Callable[[], float],
        parameters: ImageParameters,
    ) -> None:
        self.ec2 = ec2
        self.launches = launches
        self.core = core
        self.give_back = give_back
        self.monotonic = monotonic
        # The Systems Manager parameters a template's image may name (resolve:ssm:).
        self.parameters = parameters
        self.templates = Templates(ec2, launches, core.cluster_id)

    # -- the job's template, checked before anything is held ---------------------------
    def source(self, request: ReserveRequest, deadline: float) -> Version | None:
        """The version the new template version builds on (``$Latest`` and ``$Default``
        resolved once per request id: see ``Templates.source``), or ``InvalidInput`` when the
        job's template or version does not exist (``TemplateRefused``: not this cluster's)."""
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

    @staticmethod
    def platform_from_template(request: ReserveRequest) -> bool:
        """The job named neither ``image_id`` nor ``instance_platform``: its holds take the
        platform its launch template's image bills as (contract v3)."""
        return request.launch_template is not None and not request.platform_chosen

    def platform(
        self, place: placement.Placement, source: Version | None, deadline: float
    ) -> placement.Placement:
        """``place`` with the platform ``source``'s image bills as."""
        if source is None:
            return place
        return placement.from_template(self.ec2, self.parameters, place, source, deadline)

    # -- template version and fleet ---------------------------------------------------
    def use(
        self,
        request: ReserveRequest,
        request_id: str,
        chosen: Chosen,
        source: Version | None,
        answer: Answer,
        deadline: float,
        hard_deadline: float,
        stats: ReserveStats,
    ) -> ReserveResponse:
        """A template version that targets ``chosen``, then (``provision``) the fleet. A step
        that fails gives the hold back (``GiveBack.undo``); a fleet whose every answer was
        lost keeps it for the retry of the request."""
        response = answer.response
        if request.launch_template is None:
            return response
        stage = "launch template"
        try:
            self._in_time(deadline, "before the launch template version")
            template = self.version(request, request_id, chosen, source, deadline)
            response.launch_template = LaunchTemplateInfo(
                id=template.template_id, version=template.version
            )
            response.message += (
                f"; launch template {template.template_id} version {template.version} targets it"
            )
            if not request.provision:
                return response
            stage = "fleet"
            self._in_time(deadline, "before the fleet")
            fleet = self.fleet(request, request_id, template, chosen, deadline, hard_deadline)
        except BrokerFailure as failure:
            if isinstance(failure, FleetUnknown):
                return self._unknown_fleet(answer, chosen, failure)
            return self.give_back.undo(
                answer, chosen, f"The {stage} step failed", failure, hard_deadline, stats
            )
        return self._after_fleet(request, chosen, fleet, answer, hard_deadline, stats)

    def _in_time(self, deadline: float, where: str) -> None:
        if self.monotonic() >= deadline:
            raise OutOfTime(where)

    @staticmethod
    def _unknown_fleet(answer: Answer, chosen: Chosen, unknown: FleetUnknown) -> ReserveResponse:
        """Every answer to CreateFleet was lost: EC2 may have launched the nodes. The hold is
        kept (cancelling it would let a retry make a new hold, a new version and a second
        fleet); the retry of this request takes it over and asks EC2 with the same
        ClientToken, which returns the fleet if there is one."""
        response = answer.failed(unknown)
        response.instances = list(unknown.seen)
        if chosen.owned:
            response.cleanup = "pending"
            response.message += (
                f"; hold {chosen.reservation.id} is kept for that retry (its EndDate and the "
                "cleaner end it otherwise)"
            )
        return response

    def earlier_nodes(
        self, request: ReserveRequest, request_id: str, deadline: float, patient: bool = True
    ) -> list[str]:
        """The nodes an earlier invocation of this request launched (they carry the request
        id). A listing can miss instances launched a moment ago: ``patient`` (an earlier
        invocation is known to have given its hold back, so it may have launched) looks again
        for a short, bounded while until it shows the request's count; otherwise one look."""

        def look() -> list[str]:
            return self.launches.request_instances(self.core.cluster_id, request_id, deadline)

        if not patient:
            return look()
        return self.core.look_again_until(
            look, lambda found: len(found) >= request.instance_count, deadline
        )

    def fleet(
        self,
        request: ReserveRequest,
        request_id: str,
        template: TemplateVersion,
        chosen: Chosen,
        deadline: float,
        hard_deadline: float,
    ) -> FleetResult:
        """The job's nodes, all or nothing: an instant fleet into an On-Demand Capacity
        Reservation (``MinTargetCapacity``, which EC2 honours), RunInstances with ``MinCount`` =
        ``MaxCount`` into a Capacity Block (EC2 documents a block fleet as one that "fulfills
        as much capacity as it can").

        Nodes an earlier invocation launched and EC2 already shows (they carry the request
        id) are not launched again. A launch that failed for a reason that only says "not now"
        (``domain.errors.launch_asks_again``: throttled, a version EC2 does not show yet, a
        hold not ready yet) is asked again, with a new ClientToken each time (EC2 answers a
        token with its first answer, errors included), ``LAUNCH_TRIES`` times at most and
        within the time budget; the hold stays meanwhile. Any other failure is final: the
        caller gives the hold back.
        """
        reservation, subnet_id = chosen.reservation, chosen.subnet_ids[0]
        if request.request_id is not None:
            earlier = self.earlier_nodes(request, request_id, deadline, chosen.earlier_work)
            if earlier:
                return FleetResult(None, earlier)
        tags = {
            # The cluster's own nodes: what reserve may terminate (a partial launch).
            TAG_CLUSTER_ID: self.core.cluster_id,
            TAG_JOB_ID: request.job_id,
            TAG_REQUEST_ID: request_id,
            **(request.tags or {}),
        }
        block = reservation.reservation_type == "capacity-block"
        tries = 0
        while True:
            token = client_token(
                Purpose.HOLD,
                request_id,
                reservation.instance_type,
                subnet_id,
                # One launch per hold and try: a retry that had to make a new hold (the old
                # one was given back) launches from a new version, which the old token would
                # refuse; a launch asked again after a transient failure needs a fresh token.
                nonce=f"fleet:{reservation.id}" + (f":{tries}" if tries else ""),
            )
            spec = LaunchSpec(
                template, reservation.instance_type, subnet_id, request.instance_count, token, tags
            )
            result = self._launch_once(request, request_id, spec, block, deadline, hard_deadline)
            if result.instance_ids or not result.errors:
                return result
            if not all(launch_asks_again(e.code, chosen.owned) for e in result.errors):
                return result
            pause = min(LAUNCH_PAUSE_CAP, LAUNCH_PAUSE * 2**tries)
            if tries + 1 >= LAUNCH_TRIES or self.monotonic() + pause >= deadline:
                return result
            self.core.sleep(pause)
            tries += 1

    def _launch_once(
        self,
        request: ReserveRequest,
        request_id: str,
        spec: LaunchSpec,
        block: bool,
        deadline: float,
        hard_deadline: float,
    ) -> FleetResult:
        """One launch under ``spec``'s token: an instant fleet, or RunInstances into a
        Capacity Block. An answer that was lost (timeouts, 5xx, after the adapter's retries)
        is asked for again with the same token, which returns what the first call launched;
        what DescribeInstances shows then is taken as a confirmation, and nothing shown proves
        nothing (EC2 is eventually consistent): ``FleetUnknown``, and the hold stays for the
        retry of the request to find."""

        def create(until: float) -> FleetResult:
            if not block:
                return self.launches.create_instant_fleet(spec, until)
            try:
                return self.launches.run_instances(spec, until)
            except AwsError as error:
                if is_retryable(error.error_class):
                    raise  # no answer: the lost-answer path below
                # EC2 answered: nothing was launched (MinCount). Judged as a fleet's error.
                return FleetResult(None, [], [FleetError(error.code or "Unknown", error.message)])

        # After no answer (timeouts, 5xx) past the adapter's retries, EC2 may have launched
        # the nodes: the same token once more, within what is left for finishing the request.
        lost: AwsError | None = None
        for until in (deadline, hard_deadline):
            if lost is not None and self.monotonic() >= hard_deadline:
                break
            try:
                return create(until)
            except AwsError as error:
                if not is_retryable(error.error_class):
                    raise
                lost = error
        assert lost is not None  # every pass that did not return set it
        # Still no answer: the nodes carry the request id. A listing can miss instances
        # launched a moment ago (by tag, for minutes at worst), and EC2 may well have launched
        # them: looked at again with the whole patience until it shows them all.
        try:
            seen = self.core.look_again_until(
                lambda: self.launches.request_instances(
                    self.core.cluster_id, request_id, hard_deadline
                ),
                lambda found: len(found) == request.instance_count,
                hard_deadline,
                expected=True,
            )
        except AwsError:
            seen = []
        if len(seen) == request.instance_count:
            return FleetResult(None, seen)
        raise FleetUnknown(lost, seen)

    def version(
        self,
        request: ReserveRequest,
        request_id: str,
        chosen: Chosen,
        source: Version | None,
        deadline: float,
    ) -> TemplateVersion:
        """The job's new template version, built on ``source``, that targets ``chosen``."""
        reservation, subnet_id = chosen.reservation, chosen.subnet_ids[0]
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
        answer: Answer,
        hard_deadline: float,
        stats: ReserveStats,
    ) -> ReserveResponse:
        response = answer.response
        launched = len(fleet.instance_ids) == request.instance_count
        cleaned = self.give_back.drop(chosen, hard_deadline, stats) if chosen.owned else True
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
            details = "; ".join(f"{e.code}: {e.message}" for e in fleet.errors)[:400]
            response.message = (
                f"The launch could not start all {request.instance_count} nodes at once: "
                f"{details or 'no error given'}"
            )
            response.instances = fleet.instance_ids
            if fleet.instance_ids and fleet.errors:
                # A launch that answered with part of the nodes (EC2 did not honour the
                # minimum): all or nothing, what did launch is ended before the answer says
                # error. (Nodes an earlier invocation launched that a listing shows only in
                # part are the job's whole launch, lagging: never ended here.)
                left = self._end_partial(fleet.instance_ids, hard_deadline)
                response.instances = left
                response.message += (
                    f"; the {len(fleet.instance_ids)} nodes it did launch are terminated"
                    if not left
                    else f"; {len(left)} of the {len(fleet.instance_ids)} nodes it did launch "
                    f"could not be terminated: {', '.join(left)}"
                )
                if left:
                    response.cleanup = "pending"
            if chosen.owned:
                response.message += "; the hold is cancelled"
        if not cleaned:
            response.cleanup = "pending"
            response.message += (
                "; the hold could not be cancelled: its EndDate and the cleaner will"
            )
        return response

    def _end_partial(self, instance_ids: list[str], hard_deadline: float) -> list[str]:
        """Terminate a partial launch (made a moment ago: EC2 may not know the ids yet);
        answers the ids EC2 did not confirm ending."""
        try:
            ended = self.ec2.terminate_instances(instance_ids, hard_deadline, wait_for=instance_ids)
        except AwsError:
            ended = []
        return sorted(set(instance_ids) - set(ended))
