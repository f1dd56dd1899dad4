"""The circuit breaker: a node set whose launches keep failing for a reason that is not
capacity stops taking jobs (contract v3, "Slurm (v3)", ``error_budget``; v4: it counts only
what fails every job of the node set).

A wrong ``function_prefix``, a launch template tagged for another cluster, a refused request:
each fails every job the same way, and a requeued job would be tried again every couple of
minutes forever. So each node set keeps a count of its launches that ended in an error in a
row (any answer but ``provisioned``, ``no_capacity`` and ``unreserved``, or a call to the
broker that failed), leaving out:

- passing trouble (throttling, a server fault, no answer, a SnapStart version waking up):
  EC2's or Lambda's moment, which the next try may not meet;
- a job's own error (``own``): what its own request asked is refused (its count over the
  account's quota, its runtime past its Capacity Block's usable end, the broker's time budget
  spent on it). Any user could otherwise drain a node set for everyone by submitting three
  jobs larger than the quota; such a job is held or requeued alone, with the reason in its
  Comment, and the node set's count is left as it was.

A launch that was answered about capacity (provisioned or not) sets it back to zero: the
broker works. When the count reaches the node set's ``error_budget`` the program drains the
node set's nodes (a reason naming the error and the command that undoes it) and holds the job
instead of letting Slurm requeue it; every later job that fails the same way is held too,
until a launch of the node set works again.

Where the count lives: one small JSON file per node set in a directory the programs own,
by default ``<StateSaveLocation>/capacity-broker`` (slurm.conf's StateSaveLocation belongs to
SlurmUser, who runs the programs, survives restarts, and is the directory a backup controller
shares). Programs run side by side (one per resume call, and each launches jobs in threads):
the file is read and written under an exclusive ``flock`` held for the update only.

The programs run as SlurmUser (often root), and ``state_dir`` may be set to any path: so the
directory is made private (0700) when it is missing, and refused (``UnsafeState``) when it is
a symlink, is not this user's, or others may write in it; the file is opened through the
directory's descriptor with ``O_NOFOLLOW`` (a symlink planted in its place is never followed)
and refused unless it is a regular file of this user with one link. A refused count is
logged by the programs and counts nothing: the node set is never drained on a file it cannot
trust.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..client.deployed import WAKING
from ..domain.errors import classify
from ..domain.outcomes import leaves_capacity_open
from ..domain.reserve import ReserveStatus, runs_past_block

# Answers about capacity: the broker and the node set work, there is just nothing to launch on
# now. They never count, and they end a run of errors.
CAPACITY_WAITS = frozenset({str(ReserveStatus.NO_CAPACITY), str(ReserveStatus.UNRESERVED)})
DIRECTORY = "capacity-broker"


@dataclass(frozen=True)
class Count:
    """A node set's errors in a row, and the last one."""

    errors: int
    last: str

    def tripped(self, budget: int) -> bool:
        return budget > 0 and self.errors >= budget


def counts(status: str, passing: bool = False) -> bool:
    """Whether a launch that ended with ``status`` is an error the breaker counts: not an
    answer about capacity, nor a ``passing`` error (throttled, a server fault, no answer at
    all: EC2's or Lambda's trouble of the moment, which the next try may not meet)."""
    return status != ReserveStatus.PROVISIONED and status not in CAPACITY_WAITS and not passing


# EC2's answers about the job's own count (its instances' vCPUs, or their number, over the
# account's On-Demand quota: "Error codes for the Amazon EC2 API"). A smaller job of the same
# node set fits: they say nothing about the node set.
OWN_COUNT = frozenset({"InstanceLimitExceeded", "VcpuLimitExceeded"})
# The broker's own deadline ran out on this request (a slow region at the moment).
OWN_TIME = frozenset({"TimeBudgetExceeded"})


@dataclass(frozen=True)
class Own:
    """A job's own error: ``why`` in words; ``hold``: waiting cannot cure it (the job is held
    until its owner changes it and releases it), else the job is requeued as a wait is."""

    why: str
    hold: bool


def own(status: str, code: str | None, detail: str) -> Own | None:
    """Whether a launch that failed with ``status``/``code`` (the broker's answer,
    ``detail`` its message) failed for what the job itself asked, not for its node set."""
    if code in OWN_COUNT:
        return Own("the job's own instance count is over the account's quota", hold=True)
    if code in OWN_TIME:
        return Own("the broker's time budget ran out on this job's request", hold=False)
    if status == ReserveStatus.REJECTED and runs_past_block(detail):
        return Own("the job's time limit runs past its Capacity Block's usable end", hold=True)
    return None


# Lambda's SnapStart refusals (``client.deployed.WAKING``: a version re-initializing, a restore
# that timed out), which the client waits out within its patience first, and the function's
# own restore hook failing: none says anything about the node set (contract v4).
SNAPSTART = WAKING | {"SnapStartException"}


def passing(code: str | None, answered: bool = True) -> bool:
    """An error code (EC2's, Lambda's) that says nothing about the node set: throttling, a
    server fault (``domain.errors.leaves_capacity_open``), SnapStart waking up (``SNAPSTART``);
    ``answered=False``: no answer at all."""
    if not answered and code is None:
        return True
    if code in SNAPSTART:
        return True
    return code is not None and leaves_capacity_open(classify(code))


_ReadWrite = tuple[Callable[[], Count], Callable[[Count], None]]


class UnsafeState(OSError):
    """The breaker's directory or file cannot be trusted; the message says which and why."""


def _private_directory(directory: Path) -> int:
    """A descriptor of ``directory``, made 0700 when missing; ``UnsafeState`` when it is a
    symlink, is another user's, or is writable by others (who could swap the files in it)."""
    me = os.geteuid()
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        # Its parents first (their mode is the process's); the directory itself private.
        directory.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        if os.path.islink(directory):
            raise UnsafeState(
                f"the breaker's directory {directory} is a symlink: refused (set state_dir to "
                "the real directory)"
            ) from None
        raise UnsafeState(f"the breaker's directory {directory}: {error.strerror}") from None
    found = os.fstat(fd)
    problem = None
    if found.st_uid != me:
        problem = f"is owned by uid {found.st_uid}, not this program's user (uid {me})"
    elif found.st_mode & 0o022:
        problem = f"is writable by others (mode {stat.S_IMODE(found.st_mode):04o})"
    if problem is not None:
        os.close(fd)
        raise UnsafeState(
            f"the breaker's directory {directory} {problem}: refused (make it SlurmUser's own, "
            "mode 0700, or set state_dir to a directory that is)"
        )
    return fd


def _open_count_file(directory: Path, name: str) -> int:
    """The node set's file in ``directory``, opened for reading and writing without following
    a symlink, and only if it is a regular file of this user with one link."""
    folder = _private_directory(directory)
    try:
        try:
            fd = os.open(
                name,
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=folder,
            )
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UnsafeState(
                    f"the breaker's file {directory / name} is a symlink: refused (remove it)"
                ) from None
            raise
    finally:
        os.close(folder)
    found = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(found.st_mode):
        problem = "is not a regular file"
    elif found.st_uid != os.geteuid():
        problem = f"is owned by uid {found.st_uid}"
    elif found.st_nlink != 1:
        problem = f"has {found.st_nlink} links"
    if problem is not None:
        os.close(fd)
        raise UnsafeState(f"the breaker's file {directory / name} {problem}: refused (remove it)")
    return fd


class Breaker:
    """The counts of one cluster's node sets, in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # One program launches several jobs at once (threads, one runtime, one Breaker), and
        # each open file holds its own flock: the threads take turns here first.
        self._threads = threading.Lock()

    def failed(self, nodeset: str, why: str) -> Count:
        """One more error in a row for ``nodeset``; the count after it."""
        with self._locked(nodeset) as (read, write):
            count = Count(read().errors + 1, why)
            write(count)
        return count

    def worked(self, nodeset: str) -> None:
        """The broker answered the node set about capacity: its run of errors is over."""
        path = self.directory / self._name(nodeset)
        if not os.path.lexists(path):
            return  # the common case: nothing to reset, no lock taken
        with self._locked(nodeset) as (read, write):
            if read().errors:
                write(Count(0, ""))

    def count(self, nodeset: str) -> Count:
        with self._locked(nodeset) as (read, _):
            return read()

    @staticmethod
    def _name(nodeset: str) -> str:
        # A node set's label may be a hostlist ("hpc-[1-4]"): the file is named by a digest.
        digest = hashlib.sha256(nodeset.encode()).hexdigest()[:16]
        return f"nodeset-{digest}.json"

    @contextlib.contextmanager
    def _locked(self, nodeset: str) -> Iterator[_ReadWrite]:
        with self._threads:
            fd = _open_count_file(self.directory, self._name(nodeset))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)

                def read() -> Count:
                    os.lseek(fd, 0, os.SEEK_SET)
                    text = os.read(fd, 65536).decode("utf-8", "replace")
                    try:
                        data = json.loads(text) if text.strip() else {}
                        return Count(int(data.get("errors", 0)), str(data.get("last", "")))
                    except (ValueError, TypeError, AttributeError):
                        return Count(0, "")  # a torn or foreign file: start again

                def write(count: Count) -> None:
                    body = {
                        "nodeset": nodeset,
                        "errors": count.errors,
                        "last": count.last,
                        "at": f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}",
                    }
                    data = json.dumps(body).encode()
                    os.lseek(fd, 0, os.SEEK_SET)
                    os.ftruncate(fd, 0)
                    os.write(fd, data)

                yield read, write
            finally:
                os.close(fd)  # closing drops the flock
