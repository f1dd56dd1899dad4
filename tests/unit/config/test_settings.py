"""The broker's settings (``capacity_broker.config``): every variable read in one place,
checked at once, every problem named by its variable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from capacity_broker.config import VARIABLES, InvalidConfiguration, Settings
from capacity_broker.domain.cleaner import Graces
from pydantic import ValidationError

CLUSTER = {"BROKER_CLUSTER_ID": "hpc-prod"}


def test_defaults_are_the_contracts() -> None:
    settings = Settings.from_env(CLUSTER)
    assert settings.cluster_id == "hpc-prod"
    assert settings.parameter_prefix == "/capacity-broker/hpc-prod"
    assert settings.region == "us-east-1"
    assert settings.regions == ("us-east-1",)
    assert settings.state_table is None
    assert settings.max_concurrency == 32
    assert settings.ec2_rate_scale == 1.0
    assert settings.graces == Graces()


def test_every_variable_is_read() -> None:
    settings = Settings.from_env(
        {
            "BROKER_CLUSTER_ID": " hpc-prod ",
            "BROKER_PARAMETER_PREFIX": "/hpc/broker/",
            "AWS_REGION": "eu-west-1",
            "AWS_DEFAULT_REGION": "us-west-2",  # AWS_REGION wins, as in the SDK
            "BROKER_REGIONS": "eu-west-1, us-east-1,",
            "BROKER_STATE_TABLE": "broker-state",
            "BROKER_MAX_CONCURRENCY": "8",
            "BROKER_EC2_RATE_SCALE": "2.5",
            "UNRELATED": "x",
        }
    )
    assert settings.cluster_id == "hpc-prod"
    assert settings.parameter_prefix == "/hpc/broker"
    assert (settings.region, settings.regions) == ("eu-west-1", ("eu-west-1", "us-east-1"))
    assert settings.state_table == "broker-state"
    assert settings.max_concurrency == 8
    assert settings.ec2_rate_scale == 2.5
    assert Settings.from_env(CLUSTER | {"AWS_DEFAULT_REGION": "us-west-2"}).region == "us-west-2"


def test_graces_from_env() -> None:
    # (Was Graces.from_env in domain/cleaner.py, which handed the raw strings on.)
    env = {
        "BROKER_PROBE_GRACE_SECONDS": "30",
        "BROKER_STACK_GRACE_SECONDS": " 60 ",
        "BROKER_IDLE_GRACE_SECONDS": "",
        "BROKER_HOLD_LIMIT_SECONDS": "1.5",
        "UNRELATED": "x",
    }
    graces = Settings.from_env(CLUSTER | env).graces
    assert graces == Graces(
        probe=timedelta(seconds=30),
        stack=timedelta(seconds=60),
        idle=timedelta(minutes=10),
        hold_limit=timedelta(seconds=1.5),
    )
    assert Settings.from_env(CLUSTER).graces == Graces()


@pytest.mark.parametrize("raw", ["abc", "-1", "nan", "inf", "1e12"])
def test_bad_grace_names_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match="BROKER_IDLE_GRACE_SECONDS"):
        Settings.from_env(CLUSTER | {"BROKER_IDLE_GRACE_SECONDS": raw})


BAD = [
    ("BROKER_CLUSTER_ID", "   "),
    ("BROKER_CLUSTER_ID", "x" * 256),
    ("BROKER_PARAMETER_PREFIX", "capacity-broker/hpc"),
    ("AWS_REGION", "Mars"),
    ("AWS_DEFAULT_REGION", "us_east_1"),
    ("BROKER_REGIONS", "us-east-1,not a region"),
    ("BROKER_STATE_TABLE", "t"),
    ("BROKER_MAX_CONCURRENCY", "many"),
    ("BROKER_MAX_CONCURRENCY", "0"),
    ("BROKER_MAX_CONCURRENCY", "2.5"),
    ("BROKER_PROBE_GRACE_SECONDS", "ten"),
    ("BROKER_STACK_GRACE_SECONDS", "-5"),
    ("BROKER_IDLE_GRACE_SECONDS", "nan"),
    ("BROKER_HOLD_LIMIT_SECONDS", "1e12"),
    ("BROKER_EC2_RATE_SCALE", "fast"),
    ("BROKER_EC2_RATE_SCALE", "0"),
    ("BROKER_EC2_RATE_SCALE", "-1"),
    ("BROKER_EC2_RATE_SCALE", "inf"),
]


@pytest.mark.parametrize(("variable", "raw"), BAD)
def test_each_bad_variable_is_named(variable: str, raw: str) -> None:
    env = CLUSTER | {variable: raw}
    if variable == "BROKER_CLUSTER_ID":
        env = {variable: raw}
    with pytest.raises(InvalidConfiguration) as caught:
        Settings.from_env(env)
    (problem,) = caught.value.problems
    assert problem[0] == variable
    assert variable in str(caught.value)
    if raw.strip():
        assert raw.strip()[:57] in problem[1]


def test_every_problem_at_once() -> None:
    env = {name: raw for name, raw in BAD if name not in ("AWS_DEFAULT_REGION",)}
    with pytest.raises(InvalidConfiguration) as caught:
        Settings.from_env(env)
    named = [name for name, _ in caught.value.problems]
    assert named == sorted(set(named), key=named.index)  # each once
    assert set(named) == {name for name, _ in BAD} - {"AWS_DEFAULT_REGION"}


def test_the_variables_table_is_the_models_fields() -> None:
    fields = set(Settings.model_fields) - {"safety_margin"}
    assert set(VARIABLES) == fields


def test_made_in_python_with_the_field_names() -> None:
    settings = Settings(cluster_id="c", region="eu-west-1", max_concurrency=4)
    assert settings.regions == ("eu-west-1",)
    assert settings.parameter_prefix == "/capacity-broker/c"
    with pytest.raises(ValidationError):
        Settings(cluster_id="c", ec2_rate_scale=0)
    with pytest.raises(ValidationError):
        settings.model_copy().__setattr__("cluster_id", "other")  # frozen
