"""The cold-start options: SnapStart, provisioned concurrency for probe, the alias invokers call."""

from __future__ import annotations

from typing import Any

import pytest
from infra_helpers import FUNCTIONS, Synth

from infra.app import build_app, cdk_json_context
from infra.config import LIVE_ALIAS, BrokerConfig, ConfigError

pytestmark = pytest.mark.infra


def alias_of(synth: Synth, name: str) -> tuple[str, dict[str, Any]]:
    function_id, _ = synth.function(name)
    (match,) = [
        (logical_id, resource)
        for logical_id, resource in synth.resources("AWS::Lambda::Alias").items()
        if resource["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    return match


def cleaner_targets(synth: Synth) -> list[Any]:
    return [
        target["Arn"]
        for rule in synth.resources("AWS::Events::Rule").values()
        for target in rule["Properties"]["Targets"]
    ]


def test_by_default_nothing_is_published_and_invokers_call_the_functions(broker: Synth) -> None:
    assert broker.resources("AWS::Lambda::Version") == {}
    assert broker.resources("AWS::Lambda::Alias") == {}
    for name in FUNCTIONS:
        _, resource = broker.function(name)
        assert "SnapStart" not in resource["Properties"]
    cleaner_id, _ = broker.function("cleaner")
    assert cleaner_targets(broker) == [{"Fn::GetAtt": [cleaner_id, "Arn"]}] * 3
    assert "FunctionQualifier" not in broker.doc["Outputs"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_snapstart_on_published_versions_behind_the_live_alias(snapstart: Synth, name: str) -> None:
    function_id, resource = snapstart.function(name)
    assert resource["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    assert resource["Properties"]["Runtime"] == "python3.14"
    # SnapStart's limits (AWS docs): no EFS, at most 512 MB of ephemeral storage.
    assert "FileSystemConfigs" not in resource["Properties"]
    assert resource["Properties"].get("EphemeralStorage", {"Size": 512})["Size"] <= 512
    alias_id, alias = alias_of(snapstart, name)
    version_id = alias["Properties"]["FunctionVersion"]["Fn::GetAtt"][0]
    version = snapstart.doc["Resources"][version_id]
    assert version["Type"] == "AWS::Lambda::Version"
    assert version["Properties"]["FunctionName"] == {"Ref": function_id}
    # The version a deploy replaces is deleted: SnapStart charges per cached version.
    assert version["DeletionPolicy"] == "Delete"
    assert alias["Properties"]["Name"] == LIVE_ALIAS
    # SnapStart and provisioned concurrency do not mix.
    assert "ProvisionedConcurrencyConfig" not in alias["Properties"]
    # The outputs the client and Slurm are configured from name the alias.
    title = name.capitalize()
    assert snapstart.doc["Outputs"][f"{title}FunctionArn"]["Value"] == {"Ref": alias_id}


def test_snapstart_invokers_call_the_alias(snapstart: Synth) -> None:
    alias_id, _ = alias_of(snapstart, "cleaner")
    assert cleaner_targets(snapstart) == [{"Ref": alias_id}] * 3
    permissions = snapstart.resources("AWS::Lambda::Permission").values()
    assert {p["Properties"]["FunctionName"]["Ref"] for p in permissions} == {alias_id}
    (invoke_config,) = snapstart.resources("AWS::Lambda::EventInvokeConfig").values()
    assert "Qualifier" in invoke_config["Properties"]
    assert snapstart.doc["Outputs"]["FunctionQualifier"]["Value"] == LIVE_ALIAS


def test_provisioned_concurrency_on_the_probe_alias_only(warm_probe: Synth) -> None:
    for name in FUNCTIONS:
        _, resource = warm_probe.function(name)
        assert "SnapStart" not in resource["Properties"]
        _, alias = alias_of(warm_probe, name)
        config = alias["Properties"].get("ProvisionedConcurrencyConfig")
        if name == "probe":
            assert config == {"ProvisionedConcurrentExecutions": 4}
        else:
            assert config is None
    alias_id, _ = alias_of(warm_probe, "cleaner")
    assert cleaner_targets(warm_probe) == [{"Ref": alias_id}] * 3


def test_both_options_at_once_fail_synth_with_the_reason() -> None:
    context = {
        **cdk_json_context(),
        "clusterId": "demo",
        "snapStart": "true",
        "probeProvisionedConcurrency": "2",
    }
    with pytest.raises(ConfigError) as refused:
        build_app(context, nag=False)
    message = str(refused.value)
    assert "snapStart" in message and "probeProvisionedConcurrency" in message
    assert "does not support provisioned concurrency" in message


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 0), ("", 0), ("0", 0), (3, 3), ("1000", 1000)]
)
def test_provisioned_concurrency_values(value: object, expected: int) -> None:
    config = BrokerConfig.from_context({"clusterId": "demo", "probeProvisionedConcurrency": value})
    assert config.probe_provisioned_concurrency == expected
    assert config.live_alias == (LIVE_ALIAS if expected else None)


@pytest.mark.parametrize("value", ["-1", "1001", "two", "1.5", True])
def test_provisioned_concurrency_refuses_nonsense(value: object) -> None:
    with pytest.raises(ConfigError, match="probeProvisionedConcurrency"):
        BrokerConfig.from_context({"clusterId": "demo", "probeProvisionedConcurrency": value})


@pytest.mark.parametrize(
    ("region", "named"),
    [
        ("ap-southeast-6", "Asia Pacific (New Zealand)"),
        ("ap-east-2", "Asia Pacific (Taipei)"),
        ("us-gov-west-1", "outside AWS's commercial partition"),
    ],
)
def test_snapstart_in_a_region_lambda_does_not_offer_it_in_fails_synth(
    region: str, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The region the CDK CLI targets (it sets CDK_DEFAULT_REGION before running the app)."""
    monkeypatch.setenv("CDK_DEFAULT_REGION", region)
    context = {**cdk_json_context(), "clusterId": "demo", "snapStart": "true"}
    with pytest.raises(ConfigError) as refused:
        build_app(context, nag=False)
    message = str(refused.value)
    assert f"snapStart=true cannot be deployed to {region} ({named})" in message
    assert "docs.aws.amazon.com/lambda/latest/dg/snapstart.html" in message


def test_snapstart_where_lambda_offers_it_and_without_it_anywhere() -> None:
    context = {"clusterId": "demo", "snapStart": "true"}
    assert BrokerConfig.from_context(context, region="eu-west-1").snap_start
    assert BrokerConfig.from_context(context).snap_start  # region unknown: agnostic
    assert not BrokerConfig.from_context({"clusterId": "demo"}, region="ap-east-2").snap_start
