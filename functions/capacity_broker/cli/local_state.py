"""Where ``capacity-broker local --background`` keeps its brokers: a directory only its user can
reach, holding one record (``<port>.json``) and one log (``<port>.log``) per broker.

Head nodes are shared hosts: another local user may have made the path first, as a directory
of theirs, a world-writable one or a symbolic link, to read the log or to plant lines that a
shell would ``eval``. So the directory is ``$XDG_RUNTIME_DIR/capacity-broker-local`` when that
is private (the login's own runtime directory), else ``<tmp>/capacity-broker-local-<uid>``
made 0700; either way it is opened without following a link and used only when it is a
directory owned by this user with mode 0700, otherwise refused with the reason (``Unsafe``).
Every file in it is reached through that open directory: made with ``O_EXCL|O_NOFOLLOW``,
read without following links, removed by the names this module gives them, never a path a
record names.

A record names the broker's process by its pid and its identity (``identity``: its start time
and owner), taken when it was started, so a pid reused by another process is never signalled.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self

NAME = "capacity-broker-local"
# What the child hands over and a record holds: the server's own endpoint, nothing else.
_ENDPOINT = re.compile(r"http://127\.0\.0\.1:([1-9][0-9]{0,4})", re.ASCII)
_RECORD = re.compile(r"([1-9][0-9]{0,4})\.json", re.ASCII)
MAX_RECORD = 64 * 1024


class Unsafe(Exception):
    """The state directory cannot be trusted; the message says why and what to do."""


def endpoint_port(text: str, wanted: int = 0) -> int | None:
    """The port of ``http://127.0.0.1:<port>`` exactly (and ``wanted`` when not 0), else
    ``None``."""
    match = _ENDPOINT.fullmatch(text)
    if match is None or int(match[1]) > 65535 or wanted not in (0, int(match[1])):
        return None
    return int(match[1])


def _problem(st: os.stat_result, exact: bool) -> str | None:
    """Why a directory is not this user's private one, or ``None``."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
    mode = stat.S_IMODE(st.st_mode)
    if (mode != 0o700) if exact else (mode & 0o077):
        return f"has mode {mode:04o}, not 0700"
    return None


def location() -> tuple[Path, str | None]:
    """The state directory's path, and a note when ``$XDG_RUNTIME_DIR`` was set but passed
    over (not an absolute path to a directory of this user's that only they can reach)."""
    fallback = Path(tempfile.gettempdir()) / f"{NAME}-{os.getuid()}"
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if not runtime:
        return fallback, None
    if not os.path.isabs(runtime):
        problem: str | None = "is not an absolute path"
    else:
        try:
            problem = _problem(os.lstat(runtime), exact=False)
        except OSError as error:
            problem = f"cannot be read ({error.strerror})"
    if problem is None:
        return Path(runtime) / NAME, None
    return fallback, f"XDG_RUNTIME_DIR {runtime} {problem}: using {fallback}"


@dataclass(frozen=True)
class Record:
    """One background broker: its port, process and settings."""

    port: int
    pid: int
    identity: str
    endpoint: str
    settings: dict[str, str]

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def parse(cls, port: int, raw: bytes) -> Self | None:
        """The record, or ``None`` when it is not one this module wrote for ``port``."""
        try:
            data = json.loads(raw)
            record = cls(
                port=data["port"],
                pid=data["pid"],
                identity=data["identity"],
                endpoint=data["endpoint"],
                settings=data["settings"],
            )
        except (ValueError, TypeError, KeyError):
            return None
        fine = (
            record.port == port
            and type(record.pid) is int
            and record.pid > 1
            and isinstance(record.identity, str)
            and record.identity != ""
            and endpoint_port(str(record.endpoint), port) == port
            and isinstance(record.settings, dict)
            and all(isinstance(v, str) for v in record.settings.values())
        )
        return record if fine else None

    def alive(self) -> bool:
        """The process started for this record still runs (not merely its pid)."""
        return identity(self.pid) == self.identity

    def signal(self, number: int) -> bool:
        """Send ``number`` to the process started for this record, if it still runs; never to
        another that has its pid since. Where Linux has pidfds the process is held while it
        is checked, so it cannot be replaced between the check and the signal."""
        if hasattr(os, "pidfd_open"):
            try:
                handle = os.pidfd_open(self.pid)
            except OSError:  # gone, or pidfds unsupported by this kernel
                handle = -1
            if handle >= 0:
                try:
                    if not self.alive():
                        return False
                    with contextlib.suppress(ProcessLookupError):
                        signal.pidfd_send_signal(handle, number)
                    return True
                finally:
                    os.close(handle)
        if not self.alive():
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, number)
        return True


class StateDir:
    """The verified state directory, held open: every file operation goes through it."""

    def __init__(self, path: Path, fd: int, note: str | None = None) -> None:
        self.path = path
        self.fd = fd
        self.note = note

    @classmethod
    def open(cls, create: bool = True) -> Self | None:
        """The state directory (made 0700 when missing and ``create``), verified; ``None``
        when it does not exist and ``create`` is false. ``Unsafe`` when it cannot be
        trusted."""
        path, note = location()
        made = False
        if create:
            try:
                os.mkdir(path, 0o700)
                made = True
            except FileExistsError:
                pass
            except OSError as error:
                raise Unsafe(f"cannot make {path}: {error.strerror}") from None
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            if create:
                raise Unsafe(f"{path} vanished while it was being made") from None
            return None
        except OSError as error:
            why = (
                "is a symbolic link or not a directory"
                if error.errno in (errno.ELOOP, errno.ENOTDIR)
                else f"cannot be opened ({error.strerror})"
            )
            raise Unsafe(_refusal(path, why)) from None
        st = os.fstat(fd)
        if made and st.st_uid == os.getuid():
            os.fchmod(fd, 0o700)  # the umask may have taken bits off
            st = os.fstat(fd)
        problem = _problem(st, exact=True)
        if problem is not None:
            os.close(fd)
            raise Unsafe(_refusal(path, problem))
        return cls(path, fd, note)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One ``--background`` or ``--stop`` at a time (a second waits for the first)."""
        import fcntl  # POSIX only, as the rest of this module

        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    # -- files, by the names given here -----------------------------------------------------
    def create(self, name: str) -> int:
        """A new file of this user's only (read-write); fails if anything has that name."""
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(name, flags, 0o600, dir_fd=self.fd)

    def read(self, name: str) -> bytes | None:
        """A regular file of this user's (not a link), at most ``MAX_RECORD`` bytes."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, dir_fd=self.fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                return None
            return os.read(fd, MAX_RECORD)
        finally:
            os.close(fd)

    def write(self, name: str, data: bytes) -> None:
        """Replace ``name`` at once with ``data`` (a fresh file renamed over it)."""
        draft = f".{name}.{os.getpid()}.{time.time_ns()}"
        fd = self.create(draft)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.rename(draft, name)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    # -- records ----------------------------------------------------------------------------
    def record(self, port: int) -> Record | None:
        raw = self.read(f"{port}.json")
        return None if raw is None else Record.parse(port, raw)

    def ports(self) -> list[int]:
        return sorted(int(m[1]) for n in os.listdir(self.fd) if (m := _RECORD.fullmatch(n)))

    def running(self) -> list[Record]:
        """The brokers that still run; a record whose process is gone is removed."""
        found = []
        for port in self.ports():
            record = self.record(port)
            if record is not None and record.alive():
                found.append(record)
            elif record is not None:
                self.forget(port)
        return found

    def keep(self, record: Record) -> None:
        self.write(f"{record.port}.json", record.to_json())

    def forget(self, port: int) -> None:
        """Remove the record and log of ``port``: the two files this module made for it."""
        self.remove(f"{port}.json")
        self.remove(f"{port}.log")


def _refusal(path: Path, problem: str) -> str:
    return (
        f"refusing to use {path}: it {problem}. Another local user may have made it to read "
        "or change what the local broker keeps there. Remove it if it is yours, or set "
        "XDG_RUNTIME_DIR (or TMPDIR) to a directory only you can reach."
    )


def identity(pid: int) -> str | None:
    """Process ``pid``'s start time, when it runs as this user (not a zombie); else ``None``.
    Its pid and start time together name one process, never a later one given the same pid."""
    proc = Path(f"/proc/{pid}")
    if Path("/proc/self/stat").exists():
        try:
            owner = proc.stat().st_uid
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        # after the command's name: state (3rd field), ..., starttime (22nd)
        if owner != os.getuid() or len(fields) < 20 or fields[0] in ("Z", "X"):
            return None
        return f"boot+{fields[19]}"
    return _identity_from_ps(pid)


def _identity_from_ps(pid: int) -> str | None:
    """Where there is no ``/proc`` (macOS): ``ps`` says the owner, state and start."""
    try:
        done = subprocess.run(  # noqa: S603 - ps, with a number
            ["ps", "-o", "uid=,stat=,lstart=", "-p", str(pid)],  # noqa: S607
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.split()
    if done.returncode != 0 or len(words) < 3 or words[0] != str(os.getuid()):
        return None
    if words[1].startswith("Z"):
        return None
    return "ps+" + " ".join(words[2:])


def settings_of(values: Mapping[str, Any]) -> dict[str, str]:
    """A broker's settings as a record keeps them (a scenario file by its absolute path)."""
    scenario = str(values.get("scenario") or "")
    if scenario and Path(scenario).is_file():
        scenario = str(Path(scenario).resolve())
    return {k: str(v or "") for k, v in values.items()} | {"scenario": scenario}
