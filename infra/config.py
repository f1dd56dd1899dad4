"""Deployment settings read from CDK context (cdk.json defaults, `-c key=value` overrides).

Every value is validated here, once, so that a typo fails `cdk synth` with a message that
names the context key instead of surfacing later as a broken IAM policy or a CloudFormation
error halfway through a deploy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The rules the runtime keeps (pure functions of ``capacity_broker.domain``), so the stack and
# the functions read names the same way.
from capacity_broker.adapters.regions import unknown_region_message, unknown_regions
from capacity_broker.domain import tags
from capacity_broker.domain.names import default_parameter_prefix, default_stack_prefix
from capacity_broker.domain.pool_spec import PoolSpec, PoolSpecError

# The five entry points of the contract, in the order they are presented everywhere.
FUNCTION_NAMES: tuple[str, ...] = ("probe", "reserve", "release", "cleaner", "capacity")

# Ownership tags of the contract: IAM conditions and docs refer to these keys (the runtime's).
TAG_CLUSTER_ID = tags.TAG_CLUSTER_ID
TAG_PURPOSE = tags.TAG_PURPOSE
PURPOSES: tuple[str, ...] = ("probe", "hold")

METRICS_NAMESPACE = "CapacityBroker"
POWERTOOLS_VERSION = "3.37.0"

# Used in function names, SSM paths, stack and alarm names: keep it to what all of them accept.
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}$")
_FUNCTION_PREFIX = re.compile(r"^[A-Za-z0-9_-]{1,54}$")
# CloudFormation stack names: a letter, then letters, digits and hyphens.
_STACK_NAME_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,100}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
_PARAMETER_PREFIX = re.compile(r"^(/[A-Za-z0-9_.-]+)+$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
# An SSM parameter a launch template's image may resolve (resolve:ssm:<name>): a name (or a
# path ending in "*") in this account, or the ARN of one shared from another account.
_PARAMETER_NAME = re.compile(r"^/?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*(/\*)?$")
_PARAMETER_ARN = re.compile(
    r"^arn:aws[a-z-]*:ssm:[a-z]{2}(-[a-z]+)+-\d{1,2}:\d{12}:parameter(/[A-Za-z0-9_.-]+)+(/\*)?$"
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# An SNS topic's ARN (topic names: letters, digits, '-' and '_', at most 256; '.fifo' ends a
# FIFO topic's).
# A resource group's name (Resource Groups CreateGroup: "[a-zA-Z0-9_\.-]{1,300}"): the grant
# names the group's ARN, so only a name is taken here.
_POOL_GROUP = re.compile(r"[A-Za-z0-9_.-]{1,300}")
_TOPIC_ARN = re.compile(
    r"^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d{1,2}:\d{12}:[A-Za-z0-9_-]{1,251}(\.fifo)?$"
)
_LAYER_ARN = re.compile(
    r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:AWSLambdaPowertoolsPythonV3-"
    r"python3\d+-arm64:\d+$"
)

# The alias every invoker calls when versions are published (SnapStart, provisioned concurrency).
LIVE_ALIAS = "live"
# Lambda's default concurrency quota is 1,000 a region; a probe pool beyond it cannot be granted.
MAX_PROVISIONED_CONCURRENCY = 1000

DEFAULT_GRACES: dict[str, int] = {
    "probeGraceSeconds": 90,
    "stackGraceSeconds": 180,
    "idleGraceSeconds": 600,
    "holdLimitSeconds": 1800,
}


class ConfigError(ValueError):
    """A context value is missing or malformed; the message names the key and the fix."""


# Lambda SnapStart "is available in all commercial Regions except Asia Pacific (New Zealand)
# and Asia Pacific (Taipei)" (AWS Lambda Developer Guide, "Improving startup performance with
# Lambda SnapStart", Supported Regions: https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html).
SNAPSTART_DOCS = (
    "https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html#snapstart-supported-regions"
)
SNAPSTART_UNSUPPORTED = {
    "ap-southeast-6": "Asia Pacific (New Zealand)",
    "ap-east-2": "Asia Pacific (Taipei)",
}
# Regions outside the commercial partition (GovCloud, China, the isolated ones) are not in
# that statement: refused too rather than deployed to fail at the first publish.
_NOT_COMMERCIAL = ("us-gov-", "cn-", "us-iso", "eu-isoe-", "eusc-")


def target_region(environ: Mapping[str, str]) -> str | None:
    """The region a synth targets, when the environment says: ``CDK_DEFAULT_REGION``, which
    the CDK CLI sets from ``--profile``/``AWS_REGION`` before it runs the app, else the SDK's
    own variables. None: unknown (the template stays region-agnostic)."""
    for key in ("CDK_DEFAULT_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"):
        value = (environ.get(key) or "").strip()
        if value:
            return value
    return None


def snapstart_region_refusal(region: str) -> str | None:
    """Why ``snapStart=true`` cannot be deployed to ``region``, or None when it can."""
    name = SNAPSTART_UNSUPPORTED.get(region)
    if name is None and region.startswith(_NOT_COMMERCIAL):
        name = "outside AWS's commercial partition"
    if name is None:
        return None
    return (
        f"context snapStart=true cannot be deployed to {region} ({name}): Lambda SnapStart is "
        "available in all commercial Regions except Asia Pacific (New Zealand) and Asia "
        f"Pacific (Taipei) ({SNAPSTART_DOCS}). Deploy without snapStart there (cold starts: "
        "probeProvisionedConcurrency, docs/deploy.md), or to another region"
    )


@dataclass(frozen=True)
class BrokerConfig:
    """Everything the stack needs to know about one broker deployment (one cluster)."""

    cluster_id: str
    function_prefix: str
    parameter_prefix: str
    stack_name_prefix: str
    # Empty: the deploy region only (resolved by CloudFormation at deploy time).
    regions: tuple[str, ...]
    enable_capacity_reservation: bool
    enforce_strict_capacity_reservation: bool
    instance_role_arns: tuple[str, ...]
    alarm_email: str | None
    powertools_layer_arn: str | None
    probe_grace_seconds: int
    stack_grace_seconds: int
    idle_grace_seconds: int
    hold_limit_seconds: int
    # SSM parameters the job templates' images resolve from, beyond AWS's public ones.
    image_parameters: tuple[str, ...] = ()
    # Cold start (docs/deploy.md): Lambda SnapStart for every function, or provisioned
    # concurrency for probe. Either one publishes versions behind the alias LIVE_ALIAS, which
    # every invoker then calls.
    snap_start: bool = False
    probe_provisioned_concurrency: int = 0
    # Reserved concurrency per function (docs/deploy.md): at most that many environments of
    # the function run at once, each with its own EC2 pacer; more concurrent invocations are
    # refused by Lambda with TooManyRequestsException, which the client and the Slurm
    # programs back off on. The cleaner's is always 1.
    reserved_concurrency: tuple[tuple[str, int], ...] = ()
    # Probes alike that arrive together are answered as one group, meeting in the state table
    # across containers (BROKER_PROBE_GROUPING, docs/performance.md "Grouped probes").
    probe_grouping: bool = True
    # An existing SNS topic the alarms notify (alarmTopicArn), instead of a new one.
    alarm_topic_arn: str | None = None
    # The cluster's reserved pool (issue 43, docs/interface.md): Capacity Reservation resource
    # group names (poolGroups) and/or one operator's tag key=value (poolTag), and the order of
    # its kinds (poolPriority). The functions read the groups' members (ListGroupResources on
    # these groups only) and never cancel a reservation the pool names.
    pool_groups: tuple[str, ...] = ()
    pool_tag: str | None = None
    pool_priority: tuple[str, ...] = ()

    @property
    def live_alias(self) -> str | None:
        """The alias the invokers call, or None: they call the function ($LATEST)."""
        return LIVE_ALIAS if self.snap_start or self.probe_provisioned_concurrency else None

    # On-Demand USD per instance-hour of the types the dashboard estimates the cost of
    # (reservations bill at the On-Demand rate, per second, used or not).
    on_demand_prices: tuple[tuple[str, float], ...] = ()

    @property
    def stack_name(self) -> str:
        return f"capacity-broker-{self.cluster_id}"

    @property
    def flags_path(self) -> str:
        return f"{self.parameter_prefix}/configuration/FeatureFlags"

    def function_name(self, name: str) -> str:
        return f"{self.function_prefix}-{name}"

    @classmethod
    def from_context(cls, context: Mapping[str, Any], region: str | None = None) -> BrokerConfig:
        """Build from a context mapping (`{key: value}`; missing keys may be absent or None).
        ``region``: the region the synth targets, when known (``target_region``): options
        Lambda does not offer there are refused."""
        cluster_id = _required_str(context, "clusterId")
        if not _CLUSTER_ID.fullmatch(cluster_id):
            raise ConfigError(
                f"context clusterId={cluster_id!r} is malformed: use 1-39 letters, digits or "
                "hyphens, starting with a letter or digit (e.g. -c clusterId=soca-prod)"
            )

        given_prefix = _optional_str(context, "functionPrefix")
        function_prefix = given_prefix or f"capacity-broker-{cluster_id}"
        if not given_prefix and not _FUNCTION_PREFIX.fullmatch(function_prefix):
            # A valid id of 39 characters makes a default name Lambda refuses: say which.
            raise ConfigError(
                f"context clusterId={cluster_id!r} is too long for the default functionPrefix "
                f"{function_prefix!r} (at most 54 characters: Lambda names stop at 64): give "
                "-c functionPrefix=<shorter> or use a cluster id of at most 38 characters"
            )
        if not _FUNCTION_PREFIX.fullmatch(function_prefix):
            raise ConfigError(
                f"context functionPrefix={function_prefix!r} is malformed: letters, digits, "
                "'-' and '_' only, at most 54 characters (Lambda names stop at 64)"
            )

        parameter_prefix = (
            _optional_str(context, "parameterPrefix") or default_parameter_prefix(cluster_id)
        ).rstrip("/")
        if not _PARAMETER_PREFIX.fullmatch(parameter_prefix) or parameter_prefix.lower().startswith(
            ("/aws", "/ssm")
        ):
            raise ConfigError(
                f"context parameterPrefix={parameter_prefix!r} is malformed: an SSM path such as "
                "/capacity-broker/prod (leading '/', no trailing '/', not under /aws or /ssm)"
            )

        # The runtime's rule (one home): no cluster's default starts another's.
        stack_name_prefix = _optional_str(context, "stackNamePrefix")
        if stack_name_prefix is None:
            try:
                stack_name_prefix = default_stack_prefix(cluster_id)
            except ValueError as error:
                raise ConfigError(
                    f"context clusterId={cluster_id!r} gives no default job-stack name prefix "
                    f"({error}): set -c stackNamePrefix=<the start of this cluster's job stack "
                    "names>"
                ) from None
        if not _STACK_NAME_PREFIX.fullmatch(stack_name_prefix):
            raise ConfigError(
                f"context stackNamePrefix={stack_name_prefix!r} is malformed: the start of a "
                "CloudFormation stack name (a letter, then letters, digits and hyphens)"
            )

        regions = _str_list(context, "regions")
        for region in regions:
            if not _REGION.fullmatch(region):
                raise ConfigError(
                    f"context regions: {region!r} is not a region name (e.g. us-east-1)"
                )
        if len(set(regions)) != len(regions):
            raise ConfigError(f"context regions lists a region twice: {','.join(regions)}")
        # The client's rule (botocore's partitions, offline): the cleaner would otherwise sweep
        # a region that does not exist on every schedule, and fail there each time.
        unknown = unknown_regions(regions)
        if unknown:
            raise ConfigError(
                "context regions: "
                + "; ".join(unknown_region_message(name, close) for name, close in unknown.items())
            )

        role_arns = _str_list(context, "instanceRoleArns")
        for arn in role_arns:
            if not _ROLE_ARN.fullmatch(arn):
                raise ConfigError(
                    f"context instanceRoleArns: {arn!r} is not an IAM role ARN "
                    "(arn:aws:iam::123456789012:role/name)"
                )

        image_parameters = _str_list(context, "imageParameters")
        for parameter in image_parameters:
            if not (_PARAMETER_NAME.fullmatch(parameter) or _PARAMETER_ARN.fullmatch(parameter)):
                raise ConfigError(
                    f"context imageParameters: {parameter!r} is not an SSM parameter name "
                    "(/golden-ami/hpc, or a path ending in /*) or parameter ARN "
                    "(arn:aws:ssm:us-east-1:123456789012:parameter/shared/ami)"
                )

        alarm_email = _optional_str(context, "alarmEmail")
        if alarm_email is not None and not _EMAIL.fullmatch(alarm_email):
            raise ConfigError(f"context alarmEmail={alarm_email!r} is not an e-mail address")
        alarm_topic_arn = _optional_str(context, "alarmTopicArn")
        if alarm_topic_arn is not None and not _TOPIC_ARN.fullmatch(alarm_topic_arn):
            raise ConfigError(
                f"context alarmTopicArn={alarm_topic_arn!r} is not an SNS topic ARN "
                "(arn:aws:sns:us-east-1:123456789012:ops-alarms)"
            )
        if alarm_topic_arn is not None and alarm_email is not None:
            raise ConfigError(
                "context alarmEmail and alarmTopicArn cannot be combined: alarmEmail makes a "
                "new topic for the alarms, alarmTopicArn sends them to yours (subscribe the "
                "address to your topic instead; see docs/deploy.md)"
            )

        layer_arn = _optional_str(context, "powertoolsLayerArn")
        if layer_arn is not None and not _LAYER_ARN.fullmatch(layer_arn):
            raise ConfigError(
                f"context powertoolsLayerArn={layer_arn!r} is not a Powertools for AWS Lambda "
                "(Python) v3 arm64 layer ARN (arn:aws:lambda:<region>:017000801446:layer:"
                "AWSLambdaPowertoolsPythonV3-python314-arm64:<version>)"
            )

        graces = {
            key: _positive_int(context, key, default) for key, default in DEFAULT_GRACES.items()
        }

        snap_start = _bool(context, "snapStart", default=False)
        if snap_start and region:
            refusal = snapstart_region_refusal(region)
            if refusal:
                raise ConfigError(refusal)
        provisioned = _count(context, "probeProvisionedConcurrency", MAX_PROVISIONED_CONCURRENCY)
        if snap_start and provisioned:
            # AWS: "SnapStart does not support provisioned concurrency" (both are settings of
            # the published version probe's alias would point at).
            raise ConfigError(
                "context snapStart=true and probeProvisionedConcurrency="
                f"{provisioned} cannot be combined: Lambda SnapStart does not support "
                "provisioned concurrency "
                "(https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html). Choose one: "
                "SnapStart (restores every function from a snapshot, paid per cached version and "
                "per restore) or provisioned concurrency for probe (initialized environments "
                "kept warm, paid per hour); see docs/deploy.md"
            )

        reserved = _reserved(context, "reservedConcurrency")
        probe_reserved = dict(reserved).get("probe")
        if probe_reserved is not None and provisioned > probe_reserved:
            # AWS: provisioned concurrency cannot exceed the function's reserved concurrency.
            raise ConfigError(
                f"context probeProvisionedConcurrency={provisioned} exceeds probe's "
                f"reservedConcurrency={probe_reserved}: Lambda allocates provisioned "
                "concurrency out of the reserved concurrency "
                "(https://docs.aws.amazon.com/lambda/latest/dg/provisioned-concurrency.html)"
            )

        pool_groups = _str_list(context, "poolGroups")
        for group in pool_groups:
            if not _POOL_GROUP.fullmatch(group):
                raise ConfigError(
                    f"context poolGroups: {group!r} is not a resource group name (letters, "
                    "digits, '.', '-' and '_', at most 300 characters)"
                )
        pool_tag = _optional_str(context, "poolTag")
        pool_priority = _str_list(context, "poolPriority")
        try:
            PoolSpec.parse(pool_groups, pool_tag, pool_priority or None)
        except PoolSpecError as error:
            raise ConfigError(f"context poolTag/poolPriority: {error}") from None

        return cls(
            cluster_id=cluster_id,
            function_prefix=function_prefix,
            parameter_prefix=parameter_prefix,
            stack_name_prefix=stack_name_prefix,
            regions=tuple(regions),
            enable_capacity_reservation=_bool(context, "enableCapacityReservation", default=True),
            enforce_strict_capacity_reservation=_bool(
                context, "enforceStrictCapacityReservation", default=False
            ),
            instance_role_arns=tuple(role_arns),
            alarm_email=alarm_email,
            alarm_topic_arn=alarm_topic_arn,
            powertools_layer_arn=layer_arn,
            probe_grace_seconds=graces["probeGraceSeconds"],
            stack_grace_seconds=graces["stackGraceSeconds"],
            idle_grace_seconds=graces["idleGraceSeconds"],
            hold_limit_seconds=graces["holdLimitSeconds"],
            image_parameters=tuple(image_parameters),
            snap_start=snap_start,
            probe_provisioned_concurrency=provisioned,
            on_demand_prices=_prices(context, "onDemandPrices"),
            reserved_concurrency=reserved,
            probe_grouping=_bool(context, "probeGrouping", default=True),
            pool_groups=tuple(pool_groups),
            pool_tag=pool_tag,
            pool_priority=tuple(pool_priority),
        )


def _raw(context: Mapping[str, Any], key: str) -> Any:
    value = context.get(key)
    # `-c key=` on the command line gives "", which means "not set" to an operator.
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _required_str(context: Mapping[str, Any], key: str) -> str:
    value = _raw(context, key)
    if value is None:
        raise ConfigError(
            f"context {key} is required: deploy with "
            f'`make deploy CDK_ARGS="-c {key}=<your cluster id>"` '
            f"(or `npx cdk deploy -c {key}=<your cluster id>` with the virtualenv on PATH)"
        )
    if not isinstance(value, str):
        raise ConfigError(f"context {key} must be a string, got {value!r}")
    return value.strip()


def _optional_str(context: Mapping[str, Any], key: str) -> str | None:
    value = _raw(context, key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"context {key} must be a string, got {value!r}")
    return value.strip()


def _str_list(context: Mapping[str, Any], key: str) -> list[str]:
    """A list in cdk.json, or a comma-separated string from `-c key=a,b`."""
    value = _raw(context, key)
    if value is None:
        return []
    items: Sequence[Any]
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list | tuple):
        items = value
    else:
        raise ConfigError(f"context {key} must be a list or a comma-separated string")
    if not all(isinstance(item, str) for item in items):
        raise ConfigError(f"context {key} must contain strings only, got {value!r}")
    return [item.strip() for item in items if item.strip()]


_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")


def _pairs(context: Mapping[str, Any], key: str, shape: str) -> list[tuple[Any, Any]]:
    """An object from cdk.json, or ``a=1,b=2`` from `-c`: its (name, value) pairs in order
    (none when the key is absent or empty)."""
    value = _raw(context, key)
    if value is None:
        return []
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, str):
        return [
            (item.partition("=")[0], item.partition("=")[2] or None)
            for item in value.split(",")
            if item.strip()
        ]
    raise ConfigError(f"context {key} must be an object or {shape}")


def _prices(context: Mapping[str, Any], key: str) -> tuple[tuple[str, float], ...]:
    """``{"g6.xlarge": 0.8048}`` in cdk.json, or ``g6.xlarge=0.8048,p5.48xlarge=55.04`` from
    `-c`: USD per instance-hour, in the order given."""
    pairs = _pairs(context, key, "type=price,type=price")
    prices: list[tuple[str, float]] = []
    for name, price in pairs:
        name = str(name).strip()
        try:
            number = float(price)
        except (TypeError, ValueError):
            number = -1.0
        if not _INSTANCE_TYPE.match(name) or not number > 0 or number != number:
            raise ConfigError(
                f"context {key}: {name}={price!r} is not an instance type with a positive "
                "USD per instance-hour (e.g. g6.xlarge=0.8048)"
            )
        prices.append((name, number))
    if len({name for name, _ in prices}) != len(prices):
        raise ConfigError(f"context {key} names an instance type twice")
    return tuple(prices)


RESERVABLE = ("probe", "reserve", "release", "capacity")


def _reserved(context: Mapping[str, Any], key: str) -> tuple[tuple[str, int], ...]:
    """``{"probe": 50}`` in cdk.json, or ``probe=50,reserve=20`` from `-c`: each function's
    reserved concurrency (1 to MAX_PROVISIONED_CONCURRENCY), in the order given."""
    reserved: list[tuple[str, int]] = []
    for name, count in _pairs(context, key, "function=N,function=N"):
        name = str(name).strip()
        if name not in RESERVABLE:
            raise ConfigError(
                f"context {key}: {name!r} is not one of {', '.join(RESERVABLE)} (the cleaner "
                "always runs one at a time)"
            )
        text = str(count).strip()
        if isinstance(count, bool) or not text.isdigit() or int(text) < 1:
            raise ConfigError(f"context {key}: {name}={count!r} must be a whole number from 1")
        if int(text) > MAX_PROVISIONED_CONCURRENCY:
            raise ConfigError(
                f"context {key}: {name}={count!r} is above Lambda's default concurrency quota "
                f"of {MAX_PROVISIONED_CONCURRENCY} a region"
            )
        reserved.append((name, int(text)))
    if len({name for name, _ in reserved}) != len(reserved):
        raise ConfigError(f"context {key} names a function twice")
    return tuple(reserved)


def _bool(context: Mapping[str, Any], key: str, *, default: bool) -> bool:
    """JSON true/false from cdk.json, or "true"/"false" (any case) from `-c`."""
    value = _raw(context, key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"context {key} must be true or false, got {value!r}")


def _positive_int(context: Mapping[str, Any], key: str, default: int) -> int:
    value = _raw(context, key)
    if value is None:
        return default
    if isinstance(value, bool):
        raise ConfigError(f"context {key} must be a whole number of seconds, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"context {key} must be a whole number of seconds, got {value!r}"
        ) from None
    if number <= 0 or str(number) != str(value).strip():
        raise ConfigError(f"context {key} must be a positive whole number, got {value!r}")
    return number


def _count(context: Mapping[str, Any], key: str, most: int) -> int:
    """A whole number from 0 (off, the default) to ``most``."""
    value = _raw(context, key)
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ConfigError(f"context {key} must be a whole number, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"context {key} must be a whole number, got {value!r}") from None
    if not 0 <= number <= most or str(number) != str(value).strip():
        raise ConfigError(f"context {key} must be a whole number from 0 to {most}, got {value!r}")
    return number
