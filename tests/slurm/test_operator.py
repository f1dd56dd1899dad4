"""What an operator and the cluster's users meet in the first week, on a real slurmctld
(issue 24): a node set that fails every job stops taking jobs, a waiting job says why where
users look, and a job cancelled while its nodes launch leaves no instance running."""

from __future__ import annotations

import re
from typing import Any

import pytest
from slurm_helpers import Cluster, wait_for
from test_programs import C5_NODES, CLOUD, nodeset, powered_down, scenario

pytestmark = pytest.mark.slurm

# Addresses until the nodes are bound: slurmctld sends the kill of a requeued or cancelled
# job to its nodes, and a name that does not resolve stalls it 10 s per node.
ADDRESSED = C5_NODES.replace("State=CLOUD", "NodeAddr=127.77.9.[1-4] State=CLOUD")


def reasons(cluster: Cluster) -> dict[str, str]:
    """``sinfo -R``: node → the reason it lists (only nodes sinfo -R lists)."""
    out = cluster.run("sinfo", "-R", "--noheader", "-N", "-o", "%N|%E")
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def squeue(cluster: Cluster, job: int, format: str) -> str:
    return cluster.run("squeue", "--noheader", "-j", str(job), "-o", format).strip()


def test_errors_in_a_row_drain_the_node_set_and_hold_the_job(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    # The launch template is tagged for another broker cluster: every reserve is rejected,
    # as it would be for every job until an operator fixes it.
    aws = emulator_endpoint(scenario(c5=(8, 8), cluster="someone-else"))
    config = {
        "cluster_id": "slurm-test",
        "error_budget": 2,
        "nodesets": [nodeset("hpc-c5-[1-4]", "c5.large", strict=True)],
    }
    cluster = make_cluster(aws, config, [ADDRESSED], [CLOUD])
    first = cluster.sbatch("-N1")
    cluster.wait_log(rf"job {first}: powered down")
    # One error: requeued as before, not drained.
    assert reasons(cluster) == {}
    assert cluster.job(first)["Restarts"] == "1"

    second = cluster.sbatch("-N1")
    cluster.wait_log(rf"job {second}: held")
    undo = "scontrol update NodeName=hpc-c5-[1-4] State=RESUME"
    # Slurm applies the drain of a node it is still powering down a moment later.
    listed = wait_for(
        "every node of the set drained",
        lambda: (found := reasons(cluster)) and len(found) == 4 and found,
        30,
        explain=lambda: cluster.run("sinfo", "-N", "-o", "%N %T %E") + cluster.explain(),
    )
    assert sorted(listed) == [f"hpc-c5-{n}" for n in range(1, 5)], listed
    for why in listed.values():
        assert why.startswith("capacity-broker: 2 errors in a row, rejected: launch template")
        assert "someone-else" in why
        assert why.endswith(f"to undo: {undo}")
    assert squeue(cluster, second, "%T|%r") == "PENDING|JobHeldAdmin"
    note = squeue(cluster, second, "%k")
    assert note.startswith("capacity-broker: held, 2 errors in a row, rejected")
    assert note.endswith(f"to undo: {undo}; scontrol release {second}")
    assert aws.live_instances() == []

    # The command the reason names undoes it.
    cluster.run("scontrol", *undo.split()[1:])
    assert reasons(cluster) == {}
    cluster.run("scontrol", "release", str(second))
    assert squeue(cluster, second, "%r") != "JobHeldAdmin"


def test_capacity_waits_never_drain_and_the_reason_is_in_squeue(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    aws = emulator_endpoint(scenario(c5=(0, 1)))
    config = {
        "cluster_id": "slurm-test",
        "error_budget": 1,
        "nodesets": [nodeset("hpc-c5-[1-4]", "c5.large", strict=True)],
    }
    cluster = make_cluster(aws, config, [ADDRESSED], [CLOUD])
    plain = cluster.sbatch("-N2", "--nodelist=hpc-c5-[1-2]")
    theirs = cluster.sbatch("-N2", "--nodelist=hpc-c5-[3-4]", "--comment=my-run")
    powered_down(cluster, [f"hpc-c5-{n}" for n in range(1, 5)], "no_capacity")
    cluster.wait_log(rf"job {theirs}: powered down")

    def noted() -> bool:
        return squeue(cluster, plain, "%k").startswith("capacity-broker: no_capacity: ")

    wait_for("the job's note", noted, 30, explain=cluster.explain)
    assert squeue(cluster, plain, "%T") == "PENDING"
    # A user's own comment is kept; the note is then the job's AdminComment.
    assert squeue(cluster, theirs, "%k") == "my-run"
    shown = cluster.run("scontrol", "show", "job", str(theirs))
    assert re.search(r"AdminComment=capacity-broker: no_capacity: ", shown), shown
    # Capacity waits are not errors: nothing drained, even with a budget of 1. sinfo -R
    # lists only down, drained and failing nodes (measured): the wait's reason is the node's.
    assert reasons(cluster) == {}
    shown = cluster.run("sinfo", "--noheader", "-N", "-n", "hpc-c5-1", "-o", "%E")
    assert shown.startswith("capacity-broker: no_capacity: ")


def test_a_job_cancelled_while_its_nodes_launch_leaves_no_instance(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    from emulator.remote import RemoteEmulator

    aws = emulator_endpoint(scenario(c5=(8, 8)))
    cluster = make_cluster(
        aws,
        {
            "cluster_id": "slurm-test",
            "nodesets": [nodeset("hpc-c5-[1-4]", "c5.large", strict=True)],
        },
        [ADDRESSED],
        [CLOUD],
    )
    # Tagging the instances takes a while: long enough for a user to cancel the job between
    # its launch and its nodes' binding.
    RemoteEmulator(aws.url).latency(0, {"CreateTags": 5})
    job = cluster.sbatch("-N2")
    cluster.wait_log(rf"job {job}: Launched ")
    assert len(aws.live_instances()) == 2
    cluster.run("scancel", str(job))
    # Slurm (22.05) cancels the job at once and leaves its nodes powering up, running no
    # program on them, until ResumeTimeout (an hour here): the resume program ends them.
    cluster.wait_log(rf"job {job}: ended \(CANCELLED\) while its nodes launched")
    cluster.wait_log(r"capacity-broker-slurm-resume hpc-c5-\[1-2\] done")
    assert aws.live_instances() == []
    for node in ("hpc-c5-1", "hpc-c5-2"):
        state = cluster.node(node)
        assert "POWERING_UP" not in state["State"], state
        assert state["Reason"].startswith("capacity-broker: cancelled: job ")
