"""Capacity Block node sets: Slurm itself starts no job that cannot finish in the block.

EC2 begins terminating a Capacity Block's instances 30 minutes before its end (60 for
UltraServer types: ``domain.blocks.reclaim_lead``). A job's own time limit guards it one job
at a time (reserve's ``runtime_seconds``), but a job without a time limit, started with ten
minutes left, would be killed by EC2. So each node set that names a Capacity Block
(``capacity_reservation_id``) gets a Slurm maintenance reservation on its nodes from the
block's usable end (its end less EC2's lead) to its end: Slurm's scheduler then starts on
those nodes only jobs whose time limit ends before it, and none without one
(``Flags=MAINT,IGNORE_JOBS``: running jobs are not refused the reservation).

The reservation is kept by every resume and suspend run (an extension of the block moves it)
and shown by ``capacity-broker slurm check``. Its name carries the block's id, so it is found
again and never confused with an operator's own.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2
from ..domain import blocks
from .config import NodeSet, SlurmConfig
from .scontrol import Scontrol, ScontrolError

PREFIX = "capacity-broker-"
LOOKUP_SECONDS = 20.0
# Slurm reads a reservation's times in slurmctld's local time, to the second.
_SLURM_TIME = "%Y-%m-%dT%H:%M:%S"


@dataclass(frozen=True)
class BlockEnd:
    """A block node set's block: when it ends and when its instances stop being usable."""

    nodeset: str
    nodes: str
    reservation_id: str
    instance_type: str
    end: datetime
    usable_end: datetime

    @property
    def reservation_name(self) -> str:
        return f"{PREFIX}{self.reservation_id}"


def block_ends(config: SlurmConfig, ec2: Ec2) -> tuple[list[BlockEnd], list[str]]:
    """Each block node set's ``BlockEnd``, and what could not be read (node set: why)."""
    found: list[BlockEnd] = []
    problems: list[str] = []
    for nodeset in config.nodesets:
        if nodeset.capacity_reservation_id is None:
            continue
        try:
            end = _block_end(nodeset, ec2)
        except (AwsError, ValueError) as error:
            problems.append(f"{nodeset.label}: {error}")
            continue
        if end is not None:
            found.append(end)
    return found, problems


def _block_end(nodeset: NodeSet, ec2: Ec2) -> BlockEnd | None:
    rid = str(nodeset.capacity_reservation_id)
    reservation = ec2.reservation(rid, time.monotonic() + LOOKUP_SECONDS)
    if reservation is None:
        raise ValueError(f"{rid} does not exist")
    if reservation.reservation_type != "capacity-block" or reservation.end_date is None:
        return None  # an ODCR without an end: nothing ends under the jobs
    end = reservation.end_date.astimezone(UTC)
    return BlockEnd(
        nodeset=nodeset.label,
        nodes=nodeset.nodes,
        reservation_id=rid,
        instance_type=reservation.instance_type,
        end=end,
        usable_end=blocks.usable_until(end, reservation.instance_type),
    )


def keep(scontrol: Scontrol, block: BlockEnd, now: datetime | None = None) -> str:
    """Create or move the block's maintenance reservation; what was done, in words."""
    now = now or datetime.now(UTC)
    start = max(block.usable_end, now + timedelta(seconds=5))
    # A reservation must end after it starts; a block already over keeps its nodes closed.
    end = max(block.end, start + timedelta(minutes=1))
    times = [f"StartTime={_local(start)}", f"EndTime={_local(end)}"]
    name = block.reservation_name
    existing = _existing(scontrol, name)
    if existing is not None:
        if existing.get("StartTime") == _local(start) and existing.get("EndTime") == _local(end):
            return f"reservation {name} in place from {_local(start)}"
        if existing.get("State") == "ACTIVE":
            # Begun already: the nodes are closed; Slurm moves no start that has passed.
            return f"reservation {name} in force since {existing.get('StartTime')}"
        scontrol.run("update", f"ReservationName={name}", *times)
        return f"moved reservation {name} to start at {_local(start)}"
    scontrol.run(
        "create",
        "reservation",
        f"ReservationName={name}",
        *times,
        f"Nodes={block.nodes}",
        "Flags=MAINT,IGNORE_JOBS",
        f"Users={_slurm_user(scontrol)}",
    )
    return f"reservation {name} on {block.nodes} from {_local(start)} (the block's usable end)"


def keep_all(config: SlurmConfig, ec2: Ec2, scontrol: Scontrol) -> list[str]:
    """Every block node set's reservation kept; the log lines (problems included)."""
    said: list[str] = []
    found, problems = block_ends(config, ec2)
    said += [f"could not read a block: {problem}" for problem in problems]
    for block in found:
        try:
            said.append(f"{block.nodeset}: {keep(scontrol, block)}")
        except ScontrolError as error:
            said.append(f"{block.nodeset}: could not keep its block's reservation: {error}")
    return said


def _existing(scontrol: Scontrol, name: str) -> dict[str, str] | None:
    """The reservation's fields (``StartTime``, ``EndTime``, ``State``…), or None."""
    try:
        out = scontrol.run("-o", "show", "reservation", name)
    except ScontrolError as error:
        if "not found" in str(error).lower():
            return None
        raise
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("ReservationName") == name:
            return fields
    return None


def _slurm_user(scontrol: Scontrol) -> str:
    """SlurmUser's name (``SlurmUser = slurm(64030)``): the reservation's one user, so no
    job of the cluster's users runs in it."""
    out = scontrol.run("show", "config")
    found = re.search(r"^SlurmUser\s*=\s*([^(\s]+)", out, re.MULTILINE)
    return found.group(1) if found else "root"


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime(_SLURM_TIME)
