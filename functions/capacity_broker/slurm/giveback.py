"""SuspendProgram and ResumeFailProgram: give the nodes' instances back.

A node's instance is known from two sources, and each one found is terminated:

1. Slurm's own record: when ResumeProgram binds a node it writes the instance into the node's
   ``Comment`` in the same update as its address (``plan.Binding``). The instance is then
   asked of EC2 by id, which is not a listing: EC2 answers it, or says it does not know the
   id. That answer is trusted at once for an old binding (the instance is long gone), and
   asked again for a short while for a fresh one (EC2 still propagating an instance made a
   moment ago: "Eventual consistency in the Amazon EC2 API").
2. EC2's tags (``capacity-broker:slurm-node`` and this cluster's
   ``capacity-broker:slurm-cluster``): an instance tagged but whose node update never
   happened, or bound by a version of the programs that kept no record. A tag-filtered
   listing may miss an instance made a moment ago; that is why it is the second source, and
   why nobody waits on it: a node that never had an instance costs one listing, no patience.

Only instances this cluster's programs launched are terminated (``plan.owns``: what the head
node's IAM allows too), and every hold of their jobs is released. The nodes' addresses are
not touched (see ``Scontrol.power_down``), nor their Comment: the next binding replaces it
(an operator's note there is kept), and an old one costs nothing (its instance is terminated,
or gone and not waited for).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from ..adapters.aws import AwsError
from ..adapters.ec2.instances import LIVE_STATES, Instance
from ..client import BrokerError
from ..domain.tags import TAG_JOB_ID
from . import plan
from .hostlist import fold
from .runtime import Runtime, log
from .scontrol import ScontrolError

DEADLINE_SECONDS = 120.0


def give_back(runtime: Runtime, nodes: Sequence[str], why: str) -> bool:
    """True when every instance is confirmed ending and every hold released."""
    label = f"{why} {fold(nodes)}"
    deadline = time.monotonic() + DEADLINE_SECONDS
    bound, fresh, done = _bound(runtime, nodes, label, deadline)
    doomed = dict(bound)
    try:
        for instance in runtime.ec2.tagged_instances(
            {plan.TAG_SLURM_NODE: list(nodes), plan.TAG_SLURM_CLUSTER: [runtime.cluster]},
            deadline=deadline,
        ):
            doomed.setdefault(instance.instance_id, (instance.tags[plan.TAG_SLURM_NODE], instance))
    except AwsError as error:
        done = False
        log.error("%s: could not list their tagged instances: %s", label, error)
    if doomed:
        ids = list(doomed)
        try:
            ended = runtime.ec2.terminate_instances(ids, deadline, wait_for=fresh)
        except AwsError as error:
            log.error("%s: could not terminate %s: %s", label, ", ".join(ids), error)
            ended, done = [], False
        left = sorted(set(ids) - set(ended))
        if left:
            done = False
            log.error("%s: termination not confirmed for %s", label, ", ".join(left))
        log.info(
            "%s: terminated %s",
            label,
            ", ".join(f"{node}={iid}" for iid, (node, _) in doomed.items() if iid in ended)
            or "nothing",
        )
    else:
        log.info("%s: no instance to terminate", label)
    jobs = {i.tags[TAG_JOB_ID] for _, i in doomed.values() if i.tags.get(TAG_JOB_ID)}
    for job_id in sorted(jobs):
        try:
            answer = runtime.broker.release(job_id=job_id)
        except (BrokerError, AwsError) as error:
            done = False
            log.error("%s: could not release the holds of job %s: %s", why, job_id, error)
            continue
        if answer.cancelled:
            log.info("%s: released %s (job %s)", why, ", ".join(answer.cancelled), job_id)
    return done


def _bound(
    runtime: Runtime, nodes: Sequence[str], label: str, deadline: float
) -> tuple[dict[str, tuple[str, Instance]], set[str], bool]:
    """The live instances Slurm's records bind these nodes to (id → (node, instance)), the
    ids bound a moment ago, and whether every record could be checked."""
    try:
        bindings = runtime.bindings(nodes)
    except ScontrolError as error:
        log.error("%s: could not read the nodes' bindings: %s", label, error)
        return {}, set(), False
    now = datetime.now(UTC)
    fresh = {b.instance_id for b in bindings.values() if b.fresh(now)}
    if not bindings:
        return {}, fresh, True
    try:
        known = runtime.ec2.known_instances(
            [b.instance_id for b in bindings.values()],
            min(deadline, time.monotonic() + plan.SETTLE_SECONDS),
            wait_for=fresh,
        )
    except AwsError as error:
        log.error("%s: could not look up their bound instances: %s", label, error)
        return {}, fresh, False
    done = True
    found: dict[str, tuple[str, Instance]] = {}
    for node, binding in bindings.items():
        instance = known.get(binding.instance_id)
        if instance is None:
            if binding.instance_id in fresh:
                done = False
                log.error(
                    "%s: %s was bound to %s at %s, which EC2 still does not know",
                    label,
                    node,
                    binding.instance_id,
                    f"{binding.bound:%H:%M:%S}",
                )
        elif not plan.owns(runtime.cluster, instance.tags):
            log.warning(
                "%s: %s's Comment names %s, which this cluster's programs did not launch: "
                "left alone",
                label,
                node,
                binding.instance_id,
            )
        elif instance.state in LIVE_STATES:
            found[instance.instance_id] = (node, instance)
    return found, fresh, done
