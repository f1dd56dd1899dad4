"""``capacity-broker local --background`` / ``--stop`` on a shared host: what a shell ``eval``s
is made by the command alone, its state directory is this user's own and verified, ``--stop``
removes only its own files and signals only its own server, and a second ``--background`` or a
``--stop --port`` says what it did and nothing else.

Each test runs the real command in its own processes with ``TMPDIR`` pointing at a directory
of its own (and no ``XDG_RUNTIME_DIR``), so the state directory is
``$TMPDIR/capacity-broker-local-<uid>``, where another local user would have to go to attack
it; every process a test starts is stopped by the ``sandbox`` fixture.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from capacity_broker.cli import local as cli_local
from typer.testing import CliRunner

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLI = str(Path(sys.executable).parent / "capacity-broker")
PLANTED = "export AWS_ENDPOINT_URL=$(touch {marker})"


@dataclass
class Sandbox:
    """One test's own TMPDIR, and the environment of a shell that uses it."""

    root: Path
    env: dict[str, str]
    started: list[subprocess.Popen[Any]] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return Path(self.env["TMPDIR"]) / f"capacity-broker-local-{os.getuid()}"

    def cli(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLI, "local", *args],
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )

    def evaluate(self, exports: str) -> dict[str, str]:
        """What a shell has after ``eval "$exports"`` (run in bash, in ``root``)."""
        script = 'eval "$1"; env -0'
        done = subprocess.run(
            ["bash", "-c", script, "bash", exports],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        pairs = (entry.partition("=") for entry in done.stdout.split("\0") if entry)
        return {key: value for key, _, value in pairs}


def _ours(marker: str) -> list[int]:
    """Processes of this user whose environment carries ``marker`` (this test's TMPDIR)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    if not Path("/proc/self/environ").exists():
        pytest.skip("needs /proc to find and stop what the test started")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "BROKER_", "CAPACITY_BROKER_")) and k != "XDG_RUNTIME_DIR"
    }
    env |= {"TMPDIR": str(tmp), "AWS_ACCESS_KEY_ID": "testing"}
    env |= {"AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    box = Sandbox(tmp_path, env)
    yield box
    # Whatever the code under test did (a broker it started and lost track of included),
    # nothing this test started outlives it: the processes carrying its own TMPDIR.
    for process in box.started:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    for pid in _ours(f"TMPDIR={tmp}"):
        os.kill(pid, signal.SIGKILL)


def answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/_emulator/health", timeout=10) as response:  # noqa: S310
            return bool(json.loads(response.read())["ok"])
    except OSError:
        return False


def exported(stdout: str) -> dict[str, str]:
    values = {}
    for line in stdout.splitlines():
        for word in shlex.split(line)[1:]:  # export A=1 B=2
            key, _, value = word.partition("=")
            values[key] = value
    return values


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- 1. the state directory: this user's own, verified ---------------------------------------


class Planter(threading.Thread):
    """Another local user's loop: a line for ``eval`` appended to every log that appears in
    the directory they prepared."""

    def __init__(self, folder: Path, marker: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.line = folder, PLANTED.format(marker=marker) + "\n"
        self.done = threading.Event()

    def run(self) -> None:
        planted: set[Path] = set()
        while not self.done.is_set():
            for log in set(self.folder.glob("*.log")) - planted:
                with log.open("a") as sink:
                    sink.write(self.line)
                planted.add(log)
            time.sleep(0.005)


@pytest.mark.parametrize("prepared", ["world-writable", "a link to theirs", "theirs"])
def test_a_state_directory_another_user_prepared_is_refused(
    sandbox: Sandbox, prepared: str
) -> None:
    marker = sandbox.root / "PWNED"
    theirs = sandbox.root / "attacker"
    theirs.mkdir(mode=0o777)
    os.chmod(theirs, 0o777)  # noqa: S103 - the attacker's own, open to all
    if prepared == "world-writable":
        sandbox.state.mkdir(mode=0o777)
        os.chmod(sandbox.state, 0o777)  # noqa: S103 - the attack
        watched = sandbox.state
    elif prepared == "a link to theirs":
        sandbox.state.symlink_to(theirs, target_is_directory=True)
        watched = theirs
    else:
        if os.getuid() != 0:
            pytest.skip("making a directory another uid owns needs root")
        sandbox.state.mkdir(mode=0o700)
        os.chown(sandbox.state, 65534, 65534)
        watched = sandbox.state
    planter = Planter(watched, marker)
    planter.start()
    try:
        started = sandbox.cli("--background")
    finally:
        planter.done.set()
        planter.join()
    shell = sandbox.evaluate(started.stdout)
    assert not marker.exists(), "a line another user wrote was run by the shell"
    assert started.returncode == 3, started.stderr
    assert started.stdout == ""
    assert "refusing to use" in started.stderr and str(sandbox.state) in started.stderr
    assert "AWS_ENDPOINT_URL" not in shell
    assert not list(watched.iterdir()), "it wrote into a directory it does not trust"


def test_private_state_directory_and_files(sandbox: Sandbox) -> None:
    started = sandbox.cli("--background", "--scenario", "demo")
    assert started.returncode == 0, started.stderr
    endpoint = exported(started.stdout)["AWS_ENDPOINT_URL"]
    port = endpoint.rsplit(":", 1)[1]
    assert (sandbox.state.stat().st_mode & 0o777) == 0o700
    assert sorted(p.name for p in sandbox.state.iterdir()) == [f"{port}.json", f"{port}.log"]
    for made in sandbox.state.iterdir():
        assert (made.stat().st_mode & 0o777) == 0o600, made
    stopped = sandbox.cli("--stop", env=sandbox.env | {"AWS_ENDPOINT_URL": endpoint})
    assert stopped.returncode == 0, stopped.stderr
    assert list(sandbox.state.iterdir()) == []


def test_the_runtime_directory_is_preferred_when_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capacity_broker.cli import local_state

    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert local_state.location() == (runtime / "capacity-broker-local", None)
    runtime.chmod(0o755)
    path, note = local_state.location()
    assert path.parent != runtime
    assert note is not None and "mode 0755" in note
    monkeypatch.setenv("XDG_RUNTIME_DIR", "relative/run")
    assert "not an absolute path" in (local_state.location()[1] or "")


# -- 1. what the shell evaluates -------------------------------------------------------------


def test_every_value_for_eval_is_shell_quoted(sandbox: Sandbox) -> None:
    marker = sandbox.root / "PWNED"
    hostile = f"cb-$(touch {marker});touch {marker}"
    lines = cli_local.exports("http://127.0.0.1:5055", f"us-east-1 `touch {marker}`", hostile)
    shell = sandbox.evaluate("\n".join(lines))
    assert not marker.exists()
    assert shell["CAPACITY_BROKER_FUNCTION_PREFIX"] == hostile
    assert shell["AWS_DEFAULT_REGION"] == f"us-east-1 `touch {marker}`"
    assert shell["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5055"
    # the foreground's comment lines stay comments, whatever a setting holds
    assert cli_local._comment(f"cluster id: x\ntouch {marker}").count("\n") == 0


FAKE_SERVER = """#!{python}
# stands in for `python -m capacity_broker.cli local ...`: says the endpoint below, both on the
# pipe --background gives it (the last argument) and in its log, then serves nothing
import os, sys, time
line = {line!r}
print("export AWS_ENDPOINT_URL=" + line, flush=True)
if sys.argv[-2] == "--ready-fd":
    os.write(int(sys.argv[-1]), (line + "\\n").encode())
time.sleep(120)
"""


@pytest.mark.parametrize(
    "handed",
    [
        "http://127.0.0.1:1$(touch {marker})",
        "http://evil.example:5055",
        "http://127.0.0.1:99999",
        "http://127.0.0.1:5055/path",
        "http://127.0.0.1:05055",
    ],
)
def test_the_endpoint_handed_over_must_be_the_servers_own(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, handed: str
) -> None:
    marker = sandbox.root / "PWNED"
    fake = sandbox.root / "fake-python"
    line = handed.format(marker=marker)
    fake.write_text(FAKE_SERVER.format(python=sys.executable, line=line))
    fake.chmod(0o700)
    monkeypatch.setattr(sys, "executable", str(fake))
    for key in ("XDG_RUNTIME_DIR", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TMPDIR", sandbox.env["TMPDIR"])
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    result = CliRunner().invoke(cli_local.app, ["local", "--background"])
    sandbox.evaluate(result.stdout)
    assert not marker.exists()
    assert result.exit_code == 3, result.output
    assert "not its own" in result.stderr
    assert result.stdout == ""
    assert _ours(f"TMPDIR={sandbox.env['TMPDIR']}") == []  # the fake was stopped
    assert list(sandbox.state.iterdir()) == []  # no record, no log left


# -- 1. --stop: its own files, its own server ------------------------------------------------


def decoy(sandbox: Sandbox) -> subprocess.Popen[Any]:
    """A process of this user that only looks like a local broker (its command line names
    ``capacity_broker.cli`` and ``local``), as a reused pid would."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "capacity_broker.cli", "local"],
        env=sandbox.env,
    )
    sandbox.started.append(process)
    return process


@pytest.mark.parametrize("written_by", ["an older version", "this version, for another process"])
def test_stop_removes_only_its_own_files_and_signals_only_its_server(
    sandbox: Sandbox, written_by: str
) -> None:
    sandbox.state.mkdir(mode=0o700)
    victim = sandbox.root / "keep-me.txt"
    victim.write_text("a file of the user's")
    port = free_port()
    process = decoy(sandbox)
    record: dict[str, Any] = {
        "pid": process.pid,
        "endpoint": f"http://127.0.0.1:{port}",
        "log": str(victim),
    }
    if written_by != "an older version":
        record |= {"port": port, "identity": "boot+1", "settings": {}}
    (sandbox.state / f"{port}.json").write_text(json.dumps(record))
    stopped = sandbox.cli("--stop", "--port", str(port))
    assert victim.exists(), "--stop removed a file the record named"
    time.sleep(0.5)
    assert process.poll() is None, "--stop signalled a process it did not start"
    assert stopped.stdout == ""  # AWS_ENDPOINT_URL does not name it: nothing to unset
    assert not (sandbox.state / f"{port}.json").exists()


# -- 4. a second --background; --stop --port -------------------------------------------------


def test_a_second_background_reuses_the_same_or_refuses_another(sandbox: Sandbox) -> None:
    first = sandbox.cli("--background", "--scenario", "demo")
    assert first.returncode == 0, first.stderr
    endpoint = exported(first.stdout)["AWS_ENDPOINT_URL"]
    again = sandbox.cli("--background", "--scenario", "demo")
    assert again.returncode == 0, again.stderr
    assert exported(again.stdout) == exported(first.stdout)
    assert f"already running on {endpoint}" in again.stderr and "reusing it" in again.stderr
    other = sandbox.cli("--background", "--scenario", "discovery")
    assert other.returncode == 3
    assert other.stdout == ""
    assert f"already runs on {endpoint}" in other.stderr and "'discovery'" in other.stderr
    assert len(list(sandbox.state.glob("*.json"))) == 1
    assert answers(endpoint)
    sandbox.cli("--stop", env=sandbox.env | {"AWS_ENDPOINT_URL": endpoint})


def test_stop_port_unsets_only_what_it_stopped(sandbox: Sandbox) -> None:
    first = sandbox.cli("--background", "--scenario", "demo")
    assert first.returncode == 0, first.stderr
    mine = exported(first.stdout)["AWS_ENDPOINT_URL"]
    port = free_port()
    second = sandbox.cli("--background", "--scenario", "demo", "--port", str(port))
    assert second.returncode == 0, second.stderr
    other = exported(second.stdout)["AWS_ENDPOINT_URL"]
    assert other == f"http://127.0.0.1:{port}"
    shell = sandbox.env | {"AWS_ENDPOINT_URL": mine}
    stopped = sandbox.cli("--stop", "--port", str(port), env=shell)
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped {other}" in stopped.stderr
    assert stopped.stdout == "", "it unset the variables of the broker still running"
    assert f"still names {mine}" in stopped.stderr
    assert answers(mine) and not answers(other)
    assert f"also runs on {mine}" in second.stderr  # it said so when it started the second
    last = sandbox.cli("--stop", env=shell)
    assert last.returncode == 0, last.stderr
    assert last.stdout.startswith("unset AWS_ENDPOINT_URL ")
    assert not answers(mine)
