"""What a ``CapacityBroker`` is made with (``client.settings.ClientSettings``): its arguments,
else the environment, read once when it is made and checked like the Lambdas' settings."""

from __future__ import annotations

import pytest
from capacity_broker import CapacityBroker
from capacity_broker.client import InvalidArguments, UnknownRegions
from capacity_broker.client.settings import ClientSettings


def test_arguments_win_over_the_environment() -> None:
    env = {
        "BROKER_CLUSTER_ID": "from-env",
        "BROKER_STATE_TABLE": "env-table",
        "BROKER_REGIONS": "eu-west-1,us-west-2",
        "AWS_REGION": "eu-west-1",
    }
    made = ClientSettings.resolve(env, cluster_id="given", state_table="given-table")
    assert (made.cluster_id, made.state_table) == ("given", "given-table")
    assert made.configured_regions == ("eu-west-1", "us-west-2")
    assert made.home_region == "eu-west-1"
    assert made.mode == "direct"
    assert made.functions is not None
    # The functions' settings: the broker's cluster id and table, the environment's others.
    assert made.functions.cluster_id == "given"
    assert made.functions.state_table == "given-table"
    assert made.functions.parameter_prefix == "/capacity-broker/given"
    from_env = ClientSettings.resolve(env)
    assert (from_env.cluster_id, from_env.state_table) == ("from-env", "env-table")


def test_the_functions_settings_come_from_the_same_variables() -> None:
    env = {"BROKER_MAX_CONCURRENCY": "4", "BROKER_EC2_RATE_SCALE": "2", "AWS_REGION": "us-west-2"}
    made = ClientSettings.resolve(env, cluster_id="c", regions=["eu-west-1"])
    assert made.functions is not None
    assert (made.functions.max_concurrency, made.functions.ec2_rate_scale) == (4, 2.0)
    settings = made.function_settings("eu-west-1", ["eu-west-1", "us-east-1"])
    assert (settings.region, settings.regions) == ("eu-west-1", ("eu-west-1", "us-east-1"))
    assert settings.cluster_id == "c"


def test_every_wrong_value_is_named_at_once() -> None:
    env = {"BROKER_MAX_CONCURRENCY": "lots", "BROKER_EC2_RATE_SCALE": "fast"}
    with pytest.raises(InvalidArguments) as caught:
        ClientSettings.resolve(env, cluster_id="c", max_workers=0)
    named = [field for field, _ in caught.value.errors]
    assert named == ["max_workers", "BROKER_MAX_CONCURRENCY", "BROKER_EC2_RATE_SCALE"]


def test_unknown_regions_are_refused_by_name() -> None:
    with pytest.raises(UnknownRegions, match="us-east-9"):
        ClientSettings.resolve({}, regions=["us-east-9"])


def test_a_deployed_broker_does_not_read_the_functions_variables() -> None:
    made = ClientSettings.resolve({"BROKER_EC2_RATE_SCALE": "fast"}, function_prefix="cb-prod-")
    assert (made.mode, made.function_prefix, made.functions) == ("deployed", "cb-prod", None)


def test_a_broker_reads_the_environment_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_CLUSTER_ID", "first")
    monkeypatch.setenv("BROKER_REGIONS", "eu-west-1")
    broker = CapacityBroker()
    monkeypatch.setenv("BROKER_CLUSTER_ID", "second")
    monkeypatch.setenv("BROKER_REGIONS", "us-west-2")
    assert broker.cluster_id == "first"
    assert broker.regions == ["eu-west-1"]


def test_a_broker_made_in_a_bad_environment_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", "0")
    with pytest.raises(InvalidArguments, match="BROKER_EC2_RATE_SCALE"):
        CapacityBroker(cluster_id="c")


def test_the_cli_refuses_a_bad_environment_as_a_usage_error() -> None:
    from capacity_broker.cli import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(
        app,
        ["--cluster-id", "c", "probe", "-t", "g6.xlarge", "-s", "subnet-0d1a0000000000e1a"],
        env={"BROKER_EC2_RATE_SCALE": "fast", "BROKER_MAX_CONCURRENCY": "x"},
    )
    assert result.exit_code == 2, result.stderr
    assert "BROKER_EC2_RATE_SCALE" in result.stderr
    assert "BROKER_MAX_CONCURRENCY" in result.stderr
    assert "Traceback" not in result.stderr
