"""``capacity-broker slurm check``: the Slurm configuration against AWS, before any job runs.

First what needs no network: the region is one AWS has (refused at once, with the nearest
names). Then, each call tried once with a short connect timeout (an endpoint that does not
answer is reported in seconds, not after a minute of retries): in deployed mode, the
functions exist and answer (a ``reserve`` they refuse as invalid and a ``release`` of a job
that cannot exist: nothing is created or cancelled); per node set, do the subnets exist (and
in which AZ), do the launch template and its version exist (and which version
``$Latest``/``$Default`` is now), is the template tagged for the broker's cluster (the rule the
deployed IAM enforces, docs/deploy.md), which platform its image bills as, does EC2 offer each
instance type in those AZs; then what ``reserve`` each node set would be asked. Exit codes as
the CLI's: 0 fine, 2 the file itself is wrong, 3 anything that would make every job fail.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from botocore.config import Config
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..adapters.aws import AwsError, RetryPolicy
from ..adapters.ec2 import Ec2
from ..adapters.ec2.launches import Launches
from ..client.deployed import invoke_function
from ..client.results import BrokerError
from ..domain.errors import ErrorClass
from ..domain.tags import TAG_CLUSTER_ID
from ..logic.templates import TemplateRefused, Templates
from ..root import Adapters
from .block_ends import block_ends
from .config import (
    ENV_LOG,
    ConfigError,
    NodeSet,
    SlurmConfig,
    config_path,
    load,
    unknown_instance_types,
)
from .grants import LaunchGrants
from .runtime import aws_session

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 3
# Time the look-ups of one node set's template may take (retries included).
CHECK_SECONDS = 20.0


# Each call of the check: one attempt, a short wait to connect (an endpoint that does not
# answer is a finding, not something to wait out), a reply within a function's cold start.
def quick() -> Config:
    return Config(connect_timeout=3, read_timeout=30, retries={"total_max_attempts": 1})


# A release of this job id finds nothing: no Slurm job id has letters.
PROBE_JOB = "capacity-broker-slurm-check"

app = typer.Typer(
    name="slurm",
    help="The broker as Slurm's ResumeProgram/SuspendProgram (docs/slurm.md).",
    no_args_is_help=True,
    add_completion=False,
)


class Output(StrEnum):
    table = "table"
    json = "json"


@dataclass
class NodeSetReport:
    nodeset: str
    nodes: str
    node_count: int
    subnets: dict[str, str | None] = field(default_factory=dict)  # id → AZ (None: missing)
    launch_template: dict[str, Any] = field(default_factory=dict)
    offered: dict[str, list[str]] = field(default_factory=dict)  # type → AZs offering it
    request: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # A Capacity Block node set: when its block ends and when EC2 begins stopping its
    # instances (ISO 8601, UTC), from which Slurm starts no job on its nodes (block_ends).
    block_end: str | None = None
    usable_end: str | None = None


@dataclass
class Report:
    config: str
    region: str
    mode: str
    broker: str
    nodesets: list[NodeSetReport]
    warnings: list[str] = field(default_factory=list)
    # What fails every node set's jobs (the region, the functions).
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not any(n.problems for n in self.nodesets)


class QuickSession:
    """The check's boto3 session: every client it makes tries each call once and gives up
    connecting after a few seconds (``quick()`` over the adapters' own settings)."""

    def __init__(self, session: Any) -> None:
        self._wrapped = session

    def client(self, service_name: str, *args: Any, **kwargs: Any) -> Any:
        given = kwargs.get("config")
        kwargs["config"] = quick() if given is None else given.merge(quick())
        return self._wrapped.client(service_name, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


@app.command()
def check(
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="The YAML (default: $CAPACITY_BROKER_SLURM_CONFIG, else capacity-broker.yaml "
            "beside $SLURM_CONF, else /etc/capacity-broker/slurm.yaml).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="table or json.")] = Output.table,
) -> None:
    """Validate the Slurm configuration against AWS and show what each node set requests."""
    path = config_file or config_path()
    try:
        config = load(path)
    except ConfigError as error:
        sys.stderr.write(f"{error}\n")
        raise typer.Exit(EXIT_USAGE) from None
    session = QuickSession(aws_session(config))
    adapters = Adapters(session, retry=RetryPolicy(max_attempts=1))
    report = inspect(
        config,
        adapters.ec2(config.region),
        adapters.launches(config.region),
        str(path),
        session,
    )
    if output is Output.json:
        sys.stdout.write(json.dumps(asdict(report), indent=2) + "\n")
    else:
        _print(report)
    raise typer.Exit(EXIT_OK if report.ok else EXIT_FAILED)


def inspect(
    config: SlurmConfig, ec2: Ec2, launches: Launches, source: str = "", session: Any = None
) -> Report:
    report = Report(
        config=source,
        region=config.region,
        mode=config.mode,
        broker=(
            f"functions {config.function_prefix}-reserve/-release"
            if config.function_prefix
            else f"in process, cluster id {config.cluster_id}"
        ),
        nodesets=[],
    )
    grants = None
    if config.function_prefix:
        lam = _lambda_client(config, session)
        report.problems += _functions(config, lam)
        grants = LaunchGrants(
            config.function_prefix, config.function_qualifier, config.region, session, lam
        )
    try:
        # The rule probe and reserve refuse a type by: a name EC2 does not have in the region
        # would fail every job of its node set.
        report.problems += [
            f"{where}: {what}" for where, what in unknown_instance_types(config, ec2)
        ]
    except AwsError as error:
        report.warnings.append(f"could not read the region's instance types: {error}")
    report.nodesets = [
        _nodeset(config, nodeset, ec2, launches, grants) for nodeset in config.nodesets
    ]
    if grants is not None:
        report.warnings += grants.warnings
    _block_ends(config, ec2, report)
    if not os.access(config.scontrol, os.X_OK):
        report.warnings.append(f"{config.scontrol} is not an executable here (scontrol:)")
    log = config.log_destination({k: v for k, v in os.environ.items() if k == ENV_LOG})
    if log is not None and not os.access(log if log.exists() else log.parent, os.W_OK):
        report.warnings.append(f"the log {log} is not writable here (log_file:)")
    return report


def _block_ends(config: SlurmConfig, ec2: Ec2, report: Report) -> None:
    """Each block node set's end and usable end; a block that cannot be read fails its jobs."""
    found, problems = block_ends(config, ec2)
    by_label = {n.nodeset: n for n in report.nodesets}
    for block in found:
        shown = by_label[block.nodeset]
        shown.block_end = f"{block.end:%Y-%m-%dT%H:%M:%SZ}"
        shown.usable_end = f"{block.usable_end:%Y-%m-%dT%H:%M:%SZ}"
    for problem in problems:
        label, _, why = problem.partition(": ")
        by_label[label].problems.append(f"Capacity Block: {why}")


def _lambda_client(config: SlurmConfig, session: Any) -> Callable[[], Any]:
    """The Lambda client, made on first use."""
    client: list[Any] = []

    def lam() -> Any:
        if not client:
            client.append(session.client("lambda", region_name=config.region))
        return client[0]

    return lam


def _functions(config: SlurmConfig, lam: Callable[[], Any]) -> list[str]:
    """The deployed functions exist and answer. Each is asked something it answers without
    touching EC2: ``reserve`` an empty request (``invalid_request``), ``release`` a job id no
    Slurm job has (nothing to cancel)."""
    prefix = str(config.function_prefix)
    problems = []
    for entry, event in (("reserve", {}), ("release", {"job_id": PROBE_JOB})):
        try:
            invoke_function(lam, prefix, entry, event, config.function_qualifier)
        except BrokerError as error:
            problems.append(f"{prefix}-{entry}: {error}")
    return problems


def _nodeset(
    config: SlurmConfig,
    nodeset: NodeSet,
    ec2: Ec2,
    launches: Launches,
    grants: LaunchGrants | None = None,
) -> NodeSetReport:
    members = nodeset.members()
    found = NodeSetReport(nodeset=nodeset.label, nodes=nodeset.nodes, node_count=len(members))
    template = nodeset.launch_template
    found.request = {
        "job_id": "<the Slurm job id>",
        "instance_types": list(nodeset.instance_types),
        "subnet_ids": list(nodeset.subnet_ids),
        "instance_count": f"<the job's nodes in this set, 1 to {len(members)}>",
        "launch_template": {"id": template.id, "version": template.version},
        "provision": True,
        **nodeset.platform_options(),
        **({"strict": nodeset.strict} if nodeset.strict is not None else {}),
        **(
            {"capacity_reservation_id": nodeset.capacity_reservation_id}
            if nodeset.capacity_reservation_id
            else {}
        ),
        **nodeset.capacity_options(),
        "attempt": "<the job's restart count>",
    }
    try:
        subnets = ec2.subnets(nodeset.subnet_ids)
    except AwsError as error:
        found.problems.append(f"could not look up the subnets: {error}")
        subnets = {}
    else:
        for subnet_id in nodeset.subnet_ids:
            subnet = subnets.get(subnet_id)
            found.subnets[subnet_id] = subnet.availability_zone if subnet else None
            if subnet is None:
                found.problems.append(f"subnet {subnet_id} does not exist in {config.region}")
    try:
        deadline = time.monotonic() + CHECK_SECONDS
        # The version the broker would build on ($Latest: the newest one no broker made).
        source = Templates(ec2, launches, config.cluster_id or "").source(
            template.id, template.version, deadline
        )
        # What EC2 calls the version named ("$Latest is version 4"): for $Latest the
        # template's newest version, which a broker may have made; the broker builds on
        # ``builds_on`` then (issue 42: the check said "$Latest is version 1" where EC2 says 4).
        named = source.number
        if template.version in ("$Latest", "$Default"):
            numbers = launches.launch_template(template.id, deadline)
            named = numbers.latest if template.version == "$Latest" else numbers.default
        found.launch_template = {
            "id": template.id,
            "version": template.version,
            "is": named,
        }
        if named != source.number:
            found.launch_template["builds_on"] = source.number
        _template_facts(config, template.id, source.data, ec2, launches, found)
        if grants is not None and isinstance(source.data, dict):
            # What the deployed function may launch with (deployed mode: the deploy's
            # imageParameters and instanceRoleArns; slurm/grants.py).
            grants.compare(template.id, source.data, found.problems, found.launch_template)
    except (AwsError, TemplateRefused) as error:
        found.launch_template = {"id": template.id, "version": template.version, "is": None}
        if isinstance(error, TemplateRefused) or error.code is None or error.error_class in UNREAD:
            # EC2 did not say what the version is (no answer, throttled, not allowed, or the
            # template is another cluster's): the summary says "not read", never "MISSING",
            # which would claim it does not exist.
            found.launch_template["unread"] = True
        found.problems.append(f"launch template {template.id} version {template.version}: {error}")
    zones = sorted({s.availability_zone for s in subnets.values()})
    if zones:
        try:
            offers = ec2.instance_type_offerings(nodeset.instance_types, zones)
        except AwsError as error:
            found.warnings.append(f"could not check the instance type offerings: {error}")
        else:
            for instance_type in nodeset.instance_types:
                where = sorted({zone for t, zone in offers if t == instance_type})
                found.offered[instance_type] = where
                if not where:
                    found.problems.append(
                        f"{instance_type} is offered in none of the subnets' AZs "
                        f"({', '.join(zones)})"
                    )
                elif len(where) < len(zones):
                    missing = ", ".join(z for z in zones if z not in where)
                    found.warnings.append(f"{instance_type} is not offered in {missing}")
    return found


def _template_facts(
    config: SlurmConfig,
    template_id: str,
    data: Any,
    ec2: Ec2,
    launches: Launches,
    found: NodeSetReport,
) -> None:
    """The template's cluster tag (deployed mode: direct mode's ``Templates`` refused a
    template of another cluster already) and its image's platform."""
    if not config.cluster_id:
        tags = launches.launch_template(template_id).tags
        owner = tags.get(TAG_CLUSTER_ID)
        found.launch_template["cluster_id"] = owner
        if owner is None:
            found.problems.append(
                f"launch template {template_id} is not tagged {TAG_CLUSTER_ID}: the "
                "functions' IAM lets them use only their cluster's templates (docs/deploy.md)"
            )
    image_id = data.get("ImageId") if isinstance(data, dict) else None
    if not image_id:
        found.warnings.append(f"launch template {template_id} names no image")
        return
    if str(image_id).startswith("resolve:ssm:"):
        found.launch_template["image"] = image_id
        return
    image = ec2.image(str(image_id))
    if image is None:
        found.problems.append(f"image {image_id} of {template_id} does not exist")
        return
    found.launch_template["image"] = image_id
    found.launch_template["platform"] = image.platform_details
    # Seam: a node set's instance_platform (branch real-broker) is compared here.


# Errors after which the check knows nothing of the version (not that it is missing).
UNREAD = (
    ErrorClass.THROTTLE,
    ErrorClass.RATE_BUDGET,
    ErrorClass.TRANSIENT,
    ErrorClass.PERMISSION,
)


def _version(template: dict[str, Any]) -> str:
    """The version number EC2 named, "MISSING" when EC2 said there is none, "not read" when EC2
    could not be asked."""
    if template.get("is"):
        return str(template["is"])
    return "not read" if template.get("unread") else "MISSING"


def _print(report: Report) -> None:
    console = Console()
    console.print(
        f"[bold]{escape(report.config)}[/]: region {report.region}, {report.mode} mode "
        f"({escape(report.broker)})"
    )
    table = Table(show_lines=True)
    # A node set is named by its nodes unless it has a name of its own: one column for both.
    table.add_column("nodes", no_wrap=True)
    # Each type on a line, each AZ offering it on a line of its own: names are never cut.
    table.add_column("types (AZs)", overflow="fold", min_width=12)
    # Ids stay whole at 80 columns; the other columns give way.
    table.add_column("subnets (AZ)", no_wrap=True)
    for found in report.nodesets:
        subnets = "\n".join(f"{s} {az or 'MISSING'}" for s, az in found.subnets.items())
        types = "\n".join(
            f"{t}\n" + ("\n".join(f"  {zone}" for zone in z) or "  not offered")
            for t, z in found.offered.items()
        ) or ", ".join(found.request["instance_types"])
        named = f"{found.nodeset}\n" if found.nodeset != found.nodes else ""
        table.add_row(
            escape(f"{named}{found.nodes}\n{found.node_count} nodes"),
            escape(types),
            escape(subnets or "\n".join(found.request["subnet_ids"])),
        )
    console.print(table)
    for found in report.nodesets:
        for problem in found.problems:
            console.print(f"[red]✗ {escape(found.nodeset)}: {escape(problem)}[/]")
        for warning in found.warnings:
            console.print(f"[yellow]! {escape(found.nodeset)}: {escape(warning)}[/]")
    for problem in report.problems:
        console.print(f"[red]✗ {escape(problem)}[/]")
    for warning in report.warnings:
        console.print(f"[yellow]! {escape(warning)}[/]")
    for found in report.nodesets:
        template = found.launch_template
        platform = f" ({escape(str(template['platform']))})" if template.get("platform") else ""
        builds_on = (
            f" (the broker builds on version {template['builds_on']}, the newest no broker made)"
            if template.get("builds_on")
            else ""
        )
        console.print(
            f"{escape(found.nodeset)}: launch template {template['id']} "
            f"{escape(template['version'])} is version {_version(template)}{platform}"
            f"{builds_on}; each job asks reserve {escape(json.dumps(found.request))}"
        )
        if found.usable_end:
            console.print(
                f"{escape(found.nodeset)}: Capacity Block ends {found.block_end}, usable until "
                f"{found.usable_end}: Slurm starts no job on its nodes that would run past it "
                "(a maintenance reservation from then)"
            )
    console.print("[green]ok[/]" if report.ok else "[red]the configuration would fail jobs[/]")
