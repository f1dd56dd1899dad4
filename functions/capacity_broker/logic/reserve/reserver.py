"""The reserve flow: look up the job's places, read the flags and the memory, check its
template beside the flow, then either use the reservation it brought or race the pairs, and
use what was chosen (template version, fleet). The parts are the mixins ``Reserver`` is made
of; this module only orders them."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...adapters.aws import AwsError
from ...domain.flags import FlagError
from ...domain.reserve import (
    ReserveStatus,
)
from ...domain.templates import Version
from ...domain.tokens import CHANGED_REQUEST, CHANGED_REQUEST_CODE
from ...models import Attempt, ReserveRequest, ReserveResponse
from .. import InvalidInput, placement
from ..templates import TemplateRefused
from .answer import Answer, Chosen
from .base import ReserveStats
from .bring_your_own import BringYourOwn
from .launch import Launch
from .race import Race
from .replay import Replay

TEMPLATE_UNREADABLE = "Could not check the job's launch template (nothing was held): "


class Reserver(Launch, Race, BringYourOwn, Replay):
    """reserve's flow, over the parts it is made of (see the package docstring)."""

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
        answer = Answer(request, request_id)
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
        template = Background(self._template_source, request, deadline)

        if request.capacity_reservation_id:
            source = None
            if self._platform_from_template(request):
                # The reservation must match the platform the template's image bills as.
                try:
                    source = template.result()
                    place = self._template_platform(place, source, deadline)
                except AwsError as error:
                    return answer.error(error.code, TEMPLATE_UNREADABLE + error.message)
                except TemplateRefused as refused:
                    return answer.unchanged(
                        ReserveStatus.REJECTED, str(refused), reason=str(refused)
                    )
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
                return answer.error(error.code, TEMPLATE_UNREADABLE + error.message)
            except TemplateRefused as refused:
                return answer.unchanged(ReserveStatus.REJECTED, str(refused), reason=str(refused))
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
                if self._platform_from_template(request):
                    place = self._template_platform(place, source, deadline)
            except AwsError as error:
                return answer.error(error.code, TEMPLATE_UNREADABLE + error.message)
            except TemplateRefused as refused:
                return answer.unchanged(ReserveStatus.REJECTED, str(refused), reason=str(refused))
            # An earlier hold of this request enters as the one to beat: only better places
            # are tried, and it is given back if one of them wins.
            ran = self._attempts(
                request, request_id, place, recall, deadline, hard_deadline, stats, earlier
            )
            attempts = ran.attempts
            kept = ran.result.kept
            if any(a.error_code == CHANGED_REQUEST_CODE for a in attempts):
                # An earlier hold of this request id, made for another request, showed only
                # now (a listing made a moment after a create can miss it): the same answer as
                # ``_earlier_hold``'s, and nothing this invocation made is kept.
                if kept is not None and not kept.reused:
                    self._cancel(kept.reservation, hard_deadline)
                raise InvalidInput([("request_id", CHANGED_REQUEST)])
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

    @staticmethod
    def _platform_from_template(request: ReserveRequest) -> bool:
        """The job named neither ``image_id`` nor ``instance_platform``: its holds take the
        platform its launch template's image bills as (contract v3)."""
        return request.launch_template is not None and not request.platform_chosen

    def _template_platform(
        self, place: placement.Placement, source: Version | None, deadline: float
    ) -> placement.Placement:
        if source is None:
            return place
        return placement.from_template(self.ec2, self.parameters, place, source, deadline)


class Background:
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
