"""The circuit breaker: a node set whose launches keep failing for a reason that is not
capacity stops taking jobs (contract v3, "Slurm (v3)", ``error_budget``).

A wrong ``function_prefix``, a launch template tagged for another cluster, a refused request:
each fails every job the same way, and a requeued job would be tried again every couple of
minutes forever. So each node set keeps a count of its launches that ended in an error in a
row (any answer but ``provisioned``, ``no_capacity`` and ``unreserved``, or a call to the
broker that failed). A launch that was answered about capacity (provisioned or not) sets it
back to zero: the broker works. When the count reaches the node set's ``error_budget`` the
program drains the node set's nodes (a reason naming the error and the command that undoes
it) and holds the job instead of letting Slurm requeue it; every later job that fails the
same way is held too, until a launch of the node set works again.

Where the count lives: one small JSON file per node set in a directory the programs own,
by default ``<StateSaveLocation>/capacity-broker`` (slurm.conf's StateSaveLocation belongs to
SlurmUser, who runs the programs, survives restarts, and is the directory a backup controller
shares). Programs run side by side (one per resume call, and each launches jobs in threads):
the file is read and written under an exclusive ``flock`` held for the update only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..domain.errors import classify
from ..domain.outcomes import leaves_capacity_open
from ..domain.reserve import ReserveStatus

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


def passing(code: str | None, answered: bool = True) -> bool:
    """An error code (EC2's, Lambda's) that says nothing about the node set: throttling, a
    server fault (``domain.errors.leaves_capacity_open``); ``answered=False``: no answer at
    all."""
    if not answered and code is None:
        return True
    return code is not None and leaves_capacity_open(classify(code))


_ReadWrite = tuple[Callable[[], Count], Callable[[Count], None]]


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
        path = self._path(nodeset)
        if not path.exists():
            return  # the common case: nothing to reset, no lock taken
        with self._locked(nodeset) as (read, write):
            if read().errors:
                write(Count(0, ""))

    def count(self, nodeset: str) -> Count:
        with self._locked(nodeset) as (read, _):
            return read()

    def _path(self, nodeset: str) -> Path:
        # A node set's label may be a hostlist ("hpc-[1-4]"): the file is named by a digest.
        digest = hashlib.sha256(nodeset.encode()).hexdigest()[:16]
        return self.directory / f"nodeset-{digest}.json"

    @contextlib.contextmanager
    def _locked(self, nodeset: str) -> Iterator[_ReadWrite]:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self._path(nodeset)
        with self._threads:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
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
