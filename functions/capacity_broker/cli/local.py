"""``local``: the emulator and the five functions on 127.0.0.1, offline.

In the foreground it serves until Ctrl-C. ``--background`` starts the same server as its own
process, waits until it answers, and prints only the ``export`` lines, so that::

    eval "$(capacity-broker local --scenario demo --background)"

leaves a shell where the CLI, ``CapacityBroker.deployed()`` and a scheduler's own boto3
clients reach the local broker. ``eval "$(capacity-broker local --stop)"`` stops the broker
that ``AWS_ENDPOINT_URL`` names and unsets those variables again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer

from .app import app
from .errors import EXIT_FAILED, EXIT_USAGE, err, fail

DEFAULT_PORT = 5055
DEFAULT_PREFIX = "capacity-broker-local"
READY_SECONDS = 120
EXPORTED = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "CAPACITY_BROKER_FUNCTION_PREFIX",
    "BROKER_STATE_TABLE",
)


def exports(endpoint: str, region: str, prefix: str) -> list[str]:
    """What a shell needs to reach the local broker (fake credentials: nothing is AWS)."""
    from ..local import state_table_name

    return [
        f"export AWS_ENDPOINT_URL={endpoint}",
        "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
        f"AWS_DEFAULT_REGION={region}",
        f"export CAPACITY_BROKER_FUNCTION_PREFIX={prefix}",
        # where `capacity-broker history` reads the functions' capacity memory
        f"export BROKER_STATE_TABLE={state_table_name(prefix)}",
    ]


def state_dir() -> Path:
    """Where background brokers are recorded (one file per port: pid, endpoint, log)."""
    path = Path(tempfile.gettempdir()) / f"capacity-broker-local-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@app.command()
def local(
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario",
            metavar="FILE",
            help="Scenario file (YAML/JSON) or a bundled one's name (demo, discovery).",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            min=0,
            max=65535,
            help=f"0 picks a free port (default {DEFAULT_PORT}; with --background a free one).",
            show_default=False,
        ),
    ] = None,
    function_prefix: Annotated[
        str,
        typer.Option(
            "--function-prefix", metavar="PREFIX", help="Functions are <prefix>-probe, ..."
        ),
    ] = DEFAULT_PREFIX,
    cluster_id: Annotated[
        str, typer.Option("--cluster-id", metavar="ID", help="The functions' BROKER_CLUSTER_ID.")
    ] = "local",
    region: Annotated[
        str, typer.Option("--region", metavar="REGION", help="The functions' own region.")
    ] = "us-east-1",
    background: Annotated[
        bool,
        typer.Option(
            "--background",
            help="Start it as its own process and print only the exports: "
            'eval "$(capacity-broker local --background)".',
        ),
    ] = False,
    stop: Annotated[
        bool,
        typer.Option(
            "--stop",
            help="Stop the background broker AWS_ENDPOINT_URL (or --port) names; print the "
            "unsets to eval.",
        ),
    ] = False,
) -> None:
    """Serve the emulator and the five functions (Lambda Invoke API) on 127.0.0.1."""
    if stop:
        _stop(port)
        return
    if background:
        _background(scenario, port or 0, function_prefix, cluster_id, region)
        return
    _serve(scenario, DEFAULT_PORT if port is None else port, function_prefix, cluster_id, region)


def _serve(scenario: str | None, port: int, prefix: str, cluster_id: str, region: str) -> None:
    try:
        from ..local import LocalBroker
    except ModuleNotFoundError as error:
        raise _no_emulator(error) from None
    broker = LocalBroker(
        scenario=scenario, port=port, prefix=prefix, cluster_id=cluster_id, region=region
    )
    try:
        broker.start()
    except ModuleNotFoundError as error:
        raise _no_emulator(error) from None
    except (OSError, ValueError, KeyError) as error:
        raise fail(f"could not start: {error}") from None
    # A container or supervisor stops with SIGTERM: shut down as on Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)
    lines = [
        f"# capacity-broker local: emulator and functions on {broker.endpoint}",
        *exports(broker.endpoint, region, prefix),
        f"# functions: {', '.join(broker.function_names)}",
        f"# cluster id: {cluster_id}; regions: {','.join(broker.regions)}",
        "# Ctrl-C stops it.",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    try:
        broker.serve_forever()
    except KeyboardInterrupt:
        broker.stop()


def _no_emulator(error: ModuleNotFoundError) -> typer.Exit:
    return fail(
        f"capacity-broker local needs the emulator extra ({error.name} is missing): "
        "pip install 'capacity-broker[emulator]'"
    )


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _background(scenario: str | None, port: int, prefix: str, cluster_id: str, region: str) -> None:
    """The foreground server as a process of its own session (it outlives this shell
    command and the terminal's Ctrl-C), its output in a log file; the exports once it
    answers."""
    folder = state_dir()
    log = folder / f"starting-{os.getpid()}-{time.time_ns()}.log"
    command = [
        sys.executable,
        "-m",
        "capacity_broker.cli",
        "local",
        "--port",
        str(port),
        "--function-prefix",
        prefix,
        "--cluster-id",
        cluster_id,
        "--region",
        region,
        *(["--scenario", scenario] if scenario else []),
    ]
    with log.open("w") as sink:
        process = subprocess.Popen(  # noqa: S603 - this interpreter, our own module
            command,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    endpoint = _wait_for_endpoint(process, log)
    used = urlsplit(endpoint).port
    record = folder / f"{used}.json"
    kept = log.rename(folder / f"{used}.log")
    record.write_text(json.dumps({"pid": process.pid, "endpoint": endpoint, "log": str(kept)}))
    err.print(
        f"capacity-broker local: started on {endpoint} (pid {process.pid}, log {kept}); "
        'stop it with: eval "$(capacity-broker local --stop)"'
    )
    sys.stdout.write("\n".join(exports(endpoint, region, prefix)) + "\n")
    sys.stdout.flush()


def _wait_for_endpoint(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + READY_SECONDS
    while True:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("export AWS_ENDPOINT_URL="):
                return line.split("=", 1)[1].strip()
        if process.poll() is not None:
            raise fail(f"capacity-broker local did not start:\n{log.read_text(errors='replace')}")
        if time.monotonic() > deadline:
            process.terminate()
            raise fail(f"capacity-broker local did not answer within {READY_SECONDS} s")
        time.sleep(0.1)


def _stop(port: int | None) -> None:
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    wanted = port if port is not None else urlsplit(endpoint).port if endpoint else None
    if wanted is None:
        raise fail(
            "no local broker named: set AWS_ENDPOINT_URL (the exports of --background) or "
            "give --port",
            EXIT_USAGE,
        )
    record = state_dir() / f"{wanted}.json"
    if not record.exists():
        raise fail(f"no background broker recorded on port {wanted} ({record})", EXIT_FAILED)
    details = json.loads(record.read_text())
    pid = int(details["pid"])
    if _is_ours(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while _is_ours(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _is_ours(pid):
            os.kill(pid, signal.SIGKILL)
    record.unlink(missing_ok=True)
    Path(details.get("log") or record.with_suffix(".log")).unlink(missing_ok=True)
    err.print(f"capacity-broker local: stopped {details['endpoint']} (pid {pid})")
    sys.stdout.write(f"unset {' '.join(EXPORTED)}\n")
    sys.stdout.flush()


def _is_ours(pid: int) -> bool:
    """The process is alive and is a ``capacity-broker local`` (a recycled pid is left
    alone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():
        return True  # no /proc (macOS): the pid is the one recorded
    try:
        words = cmdline.read_bytes().split(b"\0")
    except OSError:
        return False
    if b"capacity_broker.cli" not in words or b"local" not in words:
        return False
    # A stopped child not yet reaped by anyone shows as a zombie: it is gone.
    status = Path(f"/proc/{pid}/stat")
    try:
        return status.read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True
