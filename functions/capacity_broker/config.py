"""The Lambdas' configuration, read once per container from the environment (contract)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from .domain.flags import default_prefix


class ConfigurationError(RuntimeError):
    """The function is deployed without what it needs; it refuses to run."""


@dataclass(frozen=True)
class Settings:
    cluster_id: str
    parameter_prefix: str
    region: str
    regions: tuple[str, ...]
    state_table: str | None = None
    # Attempts in flight at once per request (probe subnets, reserve pairs, cleaner cancels per
    # region): one wave for any probe (<= 20 subnets) and for reserves of up to 32 pairs, inside
    # EC2's mutating burst of 50; the pacer still guards the bucket.
    max_concurrency: int = 32
    # Seconds kept free at the end of an invocation for the answer and the cleanup.
    safety_margin: float = 3.0
    graces: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        cluster_id = (env.get("BROKER_CLUSTER_ID") or "").strip()
        if not cluster_id:
            raise ConfigurationError(
                "BROKER_CLUSTER_ID is not set: the broker will not act without knowing which "
                "cluster's reservations it owns"
            )
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
        regions = tuple(
            r.strip() for r in (env.get("BROKER_REGIONS") or region).split(",") if r.strip()
        )
        prefix = (env.get("BROKER_PARAMETER_PREFIX") or default_prefix(cluster_id)).rstrip("/")
        try:
            concurrency = int(env.get("BROKER_MAX_CONCURRENCY") or cls.max_concurrency)
        except ValueError as error:
            raise ConfigurationError(f"BROKER_MAX_CONCURRENCY is not a number: {error}") from None
        return cls(
            cluster_id=cluster_id,
            parameter_prefix=prefix,
            region=region,
            regions=regions or (region,),
            state_table=env.get("BROKER_STATE_TABLE") or None,
            max_concurrency=max(1, concurrency),
            graces={k: v for k, v in env.items() if k.startswith("BROKER_") and "GRACE" in k}
            | {k: v for k, v in env.items() if k == "BROKER_HOLD_LIMIT_SECONDS"},
        )


@lru_cache(maxsize=1)
def settings() -> Settings:
    """This container's settings (environment variables do not change under a Lambda)."""
    return Settings.from_env()
