"""``reserve`` request and answer (contract, "reserve: hold capacity for an HPC job")."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, StringConstraints, field_validator, model_validator

from ..domain.pool_spec import PoolSpec
from ..domain.reserve import ReserveStatus
from .attempt import Attempt
from .common import (
    LAUNCH_TEMPLATE_VERSION_PATTERN,
    InstanceCount,
    InstanceTypes,
    JobId,
    LaunchTemplateId,
    PlacementGroupArn,
    RequestModel,
    ReservationId,
    ResponseModel,
    StackName,
    SubnetIds,
    empty_list,
)
from .placement import PlacementFields
from .times import UtcDateTime

LaunchTemplateVersion = Annotated[
    str, StringConstraints(max_length=20, pattern=LAUNCH_TEMPLATE_VERSION_PATTERN)
]
# A scheduler asking more often than this for one job has a bug; refuse rather than overflow.
MAX_ATTEMPT = 100_000
# A Capacity Block lasts at most 182 days (EC2); a longer runtime fits nothing held.
MAX_RUNTIME_SECONDS = 366 * 24 * 3600


class LaunchTemplateRef(RequestModel):
    """The job's launch template; ``version`` defaults to ``$Default`` as in EC2."""

    id: LaunchTemplateId
    version: LaunchTemplateVersion = "$Default"


# A resource group's name or ARN (Resource Groups: "GroupName ... 1-300", an ARN up to 1600).
GroupName = Annotated[
    str, StringConstraints(min_length=1, max_length=1600, pattern=r"^[A-Za-z0-9_.:/=+@-]+$")
]
PoolTag = Annotated[str, StringConstraints(min_length=3, max_length=383, pattern=r"^[^=]+=.*$")]
PoolKind = Literal["odcr", "capacity-block", "interruptible"]


class PoolRef(RequestModel):
    """A cluster's reserved pool (issue 43): the reservations named by Capacity Reservation
    resource groups and/or one ``key=value`` tag, used in ``priority`` order of their kinds.
    Absent from a request: the deployment's pool (``BROKER_POOL_*``)."""

    resource_groups: Annotated[list[GroupName], Field(max_length=10)] = Field(
        default_factory=empty_list
    )
    tag: PoolTag | None = None
    priority: Annotated[list[PoolKind], Field(min_length=1, max_length=3)] | None = None

    @field_validator("tag")
    @classmethod
    def _not_the_brokers_key(cls, value: str | None) -> str | None:
        PoolSpec.parse((), value)  # PoolSpecError (a ValueError): this field's error
        return value

    @model_validator(mode="after")
    def _names_something(self) -> Self:
        if not self.resource_groups and self.tag is None:
            raise ValueError("a pool names resource_groups, a tag, or both")
        if self.priority is not None and len(set(self.priority)) != len(self.priority):
            raise ValueError("priority names each kind at most once")
        return self


class ReserveRequest(PlacementFields):
    """Hold capacity for an HPC job (and point its launch template at it)."""

    job_id: JobId
    instance_types: InstanceTypes
    subnet_ids: SubnetIds
    instance_count: InstanceCount
    stack_name: StackName | None = None
    launch_template: LaunchTemplateRef | None = None
    capacity_reservation_id: ReservationId | None = None
    placement_group_arn: PlacementGroupArn | None = None
    provision: bool = False
    strict: bool | None = None
    attempt: Annotated[int, Field(ge=0, le=MAX_ATTEMPT)] | None = None
    # Issue 43: "hold" (the default) holds the whole count; "reserved-first" launches first
    # into the cluster's reserved pool and holds only what the pool does not cover.
    capacity: Literal["hold", "reserved-first"] = "hold"
    pool: PoolRef | None = None
    # Issue 43: a reserved-first job may launch its shortfall On-Demand (untargeted, all or
    # nothing, in the ladder's AZ) when no hold of it can be made. Off unless asked.
    allow_on_demand: bool = False
    runtime_seconds: (
        Annotated[
            int,
            Field(
                ge=0,
                le=MAX_RUNTIME_SECONDS,
                description=(
                    "How long the job will run, in seconds, when the caller knows (a Slurm "
                    "job's time limit). A Capacity Block is used only when the job can finish "
                    "in it: EC2 begins terminating a block's instances 30 minutes before its "
                    "end (60 for UltraServer types), so a block with less than that plus this "
                    "runtime left answers no_capacity naming its end, and one whose whole "
                    "usable time is shorter is rejected. Absent: only EC2's 30/60 minutes "
                    "count."
                ),
            ),
        ]
        | None
    ) = None

    @property
    def named_types(self) -> list[tuple[str, str]]:
        return [(f"instance_types.{i}", name) for i, name in enumerate(self.instance_types)]

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        self._check_platform_source()
        if self.provision and self.launch_template is None:
            raise ValueError("provision needs a launch_template to launch from")
        if self.capacity == "reserved-first":
            if not self.provision:
                # The pool's part is only ever used by launching into it: a pool
                # reservation is never held or pointed at for later.
                raise ValueError("capacity reserved-first needs provision: true")
            if self.capacity_reservation_id:
                raise ValueError(
                    "capacity reserved-first uses the cluster's pool: no capacity_reservation_id"
                )
        elif self.pool is not None:
            raise ValueError("pool is used only with capacity reserved-first")
        elif self.allow_on_demand:
            raise ValueError("allow_on_demand is used only with capacity reserved-first")
        return self


class ReservationInfo(ResponseModel):
    id: str
    type: Literal["default", "capacity-block"]
    owned: bool
    instance_type: str
    availability_zone: str | None = None
    availability_zone_id: str | None = None
    instance_count: int
    start_date: UtcDateTime | None = None
    end_date: UtcDateTime | None = None
    # In a replayed answer (contract v3): the reservation's state as EC2 shows it now
    # ("gone" when EC2 no longer knows it).
    state: str | None = None


class LaunchTemplateInfo(ResponseModel):
    id: str
    version: int


ReserveAttempt = Attempt


class ServedInstance(ResponseModel):
    """One launched node and the rung that served it, as EC2 reports it (DescribeInstances'
    CapacityReservationId), with its On-Demand hourly price (the Price List)."""

    instance_id: str
    rung: Literal["odcr", "capacity-block", "interruptible", "hold", "on-demand"]
    reservation_id: str | None = None
    instance_type: str | None = None
    # The On-Demand rate of the type in the region (USD per hour), what an ODCR bills whether
    # used or not; None for a Capacity Block (prepaid) or when the Price List has no price.
    hourly_price_usd: float | None = None


class PoolUseInfo(ResponseModel):
    """What one pool reservation gave the job."""

    reservation_id: str
    kind: Literal["odcr", "capacity-block", "interruptible"]
    instance_type: str
    availability_zone: str
    instance_count: int


class ReserveResponse(ResponseModel):
    status: ReserveStatus
    request_id: str
    job_id: str | None = None
    reservation: ReservationInfo | None = None
    instance_types: list[str] = Field(default_factory=empty_list)
    subnet_ids: list[str] = Field(default_factory=empty_list)
    launch_template: LaunchTemplateInfo | None = None
    instances: list[str] = Field(default_factory=empty_list)
    attempts: list[Attempt] = Field(default_factory=empty_list)
    retry_after_seconds: int | None = None
    reason: str | None = None
    error_code: str | None = None
    cleanup: Literal["pending"] | None = None
    # Contract v2: the seconds the reservations this request created were held, summed, as
    # the broker measured them; a hold the answer hands to the job (``reserved``) is counted
    # by whoever gives it back (release, the cleaner), not here.
    reservation_seconds: float = 0.0
    # Contract v3, "Request identity": the answer recorded for this request id (state table),
    # given again; ``reservation.state`` says what the reservation is now.
    replayed: bool | None = None
    # Issue 43 (reserved-first): the pool reservations used, and per node the rung that
    # served it, read back from EC2.
    pool: list[PoolUseInfo] | None = None
    served: list[ServedInstance] | None = None
    message: str
