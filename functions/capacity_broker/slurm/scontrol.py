"""Slurm, through ``scontrol`` (by absolute path: slurmctld gives the programs no ``PATH``).

Slurm 22.05's scontrol has no ``--json``; ``show job -o`` and ``show node -o`` print one line
of ``Key=Value`` fields per job or node, of which only a few are read here, each by a pattern
anchored on its key (free-text fields such as ``Command=`` or ``Comment=`` may contain spaces).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from . import hostlist

# Enough for a busy slurmctld; a hung call must not hold a node half-configured forever.
TIMEOUT_SECONDS = 60
# Names per scontrol call: Slurm parses long hostlists fine, but one call's argv must stay well
# inside ARG_MAX.
_BATCH = 500
_FIELD = r"(?:^|\s){key}=(\S*)"


def _field(line: str, key: str) -> str | None:
    """The first word of ``key``'s value in a ``-o`` line (its first occurrence: free text
    that repeats a key comes later on the line)."""
    found = re.search(_FIELD.format(key=key), line)
    return found.group(1) if found else None


class ScontrolError(RuntimeError):
    """scontrol failed or could not be run; the message has its stderr."""


def duration_seconds(text: str | None) -> int | None:
    """A Slurm time limit in seconds: ``minutes``, ``minutes:seconds``,
    ``hours:minutes:seconds``, ``days-hours``, ``days-hours:minutes`` or
    ``days-hours:minutes:seconds`` (sbatch(1), ``--time``); None for ``UNLIMITED``,
    ``Partition_Limit`` and anything else that is no duration."""
    found = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", (text or "").strip())
    if not found:
        return None
    days, first, second, third = found.groups()
    if days is not None:  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if third is not None:  # hours:minutes:seconds
        return (int(first) * 60 + int(second)) * 60 + int(third)
    if second is not None:  # minutes:seconds
        return int(first) * 60 + int(second)
    return int(first) * 60  # minutes


@dataclass(frozen=True)
class Job:
    job_id: int
    state: str
    restarts: int
    nodes: list[str]
    # Slurm prints times in slurmctld's local time, without a zone.
    eligible: datetime | None
    # The first word of the job's Comment (a user's ``--comment``, or the programs' note of
    # why the job waits).
    comment: str | None = None
    # The job's time limit (``TimeLimit``) when it has one: how long its nodes will run.
    time_limit_seconds: int | None = None

    @classmethod
    def parse(cls, line: str) -> Job:
        def field(key: str) -> str | None:
            return _field(line, key)

        eligible = field("EligibleTime")
        try:
            when = datetime.fromisoformat(eligible) if eligible else None
        except ValueError:  # "Unknown", "None"
            when = None
        node_list = field("NodeList")
        return cls(
            job_id=int(field("JobId") or 0),
            state=field("JobState") or "UNKNOWN",
            restarts=int(field("Restarts") or 0),
            nodes=hostlist.expand(node_list) if node_list and node_list != "(null)" else [],
            eligible=when,
            comment=field("Comment") or None,
            time_limit_seconds=duration_seconds(field("TimeLimit")),
        )


@dataclass(frozen=True)
class Node:
    name: str
    state: str
    # Slurm's free-text Comment of the node (its first word: what the programs write is one).
    comment: str | None

    @classmethod
    def parse(cls, line: str) -> Node:
        return cls(
            name=_field(line, "NodeName") or "",
            state=_field(line, "State") or "UNKNOWN",
            comment=_field(line, "Comment") or None,
        )


class Scontrol:
    def __init__(self, path: Path, environ: Mapping[str, str] | None = None) -> None:
        self.path = path
        environ = os.environ if environ is None else environ
        # scontrol finds slurmctld through SLURM_CONF, the one variable slurmctld passes on.
        self.env = {k: environ[k] for k in ("SLURM_CONF",) if environ.get(k)}
        self._version: tuple[int, int] | None = None

    def run(self, *args: str) -> str:
        try:
            done = subprocess.run(  # noqa: S603 - an absolute path and an argument list
                [str(self.path), *args],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_SECONDS,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ScontrolError(f"{self.path} {' '.join(args)}: {error}") from None
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().replace("\n", "; ")
            raise ScontrolError(
                f"{self.path} {' '.join(args)} exited {done.returncode}: {detail[:500]}"
            )
        return done.stdout

    # -- jobs ---------------------------------------------------------------------------
    def job(self, job_id: int) -> Job | None:
        """The job, or ``None`` when slurmctld no longer knows it."""
        try:
            out = self.run("show", "job", "-o", str(job_id))
        except ScontrolError as error:
            if "Invalid job id" in str(error):
                return None
            raise
        lines = [line for line in out.splitlines() if line.strip()]
        return Job.parse(lines[0]) if lines else None

    def jobs(self) -> list[Job]:
        out = self.run("show", "job", "-o")
        return [Job.parse(line) for line in out.splitlines() if line.startswith("JobId=")]

    def delay_job(self, job_id: int, seconds: int) -> None:
        """Not eligible for ``seconds`` from now (the pending job's BeginTime; Slurm reads
        ``now+N`` on its own clock)."""
        self.run("update", f"JobId={job_id}", f"StartTime=now+{int(seconds)}")

    def hold(self, job_id: int) -> None:
        """Kept pending (``JobHeldAdmin``) until ``scontrol release``."""
        self.run("hold", str(job_id))

    def user_hold(self, job_id: int) -> None:
        """Kept pending (``JobHeldUser``) until ``scontrol release``, which the job's owner may
        run too (an administrator's hold only an administrator may release)."""
        self.run("uhold", str(job_id))

    def note_job(self, job_id: int, text: str, field: str = "Comment") -> None:
        """The job's ``Comment`` (``squeue -o %k``, ``-O Comment``; ``scontrol show job``), or
        its ``AdminComment`` (only ``scontrol show job``: 22.05's ``squeue -O AdminComment``
        prints nothing, measured). ``""`` clears it."""
        self.run("update", f"JobId={job_id}", f"{field}={text}")

    # -- nodes --------------------------------------------------------------------------
    def nodes(self, names: Sequence[str]) -> dict[str, Node]:
        """The nodes by name (a node slurmctld does not know fails the call)."""
        found: dict[str, Node] = {}
        for start in range(0, len(names), _BATCH):
            out = self.run("show", "node", "-o", ",".join(names[start : start + _BATCH]))
            for line in out.splitlines():
                if line.startswith("NodeName="):
                    node = Node.parse(line)
                    found[node.name] = node
        return found

    def node_comments(self, names: Sequence[str]) -> dict[str, str]:
        """The nodes' whole Comment (free text), from ``scontrol show node`` without ``-o``:
        there each field group is a line of its own, and the Comment's line is
        ``   Comment=<text>`` (22.05–25.11 ``slurm_sprint_node_table``), so its spaces are
        kept. Nodes without a Comment are left out."""
        found: dict[str, str] = {}
        for start in range(0, len(names), _BATCH):
            out = self.run("show", "node", ",".join(names[start : start + _BATCH]))
            node = None
            for line in out.splitlines():
                if line.startswith("NodeName="):
                    node = _field(line, "NodeName")
                elif node and line.startswith("   Comment="):
                    found[node] = line[len("   Comment=") :]
        return found

    def version(self) -> tuple[int, int]:
        """slurmctld's release as scontrol reports it (``slurm 23.11.4``): (23, 11)."""
        if self._version is None:
            found = re.search(r"(\d+)\.(\d+)", self.run("--version"))
            self._version = (int(found.group(1)), int(found.group(2))) if found else (0, 0)
        return self._version

    def bind(
        self, node: str, addr: str, host: str, comment: str, instance_id: str | None = None
    ) -> None:
        """The node's address, host name and Comment in one update: one RPC, which slurmctld
        applies under its node lock (22.05's ``update_node``: nothing between the address and
        the comment can fail), so a node never shows an instance's address without the
        record of which instance it is. From 23.11 the node's own ``InstanceId`` field is set
        in the same update (what ``sinfo``/``scontrol`` show of a cloud node); the Comment stays
        the record the programs read, since slurmctld clears InstanceId at power-off."""
        extra = [f"InstanceId={instance_id}"] if instance_id and self.version() >= (23, 11) else []
        self.run(
            "update",
            f"NodeName={node}",
            f"NodeAddr={addr}",
            f"NodeHostname={host}",
            f"Comment={comment}",
            *extra,
        )

    def power_down(self, nodes: Sequence[str], reason: str) -> None:
        """Give the nodes back now: Slurm requeues their jobs (a batch job that may be;
        POWER_DOWN_FORCE "will cancel all jobs on the node", so a job that may not be requeued
        ends NODE_FAIL, as it would when the nodes go DOWN: docs/slurm.md, section 7), runs
        SuspendProgram on them, and shows ``reason`` in sinfo/scontrol.

        Their NodeAddr is left as it is: set back to a node name that does not resolve (the
        usual case for cloud nodes), Slurm 22.05 looks the name up in the update itself,
        ten tries a second apart, holding its node lock: 10 s per node during which
        slurmctld answers nobody (measured). A powered-down node's address is never used,
        and the next resume sets it; ``SlurmctldParameters=cloud_reg_addrs`` makes Slurm
        reset it at power-off without a look-up.
        """
        for start in range(0, len(nodes), _BATCH):
            part = list(nodes[start : start + _BATCH])
            self.run(
                "update",
                f"NodeName={','.join(part)}",
                "State=POWER_DOWN_FORCE",
                f"Reason={reason}",
            )

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        """No new job is given the nodes (``sinfo -R`` lists them with ``reason``) until
        ``scontrol update NodeName=… State=RESUME``."""
        for start in range(0, len(nodes), _BATCH):
            part = list(nodes[start : start + _BATCH])
            self.run("update", f"NodeName={','.join(part)}", "State=DRAIN", f"Reason={reason}")

    def cluster_name(self) -> str:
        return self.setting("ClusterName")

    def setting(self, key: str) -> str:
        """One value of ``scontrol show config`` (e.g. ``StateSaveLocation``)."""
        out = self.run("show", "config")
        found = re.search(rf"^{re.escape(key)}\s*=\s*(\S+)", out, re.MULTILINE)
        if not found:
            raise ScontrolError(f"scontrol show config names no {key}")
        return found.group(1)
