"""The reserved pool's part of a ``reserved-first`` job (issue 43): read the cluster's pool,
plan what it covers, launch into each pool reservation used, read back which rung served each
node and what it costs an hour, and end what launched when the rest of the ladder fails.

Each part of the ladder runs as a request of its own: the job's request id with the rung
appended (``part``), so the existing hold, template-version and fleet steps (their
ClientTokens, their look for nodes an earlier invocation launched) serve one rung each, and a
retry of the job finds every rung where it was. Every node of the ladder also carries the job's
request id in ``capacity-broker:ladder`` and its rung in ``capacity-broker:rung``: one exact tag
finds the whole ladder. A pool reservation is only ever launched into: never held, modified or
cancelled (``Chosen.owned`` is false for it, and ``ReservedPool.spares`` guards every cancel).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from ...adapters.aws import AwsError
from ...adapters.ec2 import Ec2, Instance, Pricing, Reservation
from ...adapters.ec2.fleets import LaunchSpec
from ...adapters.ec2.launches import TemplateVersion
from ...domain.errors import is_retryable
from ...domain.pool import (
    LADDER_DONE,
    TAG_LADDER,
    TAG_LADDER_STATE,
    TAG_RUNG,
    PoolPlan,
    PoolReservation,
    excluded,
    kind_of,
    plan,
)
from ...domain.pool_spec import PoolSpec, Rung
from ...domain.reserve import ReserveStatus
from ...domain.tags import TAG_CLUSTER_ID, TAG_JOB_ID, TAG_REQUEST_ID, Purpose
from ...domain.templates import Version
from ...domain.tokens import client_token
from ...models import ReserveRequest, ReserveResponse
from ...models.reserve import PoolUseInfo, ServedInstance
from .. import placement
from ..pool import ReservedPool
from .answer import Answer, Chosen, ReserveStats
from .launch import Launch

# A request id is at most 128 characters (models.common); a part's id keeps that limit.
REQUEST_ID_LIMIT = 128
HOLD_PART = "hold"
ON_DEMAND_PART = Rung.ON_DEMAND.value
# A node's states: running (or about to), and ended (what an undone round leaves).
LIVE = ("pending", "running")
ENDED = ("shutting-down", "terminated", "stopping", "stopped")


def part_id(request_id: str, rung: str) -> str:
    """The request id of one rung of the ladder: ``<request id>:<rung>``, or, when that would
    pass the limit, the request id cut and a digest of the whole (still one id per rung)."""
    whole = f"{request_id}:{rung}"
    if len(whole) <= REQUEST_ID_LIMIT:
        return whole
    digest = hashlib.sha256(whole.encode()).hexdigest()[:16]
    keep = REQUEST_ID_LIMIT - len(rung) - len(digest) - 2
    return f"{request_id[:keep]}:{digest}:{rung}"


class Pool:
    """reserve's reserved-pool collaborator: plan, launch, read back, end."""

    def __init__(
        self,
        ec2: Ec2,
        launch: Launch,
        pools: Callable[[PoolSpec], ReservedPool],
        default: PoolSpec,
        cluster_id: str,
        clock: Callable[[], datetime],
        pricing: Pricing | None = None,
    ) -> None:
        self.ec2 = ec2
        self.launch = launch
        self.pools = pools
        self.default = default
        self.cluster_id = cluster_id
        self.clock = clock
        self.pricing = pricing

    # -- which pool ----------------------------------------------------------------------
    def spec_for(self, request: ReserveRequest) -> PoolSpec:
        """The request's own pool, else the deployment's."""
        if request.pool is None:
            return self.default
        return PoolSpec.parse(request.pool.resource_groups, request.pool.tag, request.pool.priority)

    # -- the plan -------------------------------------------------------------------------
    def earlier_nodes(
        self, request_id: str, deadline: float
    ) -> tuple[list[Instance], Counter[str]]:
        """The ladder's nodes an earlier invocation of this request launched (every rung) that
        run, and per rung how many EC2 shows ended (an earlier round the ladder undid). This
        cluster's only: a request id is the caller's, and another cluster in the account may
        use the same one; its nodes are never this job's."""
        found = self.ec2.tagged_instances(
            {TAG_CLUSTER_ID: [self.cluster_id], TAG_LADDER: [request_id]},
            (*LIVE, *ENDED),
            deadline,
        )
        ended = Counter(i.tags.get(TAG_RUNG, "") for i in found if i.state in ENDED)
        return [i for i in found if i.state in LIVE], ended

    def plan(
        self,
        request: ReserveRequest,
        place: placement.Placement,
        earlier: Sequence[Instance],
        deadline: float,
    ) -> tuple[PoolPlan, list[PoolReservation]]:
        """What the pool covers of the job, in one AZ. The ladder's own earlier nodes count as
        free again in the reservation they use: a retry plans what the first invocation
        planned, and each rung then finds its own nodes instead of launching more."""
        spec = self.spec_for(request)
        if spec.empty:
            return PoolPlan(None, (), request.instance_count), []
        ours = Counter(i.tags.get(TAG_RUNG) for i in earlier)
        now = self.clock()
        found = [
            replace(r, available=r.available + ours.get(r.id, 0))
            for r in self.pools(spec).read(deadline)
        ]
        usable = [r for r in found if excluded(r, self.cluster_id, now, _runtime(request)) is None]
        zones = [s.availability_zone_id for s in place.subnets]
        return (
            plan(
                usable,
                request.instance_types,
                zones,
                place.platform,
                request.tenancy,
                request.instance_count,
                spec.priority,
            ),
            found,
        )

    # -- the parts ------------------------------------------------------------------------
    @staticmethod
    def part(
        request: ReserveRequest,
        request_id: str,
        rung: str,
        count: int,
        subnet_ids: list[str],
        round_: int = 0,
    ) -> tuple[ReserveRequest, str]:
        """One rung of the ladder as a request of its own (its id, count and subnets; its
        nodes tagged with the ladder and the rung). Built from a validated request: the
        broker's own tag keys are added past the model's check of a caller's tags.

        ``round_`` > 0: an earlier round of this rung was undone (its nodes ended). The part
        then has an id of its own: under the old id the fleet's ClientToken would make EC2
        answer the old fleet again, the ended nodes, and launch nothing."""
        sub_id = part_id(request_id, f"{rung}~{round_}" if round_ else rung)
        sub = request.model_copy(
            update={
                "request_id": sub_id,
                "instance_count": count,
                "subnet_ids": list(subnet_ids),
                "capacity": "hold",
                "pool": None,
                "tags": {**(request.tags or {}), TAG_LADDER: request_id, TAG_RUNG: rung},
            }
        )
        return sub, sub_id

    def launch_use(
        self,
        request: ReserveRequest,
        request_id: str,
        reservation: Reservation,
        count: int,
        subnet_id: str,
        source: Version | None,
        deadline: float,
        hard_deadline: float,
        stats: ReserveStats,
        round_: int = 0,
    ) -> ReserveResponse:
        """Launch ``count`` nodes into one pool reservation: a template version that targets it
        and one all-or-nothing launch (``Launch.use``), never a hold."""
        sub, sub_id = self.part(request, request_id, reservation.id, count, [subnet_id], round_)
        chosen = Chosen(reservation, False, [subnet_id])
        answer = Answer(sub, sub_id)
        answer.chosen(chosen, [])
        return self.launch.use(sub, sub_id, chosen, source, answer, deadline, hard_deadline, stats)

    def on_demand(
        self,
        request: ReserveRequest,
        request_id: str,
        count: int,
        subnet_ids: Sequence[str],
        instance_types: Sequence[str],
        source: Version | None,
        deadline: float,
        round_: int = 0,
    ) -> ReserveResponse:
        """The shortfall On-Demand (``allow_on_demand``, when no hold of it could be made): one
        all-or-nothing instant fleet (``MinTargetCapacity``) from the job's own template
        version, untargeted, per (type, subnet) in order until one launches every node. Its
        ClientToken is the part's, type's and subnet's: a retry of the request gets the same
        fleet back, never a second. The nodes carry the ladder and the rung ``on-demand``.

        The answer is the part's: ``provisioned`` with its nodes, or ``error`` naming the
        nodes a short launch left (the ladder ends them) and, when an answer was lost,
        ``cleanup: pending`` (EC2 may have launched: those nodes never get the ladder's done
        record, so the cleaner ends them)."""
        sub, sub_id = self.part(
            request, request_id, ON_DEMAND_PART, count, list(subnet_ids), round_
        )
        response = Answer(sub, sub_id).response
        response.status = ReserveStatus.ERROR
        if source is None or _targets_a_reservation(source.data):
            response.error_code = "OnDemandNotUntargeted"
            response.message = (
                "the job's launch template version targets a reservation: its nodes cannot be "
                "launched On-Demand beside it"
            )
            return response
        tags = {
            TAG_CLUSTER_ID: self.cluster_id,
            TAG_JOB_ID: request.job_id,
            TAG_REQUEST_ID: sub_id,
            **(sub.tags or {}),
        }
        said: list[tuple[str, str]] = []
        for instance_type in dict.fromkeys(instance_types):
            for subnet_id in subnet_ids:
                if self.launch.monotonic() >= deadline:
                    said.append(("DeadlineExceeded", "no time left for another launch"))
                    break
                spec = LaunchSpec(
                    TemplateVersion(source.template_id, source.number),
                    instance_type,
                    subnet_id,
                    count,
                    client_token(
                        Purpose.HOLD, sub_id, instance_type, subnet_id, nonce=ON_DEMAND_PART
                    ),
                    tags,
                )
                try:
                    fleet = self.launch.launches.create_instant_fleet(spec, deadline)
                except AwsError as error:
                    if is_retryable(error.error_class):
                        response.error_code = error.code or "RequestTimeout"
                        response.cleanup = "pending"
                        response.message = (
                            f"no answer to the On-Demand launch ({error.message}); any node it "
                            "made carries the ladder without its done record: the cleaner ends it"
                        )[:600]
                        return response
                    said.append((error.code or "Unknown", f"{instance_type}: {error.message}"))
                    continue
                if len(fleet.instance_ids) == count:
                    response.status = ReserveStatus.PROVISIONED
                    response.instances = list(fleet.instance_ids)
                    response.instance_types = [instance_type]
                    response.subnet_ids = [subnet_id]
                    response.message = f"{count} × {instance_type} On-Demand in {subnet_id}"
                    return response
                errors = [(e.code, f"{instance_type}: {e.message}") for e in fleet.errors]
                if fleet.instance_ids:
                    # EC2 did not honour the minimum: the ladder ends what did launch.
                    response.instances = list(fleet.instance_ids)
                    response.error_code = errors[0][0] if errors else "FleetIncomplete"
                    response.message = (
                        f"the On-Demand launch came back short ({len(fleet.instance_ids)} of "
                        f"{count})"
                    )
                    return response
                said.extend(errors or [("FleetIncomplete", f"{instance_type}: no error given")])
        response.error_code = said[0][0] if said else "InsufficientInstanceCapacity"
        response.message = (
            "no On-Demand launch of the shortfall: " + "; ".join(f"{c}: {m}" for c, m in said)
        )[:600]
        return response

    def reservation(self, use: PoolReservation, deadline: float) -> Reservation | None:
        """The pool reservation as the launch step takes it (EC2's full record)."""
        return self.ec2.reservation(use.id, deadline)

    def end(self, instance_ids: Sequence[str], hard_deadline: float) -> list[str]:
        """Terminate what the ladder launched (all or nothing); answers the ids EC2 did not
        confirm ending."""
        if not instance_ids:
            return []
        try:
            ended = self.ec2.terminate_instances(
                list(instance_ids), hard_deadline, wait_for=list(instance_ids)
            )
        except AwsError:
            ended = []
        return sorted(set(instance_ids) - set(ended))

    def mark_done(self, instance_ids: Sequence[str], hard_deadline: float) -> list[str]:
        """The ladder's done record: ``capacity-broker:ladder-state=done`` on every node it
        launched, before reserve answers ``provisioned`` (the cleaner ends a ladder without
        it once no invocation can still finish it). Answers the ids EC2 did not confirm
        tagging: any, and the ladder is not done."""
        if not instance_ids:
            return []
        try:
            tagged = self.ec2.tag_instances(
                list(instance_ids),
                {TAG_LADDER_STATE: LADDER_DONE},
                hard_deadline,
                wait_for=list(instance_ids),
            )
        except AwsError:
            tagged = []
        return sorted(set(instance_ids) - set(tagged))

    # -- the answer -----------------------------------------------------------------------
    @staticmethod
    def uses(pool_plan: PoolPlan) -> list[PoolUseInfo]:
        return [
            PoolUseInfo(
                reservation_id=u.reservation.id,
                kind=u.reservation.kind.value,
                instance_type=u.reservation.instance_type,
                availability_zone=u.reservation.availability_zone,
                instance_count=u.count,
            )
            for u in pool_plan.uses
        ]

    def read_back(self, instance_ids: Sequence[str], deadline: float) -> dict[str, Instance]:
        """The launched nodes as EC2 shows them now (none when it cannot answer)."""
        try:
            return self.ec2.known_instances(list(instance_ids), deadline, wait_for=instance_ids)
        except AwsError:
            return {}

    def served(
        self,
        instance_ids: Sequence[str],
        known: Mapping[str, Instance],
        pool: Sequence[PoolReservation],
        hold_id: str | None,
        deadline: float,
    ) -> list[ServedInstance]:
        """Per node, the rung that served it as EC2 reports it (DescribeInstances'
        CapacityReservationId: the CreateFleet answer names no reservation) and the On-Demand
        price of its type. A node EC2 does not show yet is left out (never guessed)."""
        kinds = {r.id: r.kind for r in pool}
        # Per answer, each reservation the pool did not list is asked of EC2 once (the nodes
        # of one hold share it), as each type's price is.
        looked_up: dict[str, Rung | None] = {}
        prices: dict[str, float | None] = {}
        out: list[ServedInstance] = []
        for instance_id in instance_ids:
            instance = known.get(instance_id)
            if instance is None:
                continue
            reservation_id = instance.capacity_reservation_id
            if reservation_id is None:
                rung = Rung.ON_DEMAND
            elif reservation_id == hold_id or (
                reservation_id not in kinds and instance.tags.get(TAG_RUNG) == HOLD_PART
            ):
                # The hold part launched it into a hold (on a retry, the earlier invocation's
                # hold, given back since: not this answer's ``reservation``).
                rung = Rung.HOLD
            elif reservation_id in kinds:
                rung = kinds[reservation_id]
            else:
                if reservation_id not in looked_up:
                    looked_up[reservation_id] = self._kind(reservation_id, deadline)
                found = looked_up[reservation_id]
                if found is None:
                    continue  # never guessed
                rung = found
            price = None
            if rung is not Rung.CAPACITY_BLOCK and instance.instance_type:
                price = self._price(instance.instance_type, prices)
            out.append(
                ServedInstance(
                    instance_id=instance_id,
                    rung=rung.value,
                    reservation_id=reservation_id,
                    instance_type=instance.instance_type,
                    hourly_price_usd=price,
                )
            )
        return out

    def _kind(self, reservation_id: str, deadline: float) -> Rung | None:
        """The kind of a reservation the pool did not list, as EC2 shows it (None: unknown)."""
        try:
            found = self.ec2.reservation(reservation_id, deadline)
        except AwsError:
            return None
        if found is None:
            return None
        return kind_of(found.reservation_type, found.interruptible)

    def _price(self, instance_type: str, prices: dict[str, float | None]) -> float | None:
        if instance_type in prices:
            return prices[instance_type]
        price = None
        if self.pricing is not None:
            try:
                price = self.pricing.on_demand_price(instance_type, self.ec2.region)
            except AwsError:
                price = None  # a price is information, never a reason to fail a launch
        prices[instance_type] = price
        return price


def _targets_a_reservation(data: Mapping[str, object]) -> bool:
    """Whether a template version's data sends its launches to a reservation (a target, or
    ``capacity-reservations-only``): an On-Demand rung is launched from a version that does
    not."""
    spec = data.get("CapacityReservationSpecification")
    if not isinstance(spec, Mapping):
        return False
    return bool(spec.get("CapacityReservationTarget")) or spec.get(
        "CapacityReservationPreference"
    ) in ("capacity-reservations-only",)


def _runtime(request: ReserveRequest) -> timedelta | None:
    return timedelta(seconds=request.runtime_seconds) if request.runtime_seconds else None
