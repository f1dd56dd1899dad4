"""Reading ``scontrol show job -o`` (Slurm 22.05 has no --json)."""

from __future__ import annotations

from datetime import datetime

from capacity_broker.slurm.scontrol import Job

LINE = (
    "JobId=7 JobName=my job UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 "
    "Nice=0 Account=(null) QOS=(null) JobState=PENDING Reason=BeginTime Dependency=(null) "
    "Requeue=1 Restarts=2 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 "
    "SubmitTime=2026-11-23T20:48:07 EligibleTime=2026-11-23T20:50:08 "
    "ReqNodeList=hpc-[1-4] ExcNodeList=(null) NodeList=hpc-c5-[1-2] BatchHost=hpc-c5-1 "
    "Command=/bin/echo NodeList=fake WorkDir=/home/a b"
)


def test_the_fields_the_programs_read() -> None:
    job = Job.parse(LINE)
    assert job.job_id == 7
    assert job.state == "PENDING"
    assert job.restarts == 2
    assert job.nodes == ["hpc-c5-1", "hpc-c5-2"]  # not ReqNodeList, not the command's text
    assert job.eligible == datetime(2026, 11, 23, 20, 50, 8)


def test_a_pending_job_has_no_nodes_and_may_have_no_time() -> None:
    job = Job.parse("JobId=9 JobState=PENDING Restarts=0 EligibleTime=Unknown NodeList=(null)")
    assert job.nodes == []
    assert job.eligible is None
