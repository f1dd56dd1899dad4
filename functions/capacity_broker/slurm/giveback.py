"""SuspendProgram and ResumeFailProgram: give the nodes' instances back.

The instances are found by the tags ResumeProgram put on them (``capacity-broker:slurm-node``
and this Slurm cluster's ``capacity-broker:slurm-cluster``), terminated, and every hold of
their jobs is released. The nodes' addresses are not touched (see ``Scontrol.power_down``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..adapters.aws import AwsError
from ..client import BrokerError
from ..domain.tags import TAG_JOB_ID
from . import plan
from .hostlist import fold
from .runtime import Runtime, log
from .scontrol import ScontrolError

DEADLINE_SECONDS = 120.0


def give_back(runtime: Runtime, nodes: Sequence[str], why: str) -> bool:
    """True when every instance is confirmed ending and every hold released."""
    done = True
    deadline = time.monotonic() + DEADLINE_SECONDS
    try:
        found = runtime.ec2.tagged_instances(
            {plan.TAG_SLURM_NODE: list(nodes), plan.TAG_SLURM_CLUSTER: [runtime.cluster]},
            deadline=deadline,
        )
    except (AwsError, ScontrolError) as error:
        log.error("%s %s: could not look up their instances: %s", why, fold(nodes), error)
        return False
    ids = [i.instance_id for i in found]
    if ids:
        try:
            ended = runtime.ec2.terminate_instances(ids, deadline)
        except AwsError as error:
            log.error("%s %s: could not terminate %s: %s", why, fold(nodes), ", ".join(ids), error)
            ended, done = [], False
        left = sorted(set(ids) - set(ended))
        if left:
            done = False
            log.error("%s %s: termination not confirmed for %s", why, fold(nodes), ", ".join(left))
        log.info(
            "%s %s: terminated %s",
            why,
            fold(nodes),
            ", ".join(f"{i.tags.get(plan.TAG_SLURM_NODE)}={i.instance_id}" for i in found),
        )
    else:
        log.info("%s %s: no instance to terminate", why, fold(nodes))
    for job_id in sorted({i.tags[TAG_JOB_ID] for i in found if i.tags.get(TAG_JOB_ID)}):
        try:
            answer = runtime.broker.release(job_id=job_id)
        except (BrokerError, AwsError) as error:
            done = False
            log.error("%s: could not release the holds of job %s: %s", why, job_id, error)
            continue
        if answer.cancelled:
            log.info("%s: released %s (job %s)", why, ", ".join(answer.cancelled), job_id)
    return done
