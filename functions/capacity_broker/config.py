"""The broker's configuration: one validated ``Settings``, read from the environment once, at
the entry (contract, "Configuration of the Lambdas").

Every variable is read here and nowhere else. ``Settings.from_env`` checks all of them at once
and raises ``InvalidConfiguration`` naming every variable that is wrong, so that a Lambda
deployed with a typo answers one structured error (``handlers._runtime``) instead of failing
at import, on its first AWS call, or on one code path out of many.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from .domain.failures import BrokerFailure
from .domain.graces import HOLD_LIMIT, IDLE_GRACE, LADDER_WINDOW, PROBE_GRACE, STACK_GRACE
from .domain.names import default_parameter_prefix
from .domain.pool_spec import PoolSpec
from .models.common import REGION_PATTERN

if TYPE_CHECKING:  # made by the cleaner alone (``Settings.graces``), with its rules
    from .domain.cleaner import Graces

DEFAULT_REGION = "us-east-1"
# A grace longer than a week is a typo (the contract's are minutes).
MAX_GRACE_SECONDS = 7 * 24 * 3600
# Grouped probes (``domain.group``): a group takes members until none has joined for this
# long, and for at most the maximum from its opening. A class whose arrivals spread over
# several seconds made, with 2 s, two or three groups per kind of desktop, each costing the
# account's bucket its creates and cancel; with 4 s, one or two. The first members wait longer
# for their leader to ask; a lone probe never waits, and a pair waits only the idle window.
GROUP_WINDOW_SECONDS = 0.25
GROUP_MAX_WINDOW_SECONDS = 4.0
# The variables, by field (the region has two, as the AWS SDK reads them).
VARIABLES: Mapping[str, tuple[str, ...]] = {
    "cluster_id": ("BROKER_CLUSTER_ID",),
    "parameter_prefix": ("BROKER_PARAMETER_PREFIX",),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "regions": ("BROKER_REGIONS",),
    "state_table": ("BROKER_STATE_TABLE",),
    "max_concurrency": ("BROKER_MAX_CONCURRENCY",),
    "probe_grace_seconds": ("BROKER_PROBE_GRACE_SECONDS",),
    "stack_grace_seconds": ("BROKER_STACK_GRACE_SECONDS",),
    "idle_grace_seconds": ("BROKER_IDLE_GRACE_SECONDS",),
    "hold_limit_seconds": ("BROKER_HOLD_LIMIT_SECONDS",),
    "ladder_window_seconds": ("BROKER_LADDER_WINDOW_SECONDS",),
    "ec2_rate_scale": ("BROKER_EC2_RATE_SCALE",),
    "probe_grouping": ("BROKER_PROBE_GROUPING",),
    "pool_groups": ("BROKER_POOL_GROUPS",),
    "pool_tag": ("BROKER_POOL_TAG",),
    "pool_priority": ("BROKER_POOL_PRIORITY",),
    "probe_group_window_seconds": ("BROKER_PROBE_GROUP_WINDOW_SECONDS",),
    "probe_group_max_window_seconds": ("BROKER_PROBE_GROUP_MAX_WINDOW_SECONDS",),
}
Seconds = Annotated[float, Field(ge=0, le=MAX_GRACE_SECONDS, allow_inf_nan=False)]
RegionName = Annotated[str, Field(max_length=32, pattern=REGION_PATTERN)]


class InvalidConfiguration(BrokerFailure, ValueError):
    """Settings that cannot run the broker; ``problems`` names each variable and what is
    wrong with it."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = tuple(problems)
        super().__init__(
            "Invalid configuration: " + "; ".join(f"{name}: {text}" for name, text in problems)
        )

    @property
    def error_code(self) -> str:
        return "InvalidConfiguration"


def _alias(field: str) -> Any:
    names = VARIABLES[field]
    return AliasChoices(*names) if len(names) > 1 else names[0]


class Settings(BaseModel):
    """What a root is built from (``root.Root``). Made from the environment with
    ``from_env``, or in Python with the field names (the in-process client, tests)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    # The scope of everything the broker owns (a tag value: at most 255 characters).
    cluster_id: Annotated[str, Field(min_length=1, max_length=255)] = Field(
        validation_alias=_alias("cluster_id")
    )
    # SSM path of the feature flags; default /capacity-broker/<cluster id>.
    parameter_prefix: Annotated[str, Field(pattern=r"^/", max_length=1011)] = Field(
        default="", validation_alias=_alias("parameter_prefix")
    )
    region: RegionName = Field(default=DEFAULT_REGION, validation_alias=_alias("region"))
    # The regions the cleaner sweeps and discovery lists; default: ``region``.
    regions: tuple[RegionName, ...] = Field(default=(), validation_alias=_alias("regions"))
    state_table: Annotated[str | None, Field(min_length=3, max_length=255)] = Field(
        default=None, validation_alias=_alias("state_table")
    )
    # Attempts in flight at once per request (probe subnets, reserve pairs, cleaner cancels per
    # region): one wave for any probe (<= 20 subnets) and for reserves of up to 32 pairs, inside
    # EC2's mutating burst of 50; the pacer still guards the bucket.
    max_concurrency: Annotated[int, Field(ge=1, le=1024)] = Field(
        default=32, validation_alias=_alias("max_concurrency")
    )
    # Seconds kept free at the end of an invocation for the answer and the cleanup (not a
    # variable: a property of the code's own last steps).
    safety_margin: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 3.0
    # How long the cleaner waits before each rule applies (contract defaults).
    probe_grace_seconds: Seconds = Field(
        default=PROBE_GRACE.total_seconds(),
        validation_alias=_alias("probe_grace_seconds"),
    )
    stack_grace_seconds: Seconds = Field(
        default=STACK_GRACE.total_seconds(),
        validation_alias=_alias("stack_grace_seconds"),
    )
    idle_grace_seconds: Seconds = Field(
        default=IDLE_GRACE.total_seconds(),
        validation_alias=_alias("idle_grace_seconds"),
    )
    hold_limit_seconds: Seconds = Field(
        default=HOLD_LIMIT.total_seconds(),
        validation_alias=_alias("hold_limit_seconds"),
    )
    # How long a reserved-first ladder without its done record waits before the cleaner ends
    # it: the reserve function's timeout plus a grace (infra/functions.py sets it).
    ladder_window_seconds: Seconds = Field(
        default=LADDER_WINDOW.total_seconds(),
        validation_alias=_alias("ladder_window_seconds"),
    )
    # Multiplies the pacer's starting refill rates (adapters/throttle.py): an account whose
    # EC2 buckets were raised, or a test's emulator running its buckets faster.
    ec2_rate_scale: Annotated[float, Field(gt=0, le=10_000, allow_inf_nan=False)] = Field(
        default=1.0, validation_alias=_alias("ec2_rate_scale")
    )
    # Grouped probes (contract v3; logic.grouping): probes alike that arrive while one is in flight
    # are answered together. Off: every probe alone, as before. The window: a group takes
    # members until none has joined for this long, for at most the maximum window (its
    # leader's added wait; a lone probe never waits).
    probe_grouping: bool = Field(default=True, validation_alias=_alias("probe_grouping"))
    probe_group_window_seconds: Annotated[float, Field(ge=0, le=5, allow_inf_nan=False)] = Field(
        default=GROUP_WINDOW_SECONDS, validation_alias=_alias("probe_group_window_seconds")
    )
    probe_group_max_window_seconds: Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)] = (
        Field(
            default=GROUP_MAX_WINDOW_SECONDS,
            validation_alias=_alias("probe_group_max_window_seconds"),
        )
    )

    # The cluster's reserved pool (issue 43): Capacity Reservation resource groups (names or
    # ARNs, comma-separated) and/or one ``key=value`` tag; the order of its kinds.
    pool_groups: tuple[Annotated[str, Field(min_length=1, max_length=1600)], ...] = Field(
        default=(), validation_alias=_alias("pool_groups")
    )
    pool_tag: Annotated[str | None, Field(pattern=r"^[^=]+=.*$", max_length=383)] = Field(
        default=None, validation_alias=_alias("pool_tag")
    )
    pool_priority: tuple[str, ...] | None = Field(
        default=None, validation_alias=_alias("pool_priority")
    )

    @field_validator("cluster_id", "state_table", mode="before")
    @classmethod
    def _stripped(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @field_validator("regions", "pool_groups", "pool_priority", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(r.strip() for r in value.split(",") if r.strip())
        return value

    @field_validator("pool_tag")
    @classmethod
    def _pool_tag(cls, value: str | None) -> str | None:
        PoolSpec.parse((), value)  # PoolSpecError (a ValueError): named by its variable
        return value

    @field_validator("pool_priority")
    @classmethod
    def _pool_priority(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        PoolSpec.parse((), None, value)
        return value

    @model_validator(mode="after")
    def _defaults(self) -> Settings:
        # Derived defaults (frozen model: set once, here).
        if not self.parameter_prefix:
            object.__setattr__(self, "parameter_prefix", default_parameter_prefix(self.cluster_id))
        object.__setattr__(self, "parameter_prefix", self.parameter_prefix.rstrip("/") or "/")
        if not self.regions:
            object.__setattr__(self, "regions", (self.region,))
        return self

    @property
    def pool(self) -> PoolSpec:
        """The deployment's reserved pool (empty: none configured)."""
        return PoolSpec.parse(self.pool_groups, self.pool_tag, self.pool_priority)

    @property
    def graces(self) -> Graces:
        """The cleaner's graces (only the cleaner asks: its rules' module is imported here)."""
        from .domain.cleaner import Graces

        return Graces(
            probe=timedelta(seconds=self.probe_grace_seconds),
            stack=timedelta(seconds=self.stack_grace_seconds),
            idle=timedelta(seconds=self.idle_grace_seconds),
            hold_limit=timedelta(seconds=self.hold_limit_seconds),
            ladder=timedelta(seconds=self.ladder_window_seconds),
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """The settings ``env`` (a process's environment) gives; ``InvalidConfiguration``
        naming every variable that is missing or wrong. An empty value counts as unset."""
        given = {
            name: value.strip()
            for names in VARIABLES.values()
            for name in names
            if (value := env.get(name)) is not None and value.strip()
        }
        # AWS_REGION wins over AWS_DEFAULT_REGION, as in the AWS SDK.
        if "AWS_REGION" in given:
            given.pop("AWS_DEFAULT_REGION", None)
        try:
            return cls.model_validate(given)
        except ValidationError as error:
            raise InvalidConfiguration(_problems(error, given)) from None


def _problems(error: ValidationError, given: Mapping[str, str]) -> list[tuple[str, str]]:
    """Each wrong variable once, with what it must be and what it was, in ``VARIABLES``'s
    order."""
    wrong: dict[str, str] = {}
    for item in error.errors(include_url=False):
        field = next((str(p) for p in item.get("loc", ()) if str(p) in _FIELD_OF), None)
        if field is None:
            field = next((str(p) for p in item.get("loc", ()) if str(p) in VARIABLES), "")
        else:
            field = _FIELD_OF[field]
        names = VARIABLES.get(field, ("settings",))
        variable = next((n for n in names if n in given), names[0])
        raw = given.get(variable)
        shown = "" if raw is None else f" (got {raw if len(raw) <= 60 else raw[:57] + '...'!r})"
        wrong.setdefault(variable, f"{RULES.get(field, item.get('msg', 'is not valid'))}{shown}")
    order = [name for names in VARIABLES.values() for name in names]
    return sorted(wrong.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99)


_FIELD_OF = {name: field for field, names in VARIABLES.items() for name in names}
# What each variable must be, said the same way whatever pydantic found wrong.
RULES: Mapping[str, str] = {
    "cluster_id": "must be set (1 to 255 characters): the broker will not act without knowing "
    "which cluster's reservations it owns",
    "parameter_prefix": "must be an SSM parameter path starting with /",
    "region": "must be an AWS region name such as us-east-1",
    "regions": "must be AWS region names separated by commas, such as us-east-1,eu-west-1",
    "state_table": "must be a DynamoDB table name (3 to 255 characters)",
    "max_concurrency": "must be a whole number from 1 to 1024",
    "probe_grace_seconds": f"must be a number of seconds from 0 to {MAX_GRACE_SECONDS}",
    "stack_grace_seconds": f"must be a number of seconds from 0 to {MAX_GRACE_SECONDS}",
    "idle_grace_seconds": f"must be a number of seconds from 0 to {MAX_GRACE_SECONDS}",
    "hold_limit_seconds": f"must be a number of seconds from 0 to {MAX_GRACE_SECONDS}",
    "ladder_window_seconds": f"must be a number of seconds from 0 to {MAX_GRACE_SECONDS}",
    "ec2_rate_scale": "must be a number greater than 0 (at most 10000)",
    "pool_groups": "must be resource group names or ARNs separated by commas",
    "pool_tag": "must be key=value, a tag the operator put on the pool's reservations (not "
    "one of the broker's own capacity-broker: keys)",
    "pool_priority": "must be odcr, capacity-block, interruptible (comma-separated, each once)",
}
