"""The five functions: one code asset, runtime, architecture, logging, tracing, sizing, env."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match
from capacity_broker.adapters.aws import BOTOCORE_DATA
from infra_helpers import CUSTOM_LAYER_ARN, FUNCTIONS, Synth

from infra.functions import CODE_DIR

pytestmark = pytest.mark.infra


def newest_python_runtime() -> str:
    """The highest `Runtime.PYTHON_3_x` the pinned aws-cdk-lib knows about."""
    minors = [
        int(name.removeprefix("PYTHON_3_"))
        for name in dir(lambda_.Runtime)
        if name.startswith("PYTHON_3_") and name.removeprefix("PYTHON_3_").isdigit()
    ]
    return f"python3.{max(minors)}"


def test_five_functions_named_for_the_python_client(broker: Synth) -> None:
    names = {
        resource["Properties"]["FunctionName"]
        for resource in broker.resources("AWS::Lambda::Function").values()
    }
    assert names == {f"capacity-broker-demo-{name}" for name in FUNCTIONS}


def test_function_prefix_override(custom: Synth) -> None:
    for name in FUNCTIONS:
        _, resource = custom.function(name)
        assert resource["Properties"]["FunctionName"] == f"cb-prod-{name}"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_runtime_architecture_tracing_and_json_logs(broker: Synth, name: str) -> None:
    _, resource = broker.function(name)
    props = resource["Properties"]
    assert props["Runtime"] == newest_python_runtime() == "python3.14"
    assert props["Architectures"] == ["arm64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    assert props["Handler"] == f"capacity_broker.handlers.{name}.handler"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_function_logs_to_its_own_group_with_a_retention(broker: Synth, name: str) -> None:
    _, resource = broker.function(name)
    group_id = resource["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    group = broker.doc["Resources"][group_id]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"]["LogGroupName"] == f"/aws/lambda/capacity-broker-demo-{name}"
    assert group["Properties"]["RetentionInDays"] == 90


def test_one_code_asset_for_all_five(broker: Synth) -> None:
    keys = {
        str(resource["Properties"]["Code"]["S3Key"])
        for resource in broker.resources("AWS::Lambda::Function").values()
    }
    assert len(keys) == 1


def code_asset(synth: Synth) -> Path:
    _, resource = synth.function("probe")
    asset_hash = resource["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    return Path(synth.app.outdir) / f"asset.{asset_hash}"


def test_code_asset_is_the_package_without_caches_or_tests(broker: Synth) -> None:
    asset = code_asset(broker)
    assert (asset / "capacity_broker" / "__init__.py").is_file()
    assert (asset / "capacity_broker" / "handlers").is_dir()
    unwanted = [
        path.relative_to(asset)
        for path in asset.rglob("*")
        if path.name in ("tests", "conftest.py", ".pytest_cache", ".mypy_cache")
        or path.name.startswith("test_")
        or (path.suffix == ".pyc" and not path.name.endswith(".cpython-314.pyc"))
        or path.name.endswith(".egg-info")
    ]
    assert unwanted == []


def test_code_asset_carries_the_trimmed_ec2_model(broker: Synth) -> None:
    """The functions' clients read EC2's model from the package (``Clients``,
    ``BOTOCORE_DATA``): without it they would parse botocore's whole model again."""
    asset = code_asset(broker)
    models = [p for p in BOTOCORE_DATA.rglob("*") if p.is_file()]
    assert models
    for model in models:
        shipped = asset / model.relative_to(CODE_DIR)
        assert shipped.is_file(), shipped
        assert shipped.read_bytes() == model.read_bytes()


# CPython 3.14's magic number (3627, Include/internal/pycore_magic_number.h) + b"\r\n", the
# one the python3.14 runtime loads; PEP 552's flags word 0b01: hash-based, source not checked.
PYTHON_314_MAGIC = bytes.fromhex("2b0e0d0a")
UNCHECKED_HASH = 0b01


def test_code_asset_has_python_3_14_bytecode_beside_every_source(broker: Synth) -> None:
    """Lambda cannot write /var/task: without bytecode every cold start compiles the broker."""
    asset = code_asset(broker)
    sources = sorted(asset.rglob("*.py"))
    # Every module of the package is shipped as source too (tracebacks show its lines).
    packaged = {
        path.relative_to(CODE_DIR)
        for path in CODE_DIR.rglob("*.py")
        if not {"tests", "__pycache__"} & set(path.parts)
        and not path.name.startswith("test_")
        and path.name != "conftest.py"
    }
    assert {path.relative_to(asset) for path in sources} == packaged
    assert len(sources) > 100
    for source in sources:
        pyc = source.parent / "__pycache__" / f"{source.stem}.cpython-314.pyc"
        assert pyc.is_file(), source
        data = pyc.read_bytes()
        assert data[:4] == PYTHON_314_MAGIC, (source, data[:4].hex())
        assert int.from_bytes(data[4:8], "little") == UNCHECKED_HASH, source
        # The source it names is where Lambda unpacks the code, not the build directory.
        module = source.relative_to(asset).as_posix()
        assert f"/var/task/{module}".encode() in data, source
        assert str(asset).encode() not in data
        assert pyc.stat().st_mode & 0o444 == 0o444
    assert len(list(asset.rglob("*.pyc"))) == len(sources)


def test_sizing(broker: Synth) -> None:
    timeouts = {name: broker.function(name)[1]["Properties"]["Timeout"] for name in FUNCTIONS}
    # probe answers inside a VDI launch; the cleaner gets minutes for a multi-region sweep.
    assert timeouts == {"probe": 30, "reserve": 120, "release": 60, "cleaner": 300, "capacity": 120}
    for name in FUNCTIONS:
        assert broker.function(name)[1]["Properties"]["MemorySize"] >= 256


def test_only_the_cleaner_is_limited_to_one_concurrent_run(broker: Synth) -> None:
    reserved = {
        name: broker.function(name)[1]["Properties"].get("ReservedConcurrentExecutions")
        for name in FUNCTIONS
    }
    assert reserved == {
        "probe": None,
        "reserve": None,
        "release": None,
        "cleaner": 1,
        "capacity": None,
    }


@pytest.mark.parametrize("name", FUNCTIONS)
def test_environment_per_contract(broker: Synth, name: str) -> None:
    _, resource = broker.function(name)
    env = resource["Properties"]["Environment"]["Variables"]
    (table_id,) = broker.resources("AWS::DynamoDB::Table")
    expected = {
        "BROKER_CLUSTER_ID": "demo",
        "BROKER_PARAMETER_PREFIX": "/capacity-broker/demo",
        # Default: the function's own region.
        "BROKER_REGIONS": {"Ref": "AWS::Region"},
        "BROKER_STATE_TABLE": {"Ref": table_id},
        # Default: probes alike that arrive together are answered as one group.
        "BROKER_PROBE_GROUPING": "true",
        "POWERTOOLS_SERVICE_NAME": name,
        "POWERTOOLS_METRICS_NAMESPACE": "CapacityBroker",
        # No pydantic plugin: no scan of every installed distribution at the first model.
        "PYDANTIC_DISABLE_PLUGINS": "__all__",
    }
    if name == "cleaner":
        expected |= {
            "BROKER_PROBE_GRACE_SECONDS": "90",
            "BROKER_STACK_GRACE_SECONDS": "180",
            "BROKER_IDLE_GRACE_SECONDS": "600",
            "BROKER_HOLD_LIMIT_SECONDS": "1800",
            # A reserved-first ladder without its done record: the reserve function's timeout
            # (120 s) and the 5-minute grace (domain.graces.LADDER_GRACE).
            "BROKER_LADDER_WINDOW_SECONDS": "420",
        }
    assert env == expected


def test_the_ladder_window_outlasts_every_reserve_invocation(broker: Synth) -> None:
    """The cleaner ends a ladder without its done record only once no reserve invocation that
    launched one of its nodes can still run: its window is longer than reserve's timeout, and
    the domain's own default (``Graces().ladder``) is the deployed one."""
    from capacity_broker.domain.cleaner import Graces
    from capacity_broker.domain.graces import LADDER_GRACE, RESERVE_MAX_RUN

    reserve_timeout = broker.function("reserve")[1]["Properties"]["Timeout"]
    cleaner_env = broker.function("cleaner")[1]["Properties"]["Environment"]["Variables"]
    window = float(cleaner_env["BROKER_LADDER_WINDOW_SECONDS"])
    assert reserve_timeout == RESERVE_MAX_RUN.total_seconds()
    assert window == reserve_timeout + LADDER_GRACE.total_seconds() > reserve_timeout
    assert window == Graces().ladder.total_seconds()


def test_environment_overrides(custom: Synth) -> None:
    for name in FUNCTIONS:
        env = custom.function(name)[1]["Properties"]["Environment"]["Variables"]
        assert env["BROKER_CLUSTER_ID"] == "soca-prod"
        assert env["BROKER_PARAMETER_PREFIX"] == "/hpc/broker"
        assert env["BROKER_REGIONS"] == "us-east-1,eu-west-1"
    cleaner_env = custom.function("cleaner")[1]["Properties"]["Environment"]["Variables"]
    assert cleaner_env["BROKER_HOLD_LIMIT_SECONDS"] == "2400"


def test_powertools_layer_is_pinned_to_3_37_0_through_its_public_parameter(broker: Synth) -> None:
    """Powertools publishes /aws/service/powertools/python/<arch>/<runtime>/<version>."""
    layers = {str(broker.function(name)[1]["Properties"]["Layers"]) for name in FUNCTIONS}
    assert len(layers) == 1
    (layer,) = broker.function("probe")[1]["Properties"]["Layers"]
    parameter = broker.doc["Parameters"][layer["Ref"]]
    assert parameter == {
        "Type": "AWS::SSM::Parameter::Value<String>",
        "Default": "/aws/service/powertools/python/arm64/python3.14/3.37.0",
    }


def test_powertools_layer_arn_override(custom: Synth) -> None:
    for name in FUNCTIONS:
        assert custom.function(name)[1]["Properties"]["Layers"] == [CUSTOM_LAYER_ARN]


def test_state_table_matches_powertools_idempotency_schema(broker: Synth) -> None:
    broker.template.resource_count_is("AWS::DynamoDB::Table", 1)
    broker.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
            "TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True},
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
        },
    )


def test_outputs_name_and_arn_of_each_function(broker: Synth) -> None:
    outputs = broker.doc["Outputs"]
    for name in FUNCTIONS:
        logical_id, _ = broker.function(name)
        title = name.capitalize()
        assert outputs[f"{title}FunctionName"]["Value"] == {"Ref": logical_id}
        assert outputs[f"{title}FunctionArn"]["Value"] == {"Fn::GetAtt": [logical_id, "Arn"]}
    assert outputs["FunctionPrefix"]["Value"] == "capacity-broker-demo"


def test_everything_is_tagged_with_the_cluster(broker: Synth) -> None:
    broker.template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Tags": Match.array_with([{"Key": "capacity-broker:cluster-id", "Value": "demo"}])},
    )
