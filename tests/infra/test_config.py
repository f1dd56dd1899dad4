"""Context validation: a missing or malformed value fails synth with a message naming the key."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from infra.config import BrokerConfig, ConfigError

pytestmark = pytest.mark.infra


def config(**context: Any) -> BrokerConfig:
    return BrokerConfig.from_context({"clusterId": "demo", **context})


def test_defaults_follow_the_cluster_id() -> None:
    cfg = config()
    assert cfg.function_prefix == "capacity-broker-demo"
    assert cfg.function_name("probe") == "capacity-broker-demo-probe"
    assert cfg.parameter_prefix == "/capacity-broker/demo"
    assert cfg.flags_path == "/capacity-broker/demo/configuration/FeatureFlags"
    assert cfg.stack_name_prefix == "demo-job-"
    assert cfg.stack_name == "capacity-broker-demo"
    assert cfg.regions == ()
    assert cfg.enable_capacity_reservation is True
    assert cfg.enforce_strict_capacity_reservation is False
    assert cfg.instance_role_arns == ()
    assert cfg.alarm_email is None
    assert (
        cfg.probe_grace_seconds,
        cfg.stack_grace_seconds,
        cfg.idle_grace_seconds,
        cfg.hold_limit_seconds,
    ) == (90, 180, 600, 1800)


def test_soca_cluster_ids_are_not_prefixed_twice() -> None:
    assert config(clusterId="soca-prod").stack_name_prefix == "soca-prod-job-"


def test_default_job_stack_prefixes_of_two_clusters_never_meet() -> None:
    """The issue's pair: ``prod`` and ``soca-prod`` both defaulted to ``soca-prod-job-``, so
    each cluster's cleaner heard (and could describe) the other's job stacks."""
    assert config(clusterId="prod").stack_name_prefix == "prod-job-"
    assert config(clusterId="soca-prod").stack_name_prefix == "soca-prod-job-"


_ID = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,38}", fullmatch=True)


@settings(max_examples=300)
@given(first=_ID, second=st.one_of(_ID, _ID.map(lambda s: f"soca-{s}"[:39])))
@example(first="prod", second="soca-prod")
@example(first="prod", second="prod-job-x")
def test_no_default_prefix_starts_another_clusters(first: str, second: str) -> None:
    """Whatever two ids two deployments choose: the stacks under one's default prefix (what
    its event rule and its DescribeStacks grant reach) are never under the other's."""
    if "job" in f"{first}-{second}".split("-"):
        return  # such an id must name its prefix (below)
    prefixes = [
        # (a named function prefix: an id of 39 characters is too long for the default one)
        config(clusterId=cluster_id, functionPrefix="broker").stack_name_prefix
        for cluster_id in (first, second)
    ]
    if first != second:
        assert not prefixes[1].startswith(prefixes[0])
        assert not prefixes[0].startswith(prefixes[1])


def test_an_id_too_long_for_the_default_function_prefix_says_so() -> None:
    """39 characters is a valid cluster id, but ``capacity-broker-<id>`` would pass Lambda's
    limit: the error names the id and the way out, not a functionPrefix nobody gave."""
    long_id = "a" * 39
    with pytest.raises(ConfigError, match=r"clusterId='a{39}' is too long .* functionPrefix"):
        config(clusterId=long_id)
    assert config(clusterId=long_id, functionPrefix="hpc-broker").function_prefix == "hpc-broker"
    assert config(clusterId="a" * 38).function_prefix == "capacity-broker-" + "a" * 38


@pytest.mark.parametrize("cluster_id", ["prod-job", "prod-job-x", "job-1", "a-job-b", "1demo"])
def test_an_id_without_a_safe_default_prefix_must_name_one(cluster_id: str) -> None:
    with pytest.raises(ConfigError, match=r"stackNamePrefix"):
        config(clusterId=cluster_id)
    assert config(clusterId=cluster_id, stackNamePrefix="x-").stack_name_prefix == "x-"


def test_the_functions_and_the_stack_read_the_same_parameter_prefix() -> None:
    from capacity_broker.config import Settings

    for cluster_id in ("demo", "soca-prod"):
        runtime = Settings.from_env({"BROKER_CLUSTER_ID": cluster_id}).parameter_prefix
        assert runtime == config(clusterId=cluster_id).parameter_prefix


@pytest.mark.parametrize("context", [{}, {"clusterId": None}, {"clusterId": "  "}])
def test_missing_cluster_id_says_how_to_set_it(context: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"clusterId is required.*-c clusterId="):
        BrokerConfig.from_context(context)


@pytest.mark.parametrize(
    "cluster_id", ["-demo", "demo_1", "demo/1", "dé", "x" * 40, "a b", "demo*"]
)
def test_malformed_cluster_id_is_refused(cluster_id: str) -> None:
    with pytest.raises(ConfigError, match=r"clusterId=.*malformed"):
        config(clusterId=cluster_id)


def test_cluster_id_must_be_a_string() -> None:
    with pytest.raises(ConfigError, match="clusterId must be a string"):
        config(clusterId=42)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(True, True), (False, False), ("true", True), ("FALSE", False), (" True ", True)],
)
def test_flags_accept_json_booleans_and_cli_strings(raw: object, expected: bool) -> None:
    assert config(enableCapacityReservation=raw).enable_capacity_reservation is expected
    assert config(enforceStrictCapacityReservation=raw).enforce_strict_capacity_reservation is (
        expected
    )


@pytest.mark.parametrize("raw", ["yes", "1", 1, "treu"])
def test_flags_refuse_anything_else(raw: object) -> None:
    with pytest.raises(ConfigError, match="enableCapacityReservation must be true or false"):
        config(enableCapacityReservation=raw)


def test_regions_from_a_comma_list_or_a_json_list() -> None:
    assert config(regions="us-east-1, eu-west-1").regions == ("us-east-1", "eu-west-1")
    assert config(regions=["us-gov-west-1"]).regions == ("us-gov-west-1",)


def test_alarm_topic_arn_is_an_sns_topic_and_not_beside_an_email() -> None:
    arn = "arn:aws:sns:eu-west-1:123456789012:ops-alarms"
    assert config(alarmTopicArn=arn).alarm_topic_arn == arn
    assert config().alarm_topic_arn is None
    with pytest.raises(ConfigError, match="alarmTopicArn='arn:aws:sqs"):
        config(alarmTopicArn="arn:aws:sqs:eu-west-1:123456789012:ops-alarms")
    with pytest.raises(ConfigError, match="cannot be combined"):
        config(alarmTopicArn=arn, alarmEmail="ops@example.com")


def test_a_region_aws_does_not_have_fails_synth_by_name() -> None:
    """The client's rule (botocore's partitions): `-c regions=us-east-1,us-east-7` used to
    synthesize, and the cleaner then swept a region that does not exist."""
    with pytest.raises(ConfigError) as error:
        config(regions="us-east-1,us-east-7")
    assert "context regions: 'us-east-7' is not an AWS region (did you mean" in str(error.value)
    assert "'us-east-1'" in str(error.value)


@pytest.mark.parametrize("regions", ["us-east-1,useast1", "US-EAST-1", "us-east-1,us-east-1"])
def test_bad_regions_are_refused(regions: str) -> None:
    with pytest.raises(ConfigError, match="regions"):
        config(regions=regions)


def test_overrides() -> None:
    cfg = config(
        functionPrefix="cb-prod",
        parameterPrefix="/hpc/broker/",
        stackNamePrefix="prod-job-",
        instanceRoleArns="arn:aws:iam::123456789012:role/a,arn:aws:iam::123456789012:role/p/b",
        alarmEmail="ops@example.com",
        holdLimitSeconds="2400",
        probeGraceSeconds=60,
    )
    assert cfg.function_name("cleaner") == "cb-prod-cleaner"
    assert cfg.parameter_prefix == "/hpc/broker"
    assert cfg.stack_name_prefix == "prod-job-"
    assert cfg.instance_role_arns == (
        "arn:aws:iam::123456789012:role/a",
        "arn:aws:iam::123456789012:role/p/b",
    )
    assert cfg.alarm_email == "ops@example.com"
    assert cfg.hold_limit_seconds == 2400
    assert cfg.probe_grace_seconds == 60


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("functionPrefix", "cb prod", "functionPrefix"),
        ("functionPrefix", "x" * 55, "functionPrefix"),
        ("parameterPrefix", "capacity-broker", "parameterPrefix"),
        ("parameterPrefix", "/aws/broker", "parameterPrefix"),
        ("stackNamePrefix", "1job-", "stackNamePrefix"),
        ("instanceRoleArns", "arn:aws:iam::123456789012:user/bob", "instanceRoleArns"),
        ("instanceRoleArns", "*", "instanceRoleArns"),
        ("imageParameters", "*", "imageParameters"),
        ("imageParameters", "/golden ami", "imageParameters"),
        ("imageParameters", "arn:aws:ssm:us-east-1:1:parameter/x", "imageParameters"),
        ("alarmEmail", "ops", "alarmEmail"),
        ("powertoolsLayerArn", "arn:aws:lambda:us-east-1:1:layer:x:1", "powertoolsLayerArn"),
        ("holdLimitSeconds", "0", "holdLimitSeconds"),
        ("holdLimitSeconds", "1.5", "holdLimitSeconds"),
        ("idleGraceSeconds", True, "idleGraceSeconds"),
    ],
)
def test_malformed_optional_values_are_refused(key: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**{key: value})


def test_image_parameters() -> None:
    assert config().image_parameters == ()
    cfg = config(
        imageParameters="/golden-ami/hpc, golden,/images/*,"
        "arn:aws:ssm:us-east-1:210987654321:parameter/shared/ami"
    )
    assert cfg.image_parameters == (
        "/golden-ami/hpc",
        "golden",
        "/images/*",
        "arn:aws:ssm:us-east-1:210987654321:parameter/shared/ami",
    )


def test_empty_cli_values_mean_default() -> None:
    cfg = config(functionPrefix="", regions="", alarmEmail="")
    assert cfg.function_prefix == "capacity-broker-demo"
    assert cfg.regions == ()
    assert cfg.alarm_email is None


def test_an_official_layer_arn_is_accepted() -> None:
    arn = (
        "arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python314-arm64:9"
    )
    assert config(powertoolsLayerArn=arn).powertools_layer_arn == arn


def test_on_demand_prices_from_json_or_the_command_line() -> None:
    base = {"clusterId": "hpc"}
    assert BrokerConfig.from_context(base).on_demand_prices == ()
    given = {"g6.xlarge": 0.8048, "p5.48xlarge": 55.04}
    expected = (("g6.xlarge", 0.8048), ("p5.48xlarge", 55.04))
    assert BrokerConfig.from_context({**base, "onDemandPrices": given}).on_demand_prices == (
        expected
    )
    line = "g6.xlarge=0.8048, p5.48xlarge=55.04"
    assert BrokerConfig.from_context({**base, "onDemandPrices": line}).on_demand_prices == (
        expected
    )


@pytest.mark.parametrize(
    "prices",
    ["g6.xlarge", "g6.xlarge=-1", "g6.xlarge=free", "gpu=1", "g6.xlarge=1,g6.xlarge=2", 3],
)
def test_bad_on_demand_prices_are_refused(prices: object) -> None:
    with pytest.raises(ConfigError, match="onDemandPrices"):
        BrokerConfig.from_context({"clusterId": "hpc", "onDemandPrices": prices})
