"""The Slurm integration's rules, as plain functions: which nodes launch together, under which
request id, which instance becomes which node (and how Slurm keeps it), and what Slurm is told
when it fails.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..domain.tags import TAG_REQUEST_ID
from . import hostlist

# Tags the programs put on the instances they bind (on top of the fleet's job and request id).
TAG_SLURM_NODE = "capacity-broker:slurm-node"
TAG_SLURM_CLUSTER = "capacity-broker:slurm-cluster"
# Every reason the programs give Slurm starts so (contract); operators grep for it.
REASON_PREFIX = "capacity-broker:"
# Slurm keeps reasons whole, but sinfo and scontrol lines should stay readable.
MAX_REASON = 200
# Slurm's ClusterName in request ids (``cluster_label``): kept as it is when it is made of these
# characters only, at most 40 of them.
_PLAIN_CLUSTER = re.compile(r"[A-Za-z0-9-]{1,40}")
_UNSAFE = re.compile(r"[^A-Za-z0-9-]+")
# How long EC2 may not know an instance made a moment ago ("Eventual consistency in the Amazon
# EC2 API" gives no figure; its advice to back off starts at a couple of seconds).
SETTLE_SECONDS = 60.0
# A binding younger than this whose instance EC2 says it does not know can only be EC2 lagging:
# "Terminated instances remain visible after termination (for approximately one hour)" (EC2 API
# Reference, TerminateInstances). Older, the instance may be gone for good: nobody waits for it.
FRESH_BINDING = timedelta(minutes=15)
_BINDING = re.compile(
    r"^capacity-broker:instance=(?P<instance>i-[0-9a-f]{8,32}),"
    r"bound=(?P<bound>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$"
)


# Slurm job ids are 32-bit: "The job id is a 32 bit field with the first 26 bits for the local
# job id and the remaining 6 bits reserved for a cluster id" (slurm.conf, MaxJobId); 0xfffffffe
# and 0xffffffff are Slurm's NO_VAL and INFINITE, never a job's.
MAX_JOB_ID = 0xFFFFFFFD


class ResumeFileError(ValueError):
    """SLURM_RESUME_FILE is not the JSON Slurm writes."""


@dataclass(frozen=True)
class Unit:
    """Nodes Slurm resumes together: a job's (``job_id``), or one node with no job."""

    job_id: int | None
    nodes: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"job {self.job_id}" if self.job_id is not None else f"node {self.nodes[0]}"


@dataclass(frozen=True)
class BadEntry:
    """A job entry of the resume file that cannot be used: why, and the nodes it names when
    they can be known (``None``: its node list itself is not sound)."""

    position: int  # 1-based, in the file's "jobs"
    why: str
    nodes: tuple[str, ...] | None

    @property
    def label(self) -> str:
        return f"SLURM_RESUME_FILE job entry {self.position}"


@dataclass(frozen=True)
class ResumeFile:
    """What the resume file says: each sound job entry's (job id, nodes), the entries that
    are not sound, and ``all_nodes`` (``None`` when absent or not sound)."""

    jobs: list[tuple[int, list[str]]]
    bad: list[BadEntry]
    all_nodes: list[str] | None


def read_resume_file(text: str) -> ResumeFile:
    """Slurm's resume file, read entry by entry: one entry that is not sound (a node list that
    is not a hostlist, a ``job_id`` that is not a positive integer, wrong types) is reported in
    ``bad`` and affects no other entry. ``ResumeFileError`` only when the file as a whole is
    not Slurm's (not JSON, not an object, ``jobs`` not a list).

    The shape, as SchedMD documents it (https://slurm.schedmd.com/power_save.html,
    ResumeProgram, "SLURM_RESUME_FILE"): ``{"all_nodes_resume": "cloud[1-3,7-8]", "jobs":
    [{"job_id": 140814, "nodes_alloc": "cloud[1-4]", "nodes_resume": "cloud[1-3]", "extra":
    …, "features": …, "oversubscribe": …, "partition": …, "reservation": …}, …]}``: ``job_id``
    a JSON number, node lists Slurm hostlist expressions. Slurm 22.05 names the node lists
    ``nodes`` and ``all_nodes``: both spellings are read.
    """
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ResumeFileError(f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ResumeFileError("not a JSON object")
    entries = data.get("jobs")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise ResumeFileError(f'"jobs" is not a list: {entries!r:.100}')
    jobs: list[tuple[int, list[str]]] = []
    bad: list[BadEntry] = []
    for position, entry in enumerate(entries, start=1):
        read = _entry(position, entry)
        if isinstance(read, BadEntry):
            bad.append(read)
        else:
            jobs.append(read)
    try:
        all_nodes: list[str] | None = _hostlist(
            data.get("all_nodes_resume", data.get("all_nodes")) or ""
        )
    except ValueError:
        all_nodes = None  # nothing depends on it: the program's argument names the nodes
    return ResumeFile(jobs, bad, all_nodes)


def _hostlist(value: object) -> list[str]:
    if not isinstance(value, str):
        raise ValueError(f"a node list that is not a string: {value!r:.80}")
    try:
        return hostlist.expand(value)
    except hostlist.HostlistError as error:
        raise ValueError(str(error)) from None


def _entry(position: int, entry: object) -> tuple[int, list[str]] | BadEntry:
    """(job id, nodes) of a sound entry; else what is wrong, with its nodes if known."""
    if not isinstance(entry, dict):
        return BadEntry(position, f"not a JSON object: {entry!r:.80}", None)
    problems: list[str] = []
    nodes: list[str] | None = None
    try:
        nodes = _hostlist(entry.get("nodes_resume", entry.get("nodes")) or "")
    except ValueError as error:
        problems.append(f"nodes: {error}")
    job_id = entry.get("job_id")
    # A JSON true is a Python bool, and a bool is an int: refused, as any non-integer.
    if isinstance(job_id, bool) or not isinstance(job_id, int) or not 1 <= job_id <= MAX_JOB_ID:
        problems.insert(0, f"job_id {json.dumps(job_id)[:40]} is not a positive integer")
    if problems or nodes is None or not isinstance(job_id, int):
        return BadEntry(position, "; ".join(problems), None if nodes is None else tuple(nodes))
    return job_id, nodes


def unusable(resumed: Sequence[str], resume: ResumeFile) -> list[tuple[BadEntry, list[str]]]:
    """The nodes being resumed that a bad entry of the resume file may be for, and are not
    any sound entry's: (the entry, its nodes). Such nodes are not launched (their job is not
    known for sure) but powered down, so that Slurm requeues whatever job they were for. A
    bad entry whose nodes are known claims only those; one whose nodes cannot be known claims
    every resumed node no sound entry names (it may be any of them). A sound entry's nodes
    are never claimed: another job's launch is never affected."""
    sound = {node for _, nodes in resume.jobs for node in nodes}
    free = [node for node in dict.fromkeys(resumed) if node not in sound]
    found: list[tuple[BadEntry, list[str]]] = []
    for entry in resume.bad:
        if entry.nodes is not None:
            mine = [n for n in free if n in set(entry.nodes)]
            if mine:
                found.append((entry, mine))
                free = [n for n in free if n not in set(mine)]
    unknown = [entry for entry in resume.bad if entry.nodes is None]
    if unknown and free:
        found.append((unknown[0], free))
    return found


def units(resumed: Sequence[str], jobs: Iterable[tuple[int, Sequence[str]]]) -> list[Unit]:
    """What launches together: each job's nodes among those being resumed, then every
    resumed node no job claimed, alone. A node two jobs share (Slurm lists it for both)
    launches once, with the first job."""
    wanted = set(resumed)
    claimed: set[str] = set()
    found: list[Unit] = []
    for job_id, nodes in jobs:
        mine = [n for n in dict.fromkeys(nodes) if n in wanted and n not in claimed]
        if mine:
            claimed.update(mine)
            found.append(Unit(job_id, tuple(mine)))
    found += [Unit(None, (node,)) for node in resumed if node not in claimed]
    return found


def request_id(cluster: str, job_id: int, restarts: int, nodeset: str, nodes: Sequence[str]) -> str:
    """The reserve request id of a job's nodes of one node set.

    The same job, run, node set and nodes give the same id, so a re-run of the resume program
    (slurmctld restarted, an operator) finds the launch already made instead of launching
    twice. A requeued job's next try (Slurm raised its restart count) gets a new id, so it
    launches afresh rather than being handed the failed try's answer. The digest keeps the
    id within the broker's 128 characters whatever the node names.
    """
    digest = _digest(cluster, str(job_id), str(restarts), nodeset, *sorted(nodes))
    return f"{_prefix(cluster)}.job-{job_id}.r{restarts}.{digest}"


def node_request_id(cluster: str, node: str, moment: str) -> str:
    """The reserve request id of a node resumed with no job (``scontrol update
    State=POWER_UP``). Nothing in Slurm tells one such power-up from the next, so the id is
    unique per try (``moment``), and ``node_request_prefix`` finds an earlier try's
    instance before a re-run launches another."""
    return f"{node_request_prefix(cluster, node)}{moment}"


def node_request_prefix(cluster: str, node: str) -> str:
    return f"{_prefix(cluster)}.node.{_digest(cluster, node)}."


def job_tag(unit: Unit) -> str:
    """The broker's ``job_id`` for a unit: the Slurm job id, or the node's own name."""
    return str(unit.job_id) if unit.job_id is not None else f"slurm-node-{unit.nodes[0]}"[:128]


def cluster_label(cluster: str) -> str:
    """Slurm's ClusterName as every request id of its programs carries it, after ``slurm.``
    and before a ``.``: the name itself when it is 1-40 letters, digits and hyphens, else its
    first 23 characters so (others as ``-``), ``_`` and a digest of the whole name.

    Neither form holds a ``.``, so the ``.`` after it ends it: the request ids of cluster
    ``prod.x`` (``slurm.prod-x_….``) never start with ``slurm.prod.``, the head node IAM's
    pattern of cluster ``prod`` (docs/slurm.md); and only the digest form holds a ``_``, so two
    names never share a label (``prod.x`` and ``prod-x`` used to share ``prod-x``, and names
    past 40 characters their first 40)."""
    if _PLAIN_CLUSTER.fullmatch(cluster):
        return cluster
    return f"{_UNSAFE.sub('-', cluster)[:23]}_{_digest('cluster', cluster)}"


def _prefix(cluster: str) -> str:
    return f"slurm.{cluster_label(cluster)}"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def owns(cluster: str, tags: Mapping[str, str]) -> bool:
    """Whether the programs of this Slurm cluster launched the instance: the fleet tags each
    instance with its request id when it launches it, and every request id they make starts
    ``slurm.<ClusterName>.`` (what the head node's IAM lets them terminate)."""
    return tags.get(TAG_REQUEST_ID, "").startswith(f"{_prefix(cluster)}.")


@dataclass(frozen=True)
class Binding:
    """What a node's Slurm ``Comment`` says it was bound to: which instance, since when."""

    instance_id: str
    bound: datetime

    def text(self) -> str:
        """The binding: one word, the first of the node's Comment (``scontrol show node -o``
        prints the Comment as is; its first word is read back)."""
        return f"{REASON_PREFIX}instance={self.instance_id},bound={self.bound:%Y-%m-%dT%H:%M:%SZ}"

    def comment(self, current: str | None) -> str:
        """The node's Comment with this binding: the binding first, then whatever else the
        Comment said (an operator's note is kept; an older binding is replaced)."""
        first, _, after = (current or "").strip().partition(" ")
        rest = (after if _BINDING.match(first) else f"{first} {after}").strip()
        return f"{self.text()} {rest}" if rest else self.text()

    def fresh(self, now: datetime) -> bool:
        """Made so recently that EC2 not knowing its instance means EC2 lags, not "gone"."""
        return now - self.bound < FRESH_BINDING

    @classmethod
    def read(cls, comment: str | None) -> Binding | None:
        """The binding a Comment records; ``None`` for anything else (an operator's note)."""
        found = _BINDING.match(comment or "")
        if found is None:
            return None
        bound = datetime.strptime(found["bound"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        return cls(found["instance"], bound)


def pair(nodes: Sequence[str], instances: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """Node ↔ instance. ``instances`` maps each instance id to the node it is already tagged
    with (a re-run keeps the binding it made); the others are matched in order. Requires as
    many instances as nodes."""
    if len(nodes) != len(instances):
        raise ValueError(f"{len(instances)} instances for {len(nodes)} nodes")
    bound = {node: iid for iid, node in sorted(instances.items()) if node in set(nodes)}
    free_instances = iter(sorted(i for i in instances if i not in bound.values()))
    return [(node, bound.get(node) or next(free_instances)) for node in nodes]


def reason(status: str, detail: str = "", undo: str = "") -> str:
    """``capacity-broker: no_capacity: …``: the status first, then why, on one line; ``undo``
    (the command that undoes what the programs did) ends it and is never cut."""
    tail = f"; to undo: {' '.join(undo.split())}" if undo else ""
    text = " ".join((f"{REASON_PREFIX} {status}" + (f": {detail}" if detail else "")).split())
    return text[: max(MAX_REASON - len(tail), len(REASON_PREFIX) + 1)] + tail
