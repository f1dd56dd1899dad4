"""The reserved pool's deploy options as the functions read them (issue 43): a setting that
cannot name a pool is refused at start, naming its variable."""

from __future__ import annotations

import pytest
from capacity_broker.config import InvalidConfiguration, Settings
from capacity_broker.domain.pool_spec import PoolSpec, Rung


def settings(**env: str) -> Settings:
    return Settings.from_env({"BROKER_CLUSTER_ID": "hpc", **env})


def test_no_pool_by_default() -> None:
    assert settings().pool == PoolSpec()
    assert settings().pool.empty


def test_groups_tag_and_priority() -> None:
    pool = settings(
        BROKER_POOL_GROUPS="hpc-pool, gpu-pool",
        BROKER_POOL_TAG="hpc-pool=prod",
        BROKER_POOL_PRIORITY="interruptible,odcr",
    ).pool
    assert pool.groups == ("hpc-pool", "gpu-pool")
    assert (pool.tag_key, pool.tag_value) == ("hpc-pool", "prod")
    assert pool.priority == (Rung.INTERRUPTIBLE, Rung.ODCR)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("BROKER_POOL_TAG", "no-equals"),
        ("BROKER_POOL_TAG", "capacity-broker:purpose=hold"),
        ("BROKER_POOL_PRIORITY", "hold"),
        ("BROKER_POOL_PRIORITY", "odcr,odcr"),
    ],
)
def test_a_setting_that_names_no_pool_is_refused_by_its_name(variable: str, value: str) -> None:
    with pytest.raises(InvalidConfiguration) as refused:
        settings(**{variable: value})
    assert str(refused.value).startswith(f"Invalid configuration: {variable}:")
