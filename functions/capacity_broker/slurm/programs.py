"""The console scripts slurmctld runs: ``capacity-broker-slurm-resume``, ``-suspend`` and
``-resume-fail``, each with Slurm's hostlist as its only argument.

How slurmctld (22.05) runs them, measured: the environment holds ``SLURM_CONF`` and, for
resume, ``SLURM_RESUME_FILE`` and nothing else (no ``PATH``, no ``HOME``), and every file
descriptor is closed, standard input, output and error included. So the first thing done here
is to put ``/dev/null`` on descriptors 0–2 (else the first file opened would become
"standard output"), then to read the resume file (slurmctld may drop it once the program has
run a few seconds), then the configuration. Logs go to the configured file (and, when
slurmctld closed standard error, so does anything else printed); with no file configured, to
standard error when there is one, else to syslog.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..adapters.aws import AwsError
from . import block_ends, giveback, launch, plan
from .config import DEFAULT_SCONTROL, ENV_LOG, ConfigError, load
from .hostlist import HostlistError, expand, fold
from .runtime import Runtime, log
from .scontrol import Scontrol, ScontrolError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
_FORMAT = "%(asctime)s {program}[%(process)d] %(levelname)s %(message)s"
_SYSLOG = Path("/dev/log")
CLIENT_LOG = "capacity_broker.client"


def resume() -> None:
    sys.exit(main("resume", sys.argv))


def suspend() -> None:
    sys.exit(main("suspend", sys.argv))


def resume_fail() -> None:
    sys.exit(main("resume-fail", sys.argv))


def main(program: str, argv: Sequence[str]) -> int:
    closed = _reopen_standard_descriptors()
    # Read at once: slurmctld keeps the file only while it runs (power_save docs: "within ten
    # seconds").
    resume_text, resume_error = _resume_file() if program == "resume" else (None, None)
    name = f"capacity-broker-slurm-{program}"
    # Until the configuration names the log: the shell's $CAPACITY_BROKER_SLURM_LOG, if any.
    early_log = Path(os.environ[ENV_LOG]) if os.environ.get(ENV_LOG, "").strip() else None
    # slurmctld adds a second argument, the features, when a job's features need a node
    # rebooted (power_save.c, power_job_reboot); a launch from a template has none to apply.
    if len(argv) not in (2, 3) or not argv[1].strip():
        _logging(name, early_log, "INFO", closed)
        log.error("usage: %s HOSTLIST (slurmctld passes the nodes' hostlist)", name)
        return EXIT_USAGE
    try:
        nodes = expand(argv[1])
    except HostlistError as error:
        _logging(name, early_log, "INFO", closed)
        log.error("%s", error)
        return EXIT_USAGE
    try:
        config = load()
    except ConfigError as error:
        _logging(name, early_log, "INFO", closed)
        log.error("%s", error)
        if program == "resume":
            # The job must not wait ResumeTimeout for nodes nobody is launching.
            _power_down_unconfigured(nodes, str(error))
        return EXIT_FAILED
    _logging(name, config.log_destination(os.environ), config.log_level, closed)
    log.info("%s %s (%s mode)", name, fold(nodes), config.mode)
    if len(argv) == 3:
        log.warning("features %r are not applied: each node set's template decides", argv[2])
    try:
        runtime = Runtime.build(config)
        if program == "resume":
            jobs, unusable = _jobs(runtime, nodes, resume_text, resume_error)
            ok = _power_down_unusable(runtime.scontrol, unusable)
            given_up = {node for _, mine in unusable for node in mine}
            wanted = [node for node in nodes if node not in given_up]
            ok = launch.resume(runtime, wanted, jobs) and ok
        else:
            ok = giveback.give_back(runtime, nodes, program)
        # After the run's own work: the reservation is for the jobs Slurm schedules next.
        _keep_block_ends(runtime)
    except Exception as error:  # noqa: BLE001 - logged; slurmctld sees the exit code
        log.exception("%s %s failed: %s", name, fold(nodes), error)
        if program == "resume":
            _power_down(Scontrol(config.scontrol), nodes, plan.reason("error", str(error)))
        return EXIT_FAILED
    log.info("%s %s done%s", name, fold(nodes), "" if ok else " with errors (see above)")
    return EXIT_OK if ok else EXIT_FAILED


def _keep_block_ends(runtime: Runtime) -> None:
    """Each block node set's maintenance reservation from its usable end (block_ends), kept
    on every run: a block extended since moves it. Never in the way of the run itself."""
    if not any(n.capacity_reservation_id for n in runtime.config.nodesets):
        return
    try:
        for line in block_ends.keep_all(runtime.config, runtime.ec2, runtime.scontrol):
            (log.warning if "could not" in line else log.info)("%s", line)
    except (AwsError, ScontrolError) as error:
        log.warning("could not keep the blocks' reservations: %s", error)


def _jobs(
    runtime: Runtime, nodes: list[str], text: str | None, error: str | None
) -> tuple[list[tuple[int, list[str]]], list[tuple[plan.BadEntry, list[str]]]]:
    """The jobs the nodes are resumed for, and the nodes a bad entry of the resume file may be
    for (``plan.unusable``), which are not launched."""
    if text is not None:
        try:
            resume = plan.read_resume_file(text)
        except plan.ResumeFileError as bad:
            error = f"SLURM_RESUME_FILE: {bad}"
        else:
            for entry in resume.bad:
                log.error(
                    "%s: %s (nodes %s)",
                    entry.label,
                    entry.why,
                    fold(entry.nodes) if entry.nodes is not None else "unknown",
                )
            return resume.jobs, plan.unusable(nodes, resume)
    if error:
        log.warning("%s; asking slurmctld which jobs the nodes are for", error)
    # Run by hand, or an old Slurm: the jobs configuring on these nodes are the same mapping.
    wanted = set(nodes)
    jobs = [
        (job.job_id, [n for n in job.nodes if n in wanted])
        for job in runtime.scontrol.jobs()
        if job.state.startswith("CONFIGURING") and wanted.intersection(job.nodes)
    ]
    return jobs, []


def _power_down_unusable(
    scontrol: Scontrol, unusable: list[tuple[plan.BadEntry, list[str]]]
) -> bool:
    """Nodes a bad resume-file entry may be for: powered down (Slurm requeues their job) with
    a reason naming the entry and what is wrong with it. True when every power-down took."""
    done = [
        _power_down(scontrol, mine, plan.reason("error", f"{entry.label}: {entry.why}"))
        for entry, mine in unusable
    ]
    return all(done)


def _resume_file() -> tuple[str | None, str | None]:
    path = os.environ.get("SLURM_RESUME_FILE")
    if not path:
        return None, "no SLURM_RESUME_FILE"
    try:
        return Path(path).read_text(encoding="utf-8"), None
    except OSError as error:
        return None, f"SLURM_RESUME_FILE {path}: {error.strerror}"


def _power_down_unconfigured(nodes: list[str], why: str) -> None:
    _power_down(Scontrol(DEFAULT_SCONTROL), nodes, plan.reason("error", f"configuration: {why}"))


def _power_down(scontrol: Scontrol, nodes: list[str], reason: str) -> bool:
    try:
        scontrol.power_down(nodes, reason)
        log.info("powered down %s: %s", fold(nodes), reason)
    except ScontrolError as error:
        log.error("could not power down %s: %s", fold(nodes), error)
        return False
    return True


# -- the process ----------------------------------------------------------------------------


def _reopen_standard_descriptors() -> bool:
    """``/dev/null`` on any of descriptors 0–2 that is closed; True when standard error was
    (the program runs under slurmctld, or a daemon like it)."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
    for fd in closed:
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    if 1 in closed:
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process's own
    if 2 in closed:
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    return 2 in closed


def _logging(program: str, destination: Path | None, level: str, stderr_closed: bool) -> None:
    handlers: list[logging.Handler] = []
    if destination is not None:
        try:
            handlers.append(logging.FileHandler(destination, encoding="utf-8"))
        except OSError as error:
            print(f"{program}: cannot open the log {destination}: {error}", file=sys.stderr)
        else:
            if stderr_closed:
                # Whatever else is printed (a library's warning, a traceback) lands there too.
                target = os.open(destination, os.O_WRONLY | os.O_APPEND)
                os.dup2(target, 1)
                os.dup2(target, 2)
                os.close(target)
    if not handlers or (not stderr_closed and sys.stderr.isatty()):
        if not stderr_closed:
            handlers.append(logging.StreamHandler(sys.stderr))
        elif _SYSLOG.exists():
            # No syslog daemon listening: nowhere left to log.
            with contextlib.suppress(OSError):
                handlers.append(logging.handlers.SysLogHandler(address=str(_SYSLOG)))
    formatter = logging.Formatter(_FORMAT.format(program=program))
    for handler in handlers:
        handler.setFormatter(formatter)
    # The deployed client's waits (a throttled or waking Lambda) go to the same log.
    for logger in (log, logging.getLogger(CLIENT_LOG)):
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = False
