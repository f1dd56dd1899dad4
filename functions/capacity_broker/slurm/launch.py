"""ResumeProgram: launch each job's nodes through the broker, all or nothing, and bind them.

Per job (a node with no job: alone), per node set in the configuration's order: one
``reserve`` with ``provision: true`` for all of the job's nodes of that set. Every answer
``provisioned`` → each node is bound to an instance (tags ``capacity-broker:slurm-node``,
``capacity-broker:slurm-cluster``, ``Name``; then ``scontrol update NodeAddr NodeHostname``).
Anything else, at any step → nothing of the job is left: its instances are terminated, its
holds released, its nodes powered down (``POWER_DOWN_FORCE``, which requeues a batch job)
with a reason starting ``capacity-broker:``, and the job is kept from starting again before
the broker's ``retry_after_seconds``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..adapters.aws import AwsError
from ..client import BrokerError
from ..domain.reserve import ReserveStatus
from ..domain.tags import TAG_NAME, TAG_REQUEST_ID
from . import plan
from .config import NodeSet
from .hostlist import fold
from .runtime import Runtime, log
from .scontrol import Job, ScontrolError

# Jobs launched at once (each is one reserve per node set); in direct mode the broker runs
# one request at a time in this process anyway.
MAX_JOBS_AT_ONCE = 4
# How long a launched instance may stay unknown to EC2's next calls (eventual consistency).
BIND_SECONDS = 60.0
LIVE = ("pending", "running")


class Failed(Exception):
    """The unit cannot run now; ``status`` names why (the broker's status when it answered)."""

    def __init__(self, status: str, detail: str, retry_after: int | None = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


@dataclass
class Attempt:
    unit: plan.Unit
    job: Job | None = None
    request_ids: list[str] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)

    @property
    def restarts(self) -> int:
        return self.job.restarts if self.job else 0


def resume(
    runtime: Runtime, nodes: Sequence[str], jobs: Sequence[tuple[int, Sequence[str]]]
) -> bool:
    """Resume ``nodes``; ``jobs`` as Slurm's resume file maps them. True when every unit
    ended as it should (launched and bound, or cleanly given back)."""
    todo = plan.units(nodes, jobs)
    log.info("resume %s: %s", fold(nodes), ", ".join(u.label for u in todo) or "nothing")
    if not todo:
        return True
    with ThreadPoolExecutor(max_workers=min(MAX_JOBS_AT_ONCE, len(todo))) as pool:
        return all(pool.map(lambda unit: _resume_unit(runtime, unit), todo))


def _resume_unit(runtime: Runtime, unit: plan.Unit) -> bool:
    attempt = Attempt(unit)
    try:
        if unit.job_id is not None:
            attempt.job = runtime.scontrol.job(unit.job_id)
        _launch(runtime, attempt)
    except Failed as failure:
        return _give_back(runtime, attempt, failure)
    except (AwsError, BrokerError, ScontrolError, ValueError) as error:
        return _give_back(runtime, attempt, Failed("error", f"{type(error).__name__}: {error}"))
    except Exception as error:  # noqa: BLE001 - nothing may leave a node half-configured
        log.exception("%s: unexpected failure", unit.label)
        return _give_back(runtime, attempt, Failed("error", f"{type(error).__name__}: {error}"))
    return True


def _launch(runtime: Runtime, attempt: Attempt) -> None:
    config = runtime.config
    unit = attempt.unit
    groups: dict[str, tuple[NodeSet, list[str]]] = {}
    strays: list[str] = []
    for node in unit.nodes:
        nodeset = config.nodeset_of(node)
        if nodeset is None:
            strays.append(node)
        else:
            groups.setdefault(nodeset.label, (nodeset, []))[1].append(node)
    if strays:
        raise Failed("unconfigured", f"no node set in the configuration has {fold(strays)}")
    # The configuration's order, so that every run of the same job asks in the same order.
    ordered = [groups[n.label] for n in config.nodesets if n.label in groups]
    for nodeset, nodes in ordered:
        _provision(runtime, attempt, nodeset, nodes)
    _bind(runtime, attempt)


def _provision(runtime: Runtime, attempt: Attempt, nodeset: NodeSet, nodes: list[str]) -> None:
    unit = attempt.unit
    if unit.job_id is None:
        earlier = _earlier_try(runtime, unit.nodes[0])
        if earlier:
            attempt.instances += earlier
            log.info("%s: already launched as %s (an earlier try)", unit.label, earlier[0])
            return
        request_id = plan.node_request_id(runtime.cluster, unit.nodes[0], f"{time.time_ns()}")
    else:
        request_id = plan.request_id(
            runtime.cluster, unit.job_id, attempt.restarts, nodeset.label, nodes
        )
    attempt.request_ids.append(request_id)
    template = nodeset.launch_template
    options: dict[str, object] = {
        "launch_template": {"id": template.id, "version": template.version},
        "provision": True,
    }
    if nodeset.strict is not None:
        options["strict"] = nodeset.strict
    if attempt.job is not None:
        options["attempt"] = attempt.restarts
    log.info(
        "%s: reserve %s (%d × %s) request %s",
        unit.label,
        fold(nodes),
        len(nodes),
        "/".join(nodeset.instance_types),
        request_id,
    )
    answer = runtime.broker.reserve(
        plan.job_tag(unit),
        nodeset.instance_types,
        nodeset.subnet_ids,
        len(nodes),
        request_id=request_id,
        **options,
    )
    attempt.instances += answer.instances
    if answer.status != ReserveStatus.PROVISIONED:
        raise Failed(str(answer.status), answer.message, answer.retry_after_seconds)
    if len(answer.instances) != len(nodes):
        raise Failed("error", f"{len(answer.instances)} instances for {len(nodes)} nodes")
    log.info("%s: %s", unit.label, answer.message)


def _earlier_try(runtime: Runtime, node: str) -> list[str]:
    """A node with no job: the live instance an earlier run launched for it, if any."""
    found = runtime.ec2.tagged_instances(
        {TAG_REQUEST_ID: [plan.node_request_prefix(runtime.cluster, node) + "*"]},
        states=LIVE,
        deadline=time.monotonic() + BIND_SECONDS,
    )
    return [i.instance_id for i in found][:1]


def _bind(runtime: Runtime, attempt: Attempt) -> None:
    """Each node gets its instance: the instance is tagged first (so SuspendProgram can
    always find what a node has), then Slurm learns the addresses, in one update."""
    nodes = list(attempt.unit.nodes)
    deadline = time.monotonic() + BIND_SECONDS
    described = runtime.ec2.describe_instances(attempt.instances, deadline)
    gone = [i for i in attempt.instances if i not in described or described[i].state not in LIVE]
    if gone:
        raise Failed("error", f"instances not running: {', '.join(gone)}")
    unaddressed = [i for i, found in described.items() if not found.private_ip]
    if unaddressed:
        raise Failed("error", f"instances without a private address: {', '.join(unaddressed)}")
    pairs = plan.pair(
        nodes, {iid: found.tags.get(plan.TAG_SLURM_NODE) for iid, found in described.items()}
    )
    for node, instance_id in pairs:
        runtime.ec2.tag_instance(
            instance_id,
            {
                plan.TAG_SLURM_NODE: node,
                plan.TAG_SLURM_CLUSTER: runtime.cluster,
                TAG_NAME: node,
            },
            deadline,
        )
    addrs = [str(described[i].private_ip) for _, i in pairs]
    hosts = [described[i].private_dns or str(described[i].private_ip) for _, i in pairs]
    runtime.scontrol.set_addresses([n for n, _ in pairs], addrs, hosts)
    log.info(
        "%s: bound %s",
        attempt.unit.label,
        ", ".join(f"{n}={i}({a})" for (n, i), a in zip(pairs, addrs, strict=True)),
    )


def _give_back(runtime: Runtime, attempt: Attempt, failure: Failed) -> bool:
    """Nothing of the unit stays (instances, holds); its nodes are powered down, which
    requeues the job.
    True when all of that was done (the failure itself is Slurm's to handle)."""
    unit = attempt.unit
    log.warning("%s: %s: %s", unit.label, failure.status, failure.detail)
    done = True
    deadline = time.monotonic() + BIND_SECONDS
    doomed = list(attempt.instances)
    if attempt.request_ids:
        # Also what a lost answer launched: the fleet tags its instances with the request id.
        try:
            tagged = runtime.ec2.tagged_instances(
                {TAG_REQUEST_ID: attempt.request_ids}, deadline=deadline
            )
            doomed += [i.instance_id for i in tagged]
        except AwsError as error:
            done = False
            log.error("%s: could not look up what its requests launched: %s", unit.label, error)
    doomed = list(dict.fromkeys(doomed))
    if doomed:
        try:
            ended = runtime.ec2.terminate_instances(doomed, deadline)
        except AwsError as error:
            ended, done = [], False
            log.error("%s: could not terminate %s: %s", unit.label, ", ".join(doomed), error)
        log.info("%s: terminated %s", unit.label, ", ".join(ended) or "nothing")
        left = sorted(set(doomed) - set(ended))
        if left:
            done = False
            log.error("%s: could not confirm termination of %s", unit.label, ", ".join(left))
    try:
        answer = runtime.broker.release(job_id=plan.job_tag(unit))
        if answer.cancelled:
            log.info("%s: released %s", unit.label, ", ".join(answer.cancelled))
    except (BrokerError, AwsError) as error:
        done = False
        log.error("%s: could not release its holds: %s", unit.label, error)
    try:
        runtime.scontrol.power_down(list(unit.nodes), plan.reason(failure.status, failure.detail))
        log.info("%s: powered down %s", unit.label, fold(unit.nodes))
    except ScontrolError as error:
        log.error("%s: could not power down %s: %s", unit.label, fold(unit.nodes), error)
        return False
    if unit.job_id is not None and failure.retry_after:
        done = _hold_back(runtime, unit.job_id, failure.retry_after) and done
    return done


def _hold_back(runtime: Runtime, job_id: int, seconds: int) -> bool:
    """The requeued job starts again no sooner than the broker said. Slurm already delays a
    requeued batch job (its BeginTime); only a later one is set."""
    try:
        job = runtime.scontrol.job(job_id)
        if job is None or not job.state.startswith("PENDING"):
            return True
        wanted = datetime.now() + timedelta(seconds=seconds)
        if job.eligible is not None and job.eligible >= wanted:
            return True
        runtime.scontrol.delay_job(job_id, seconds)
        log.info("job %s: eligible again in %d s (broker's retry_after_seconds)", job_id, seconds)
    except ScontrolError as error:
        log.error("job %s: could not delay its next try: %s", job_id, error)
        return False
    return True
