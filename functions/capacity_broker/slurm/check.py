"""``capacity-broker slurm check``: the Slurm configuration against AWS, before any job runs.

Per node set: do the subnets exist (and in which AZ), do the launch template and its version
exist (and which version ``$Latest``/``$Default`` is now), does EC2 offer each instance type
in those AZs; then what ``reserve`` each node set would be asked. Exit codes as the CLI's:
0 fine, 2 the file itself is wrong, 3 a subnet, template or type would make every job fail.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2
from ..logic.templates import TemplateRefused, Templates
from ..root import Adapters
from .config import ENV_LOG, ConfigError, NodeSet, SlurmConfig, config_path, load
from .runtime import aws_session

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 3
# Time the look-ups of one node set's template may take (retries included).
CHECK_SECONDS = 60.0

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


@dataclass
class Report:
    config: str
    region: str
    mode: str
    broker: str
    nodesets: list[NodeSetReport]
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(n.problems for n in self.nodesets)


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
    adapters = Adapters(aws_session(config))
    report = inspect(config, adapters.ec2(config.region), str(path))
    if output is Output.json:
        sys.stdout.write(json.dumps(asdict(report), indent=2) + "\n")
    else:
        _print(report)
    raise typer.Exit(EXIT_OK if report.ok else EXIT_FAILED)


def inspect(config: SlurmConfig, ec2: Ec2, source: str = "") -> Report:
    report = Report(
        config=source,
        region=config.region,
        mode=config.mode,
        broker=(
            f"functions {config.function_prefix}-reserve/-release"
            if config.function_prefix
            else f"in process, cluster id {config.cluster_id}"
        ),
        nodesets=[_nodeset(config, nodeset, ec2) for nodeset in config.nodesets],
    )
    if not os.access(config.scontrol, os.X_OK):
        report.warnings.append(f"{config.scontrol} is not an executable here (scontrol:)")
    log = config.log_destination({k: v for k, v in os.environ.items() if k == ENV_LOG})
    if log is not None and not os.access(log if log.exists() else log.parent, os.W_OK):
        report.warnings.append(f"the log {log} is not writable here (log_file:)")
    return report


def _nodeset(config: SlurmConfig, nodeset: NodeSet, ec2: Ec2) -> NodeSetReport:
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
        # The version the broker would build on ($Latest: the newest one no broker made).
        source = Templates(ec2, config.cluster_id or "").source(
            template.id, template.version, time.monotonic() + CHECK_SECONDS
        )
        found.launch_template = {
            "id": template.id,
            "version": template.version,
            "is": source.number,
        }
    except (AwsError, TemplateRefused) as error:
        found.launch_template = {"id": template.id, "version": template.version, "is": None}
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
    for warning in report.warnings:
        console.print(f"[yellow]! {escape(warning)}[/]")
    for found in report.nodesets:
        template = found.launch_template
        console.print(
            f"{escape(found.nodeset)}: launch template {template['id']} "
            f"{escape(template['version'])} is version {template['is'] or 'MISSING'}; "
            f"each job asks reserve {escape(json.dumps(found.request))}"
        )
    console.print("[green]ok[/]" if report.ok else "[red]the configuration would fail jobs[/]")
