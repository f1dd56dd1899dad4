"""What a ``CapacityBroker`` is made with: its arguments, else the environment of the process
that makes it, read once, when it is made, and checked like the Lambdas' (``config``): every
wrong value named at once, as ``InvalidArguments``.

A direct broker runs the functions in its own process on a root of its own; their settings
are the Lambdas' (``config.Settings``), from the broker's cluster id, state table and regions,
and from the same ``BROKER_*`` variables a deployed function reads (parameter prefix, maximum
concurrency, the cleaner's graces, the EC2 rate scale).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import InvalidConfiguration, Settings
from . import regions as where
from .results import InvalidArguments

DEFAULT_REGION = "us-east-1"
# The environment a broker reads (each only when the argument is not given).
ENV_CLUSTER_ID = "BROKER_CLUSTER_ID"
ENV_STATE_TABLE = "BROKER_STATE_TABLE"
ENV_REGIONS = "BROKER_REGIONS"
ENV_FUNCTION_PREFIX = "CAPACITY_BROKER_FUNCTION_PREFIX"
ENV_FUNCTION_QUALIFIER = "CAPACITY_BROKER_FUNCTION_QUALIFIER"


class ClientSettings(BaseModel):
    """A broker's settings (see the module)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster_id: Annotated[str | None, Field(min_length=1, max_length=255)] = None
    state_table: Annotated[str | None, Field(min_length=3, max_length=255)] = None
    # The regions the broker was given (names checked against botocore's partitions).
    regions: tuple[str, ...] = ()
    # BROKER_REGIONS: where the functions are configured to look, when no regions are given.
    configured_regions: tuple[str, ...] = ()
    # The session's region, else AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1.
    home_region: str = DEFAULT_REGION
    max_workers: Annotated[int, Field(ge=1, le=1024)] = 32
    function_prefix: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_-]{1,56}$")] = None
    function_qualifier: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_$-]{1,128}$")] = None
    # Direct mode: the in-process functions' settings, less the region and regions its root
    # is given when it is made (the process's BROKER_* variables, checked). None: deployed.
    functions: Settings | None = None

    @property
    def mode(self) -> str:
        return "deployed" if self.function_prefix else "direct"

    @classmethod
    def resolve(
        cls,
        env: Mapping[str, str],
        *,
        regions: Sequence[str] | str | None = None,
        session: Any = None,
        cluster_id: str | None = None,
        state_table: str | None = None,
        max_workers: int = 32,
        function_prefix: str | None = None,
        function_qualifier: str | None = None,
    ) -> ClientSettings:
        """The settings of a broker made with these arguments in a process with ``env``;
        ``InvalidArguments`` naming every wrong value (``UnknownRegions`` for region names AWS
        does not have)."""
        given = where.check(where.region_list(regions))
        configured = where.region_list(env.get(ENV_REGIONS))
        home = (
            getattr(session, "region_name", None)
            or env.get("AWS_REGION")
            or env.get("AWS_DEFAULT_REGION")
            or DEFAULT_REGION
        )
        cluster = (cluster_id or env.get(ENV_CLUSTER_ID) or "").strip() or None
        table = (state_table or env.get(ENV_STATE_TABLE) or "").strip() or None
        prefix = (function_prefix or env.get(ENV_FUNCTION_PREFIX) or "").rstrip("-") or None
        problems: list[tuple[str, str]] = []
        functions = None if prefix else _functions(env, cluster, table, home, problems)
        try:
            settings = cls(
                cluster_id=cluster,
                state_table=table,
                regions=tuple(given),
                configured_regions=tuple(configured),
                home_region=home,
                max_workers=max_workers,
                function_prefix=prefix,
                function_qualifier=function_qualifier or env.get(ENV_FUNCTION_QUALIFIER) or None,
                functions=functions,
            )
        except ValidationError as error:
            problems[:0] = [
                (".".join(str(p) for p in e.get("loc", ())) or "settings", str(e.get("msg")))
                for e in error.errors(include_url=False)
            ]
        else:
            if not problems:
                return settings
        raise InvalidArguments(problems)

    def function_settings(self, region: str, regions: Sequence[str]) -> Settings:
        """The settings of the functions this broker runs in process (its root's)."""
        assert self.functions is not None
        return self.functions.model_copy(update={"region": region, "regions": tuple(regions)})


# Stands in for the cluster id while the functions' other variables are checked, when the
# broker has none (discovery needs none; an action refuses to run without one).
_UNSET = "unset"


def _functions(
    env: Mapping[str, str],
    cluster: str | None,
    table: str | None,
    home: str,
    problems: list[tuple[str, str]],
) -> Settings:
    """The process's BROKER_* variables as the functions' settings, with the broker's own
    cluster id, state table and home region (checked now, so that a wrong value is said when
    the broker is made, not on its first action)."""
    wanted = {k: v for k, v in env.items() if k.startswith("BROKER_") and k != ENV_REGIONS}
    wanted |= {ENV_CLUSTER_ID: cluster or _UNSET, ENV_STATE_TABLE: table or "", "AWS_REGION": home}
    try:
        return Settings.from_env(wanted)
    except InvalidConfiguration as error:
        problems.extend(error.problems)
        return Settings(cluster_id=_UNSET)
