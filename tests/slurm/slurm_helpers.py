"""The Slurm tests' harness: a real Slurm per test, its own munged, slurmctld and emulator.

Each cluster lives in the test's tmp dir: munged with its own key and socket (slurm.conf
``AuthInfo=socket=…`` keeps clusters apart), slurmctld on its own ports with its own state,
cloud nodes (``State=CLOUD``) whose ResumeProgram, SuspendProgram and ResumeFailProgram are
scripts that run the code under test (``write_programs``), and the capacity emulator (or
``capacity-broker local``) as a server process. No slurmd ever runs, so ResumeTimeout is
long and a launched job stays CONFIGURING. The programs find their YAML beside slurm.conf:
slurmctld hands them nothing but SLURM_CONF (and SLURM_RESUME_FILE).

Without Slurm the tests skip with the reason (``make test`` prints it in its summary); under
CI (``CI=true``) a missing slurmctld is a failure: .ci/run installs it.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import boto3
import pytest
from botocore.config import Config

T = TypeVar("T")


TOOLS = {
    "slurmctld": "/usr/sbin/slurmctld",
    "munged": "/usr/sbin/munged",
    "mungekey": "/usr/sbin/mungekey",
    "scontrol": "/usr/bin/scontrol",
    "sbatch": "/usr/bin/sbatch",
    "squeue": "/usr/bin/squeue",
    "scancel": "/usr/bin/scancel",
    "sinfo": "/usr/bin/sinfo",
}
BIN = Path(sys.executable).parent
# The console scripts' entry points (pyproject.toml, [project.scripts]).
ENTRY_POINTS = {"resume": "resume", "suspend": "suspend", "resume-fail": "resume_fail"}
PROGRAMS = {name: BIN / f"capacity-broker-slurm-{name}" for name in ENTRY_POINTS}
REGION = "us-east-1"
SKIP_PREFIX = "Slurm tests skipped:"


def _tool(name: str) -> str | None:
    found = TOOLS[name] if os.access(TOOLS[name], os.X_OK) else None
    return found or shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def write_programs(directory: Path) -> dict[str, Path]:
    """The programs slurmctld runs, as scripts in ``directory`` that import the code this
    test process imports. The installed console scripts import whatever the interpreter's
    install points at (an editable install may be another checkout), and slurmctld gives
    them no PYTHONPATH: so each script names this interpreter and puts the directory that
    holds the ``capacity_broker`` under test first on its path."""
    import capacity_broker

    source = Path(capacity_broker.__file__).resolve().parent.parent
    directory.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, function in ENTRY_POINTS.items():
        path = directory / f"capacity-broker-slurm-{name}"
        path.write_text(
            f"#!{sys.executable}\n"
            "import sys\n"
            f"sys.path.insert(0, {str(source)!r})\n"
            f"from capacity_broker.slurm.programs import {function}\n"
            f"sys.exit({function}())\n"
        )
        path.chmod(0o755)
        written[name] = path
    return written


def missing_tools() -> list[str]:
    return [name for name in TOOLS if _tool(name) is None] + [
        str(p) for p in PROGRAMS.values() if not os.access(p, os.X_OK)
    ]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(
    what: str,
    check: Callable[[], T],
    timeout: float = 60.0,
    interval: float = 0.2,
    explain: Callable[[], str] = lambda: "",
) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``explain()`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{explain()}")
        time.sleep(interval)


def _stop(process: subprocess.Popen[Any] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


@dataclass
class Endpoint:
    """The emulator server (or ``capacity-broker local``) of one test."""

    url: str
    process: subprocess.Popen[Any]
    log: Path

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"total_max_attempts": 1}),
        )

    def live_instances(self) -> list[dict[str, Any]]:
        pages = (
            self.client("ec2")
            .get_paginator("describe_instances")
            .paginate(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
        )
        return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]

    def active_holds(self) -> list[dict[str, Any]]:
        found = self.client("ec2").describe_capacity_reservations(
            Filters=[{"Name": "state", "Values": ["active", "pending"]}]
        )["CapacityReservations"]
        return [
            r
            for r in found
            if any(t["Key"] == "capacity-broker:purpose" for t in r.get("Tags", []))
        ]

    def calls(self, action: str) -> list[dict[str, Any]]:
        from emulator.remote import RemoteEmulator

        return RemoteEmulator(self.url).calls(action)


def start_endpoint(tmp: Path, command: list[str]) -> Endpoint:
    log = tmp / "endpoint.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env |= {"MOTO_EC2_LOAD_DEFAULT_AMIS": "false", "AWS_ACCESS_KEY_ID": "testing"}
    env |= {"AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=tmp)

    def url() -> str | None:
        found = re.search(r"AWS_ENDPOINT_URL=(\S+)", log.read_text())
        if found is None and process.poll() is not None:
            pytest.fail(f"{command[0]} exited {process.returncode}:\n{log.read_text()}")
        return found.group(1) if found else None

    return Endpoint(wait_for("the emulator's endpoint", url, 90, 0.1, log.read_text), process, log)


@dataclass
class Cluster:
    """One Slurm cluster: munged + slurmctld in ``root``, programs configured for ``aws``."""

    root: Path
    tools: dict[str, str]
    aws: Endpoint
    name: str
    processes: list[subprocess.Popen[Any]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {
            "SLURM_CONF": str(self.root / "slurm.conf"),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }

    def run(self, tool: str, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            [self.tools[tool], *args], env=self.env, capture_output=True, text=True, timeout=60
        )
        if check and done.returncode != 0:
            pytest.fail(f"{tool} {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done.stdout

    def sbatch(self, *args: str) -> int:
        out = self.run("sbatch", "--parsable", "--output=/dev/null", *args, "--wrap", "true")
        return int(out.strip().split(";")[0])

    def node(self, name: str) -> dict[str, str]:
        line = self.run("scontrol", "show", "node", "-o", name).strip()
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        reason = re.search(r"Reason=(.*?)( \[|$)", line)
        fields["Reason"] = reason.group(1) if reason else ""
        return fields

    def job(self, job_id: int) -> dict[str, str]:
        line = self.run("scontrol", "show", "job", "-o", str(job_id)).strip()
        return dict(re.findall(r"(\w+)=(\S*)", line))

    @property
    def programs(self) -> dict[str, Path]:
        """The programs slurm.conf names (``write_programs``)."""
        return {name: self.root / "bin" / f"capacity-broker-slurm-{name}" for name in ENTRY_POINTS}

    @property
    def program_log(self) -> Path:
        return self.root / "capacity-broker.log"

    def log_text(self) -> str:
        return self.program_log.read_text() if self.program_log.exists() else ""

    def explain(self) -> str:
        ctld = self.root / "slurmctld.log"
        tail = ctld.read_text().splitlines()[-40:] if ctld.exists() else []
        return (
            f"--- programs' log\n{self.log_text()}\n--- slurmctld.log (tail)\n"
            + "\n".join(tail)
            + f"\n--- squeue\n{self.run('squeue', check=False)}"
        )

    def wait_log(self, pattern: str, timeout: float = 90.0) -> re.Match[str]:
        return wait_for(
            f"/{pattern}/ in the programs' log",
            lambda: re.search(pattern, self.log_text()),
            timeout,
            explain=self.explain,
        )

    def run_program(self, program: str, hostlist: str, resume_file: Path | None = None) -> int:
        """A program as slurmctld runs it: SLURM_CONF (and SLURM_RESUME_FILE) only."""
        env = {"SLURM_CONF": str(self.root / "slurm.conf")}
        if resume_file is not None:
            env["SLURM_RESUME_FILE"] = str(resume_file)
        done = subprocess.run(
            [str(self.programs[program]), hostlist],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=300,
            close_fds=True,
        )
        return done.returncode

    def programs_running(self) -> set[str]:
        """Pids of programs that logged their start and not yet their end."""
        started = set(
            re.findall(r"\[(\d+)\] INFO capacity-broker-slurm-\S+ \S+ \(", self.log_text())
        )
        ended = set(
            re.findall(
                r"\[(\d+)\] (?:INFO|ERROR) capacity-broker-slurm-\S+ \S+ (?:done|failed)",
                self.log_text(),
            )
        )
        return started - ended

    def start_slurmctld(self) -> None:
        """slurmctld in the foreground, recovering whatever state it saved before (``-i``:
        a first start has none)."""
        ctld = subprocess.Popen(
            [self.tools["slurmctld"], "-D", "-i", "-f", str(self.root / "slurm.conf")],
            stdout=(self.root / "slurmctld.out").open("a"),
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        self.processes.append(ctld)

        def up() -> bool:
            if ctld.poll() is not None:
                pytest.fail(f"slurmctld exited {ctld.returncode}:\n{self.explain()}")
            return "is UP" in self.run("scontrol", "ping", check=False)

        wait_for("slurmctld", up, 60, 0.1, self.explain)

    def restart_slurmctld(self) -> None:
        """Stop slurmctld (it saves its state on SIGTERM) and start it again."""
        ctld = self.processes.pop()
        _stop(ctld)
        self.start_slurmctld()

    def stop(self) -> None:
        # A program slurmctld started (a suspend after a power-down) ends before slurmctld
        # does: it would otherwise keep asking a controller that is going away.
        deadline = time.monotonic() + 60
        while self.programs_running() and time.monotonic() < deadline:
            time.sleep(0.2)
        for process in reversed(self.processes):
            _stop(process)


def _slurm_conf(
    root: Path, name: str, nodes: list[str], partitions: list[str], extra: Sequence[str] = ()
) -> str:
    """``extra``: more SlurmctldParameters. Not ``cloud_reg_addrs`` by default, although
    docs/slurm.md recommends it: with it, a powered-down node's address becomes its name,
    which nothing resolves here, and slurmctld still sends such a node the kill of the job
    it had (no slurmd ever answered): each try looks the name up ten times a second apart,
    holding slurmctld's locks (measured: 12 s), and the programs' scontrol calls time out."""
    user = getpass.getuser()
    programs = write_programs(root / "bin")
    lines = [
        f"ClusterName={name}",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        f"SlurmUser={user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'munge.sock'}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmctldLogFile={root / 'slurmctld.log'}",
        "SlurmctldDebug=debug",
        "DebugFlags=Power",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "MpiDefault=none",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "ReturnToService=2",
        f"ResumeProgram={programs['resume']}",
        f"SuspendProgram={programs['suspend']}",
        f"ResumeFailProgram={programs['resume-fail']}",
        "SuspendTime=3600",
        # Powered-down nodes come back quickly, so a test sees the whole give-back.
        "SuspendTimeout=5",
        # No slurmd ever answers here: a launched node would be failed after this.
        "ResumeTimeout=3600",
        "ResumeRate=0",
        "SuspendRate=0",
        "TreeWidth=65533",
        "PrivateData=cloud",
        # The power-save loop looks every second (default 10 s).
        "SlurmctldParameters="
        + ",".join(("idle_on_node_suspend", "power_save_interval=1", *extra)),
        *nodes,
        *partitions,
    ]
    return "\n".join(lines) + "\n"
