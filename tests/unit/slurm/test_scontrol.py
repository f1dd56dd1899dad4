"""Reading ``scontrol show job -o`` (Slurm 22.05 has no --json)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from capacity_broker.slurm.scontrol import Job, Node, Scontrol

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


@pytest.mark.parametrize(
    ("limit", "seconds"),
    [
        ("01:00:00", 3600),
        ("1-00:00:00", 86400),
        ("2-03", 2 * 86400 + 3 * 3600),
        ("2-03:04", 2 * 86400 + 3 * 3600 + 4 * 60),
        ("90", 5400),
        ("05:30", 330),
        ("UNLIMITED", None),
        ("Partition_Limit", None),
    ],
)
def test_the_jobs_time_limit_is_how_long_it_runs(limit: str, seconds: int | None) -> None:
    """sbatch(1) ``--time`` formats, as ``scontrol show job`` prints TimeLimit; reserve gets it
    as ``runtime_seconds`` (a Capacity Block must outlast it)."""
    job = Job.parse(f"JobId=9 JobState=PENDING Restarts=0 TimeLimit={limit} NodeList=(null)")
    assert job.time_limit_seconds == seconds


def test_a_pending_job_has_no_nodes_and_may_have_no_time() -> None:
    job = Job.parse("JobId=9 JobState=PENDING Restarts=0 EligibleTime=Unknown NodeList=(null)")
    assert job.nodes == []
    assert job.eligible is None


# `scontrol show node -o hpc-c5-1` of Slurm 22.05.8, measured (a bound cloud node).
NODE = (
    "NodeName=hpc-c5-1 CoresPerSocket=1  CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=N/A "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=127.77.1.5 "
    "NodeHostName=ip-127-77-1-5.ec2.internal  RealMemory=1000 AllocMem=0 FreeMem=N/A Sockets=2 "
    "Boards=1 State=MIXED+CLOUD+NOT_RESPONDING+POWERING_UP ThreadsPerCore=1 TmpDisk=0 Weight=1 "
    "Owner=N/A MCS_label=N/A Partitions=cloud  BootTime=None SlurmdStartTime=None "
    "LastBusyTime=Unknown CfgTRES=cpu=2,mem=1000M,billing=2 AllocTRES=cpu=1 CapWatts=n/a "
    "CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s "
    "Comment=capacity-broker:instance=i-0abc12345678,bound=2026-11-23T22:52:06Z "
    "Reason=capacity-broker: error: x Comment=not-this [slurm@2026-11-23T22:52:07]"
)


def test_the_node_fields_the_programs_read() -> None:
    node = Node.parse(NODE)
    assert node.name == "hpc-c5-1"
    assert node.state == "MIXED+CLOUD+NOT_RESPONDING+POWERING_UP"
    assert node.comment == "capacity-broker:instance=i-0abc12345678,bound=2026-11-23T22:52:06Z"


def test_a_node_without_a_comment() -> None:
    node = Node.parse("NodeName=hpc-c5-3 State=IDLE+CLOUD+POWERED_DOWN Partitions=cloud")
    assert node.comment is None


# `scontrol show node hpc-c5-1,hpc-c5-2` (no -o) as 22.05's slurm_sprint_node_table prints it:
# a Reason over two lines, then the Comment's own line.
SHOW = """NodeName=hpc-c5-1 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=N/A
   State=IDLE+CLOUD ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Reason=first line of a reason [root@2026-11-23T22:52:07]
          Comment=not a comment line
   Comment=capacity-broker:instance=i-0abc12345678,bound=2026-11-23T22:52:06Z rack 12 note
   Extra=x

NodeName=hpc-c5-2 CoresPerSocket=1
   State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=1

"""


def fake_scontrol(tmp_path: Any, version: str) -> tuple[Path, Path]:
    """An scontrol that prints ``SHOW`` for ``show node`` and ``version``, and records every
    argument list it was run with (one per line, NUL-separated)."""
    record = tmp_path / "argv"
    (tmp_path / "show.txt").write_text(SHOW)
    script = tmp_path / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\\\0" "$@" >> {record}; echo >> {record}\n'
        f'if [ "$1" = "--version" ]; then echo "slurm {version}"; exit 0; fi\n'
        f'if [ "$1" = "show" ]; then cat {tmp_path / "show.txt"}; fi\n'
    )
    script.chmod(0o755)
    return script, record


def test_a_nodes_whole_comment_is_read_with_its_spaces(tmp_path: Path) -> None:
    script, _ = fake_scontrol(tmp_path, "22.05.8")
    found = Scontrol(script, {}).node_comments(["hpc-c5-1", "hpc-c5-2"])
    assert found == {
        "hpc-c5-1": "capacity-broker:instance=i-0abc12345678,bound=2026-11-23T22:52:06Z "
        "rack 12 note"
    }


@pytest.mark.parametrize(("version", "with_id"), [("22.05.8", False), ("23.11.4", True)])
def test_the_instance_id_field_is_set_where_slurm_has_it(
    tmp_path: Path, version: str, with_id: bool
) -> None:
    """Slurm 23.11 added the node's InstanceId (slurmctld clears it at power-off): set beside
    the Comment's binding, in the same update; 22.05 has no such field."""
    script, record = fake_scontrol(tmp_path, version)
    Scontrol(script, {}).bind("hpc-c5-1", "10.0.0.5", "ip-10-0-0-5", "c", "i-0abc12345678")
    updates = [
        line.split("\0")[:-1]
        for line in record.read_text().splitlines()
        if line.startswith("update")
    ]
    assert updates == [
        [
            "update",
            "NodeName=hpc-c5-1",
            "NodeAddr=10.0.0.5",
            "NodeHostname=ip-10-0-0-5",
            "Comment=c",
            *(["InstanceId=i-0abc12345678"] if with_id else []),
        ]
    ]


def test_a_binding_keeps_the_operators_note_and_replaces_an_older_binding() -> None:
    from datetime import UTC

    from capacity_broker.slurm.plan import Binding

    new = Binding("i-0fedcba987654321", datetime(2026, 11, 24, 8, 0, 0, tzinfo=UTC))
    token = new.text()
    assert new.comment(None) == token
    assert new.comment("rack 12") == f"{token} rack 12"
    old = "capacity-broker:instance=i-0abc12345678,bound=2026-11-23T22:52:06Z"
    assert new.comment(f"{old} rack 12") == f"{token} rack 12"
    assert new.comment(old) == token
    assert Binding.read(new.comment("rack 12").split(" ", 1)[0]) == new
