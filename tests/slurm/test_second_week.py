"""The operator's second week on a real slurmctld (issue 41): the breaker counts only what
fails every job of a node set, so no user can drain a node set by asking too much."""

from __future__ import annotations

import json
import os
import pwd
import re
import stat
import subprocess
import sys
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from slurm_helpers import Cluster, wait_for
from test_operator import ADDRESSED, reasons, squeue
from test_programs import CLOUD, REGION, SUBNET_B, launched, nodeset, scenario

pytestmark = pytest.mark.slurm


def with_quota(world: dict[str, Any], standard_vcpus: int) -> dict[str, Any]:
    """The account's On-Demand quota of Standard vCPUs (c5 and m5 draw from it)."""
    world["regions"][REGION]["quotas"] = {"vcpus": {"Standard": standard_vcpus}}
    return world


def another_user() -> pwd.struct_passwd:
    """A user other than the one running the tests, whose job root may submit
    (``sbatch --uid``); CI runs as root (.ci/run)."""
    if os.geteuid() != 0:
        pytest.skip("submitting another user's job takes root (sbatch --uid)")
    return pwd.getpwnam("nobody")


def held_for_its_own_request(cluster: Cluster, job: int) -> str:
    def held() -> str:
        return squeue(cluster, job, "%T|%r|%k")

    return wait_for(
        f"job {job} held for its own request",
        lambda: (shown := held()).startswith("PENDING|JobHeldUser|") and shown,
        # Slurm gives the powered-down nodes to the next job at its next full scheduling
        # pass (sched_interval, a minute).
        150,
        explain=cluster.explain,
    )


def test_jobs_over_the_quota_are_held_alone_and_the_node_set_keeps_running_jobs(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    # 4 vCPUs of Standard: two c5.large. A job of three nodes is over the quota by itself,
    # a job of one is not.
    aws = emulator_endpoint(with_quota(scenario(c5=(8, 8)), 4))
    config = {
        "cluster_id": "slurm-test",
        # The default budget: three errors in a row would drain the node set.
        "nodesets": [nodeset("hpc-c5-[1-4]", "c5.large", strict=True)],
    }
    cluster = make_cluster(aws, config, [ADDRESSED], [CLOUD])
    # Whole nodes (two jobs of one CPU a node would share them): each job is launched alone.
    greedy = [cluster.sbatch("-N3", "--exclusive") for _ in range(3)]
    for job in greedy:
        shown = held_for_its_own_request(cluster, job)
        note = shown.split("|", 2)[2]
        assert note.startswith("capacity-broker: held, InstanceLimitExceeded: the job's own"), note
        assert note.endswith(f"to undo: scontrol release {job}"), note
    assert aws.live_instances() == []
    # No node of the set is drained: nothing for an administrator to undo.
    assert reasons(cluster) == {}
    assert "not counted against its node set" in cluster.log_text()

    other = another_user()
    theirs = cluster.sbatch(f"--uid={other.pw_uid}", f"--gid={other.pw_gid}", "-N1", "--exclusive")
    cluster.wait_log(rf"job {theirs}: bound ", 150)
    node = cluster.job(theirs)["NodeList"]
    assert launched(cluster, theirs, [node])[node]["State"]["Name"] in ("pending", "running")
    assert cluster.job(theirs)["JobState"] in ("CONFIGURING", "RUNNING")
    # The greedy jobs still wait for their owner, who may shrink them and release them.
    for job in greedy:
        assert squeue(cluster, job, "%r") == "JobHeldUser"


def test_the_breakers_state_follows_no_symlink_and_trusts_no_other_users_directory(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    # Every reserve is refused (the template is another cluster's): each job's failure is
    # counted, in the state_dir of the moment. The budget is never reached.
    aws = emulator_endpoint(scenario(c5=(8, 8), cluster="someone-else"))
    config = {
        "cluster_id": "slurm-test",
        "error_budget": 100,
        "nodesets": [nodeset("hpc-c5-[1-4]", "c5.large", strict=True)],
    }
    cluster = make_cluster(aws, config, [ADDRESSED], [CLOUD])
    settings = cluster.root / "capacity-broker.yaml"

    def fail_a_job_counting_in(state_dir: Path, node: int) -> str:
        """The log lines of one failed job's resume, with the count kept in ``state_dir``."""
        written = yaml.safe_load(settings.read_text()) | {"state_dir": str(state_dir)}
        settings.write_text(yaml.safe_dump(written))
        before = len(cluster.log_text())
        cluster.sbatch("--no-requeue", "-N1", f"--nodelist=hpc-c5-{node}")
        cluster.wait_log(rf"capacity-broker-slurm-resume hpc-c5-{node} done")
        return cluster.log_text()[before:]

    # A directory that does not exist is made private.
    fresh = cluster.root / "fresh" / "counts"
    said = fail_a_job_counting_in(fresh, 1)
    assert "1 error(s) in a row" in said, said
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
    (count_file,) = fresh.iterdir()
    assert stat.S_IMODE(count_file.stat().st_mode) == 0o600
    assert json.loads(count_file.read_text())["errors"] == 1

    # A symlink planted where the file goes is not followed: its target is untouched.
    victim = cluster.root / "victim"
    victim.write_text("precious\n")
    planted = cluster.root / "planted"
    planted.mkdir(mode=0o700)
    (planted / count_file.name).symlink_to(victim)
    said = fail_a_job_counting_in(planted, 2)
    assert "is a symlink: refused" in said, said
    assert "could not count its error" in said
    assert victim.read_text() == "precious\n"

    # Another user's directory is refused, and nothing is written in it.
    theirs = cluster.root / "theirs"
    theirs.mkdir(mode=0o700)
    other = another_user()
    os.chown(theirs, other.pw_uid, other.pw_gid)
    said = fail_a_job_counting_in(theirs, 3)
    assert f"is owned by uid {other.pw_uid}" in said, said
    assert list(theirs.iterdir()) == []

    # A state_dir that is itself a symlink is refused too; the real directory's count is as
    # it was.
    linked = cluster.root / "linked"
    linked.symlink_to(fresh)
    said = fail_a_job_counting_in(linked, 4)
    assert "is a symlink: refused" in said, said
    assert json.loads(count_file.read_text())["errors"] == 1


def test_a_waking_snapstart_version_is_waited_out_and_never_counted(
    local_broker: Any, make_cluster: Any
) -> None:
    from emulator.remote import RemoteEmulator

    # The functions answer as a SnapStart version asleep for a minute of the emulator's clock
    # (409), then failing one restore (408). The clock is stopped at once: the version sleeps
    # until the test moves it, however long the programs take to get there. (A minute, not
    # more: the broker's holds end 5 minutes after the functions' own real clock says.)
    aws = local_broker(
        scenario(c5=(0, 8), cluster="slurm-deployed"),
        "slurm-deployed",
        "--snapstart-asleep",
        "60",
        "--snapstart-timeouts",
        "1",
    )
    emulator = RemoteEmulator(aws.url)
    emulator.freeze()
    config = {
        "function_prefix": "capacity-broker-local",
        # One counted error would drain the node set.
        "error_budget": 1,
        "nodesets": [nodeset("hpc-c5-[1-4]", "c5.large", strict=True)],
    }
    cluster = make_cluster(aws, config, [ADDRESSED], [CLOUD])
    job = cluster.sbatch("-N2")
    cluster.wait_log(r"SnapStartNotReadyException: Lambda is initializing .*; asking again in ")
    emulator.advance(60)
    launched(cluster, job, ["hpc-c5-1", "hpc-c5-2"])
    said = cluster.log_text()
    assert "SnapStartTimeoutException: Lambda couldn't restore the snapshot" in said
    assert "error(s) in a row" not in said
    assert reasons(cluster) == {}
    assert cluster.job(job)["Restarts"] == "0"


BLOCK = "cr-0b10c0000000000b1"
P5_NODES = "NodeName=hpc-p5-[1-2] CPUs=2 RealMemory=1000 NodeAddr=127.77.9.[5-6] State=CLOUD"


def test_a_block_node_set_takes_no_job_that_would_run_past_the_blocks_usable_end(
    emulator_endpoint: Any, make_cluster: Any
) -> None:
    # A Capacity Block that ends in an hour: EC2 begins stopping its instances in 30 minutes.
    world = scenario(c5=(8, 8))
    world["regions"][REGION]["capacity_blocks"] = [
        {
            "id": BLOCK,
            "instance_type": "p5.48xlarge",
            "availability_zone": "us-east-1b",
            "count": 2,
            "start": "-23h",
            "duration_hours": 24,
        }
    ]
    aws = emulator_endpoint(world)
    config = {
        "cluster_id": "slurm-test",
        "nodesets": [
            nodeset(
                "hpc-p5-[1-2]",
                "p5.48xlarge",
                subnet_ids=[SUBNET_B],
                capacity_reservation_id=BLOCK,
            )
        ],
    }
    cluster = make_cluster(aws, config, [P5_NODES], [CLOUD])
    (block,) = aws.client("ec2").describe_capacity_reservations(CapacityReservationIds=[BLOCK])[
        "CapacityReservations"
    ]
    usable_end = block["EndDate"].astimezone(UTC) - timedelta(minutes=30)

    # `slurm check` shows the node set's usable end.
    checked = subprocess.run(
        [sys.executable, "-m", "capacity_broker.cli", "slurm", "check", "-o", "json"],
        env={
            **os.environ,
            "CAPACITY_BROKER_SLURM_CONFIG": str(cluster.root / "capacity-broker.yaml"),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    (shown,) = json.loads(checked.stdout)["nodesets"]
    assert shown["usable_end"] == f"{usable_end:%Y-%m-%dT%H:%M:%SZ}", checked.stdout
    assert shown["request"]["capacity_reservation_id"] == BLOCK

    # Any run of the programs keeps the block's maintenance reservation (here a suspend, as
    # slurmctld runs it).
    assert cluster.run_program("suspend", "hpc-p5-1") == 0
    name = f"capacity-broker-{BLOCK}"
    line = cluster.run("scontrol", "-o", "show", "reservation", name)
    fields = dict(re.findall(r"(\w+)=(\S*)", line))
    assert fields["Nodes"] == "hpc-p5-[1-2]", line
    assert "MAINT" in fields["Flags"], line
    assert fields["StartTime"] == usable_end.astimezone().strftime("%Y-%m-%dT%H:%M:%S"), line

    # Slurm starts a job that ends before then, and none that would run past it.
    short = cluster.sbatch("-N1", "--exclusive", "--time=20")
    wait_for(
        f"job {short} started on the block's nodes",
        lambda: cluster.job(short)["JobState"] != "PENDING",
        90,
        explain=cluster.explain,
    )
    long = cluster.sbatch("-N1", "--exclusive", "--time=45")
    endless = cluster.sbatch("-N1", "--exclusive")
    for job in (long, endless):
        reason = wait_for(
            f"job {job} kept off the block's nodes",
            lambda job=job: (
                (r := squeue(cluster, job, "%T|%r")).startswith("PENDING|ReqNodeNotAvail") and r
            ),
            90,
            explain=cluster.explain,
        )
        assert "Reserved for maintenance" in reason, reason
