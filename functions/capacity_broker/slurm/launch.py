"""ResumeProgram: launch each job's nodes through the broker, all or nothing, and bind them.

Per job (a node with no job: alone), per node set in the configuration's order: one
``reserve`` with ``provision: true`` for all of the job's nodes of that set. Every answer
``provisioned`` → each node is bound to an instance (tags ``capacity-broker:slurm-node``,
``capacity-broker:slurm-cluster``, ``Name``; then one ``scontrol update`` per node with its
``NodeAddr``, ``NodeHostname`` and the binding in its ``Comment``, the record SuspendProgram
trusts). Anything else, at any step → nothing of the job is left: its instances are
terminated, its holds released, its nodes powered down (``POWER_DOWN_FORCE``, which requeues a
batch job that may be requeued and ends any other) with a reason starting ``capacity-broker:``,
and the job is kept from starting again
before the broker's ``retry_after_seconds``.

EC2 is eventually consistent: an instance made a moment ago may be missing from a
tag-filtered listing, and unknown by id to the next calls. So what this program launched is
known from the broker's answers and asked of EC2 by id (asked again while EC2 does not know
it); a listing is only a second source, waited on only where there is evidence (an answer
that was lost).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ..adapters.aws import AwsError
from ..adapters.ec2 import Prefix
from ..client import BrokerError, InvalidArguments, InvokeFailed
from ..domain.reserve import ReserveStatus
from ..domain.tags import TAG_NAME, TAG_REQUEST_ID
from . import breaker, plan
from .config import NodeSet
from .hostlist import fold
from .runtime import Runtime, log
from .scontrol import Job, ScontrolError

# Jobs launched at once (each is one reserve per node set). In direct mode they run in this
# process, side by side on the broker's one root (one session, one EC2 pacer): this bounds how
# many EC2 races the program starts at once, as the function's concurrency would when deployed.
MAX_JOBS_AT_ONCE = 4
LIVE = ("pending", "running")
# A reserve whose answer was lost may have launched (the fleet tags its instances with the
# request id); a listing may not show them yet, so it is asked again for this long.
LOST_ANSWER_SECONDS = 12.0
# Node states that say Slurm gave the node up while it was being launched (an operator's
# POWER_DOWN_FORCE): its SuspendProgram may have run before the node's binding existed.
GIVEN_UP = ("POWERING_DOWN", "POWERED_DOWN")
# Job states in which a job still holds the nodes it was given. A job cancelled while its
# nodes power up is CANCELLED at once, and Slurm leaves its nodes powering up (``idle#``)
# until ResumeTimeout, running no program on them (measured, 22.05.8): the resume program
# ends them itself.
HOLDING = ("CONFIGURING", "RUNNING", "SUSPENDED")
# Beyond SuspendTimeout, how long a tripping program waits for its nodes' power-down to end.
POWER_DOWN_SLACK = 30.0


class Failed(Exception):
    """The unit cannot run now; ``status`` names why (the broker's status when it answered)."""

    def __init__(
        self,
        status: str,
        detail: str,
        retry_after: int | None = None,
        passing: bool = False,
        code: str | None = None,
    ) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.retry_after = retry_after
        # Throttled, a server fault, no answer: not counted by the breaker (breaker.passing).
        self.passing = passing
        # The broker's error code, when it answered one.
        self.code = code

    @property
    def own(self) -> breaker.Own | None:
        """The job's own error (``breaker.own``): never counted against its node set."""
        return breaker.own(self.status, self.code, self.detail)


@dataclass
class Attempt:
    unit: plan.Unit
    job: Job | None = None
    request_ids: list[str] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)
    # Requests whose answer never came (an error or a timeout while reserving).
    lost: list[str] = field(default_factory=list)
    # The node set being asked for when the launch failed (the breaker counts its errors).
    nodeset: NodeSet | None = None

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
            if not _holds_nodes(attempt.job):
                return _job_gone(runtime, attempt)
        return _launch(runtime, attempt)
    except Failed as failure:
        return _give_back(runtime, attempt, failure)
    except (AwsError, BrokerError, ScontrolError, ValueError) as error:
        code = getattr(error, "code", None)
        transient = isinstance(error, (AwsError, InvokeFailed)) and breaker.passing(
            code, answered=code is not None
        )
        failed = Failed("error", f"{type(error).__name__}: {error}", passing=transient)
        return _give_back(runtime, attempt, failed)
    except Exception as error:  # noqa: BLE001 - nothing may leave a node half-configured
        log.exception("%s: unexpected failure", unit.label)
        return _give_back(runtime, attempt, Failed("error", f"{type(error).__name__}: {error}"))


def _launch(runtime: Runtime, attempt: Attempt) -> bool:
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
    return _bind(runtime, attempt)


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
    attempt.nodeset = nodeset
    template = nodeset.launch_template
    options: dict[str, object] = {
        "launch_template": {"id": template.id, "version": template.version},
        "provision": True,
        **nodeset.platform_options(),
        **nodeset.capacity_options(),
    }
    if nodeset.strict is not None:
        options["strict"] = nodeset.strict
    if nodeset.capacity_reservation_id is not None:
        options["capacity_reservation_id"] = nodeset.capacity_reservation_id
    if attempt.job is not None:
        options["attempt"] = attempt.restarts
        if attempt.job.time_limit_seconds is not None:
            # A Capacity Block is used only if the job can finish before EC2 stops its
            # instances (contract v3, "Capacity Blocks near their end").
            options["runtime_seconds"] = attempt.job.time_limit_seconds
    log.info(
        "%s: reserve %s (%d × %s) request %s",
        unit.label,
        fold(nodes),
        len(nodes),
        "/".join(nodeset.instance_types),
        request_id,
    )
    try:
        answer = runtime.broker.reserve(
            plan.job_tag(unit),
            nodeset.instance_types,
            nodeset.subnet_ids,
            len(nodes),
            request_id=request_id,
            **options,
        )
    except InvalidArguments:
        raise  # refused before anything was done
    except Exception:
        attempt.lost.append(request_id)
        raise
    attempt.instances += answer.instances
    transient = breaker.passing(answer.error_code)
    if not transient and not breaker.counts(str(answer.status)):
        _worked(runtime, nodeset)
    if answer.status != ReserveStatus.PROVISIONED:
        raise Failed(
            str(answer.status),
            answer.message,
            answer.retry_after_seconds,
            transient,
            answer.error_code,
        )
    attempt.nodeset = None
    if len(answer.instances) != len(nodes):
        raise Failed("error", f"{len(answer.instances)} instances for {len(nodes)} nodes")
    log.info("%s: %s", unit.label, answer.message)


def _worked(runtime: Runtime, nodeset: NodeSet) -> None:
    """The broker answered about capacity: the node set's run of errors is over."""
    try:
        runtime.breaker.worked(nodeset.label)
    except (OSError, ScontrolError) as error:
        log.error("%s: could not reset its error count: %s", nodeset.label, error)


def _earlier_try(runtime: Runtime, node: str) -> list[str]:
    """A node with no job: the live instance an earlier run launched for it, if any. Slurm's
    record of the node first (its instance asked of EC2 by id); then the instances tagged
    with the node's request prefix, for a run that launched and did not get to bind."""
    prefix = plan.node_request_prefix(runtime.cluster, node)
    deadline = time.monotonic() + plan.SETTLE_SECONDS
    binding = runtime.bindings([node]).get(node)
    if binding is not None:
        fresh = [binding.instance_id] if binding.fresh(datetime.now(UTC)) else []
        known = runtime.ec2.known_instances([binding.instance_id], deadline, wait_for=fresh)
        instance = known.get(binding.instance_id)
        if instance is None and fresh:
            # It was launched a moment ago and EC2 does not show it yet: never a second one.
            raise Failed("error", f"{node} is bound to {binding.instance_id}, unknown to EC2")
        if (
            instance is not None
            and instance.state in LIVE
            and instance.tags.get(TAG_REQUEST_ID, "").startswith(prefix)
        ):
            return [instance.instance_id]
    found = runtime.ec2.tagged_instances(
        {TAG_REQUEST_ID: [Prefix(prefix)]}, states=LIVE, deadline=deadline
    )
    return [i.instance_id for i in found][:1]


def _bind(runtime: Runtime, attempt: Attempt) -> bool:
    """Each node gets its instance: the instance is tagged first (SuspendProgram's second
    source), then one update per node gives Slurm its address and the binding (the first).
    False when an instance of a node Slurm gave up meanwhile could not be ended."""
    nodes = list(attempt.unit.nodes)
    deadline = time.monotonic() + plan.SETTLE_SECONDS
    described = runtime.ec2.known_instances(attempt.instances, deadline, wait_for=attempt.instances)
    gone = [i for i in attempt.instances if i not in described or described[i].state not in LIVE]
    if gone:
        raise Failed("error", f"instances not running: {', '.join(gone)}")
    unaddressed = [i for i, found in described.items() if not found.private_ip]
    if unaddressed:
        raise Failed("error", f"instances without a private address: {', '.join(unaddressed)}")
    # A re-run keeps the pairs made before: Slurm's record, else the instance's tag.
    recorded = {b.instance_id: node for node, b in runtime.bindings(nodes).items()}
    pairs = plan.pair(
        nodes,
        {
            iid: recorded.get(iid) or found.tags.get(plan.TAG_SLURM_NODE)
            for iid, found in described.items()
        },
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
    now = datetime.now(UTC)
    # What the nodes' Comment says now: an operator's note there is kept beside the binding.
    comments = runtime.scontrol.node_comments([n for n, _ in pairs])
    for node, instance_id in pairs:
        found = described[instance_id]
        runtime.scontrol.bind(
            node,
            str(found.private_ip),
            found.private_dns or str(found.private_ip),
            plan.Binding(instance_id, now).comment(comments.get(node)),
            instance_id,
        )
    log.info(
        "%s: bound %s",
        attempt.unit.label,
        ", ".join(f"{n}={i}({described[i].private_ip})" for n, i in pairs),
    )
    job = attempt.job
    if job is not None and (job.comment or "").startswith(plan.REASON_PREFIX):
        # The note of an earlier wait: the job is not waiting for the broker any more.
        _note(runtime, job, "")
    return _given_up(runtime, attempt, pairs)


def _holds_nodes(job: Job | None) -> bool:
    return job is not None and job.state.startswith(HOLDING)


def _free(runtime: Runtime, job_id: int | None, nodes: Sequence[str]) -> list[str]:
    """Those of ``nodes`` no other live job holds (Slurm may give a powering-up node of an
    ended job to the next job: that job keeps it)."""
    taken = {
        node
        for job in runtime.scontrol.jobs()
        if job.job_id != job_id and _holds_nodes(job)
        for node in job.nodes
    }
    return [node for node in nodes if node not in taken]


def _job_gone(runtime: Runtime, attempt: Attempt) -> bool:
    """The job ended (``scancel``) before its nodes were launched: nothing is launched, and
    its nodes no other job took are powered down at once rather than left powering up
    until ResumeTimeout."""
    unit = attempt.unit
    state = attempt.job.state if attempt.job is not None else "gone"
    nodes = _free(runtime, unit.job_id, unit.nodes)
    log.info("%s: ended (%s) before its nodes launched: nothing launched", unit.label, state)
    if not nodes:
        return True
    try:
        runtime.scontrol.power_down(nodes, plan.reason("cancelled", f"{unit.label} {state}"))
        log.info("%s: powered down %s", unit.label, fold(nodes))
    except ScontrolError as error:
        log.error("%s: could not power down %s: %s", unit.label, fold(nodes), error)
        return False
    return True


def _given_up(runtime: Runtime, attempt: Attempt, pairs: list[tuple[str, str]]) -> bool:
    """Nodes Slurm no longer wants from this launch, whose instances are ended here:
    - powered down while they were being launched (an operator's POWER_DOWN_FORCE): their
      SuspendProgram may have run before their binding existed and found nothing;
    - of a job that ended meanwhile (``scancel`` of a CONFIGURING job): Slurm runs no program
      on them and would keep them until ResumeTimeout; they are also powered down, so Slurm
      takes them back at once. A node another job took meanwhile is kept for it.
    The other nodes stay bound: Slurm gives them back as it does any idle node."""
    label = attempt.unit.label
    job_id = attempt.unit.job_id
    try:
        states = runtime.scontrol.nodes([n for n, _ in pairs])
        orphaned: list[str] = []
        if job_id is not None:
            job = runtime.scontrol.job(job_id)
            if not _holds_nodes(job):
                state = job.state if job is not None else "gone"
                log.warning("%s: ended (%s) while its nodes launched", label, state)
                orphaned = _free(runtime, job_id, [n for n, _ in pairs])
    except ScontrolError as error:
        log.error("%s: could not check that Slurm still wants its nodes: %s", label, error)
        return False
    given_up = {
        node
        for node, _ in pairs
        if node in states and any(flag in states[node].state for flag in GIVEN_UP)
    }
    # Nodes Slurm is powering down already need no power-down of their own.
    orphaned = [node for node in orphaned if node not in given_up]
    abandoned = [(node, iid) for node, iid in pairs if node in given_up or node in orphaned]
    if not abandoned:
        return True
    ids = [iid for _, iid in abandoned]
    try:
        ended = runtime.ec2.terminate_instances(
            ids, time.monotonic() + plan.SETTLE_SECONDS, wait_for=ids
        )
    except AwsError as error:
        log.error("%s: could not terminate %s: %s", label, ", ".join(ids), error)
        return False
    log.warning(
        "%s: Slurm %s %s while it launched: terminated %s",
        label,
        "gave up" if orphaned else "powered down",
        fold([n for n, _ in abandoned]),
        ", ".join(ended) or "nothing",
    )
    left = sorted(set(ids) - set(ended))
    if left:
        log.error("%s: termination not confirmed for %s", label, ", ".join(left))
    if orphaned:
        # Else Slurm keeps them powering up until ResumeTimeout, counting them as busy.
        try:
            runtime.scontrol.power_down(orphaned, plan.reason("cancelled", f"{label} ended"))
            log.info("%s: powered down %s", label, fold(orphaned))
        except ScontrolError as error:
            log.error("%s: could not power down %s: %s", label, fold(orphaned), error)
            return False
    return not left


def _give_back(runtime: Runtime, attempt: Attempt, failure: Failed) -> bool:
    """Nothing of the unit stays (instances, holds); its nodes are powered down, which
    requeues the job.
    True when all of that was done (the failure itself is Slurm's to handle)."""
    unit = attempt.unit
    log.warning("%s: %s: %s", unit.label, failure.status, failure.detail)
    done = True
    deadline = time.monotonic() + plan.SETTLE_SECONDS
    doomed = list(attempt.instances)
    if attempt.request_ids:
        # Also what a lost answer launched: the fleet tags its instances with the request id.
        try:
            doomed += _launched_by(runtime, attempt)
        except AwsError as error:
            done = False
            log.error("%s: could not look up what its requests launched: %s", unit.label, error)
    doomed = list(dict.fromkeys(doomed))
    if doomed:
        try:
            # The answers' instances were made a moment ago: EC2 may not know them yet.
            ended = runtime.ec2.terminate_instances(doomed, deadline, wait_for=attempt.instances)
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
    why = plan.reason(failure.status, failure.detail)
    try:
        runtime.scontrol.power_down(list(unit.nodes), why)
        log.info("%s: powered down %s", unit.label, fold(unit.nodes))
    except ScontrolError as error:
        log.error("%s: could not power down %s: %s", unit.label, fold(unit.nodes), error)
        return False
    nodeset = attempt.nodeset
    own = failure.own
    if own is not None:
        log.warning("%s: %s: not counted against its node set", unit.label, own.why)
    elif nodeset is not None and breaker.counts(failure.status, failure.passing):
        tripped = _count_error(runtime, nodeset, failure)
        if tripped is not None:
            return _trip(runtime, attempt, nodeset, tripped, failure) and done
    if unit.job_id is not None:
        if own is not None and own.hold:
            return _hold_own(runtime, unit.job_id, attempt.job, own, failure) and done
        # Where users look (squeue, scontrol show job): the node's reason is the admins'.
        _note(runtime, attempt.job, why)
        if failure.retry_after:
            done = _hold_back(runtime, unit.job_id, failure.retry_after) and done
    return done


def _hold_own(
    runtime: Runtime, job_id: int, before: Job | None, own: breaker.Own, failure: Failed
) -> bool:
    """A job whose own request cannot succeed as it is (its count over the quota, its time
    limit past its block) waits held, alone: requeued, it would be refused again every couple
    of minutes. A user hold (``JobHeldUser``), so its owner can change the job
    (``scontrol update JobId=… NumNodes=…``/``TimeLimit=…``) and release it without an
    administrator; the note says why and how."""
    status = f"held, {failure.code or failure.status}"
    undo = f"scontrol release {job_id}"
    # The note first: any update of a job resets its Reason, and a hold's must stay.
    _note(runtime, before, plan.reason(status, f"{own.why}: {failure.detail}", undo))
    try:
        job = runtime.scontrol.job(job_id)
        if job is not None and job.state.startswith("PENDING"):
            runtime.scontrol.user_hold(job_id)
            log.warning("job %s: held (%s)", job_id, own.why)
    except ScontrolError as error:
        log.error("job %s: could not hold it: %s", job_id, error)
        return False
    return True


def _count_error(runtime: Runtime, nodeset: NodeSet, failure: Failed) -> breaker.Count | None:
    """One more error in a row for the node set; the count when it reached its budget."""
    budget = runtime.config.error_budget_of(nodeset)
    try:
        count = runtime.breaker.failed(nodeset.label, f"{failure.status}: {failure.detail}")
    except (OSError, ScontrolError) as error:
        log.error("%s: could not count its error: %s", nodeset.label, error)
        return None
    log.warning("%s: %d error(s) in a row (error_budget %d)", nodeset.label, count.errors, budget)
    return count if count.tripped(budget) else None


def _trip(
    runtime: Runtime, attempt: Attempt, nodeset: NodeSet, count: breaker.Count, failure: Failed
) -> bool:
    """The node set keeps failing for a reason no wait will cure: its nodes are drained (no
    new job is given them) and the job is held rather than requeued forever. Each says what
    went wrong and the command that undoes it, once the cause is fixed."""
    status = f"{count.errors} errors in a row, {failure.status}"
    undo_nodes = f"scontrol update NodeName={nodeset.nodes} State=RESUME"
    done = True
    drain = plan.reason(status, failure.detail, undo_nodes)
    try:
        runtime.scontrol.drain(nodeset.members(), drain)
        log.error("%s: drained %s after %s", nodeset.label, nodeset.nodes, status)
    except ScontrolError as error:
        done = False
        log.error("%s: could not drain %s: %s", nodeset.label, nodeset.nodes, error)
    unit = attempt.unit
    if unit.job_id is not None:
        held = f"held, {status}"
        done = _hold(runtime, unit.job_id, attempt.job, held, failure, undo_nodes) and done
    members = set(nodeset.members())
    mine = [n for n in unit.nodes if n in members]
    return _drain_once_powered_down(runtime, mine, drain) and done


def _hold(
    runtime: Runtime, job_id: int, before: Job | None, status: str, failure: Failed, undo: str
) -> bool:
    """The job waits held (``JobHeldAdmin``) rather than requeued again and again."""
    # The note first: any update of a job resets its Reason, and a hold's must stay.
    undo_job = f"{undo}; scontrol release {job_id}"
    _note(runtime, before, plan.reason(status, failure.detail, undo_job))
    try:
        job = runtime.scontrol.job(job_id)
        if job is not None and job.state.startswith("PENDING"):
            runtime.scontrol.hold(job_id)
            log.error("job %s: held (its node set is drained)", job_id)
    except ScontrolError as error:
        log.error("job %s: could not hold it: %s", job_id, error)
        return False
    return True


def _drain_once_powered_down(runtime: Runtime, nodes: list[str], reason: str) -> bool:
    """Slurm drains a node for the length of a ``POWER_DOWN_FORCE`` and clears DRAIN when
    the power-down ends (22.05, measured: a drain set meanwhile is lost with it). The nodes
    the program just powered down are therefore drained again once they are powered down,
    within SuspendTimeout."""
    try:
        patience = float(runtime.scontrol.setting("SuspendTimeout")) + POWER_DOWN_SLACK
    except (ScontrolError, ValueError):
        patience = POWER_DOWN_SLACK
    deadline = time.monotonic() + patience
    try:
        while True:
            states = runtime.scontrol.nodes(nodes)
            if all("POWERED_DOWN" in states[n].state for n in nodes if n in states):
                break
            if time.monotonic() > deadline:
                log.error("%s: not powered down after %.0f s", fold(nodes), patience)
                return False
            time.sleep(1.0)
        undrained = [n for n in nodes if n in states and "DRAIN" not in states[n].state]
        if undrained:
            runtime.scontrol.drain(undrained, reason)
            log.info("drained %s again once powered down", fold(undrained))
    except ScontrolError as error:
        log.error("could not drain %s: %s", fold(nodes), error)
        return False
    return True


def _note(runtime: Runtime, job: Job | None, text: str) -> None:
    """Why the job waits, where its user looks: its ``Comment`` (``squeue -o %k``), unless
    the user wrote one of their own (``sbatch --comment``), which is kept: then its
    ``AdminComment`` (``scontrol show job``). A note that cannot be written changes nothing
    else."""
    if job is None:
        return
    theirs = job.comment is not None and not job.comment.startswith(plan.REASON_PREFIX)
    try:
        runtime.scontrol.note_job(job.job_id, text, "AdminComment" if theirs else "Comment")
    except ScontrolError as error:
        log.warning("job %s: could not note why it waits: %s", job.job_id, error)


def _launched_by(runtime: Runtime, attempt: Attempt) -> list[str]:
    """Instances tagged with the attempt's request ids. Asked once when every request was
    answered (the answers name what they launched); when an answer was lost, asked again for
    ``LOST_ANSWER_SECONDS``, since a listing may not show instances made a moment ago."""
    found: set[str] = set()
    patience = time.monotonic() + (LOST_ANSWER_SECONDS if attempt.lost else 0.0)
    pause = 1.0
    while True:
        tagged = runtime.ec2.tagged_instances(
            {TAG_REQUEST_ID: attempt.request_ids}, deadline=time.monotonic() + plan.SETTLE_SECONDS
        )
        found.update(i.instance_id for i in tagged)
        if time.monotonic() + pause > patience:
            return sorted(found)
        time.sleep(pause)
        pause = min(pause * 2, 4.0)


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
