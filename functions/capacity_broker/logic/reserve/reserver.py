"""The reserve flow: look up the job's places with the flags' and the memory's reads beside
them, check its template beside the flow, then either use the reservation it brought or race
the pairs, and use what was chosen (template version, fleet). ``Reserver`` holds the
collaborators that do each part and only orders them; what stops the flow is a
``BrokerFailure``, caught here once and answered through the one table (``logic.failures``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from ...adapters.ec2 import Ec2, Pricing
from ...adapters.ec2.launches import Launches
from ...adapters.ssm import Flags, FlagValues, ImageParameters
from ...domain.failures import BrokerFailure
from ...domain.pool import TAG_RUNG
from ...domain.pool_spec import PoolSpec
from ...domain.reserve import (
    ReserveStatus,
)
from ...domain.templates import Version
from ...domain.tokens import CHANGED_REQUEST, CHANGED_REQUEST_CODE
from ...models import Attempt, ReserveRequest, ReserveResponse
from .. import InvalidInput, placement
from ..background import Background
from ..failures import step
from ..memory import CapacityMemory, Recall
from ..pool import ReservedPool
from ..reservations import ReservationCore, utcnow
from .answer import Answer, Chosen, ReserveStats
from .bring_your_own import BringYourOwn
from .giveback import GiveBack
from .launch import Launch
from .pool import ENDED, HOLD_PART, ON_DEMAND_PART, Pool
from .race import Race
from .replay import Replay

TEMPLATE_UNREADABLE = "Could not check the job's launch template (nothing was held)"
# A reserved-first retry that met its earlier hold part before EC2 listed that part's nodes.
EARLIER_NOT_LISTED = "EarlierLaunchNotListed"
# A rung failed and what launched was ended; and the ladder's done record was not written.
LADDER_INCOMPLETE = "LadderIncomplete"
LADDER_NOT_RECORDED = "LadderNotRecorded"

# What the flow uses once it has chosen: the capacity, its template's source version, and the
# attempts that chose it.
Choice = tuple[Chosen, Version | None, list[Attempt]]


class Reserver:
    """reserve's flow over its collaborators: ``race`` (the pairs, an earlier hold, no
    winner), ``bring_your_own`` (a reservation the job brings), ``launch`` (the job's template,
    the version and the fleet), ``give_back`` (every hold let go) and ``replay`` (a recorded
    answer given again). Built once per container from what the composition root passes."""

    def __init__(
        self,
        ec2: Ec2,
        flags: Flags,
        core: ReservationCore,
        launches: Launches,
        max_concurrency: int = 16,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], datetime] = utcnow,
        memory: CapacityMemory | None = None,
        parameters: ImageParameters | None = None,
        pools: Callable[[PoolSpec], ReservedPool] | None = None,
        pool: PoolSpec | None = None,
        pricing: Pricing | None = None,
    ) -> None:
        self.ec2 = ec2
        self.flags = flags
        # The capacity memory the race recalls and learns into (the handler writes it out).
        self.memory = memory
        self.give_back = GiveBack(core, monotonic, memory)
        self.race = Race(ec2, core, self.give_back, max_concurrency, monotonic, memory)
        self.bring_your_own = BringYourOwn(core, clock)
        self.launch = Launch(
            ec2,
            launches,
            core,
            self.give_back,
            monotonic,
            parameters or ImageParameters(ec2.region, ec2.clients, ec2.retry),
        )
        self.replay = Replay(core)
        self.pool = Pool(
            ec2,
            self.launch,
            pools or _no_pools,
            pool or PoolSpec(),
            core.cluster_id,
            clock,
            pricing,
        )

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
        try:
            choice = self._choose(request, request_id, answer, deadline, hard_deadline, stats)
        except InvalidInput:
            raise  # the handler's answer: invalid_request, each field's error
        except BrokerFailure as failure:
            return answer.failed(failure)
        if isinstance(choice, ReserveResponse):
            return choice
        chosen, source, attempts = choice
        answer.chosen(chosen, attempts)
        response = self.launch.use(
            request, request_id, chosen, source, answer, deadline, hard_deadline, stats
        )
        if response.cleanup != "pending" and stats.cancel_failures:
            # A losing hold whose cancel failed still holds capacity (as in probe).
            response.cleanup = "pending"
            response.message += (
                "; a losing hold could not be cancelled: its EndDate and the cleaner will"
            )
        return response

    def _choose(
        self,
        request: ReserveRequest,
        request_id: str,
        answer: Answer,
        deadline: float,
        hard_deadline: float,
        stats: ReserveStats,
    ) -> Choice | ReserveResponse:
        """The capacity the job will use, or the answer when there is none to use."""
        # The memory's read overlaps the look-ups (subnets, flags, earlier work); the decision
        # takes whatever has arrived by then.
        recall = (
            self.memory.recall(self.ec2.region, request.instance_types, deadline)
            if self.memory is not None and not request.capacity_reservation_id
            else None
        )
        # A job that races its pairs reads the flags first thing after its look-ups: the read
        # (SSM) starts beside them (EC2), one round trip instead of two in a row when the
        # flags' cache is cold (a new container, or once a minute). Its answer is taken only
        # after theirs, so what is answered (an invalid place, a look-up or a flags error,
        # ``skipped``) is what reading them one after the other answered. A brought
        # reservation never reads them, a reserved-first job only after its pool: not early.
        flags = (
            Background(self.flags.read, deadline, name="reserve-flags")
            if not request.capacity_reservation_id and request.capacity != "reserved-first"
            else None
        )
        try:
            with step("Could not look up the job's places"):
                place = placement.resolve(self.ec2, request, request.subnet_ids, deadline)
        except BaseException:
            if flags is not None:
                flags.wait()  # not the answer; nothing keeps running after it
            raise
        # The job's template is checked while the flow goes on, and before anything is held:
        # a template that does not exist must not cost a hold.
        template = Background(self.launch.source, request, deadline, name="reserve-template")
        try:
            if request.capacity_reservation_id:
                return self._brought(request, place, template, answer, deadline)
            if request.capacity == "reserved-first":
                return self._laddered(
                    request,
                    request_id,
                    place,
                    template,
                    recall,
                    answer,
                    deadline,
                    hard_deadline,
                    stats,
                )
            return self._raced(
                request,
                request_id,
                place,
                template,
                recall,
                answer,
                deadline,
                hard_deadline,
                stats,
                flags,
            )
        finally:
            # An answer that never took the check's result (``skipped``, the flags' error, a
            # refused reservation) still waits for it: nothing keeps running after the answer
            # (Lambda freezes the container, and a call under way would land in whatever
            # invocation thaws it). Once taken, it is over: this returns at once.
            template.wait()

    def _brought(
        self,
        request: ReserveRequest,
        place: placement.Placement,
        template: Background[Version | None],
        answer: Answer,
        deadline: float,
    ) -> Choice | ReserveResponse:
        if self.launch.platform_from_template(request):
            # The reservation must match the platform the template's image bills as.
            place = self._platform(request, place, _checked(template), deadline)
        with step("Could not check the reservation"):
            chosen = self.bring_your_own.choose(request, place, answer, deadline)
        if isinstance(chosen, ReserveResponse):
            return chosen
        return chosen, _checked(template), []

    def _raced(
        self,
        request: ReserveRequest,
        request_id: str,
        place: placement.Placement,
        template: Background[Version | None],
        recall: Recall | None,
        answer: Answer,
        deadline: float,
        hard_deadline: float,
        stats: ReserveStats,
        reading: Background[FlagValues] | None = None,
    ) -> Choice | ReserveResponse:
        """The race of the pairs (after the flags); ``reading``: the flags' read started
        beside the look-ups (None: read now)."""
        with step("Could not read the feature flags"):
            flags = reading.result() if reading is not None else self.flags.read(deadline)
        if not flags.enable:
            return answer.unchanged(
                ReserveStatus.SKIPPED,
                "EnableCapacityReservation is false: placement unchanged, no hold made",
            )
        strict = flags.strict if request.strict is None else request.strict
        with step("Could not look for earlier work"):
            earlier = self.race.earlier_hold(request_id, request, deadline, hard_deadline)
        source = _checked(template)
        place = self._platform(request, place, source, deadline)
        # An earlier hold of this request enters as the one to beat: only better places are
        # tried, and it is given back if one of them wins.
        ran = self.race.run(
            request, request_id, place, recall, deadline, hard_deadline, stats, earlier
        )
        attempts = ran.attempts
        kept = ran.result.kept
        if any(a.error_code == CHANGED_REQUEST_CODE for a in attempts):
            # An earlier hold of this request id, made for another request, showed only now
            # (a listing made a moment after a create can miss it): the same answer as
            # ``Race.earlier_hold``'s, and nothing this invocation made is kept.
            if kept is not None and not kept.reused:
                self.give_back.cancel(kept.reservation, hard_deadline)
            raise InvalidInput([("request_id", CHANGED_REQUEST)])
        if kept is None and ran.earlier_work and request.provision:
            # Its own nodes may be what took the capacity: the answer was lost, and the
            # request is asked again.
            with step("Could not look for the nodes of an earlier invocation"):
                found = self.launch.earlier_nodes(request, request_id, deadline)
            if len(found) == request.instance_count:
                return answer.provisioned_before(found, attempts)
        if kept is None or ran.result.kept_index is None:
            return self.race.no_winner(request, answer, ran, strict)
        subnet_id = ran.places[ran.result.kept_index].subnet.subnet_id
        return (
            Chosen(kept.reservation, True, [subnet_id], kept.since, ran.earlier_work),
            source,
            attempts,
        )

    def _laddered(
        self,
        request: ReserveRequest,
        request_id: str,
        place: placement.Placement,
        template: Background[Version | None],
        recall: Recall | None,
        answer: Answer,
        deadline: float,
        hard_deadline: float,
        stats: ReserveStats,
    ) -> ReserveResponse:
        """``reserved-first`` (issue 43): the pool's free matching instances first, a hold of
        only the shortfall (the race, as for any job), then the launches, pool first; all or
        nothing: when a later rung fails, what launched is terminated and the hold given
        back. The whole answer is built here (no further ``Launch.use``)."""
        response = answer.response
        source = _checked(template)
        place = self._platform(request, place, source, deadline)
        with step("Could not look for the nodes of an earlier invocation"):
            earlier, ended = self.pool.earlier_nodes(request_id, deadline)
        with step("Could not read the reserved pool"):
            pool_plan, pool_seen = self.pool.plan(request, place, earlier, deadline)
        if pool_plan.subnet_index is not None:
            # The job's nodes stay in one AZ: the hold is made where the pool gives most.
            zone = place.subnets[pool_plan.subnet_index].availability_zone_id
            subnets = [s for s in place.subnets if s.availability_zone_id == zone]
        else:
            subnets = list(place.subnets)
        chosen: Chosen | None = None
        hold_request: ReserveRequest | None = None
        hold_id = ""
        attempts: list[Attempt] = []
        # The hold part's nodes an earlier invocation launched (its hold given back since):
        # a retry takes them, and holds nothing again.
        held_before = [i.instance_id for i in earlier if i.tags.get(TAG_RUNG) == HOLD_PART]
        # Likewise the On-Demand part's (``allow_on_demand``): launched, it is not held again.
        on_demand_before = [
            i.instance_id for i in earlier if i.tags.get(TAG_RUNG) == ON_DEMAND_PART
        ]
        on_demand = bool(
            request.allow_on_demand
            and pool_plan.shortfall
            and len(on_demand_before) == pool_plan.shortfall
        )
        no_hold: ReserveResponse | None = None
        if pool_plan.shortfall and len(held_before) != pool_plan.shortfall and not on_demand:
            hold_request, hold_id = self.pool.part(
                request, request_id, HOLD_PART, pool_plan.shortfall, [s.subnet_id for s in subnets]
            )
            try:
                held = self._raced(
                    hold_request,
                    hold_id,
                    placement.Placement(subnets, place.platform, place.tenancy),
                    template,
                    recall,
                    Answer(hold_request, hold_id),
                    deadline,
                    hard_deadline,
                    stats,
                )
            except InvalidInput:
                # The hold part of an earlier invocation of this request was for another
                # shortfall: its nodes did not all show in the listing by tag yet (EC2 is
                # eventually consistent). Nothing was launched here; asked again a moment
                # later, the ladder finds every rung's nodes.
                response.error_code = EARLIER_NOT_LISTED
                return answer.unchanged(
                    ReserveStatus.ERROR,
                    "An earlier invocation of this request launched nodes EC2 does not list "
                    "yet; nothing was launched again: ask again in a moment",
                )
            if isinstance(held, ReserveResponse) and _may_launch_on_demand(request, held):
                # No hold for the shortfall, and the job allows On-Demand: the shortfall is
                # launched On-Demand after the pool's part (below).
                on_demand, no_hold = True, held
            elif isinstance(held, ReserveResponse):
                # No hold for the shortfall: nothing is launched (all or nothing).
                response.status = held.status
                response.error_code = held.error_code
                response.reason = held.reason
                response.retry_after_seconds = held.retry_after_seconds
                response.attempts = held.attempts
                response.cleanup = held.cleanup
                response.pool = self.pool.uses(pool_plan) or None
                response.message = (
                    f"The pool covers {pool_plan.covered} of {request.instance_count}; the "
                    f"other {pool_plan.shortfall}: {held.message}; nothing was launched"
                )
                if response.status in (ReserveStatus.RESERVED, ReserveStatus.PROVISIONED):
                    response.status = ReserveStatus.ERROR  # never: a hold is a Choice
                return response
            else:
                chosen, _, attempts = held
                answer.chosen(chosen, attempts)
        launched: list[str] = []
        for use in pool_plan.uses:
            subnet_id = place.subnets[pool_plan.subnet_index or 0].subnet_id
            # A rung an earlier round undid (its nodes ended, none runs) is launched anew.
            running = any(i.tags.get(TAG_RUNG) == use.reservation.id for i in earlier)
            round_ = 0 if running else ended.get(use.reservation.id, 0)
            with step("Could not read a pool reservation"):
                reservation = self.pool.reservation(use.reservation, deadline)
            part = (
                self.pool.launch_use(
                    request,
                    request_id,
                    reservation,
                    use.count,
                    subnet_id,
                    source,
                    deadline,
                    hard_deadline,
                    stats,
                    round_,
                )
                if reservation is not None
                else None
            )
            if part is None or part.status is not ReserveStatus.PROVISIONED:
                what = part.message if part is not None else "EC2 no longer shows it"
                return self._ladder_failed(
                    response,
                    launched,
                    chosen,
                    f"pool reservation {use.reservation.id}: {what}",
                    part,
                    hard_deadline,
                    stats,
                )
            launched += part.instances
            if part.launch_template is not None:
                response.launch_template = part.launch_template
        if pool_plan.shortfall and len(held_before) == pool_plan.shortfall:
            hold_nodes = held_before
        else:
            hold_nodes = []
        on_demand_type: str | None = None
        if on_demand and len(on_demand_before) == pool_plan.shortfall:
            launched += on_demand_before
        elif on_demand:
            running = bool(on_demand_before)
            pool_types = [u.reservation.instance_type for u in pool_plan.uses]
            part = self.pool.on_demand(
                request,
                request_id,
                pool_plan.shortfall,
                [s.subnet_id for s in subnets],
                # The pool's type first: the job's nodes alike where they can be.
                [*pool_types, *request.instance_types],
                source,
                deadline,
                0 if running else ended.get(ON_DEMAND_PART, 0),
            )
            if part.status is not ReserveStatus.PROVISIONED:
                why = no_hold.message if no_hold is not None else "no hold"
                return self._ladder_failed(
                    response,
                    launched,
                    None,
                    f"On-Demand after {why}: {part.message}",
                    part,
                    hard_deadline,
                    stats,
                )
            launched += part.instances
            on_demand_type = part.instance_types[0]
            response.subnet_ids = list(part.subnet_ids)
            if no_hold is not None:
                attempts = list(no_hold.attempts)
                # A losing hold of the race whose cancel failed still holds capacity.
                response.cleanup = no_hold.cleanup
        if chosen is not None and hold_request is not None:
            part = self.launch.use(
                hold_request,
                hold_id,
                chosen,
                source,
                Answer(hold_request, hold_id),
                deadline,
                hard_deadline,
                stats,
            )
            if part.status is not ReserveStatus.PROVISIONED:
                # ``Launch.use`` gave the hold back (or kept it for a lost fleet answer).
                return self._ladder_failed(
                    response,
                    launched,
                    None,
                    f"hold {chosen.reservation.id}: {part.message}",
                    part,
                    hard_deadline,
                    stats,
                )
            launched += part.instances
            response.launch_template = part.launch_template
        launched += hold_nodes
        if len(earlier) >= request.instance_count and not launched:
            launched = [i.instance_id for i in earlier]
        response.status = ReserveStatus.PROVISIONED
        response.instances = launched
        response.attempts = attempts
        response.pool = self.pool.uses(pool_plan) or None
        if pool_plan.subnet_index is not None and on_demand_type is None:
            response.subnet_ids = [place.subnets[pool_plan.subnet_index].subnet_id]
        if chosen is not None:
            response.subnet_ids = list(chosen.subnet_ids)
        response.instance_types = sorted(
            {u.reservation.instance_type for u in pool_plan.uses}
            | ({chosen.reservation.instance_type} if chosen is not None else set())
            | ({on_demand_type} if on_demand_type is not None else set())
        )
        # The ladder's done record, before anything says provisioned: without it the cleaner
        # ends the ladder once no invocation can still finish it. Not written, the ladder is
        # undone here (all or nothing), as when a rung fails.
        unmarked = self.pool.mark_done(launched, hard_deadline)
        if unmarked:
            return self._ladder_failed(
                response,
                launched,
                None,
                f"its done record could not be written on {', '.join(unmarked)}",
                None,
                hard_deadline,
                stats,
                LADDER_NOT_RECORDED,
            )
        # All or nothing, and never a claim EC2 has not confirmed: a node EC2 shows ended (a
        # fleet's ClientToken answering an earlier, undone launch; the cleaner ending a ladder
        # it found abandoned) fails the ladder. Read after the done record: a node the cleaner
        # ended before the record was written shows here.
        known = self.pool.read_back(launched, hard_deadline)
        gone = sorted(i for i, node in known.items() if node.state in ENDED)
        if gone:
            return self._ladder_failed(
                response,
                [i for i in launched if i not in gone],
                None,
                f"EC2 shows {', '.join(gone)} ended",
                None,
                hard_deadline,
                stats,
            )
        response.served = self.pool.served(
            launched, known, pool_seen, chosen.reservation.id if chosen else None, hard_deadline
        )
        response.message = (
            f"Launched {len(launched)} nodes: {pool_plan.covered} from the reserved pool"
            + (
                f" ({', '.join(f'{u.count} in {u.reservation.id}' for u in pool_plan.uses)})"
                if pool_plan.uses
                else ""
            )
            + (
                f", {pool_plan.shortfall} from hold {chosen.reservation.id} (released)"
                if chosen is not None
                else f", {len(hold_nodes)} launched earlier into this request's hold"
                if hold_nodes
                else f", {pool_plan.shortfall} On-Demand (allowed; no hold: "
                f"{no_hold.message if no_hold is not None else 'launched earlier'})"
                if on_demand
                else "; no hold was needed"
            )
        )[:1000]
        return response

    def _ladder_failed(
        self,
        response: ReserveResponse,
        launched: list[str],
        chosen: Chosen | None,
        what: str,
        part: ReserveResponse | None,
        hard_deadline: float,
        stats: ReserveStats,
        error_code: str = LADDER_INCOMPLETE,
    ) -> ReserveResponse:
        """A rung failed: all or nothing, what the ladder launched is terminated and the hold
        (not yet launched into) given back, before the answer says error."""
        left = self.pool.end(launched + (part.instances if part is not None else []), hard_deadline)
        response.status = ReserveStatus.ERROR
        response.error_code = (part.error_code if part is not None else None) or error_code
        response.message = f"The ladder could not launch every node ({what})"[:600]
        if launched:
            response.message += (
                f"; the {len(launched)} nodes it launched are terminated"
                if not left
                else f"; {len(left)} nodes could not be terminated: {', '.join(left)}"
            )
        response.instances = left
        if left or (part is not None and part.cleanup == "pending"):
            response.cleanup = "pending"
        if chosen is not None:
            if self.give_back.drop(chosen, hard_deadline, stats):
                response.message += "; the hold is cancelled"
            else:
                response.cleanup = "pending"
        return response

    def _platform(
        self,
        request: ReserveRequest,
        place: placement.Placement,
        source: Version | None,
        deadline: float,
    ) -> placement.Placement:
        """``place`` with the platform of the job's template, when that decides it."""
        if not self.launch.platform_from_template(request):
            return place
        with step(TEMPLATE_UNREADABLE):
            return self.launch.platform(place, source, deadline)


def _may_launch_on_demand(request: ReserveRequest, held: ReserveResponse) -> bool:
    """The job allows On-Demand and the hold of its shortfall found no capacity (strict or
    not); any other answer (skipped by the flags, an error) launches nothing."""
    return request.allow_on_demand and held.status in (
        ReserveStatus.NO_CAPACITY,
        ReserveStatus.UNRESERVED,
    )


def _no_pools(spec: PoolSpec) -> ReservedPool:
    raise RuntimeError("no reserved pool reader was given to reserve")


def _checked(template: Background[Version | None]) -> Version | None:
    """The job's template's source version, once its check is done (``TemplateRefused``:
    another cluster's)."""
    with step(TEMPLATE_UNREADABLE):
        return template.result()
