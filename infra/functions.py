"""The five Lambda functions, built from one code asset (`functions/`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from aws_cdk import AssetHashType, Aws, Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from capacity_broker.domain.graces import LADDER_GRACE, RESERVE_MAX_RUN
from constructs import Construct

from infra.bytecode import bundling_options
from infra.config import FUNCTION_NAMES, METRICS_NAMESPACE, POWERTOOLS_VERSION, BrokerConfig

CODE_DIR = Path(__file__).resolve().parent.parent / "functions"

# Newest Python runtime that aws-cdk-lib 2.275.0 offers (Runtime.PYTHON_3_14).
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
LOG_RETENTION = logs.RetentionDays.THREE_MONTHS

# Powertools publishes each release's layer ARN as a public SSM parameter named by the
# semantic version, so the pin is the package version (not the per-region layer number).
POWERTOOLS_LAYER_PARAMETER = (
    f"/aws/service/powertools/python/{ARCHITECTURE.name}/{RUNTIME.name}/{POWERTOOLS_VERSION}"
)

# Nothing but the importable package goes to Lambda: these never leave functions/ (the
# bundling step copies the rest, then adds the bytecode CPython 3.14 compiles: infra/bytecode.py).
ASSET_EXCLUDE = [
    "**/__pycache__",
    "**/*.pyc",
    "**/.pytest_cache",
    "**/.mypy_cache",
    "**/.ruff_cache",
    "**/*.egg-info",
    "**/tests",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/.DS_Store",
]


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    description: str
    memory_mb: int
    timeout: Duration
    reserved_concurrency: int | None = None
    extra_env: dict[str, str] = field(default_factory=dict)


def function_specs(config: BrokerConfig) -> dict[str, FunctionSpec]:
    """Sizes and timeouts per entry point (why: see each comment)."""
    # The reserve function's timeout: the longest any invocation of it runs. The cleaner ends
    # a reserved-first ladder left without its done record only once that long (plus a
    # grace) has passed since its youngest node launched (domain.cleaner.abandoned_ladders).
    reserve_timeout = Duration.seconds(int(RESERVE_MAX_RUN.total_seconds()))
    ladder_window = RESERVE_MAX_RUN + LADDER_GRACE
    specs = [
        # Runs inside a VDI launch: answer fast or not at all. Memory buys CPU for the
        # concurrent per-subnet attempts.
        FunctionSpec(
            "probe",
            "Is there EC2 capacity right now? Short probe reservations, cancelled at once.",
            512,
            Duration.seconds(30),
        ),
        # Tries (type x subnet) pairs, writes a launch template version, may launch a fleet.
        FunctionSpec(
            "reserve",
            "Hold capacity for an HPC job and point its launch template at the hold.",
            512,
            reserve_timeout,
        ),
        FunctionSpec(
            "release",
            "Give a job's owned holds back (cancel).",
            256,
            Duration.seconds(60),
        ),
        # Sweeps every region and page; one at a time so two sweeps never race on a cancel.
        FunctionSpec(
            "cleaner",
            "ODCRCleaner: cancel leaked probes and idle, consumed, orphaned or stale holds.",
            512,
            Duration.minutes(5),
            reserved_concurrency=1,
            extra_env={
                "BROKER_PROBE_GRACE_SECONDS": str(config.probe_grace_seconds),
                "BROKER_STACK_GRACE_SECONDS": str(config.stack_grace_seconds),
                "BROKER_IDLE_GRACE_SECONDS": str(config.idle_grace_seconds),
                "BROKER_HOLD_LIMIT_SECONDS": str(config.hold_limit_seconds),
                "BROKER_LADDER_WINDOW_SECONDS": str(int(ladder_window.total_seconds())),
            },
        ),
        # Read-only discovery across regions: pagination over several APIs.
        FunctionSpec(
            "capacity",
            "List reserved capacity (ODCRs and Capacity Blocks) and offerings; never mutates.",
            512,
            Duration.seconds(120),
        ),
    ]
    # The deploy option ``reservedConcurrency`` (docs/deploy.md) caps how many environments
    # of a function run at once: how many EC2 pacers a burst starts.
    reserved = dict(config.reserved_concurrency)
    specs = [
        replace(spec, reserved_concurrency=reserved[spec.name]) if spec.name in reserved else spec
        for spec in specs
    ]
    by_name = {spec.name: spec for spec in specs}
    assert tuple(by_name) == FUNCTION_NAMES
    return by_name


@dataclass(frozen=True)
class BrokerFunction:
    name: str
    function: lambda_.Function
    role: iam.Role
    log_group: logs.LogGroup


class BrokerFunctions(Construct):
    """Roles (empty: BrokerPermissions fills them), log groups and the functions."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: BrokerConfig,
        state_table: dynamodb.ITable,
    ) -> None:
        super().__init__(scope, construct_id)
        # The asset's hash is that of the sources (without ASSET_EXCLUDE: a local __pycache__
        # changes nothing) and of the bundling options; the bytecode is a function of them.
        code = lambda_.Code.from_asset(
            str(CODE_DIR),
            exclude=ASSET_EXCLUDE,
            asset_hash_type=AssetHashType.SOURCE,
            bundling=bundling_options(CODE_DIR, ASSET_EXCLUDE, RUNTIME.bundling_image),
        )
        self.powertools_layer = lambda_.LayerVersion.from_layer_version_arn(
            self, "PowertoolsLayer", powertools_layer_arn(self, config)
        )
        regions = ",".join(config.regions) if config.regions else Aws.REGION
        common_env = {
            "BROKER_CLUSTER_ID": config.cluster_id,
            "BROKER_PARAMETER_PREFIX": config.parameter_prefix,
            "BROKER_REGIONS": regions,
            "BROKER_STATE_TABLE": state_table.table_name,
            "BROKER_PROBE_GROUPING": "true" if config.probe_grouping else "false",
            **pool_environment(config),
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            # The broker uses no pydantic plugin; without this pydantic scans every installed
            # distribution's entry points when it builds the first model (cold start).
            "PYDANTIC_DISABLE_PLUGINS": "__all__",
        }

        self.by_name: dict[str, BrokerFunction] = {}
        for name, spec in function_specs(config).items():
            title = name.capitalize()
            function_name = config.function_name(name)
            role = iam.Role(
                self,
                f"{title}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"Capacity broker {name} function ({config.cluster_id})",
            )
            log_group = logs.LogGroup(
                self,
                f"{title}LogGroup",
                # The conventional name, so `aws logs tail /aws/lambda/<name>` just works.
                log_group_name=f"/aws/lambda/{function_name}",
                retention=LOG_RETENTION,
                # A retained group with a fixed name would make the next deploy of the same
                # cluster fail; the history that matters lives in CloudWatch metrics.
                removal_policy=RemovalPolicy.DESTROY,
            )
            function = lambda_.Function(
                self,
                title,
                function_name=function_name,
                description=f"{spec.description} [{config.cluster_id}]",
                code=code,
                handler=f"capacity_broker.handlers.{name}.handler",
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                layers=[self.powertools_layer],
                memory_size=spec.memory_mb,
                timeout=spec.timeout,
                reserved_concurrent_executions=spec.reserved_concurrency,
                role=role,
                log_group=log_group,
                logging_format=lambda_.LoggingFormat.JSON,
                application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
                system_log_level_v2=lambda_.SystemLogLevel.WARN,
                tracing=lambda_.Tracing.ACTIVE,
                # Snapshots are taken of published versions only (infra/versions.py publishes
                # them and points the alias at them). CDK refuses a runtime, architecture or
                # ephemeral storage SnapStart does not support, at synth.
                snap_start=(
                    lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if config.snap_start else None
                ),
                # A deploy that changes the function publishes a new version; the old one is
                # deleted once the alias has moved (CDK would keep it, and SnapStart charges
                # for the snapshot of every active version).
                current_version_options=lambda_.VersionOptions(
                    removal_policy=RemovalPolicy.DESTROY
                ),
                environment={
                    **common_env,
                    "POWERTOOLS_SERVICE_NAME": name,
                    **spec.extra_env,
                },
            )
            self.by_name[name] = BrokerFunction(name, function, role, log_group)

    def __getitem__(self, name: str) -> BrokerFunction:
        return self.by_name[name]

    def __iter__(self) -> Iterator[BrokerFunction]:
        return iter(self.by_name.values())


def powertools_layer_arn(scope: Construct, config: BrokerConfig) -> str:
    """The layer ARN: the context override, else the public SSM parameter for our pin."""
    if config.powertools_layer_arn:
        return config.powertools_layer_arn
    # A CloudFormation parameter of type AWS::SSM::Parameter::Value<String>: resolved in the
    # deploy region at deploy time, no lookup (and no credentials) needed to synthesize.
    return ssm.StringParameter.value_for_string_parameter(scope, POWERTOOLS_LAYER_PARAMETER)


def pool_environment(config: BrokerConfig) -> dict[str, str]:
    """The reserved pool's deploy options as the functions read them (``Settings``)."""
    env: dict[str, str] = {}
    if config.pool_groups:
        env["BROKER_POOL_GROUPS"] = ",".join(config.pool_groups)
    if config.pool_tag:
        env["BROKER_POOL_TAG"] = config.pool_tag
    if config.pool_priority:
        env["BROKER_POOL_PRIORITY"] = ",".join(config.pool_priority)
    return env
