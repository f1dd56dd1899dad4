"""The Slurm programs' configuration: one YAML file (contract, "Slurm integration").

slurmctld runs the programs with nothing but ``SLURM_CONF`` and ``SLURM_RESUME_FILE`` in the
environment (no ``PATH``, no ``HOME``), so everything they need is here: the region, direct
or deployed mode, the node sets, the absolute path of ``scontrol``, the log file, and how to
reach AWS when the head node's instance profile is not the way (credentials files of a site
outside AWS, a VPC endpoint, a local broker for tests).

Where the file is: ``$CAPACITY_BROKER_SLURM_CONFIG`` when set (a shell, a wrapper script);
else ``capacity-broker.yaml`` beside the ``slurm.conf`` slurmctld names in ``SLURM_CONF`` when
that file exists (Slurm keeps its other files there too: cgroup.conf, gres.conf, …); else
``/etc/capacity-broker/slurm.yaml``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..adapters.regions import unknown_region_message, unknown_regions
from ..domain.catalog import unknown_types
from ..models.common import (
    LAUNCH_TEMPLATE_VERSION_PATTERN,
    RESERVATION_ID_PATTERN,
    ImageId,
    InstanceTypes,
    LaunchTemplateId,
    Platform,
    Region,
    SubnetIds,
)
from ..models.reserve import PoolRef
from . import hostlist

if TYPE_CHECKING:
    from ..adapters.ec2 import Ec2

ENV_CONFIG = "CAPACITY_BROKER_SLURM_CONFIG"
ENV_LOG = "CAPACITY_BROKER_SLURM_LOG"
DEFAULT_PATH = Path("/etc/capacity-broker/slurm.yaml")
BESIDE_SLURM_CONF = "capacity-broker.yaml"
DEFAULT_SCONTROL = Path("/usr/bin/scontrol")
DEFAULT_ERROR_BUDGET = 3
_SERVICE = re.compile(r"^[a-z0-9_-]+$")


class ConfigError(Exception):
    """The file is missing, unreadable or wrong; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LaunchTemplate(_Strict):
    id: LaunchTemplateId
    version: Annotated[str, Field(pattern=LAUNCH_TEMPLATE_VERSION_PATTERN)] = "$Default"

    @field_validator("version", mode="before")
    @classmethod
    def _number_as_text(cls, value: Any) -> Any:
        # YAML reads `version: 7` as an int; EC2 and the reserve request take text.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class NodeSet(_Strict):
    """Nodes that launch alike: one ``reserve`` per job and node set."""

    nodes: str
    instance_types: InstanceTypes
    subnet_ids: SubnetIds
    launch_template: LaunchTemplate
    strict: bool | None = None
    name: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")] = None
    # Errors in a row (not capacity waits) before the node set's nodes are drained and its
    # failing jobs held (slurm/breaker.py); unset: the file's ``error_budget``. 0: never.
    error_budget: Annotated[int | None, Field(ge=0, le=1000)] = None
    # The platform the nodes' reservations are made for, as in reserve (contract v3): one of
    # EC2's CapacityReservationInstancePlatform values, or the image it is derived from; not
    # both. Neither: the broker takes the platform of the launch template's image.
    instance_platform: Platform | None = None
    image_id: ImageId | None = None
    # A Capacity Block (or ODCR) of the account the node set's jobs launch into. A block's
    # nodes are kept from jobs that could not finish before EC2 stops its instances: a Slurm
    # maintenance reservation from the block's usable end (slurm/block_ends.py).
    capacity_reservation_id: Annotated[str | None, Field(pattern=RESERVATION_ID_PATTERN)] = None
    # Issue 43: ``reserved-first`` launches a job's nodes into the cluster's reserved pool
    # first and holds only what the pool does not cover; ``pool`` names the pool for this node
    # set (``resource_groups`` and/or ``tag``, ``priority``), else the deployment's.
    capacity: Literal["hold", "reserved-first"] = "hold"
    pool: PoolRef | None = None
    # With reserved-first: launch the shortfall On-Demand when no hold of it can be made.
    allow_on_demand: bool = False

    @field_validator("nodes")
    @classmethod
    def _hostlist(cls, value: str) -> str:
        hostlist.validate(value)
        return value.strip()

    @model_validator(mode="after")
    def _one_platform_source(self) -> NodeSet:
        if self.instance_platform is not None and self.image_id is not None:
            raise ValueError("give instance_platform or image_id, not both")
        if self.capacity == "reserved-first" and self.capacity_reservation_id is not None:
            raise ValueError("capacity reserved-first uses the pool: no capacity_reservation_id")
        if self.pool is not None and self.capacity != "reserved-first":
            raise ValueError("pool is used only with capacity: reserved-first")
        if self.allow_on_demand and self.capacity != "reserved-first":
            raise ValueError("allow_on_demand is used only with capacity: reserved-first")
        return self

    def capacity_options(self) -> dict[str, object]:
        """The reserve fields of the node set's capacity ladder (none: a hold, as ever)."""
        if self.capacity != "reserved-first":
            return {}
        options: dict[str, object] = {"capacity": "reserved-first"}
        if self.pool is not None:
            options["pool"] = self.pool.model_dump(exclude_none=True)
        if self.allow_on_demand:
            options["allow_on_demand"] = True
        return options

    def platform_options(self) -> dict[str, str]:
        """The reserve fields that say the nodes' platform (none: from the template)."""
        if self.image_id is not None:
            return {"image_id": self.image_id}
        if self.instance_platform is not None:
            return {"instance_platform": self.instance_platform}
        return {}

    @property
    def label(self) -> str:
        return self.name or self.nodes

    def members(self) -> list[str]:
        return hostlist.expand(self.nodes)


class AwsAccess(_Strict):
    """How the programs reach AWS. Nothing set: the AWS SDK's defaults, which on a head node
    in EC2 means its instance profile. Each field is the SDK setting of the same name, applied
    to the programs' boto3 session (``runtime.aws_session``)."""

    profile: str | None = None
    config_file: Path | None = None
    credentials_file: Path | None = None
    # Every service (a local broker, a proxy), and/or per service by botocore's service id
    # (`ec2`, `lambda`, `ssm`, ...): e.g. interface VPC endpoints without private DNS.
    endpoint_url: Annotated[str | None, Field(pattern=r"^https?://\S+$")] = None
    endpoint_urls: dict[str, Annotated[str, Field(pattern=r"^https?://\S+$")]] = Field(
        default_factory=dict
    )

    @field_validator("config_file", "credentials_file")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_absolute():
            raise ValueError("must be an absolute path (slurmctld gives the programs no HOME)")
        return value

    @field_validator("endpoint_urls")
    @classmethod
    def _services(cls, value: dict[str, str]) -> dict[str, str]:
        for service in value:
            if not _SERVICE.match(service):
                raise ValueError(f"{service!r} is not a service id such as ec2 or lambda")
        return value


class SlurmConfig(_Strict):
    region: Region
    cluster_id: Annotated[str | None, Field(min_length=1, max_length=128)] = None
    function_prefix: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_-]{1,56}$")] = None
    # The alias (or version) to invoke: the stack's FunctionQualifier output, with SnapStart
    # or provisioned concurrency (Lambda's Invoke Qualifier: letters, digits, '-', '_').
    function_qualifier: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")] = None
    nodesets: Annotated[list[NodeSet], Field(min_length=1)]
    # Slurm's ClusterName, which scopes the instances' tags; asked of slurmctld when absent.
    slurm_cluster: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")] = None
    scontrol: Path = DEFAULT_SCONTROL
    log_file: Path | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Every node set's, unless it says its own (contract v3: default 3; 0: never drain).
    error_budget: Annotated[int, Field(ge=0, le=1000)] = DEFAULT_ERROR_BUDGET
    # Where the programs keep what must outlive one run (the breaker's counts); default:
    # ``<StateSaveLocation>/capacity-broker``, SlurmUser's own directory.
    state_dir: Path | None = None
    aws: AwsAccess = Field(default_factory=AwsAccess)

    @field_validator("scontrol", "log_file", "state_dir")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_absolute():
            raise ValueError("must be an absolute path (slurmctld gives the programs no PATH)")
        return value

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str) -> str:
        # The CLI's rule, offline: a typo would otherwise cost every job a connection time-out.
        for name, close in unknown_regions([value]).items():
            raise ValueError(unknown_region_message(name, close))
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SlurmConfig:
        if not self.cluster_id and not self.function_prefix:
            raise ValueError(
                "set cluster_id (direct mode: the broker runs in the program) or "
                "function_prefix (deployed mode: the program invokes the broker's Lambdas)"
            )
        seen: dict[str, str] = {}
        for nodeset in self.nodesets:
            for node in nodeset.members():
                if node in seen:
                    raise ValueError(
                        f"node {node} is in two node sets ({seen[node]} and {nodeset.label}): "
                        "each node launches one way"
                    )
                seen[node] = nodeset.label
        labels = [n.label for n in self.nodesets]
        if len(set(labels)) != len(labels):
            raise ValueError("node set names must be unique")
        return self

    @property
    def mode(self) -> str:
        return "deployed" if self.function_prefix else "direct"

    @cached_property
    def _index(self) -> dict[str, NodeSet]:
        return {node: nodeset for nodeset in self.nodesets for node in nodeset.members()}

    def error_budget_of(self, nodeset: NodeSet) -> int:
        return self.error_budget if nodeset.error_budget is None else nodeset.error_budget

    def nodeset_of(self, node: str) -> NodeSet | None:
        return self._index.get(node)

    def log_destination(self, env: Mapping[str, str]) -> Path | None:
        """``$CAPACITY_BROKER_SLURM_LOG`` (a shell), else ``log_file``, else none."""
        from_env = (env.get(ENV_LOG) or "").strip()
        return Path(from_env) if from_env else self.log_file


def unknown_instance_types(config: SlurmConfig, ec2: Ec2) -> list[tuple[str, str]]:
    """``(field, message)`` for each node set's instance type that EC2 does not offer in the
    configuration's region, with the nearest names it does (``ec2``: that region's adapter,
    which asks EC2's list once). The rule probe and reserve refuse a type by
    (``domain.catalog``): such a node set would fail every job. ``AwsError`` when EC2 cannot be
    asked."""
    named = [
        (f"nodesets.{i}.instance_types.{j}", name)
        for i, nodeset in enumerate(config.nodesets)
        for j, name in enumerate(nodeset.instance_types)
    ]
    return unknown_types(named, ec2.offered_types(), [config.region])


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """Which file configures this run (see the module's docstring)."""
    env = os.environ if env is None else env
    explicit = (env.get(ENV_CONFIG) or "").strip()
    if explicit:
        return Path(explicit)
    slurm_conf = (env.get("SLURM_CONF") or "").strip()
    if slurm_conf:
        beside = Path(slurm_conf).parent / BESIDE_SLURM_CONF
        if beside.is_file():
            return beside
    return DEFAULT_PATH


def load(path: Path | None = None, env: Mapping[str, str] | None = None) -> SlurmConfig:
    """Read and check the file; ``ConfigError`` says what is wrong, field by field."""
    path = path or config_path(env)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the configuration: {error.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the configuration is a mapping (region, nodesets, ...)")
    try:
        return SlurmConfig.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {_message(e)}"
            for e in error.errors(include_url=False)
        )
        raise ConfigError(f"{path}: {problems}") from None


def _message(error: Mapping[str, Any]) -> str:
    message = str(error.get("msg", ""))
    return message.removeprefix("Value error, ")
