"""``local``: the emulator and the five functions on 127.0.0.1, offline.

In the foreground it serves until Ctrl-C. ``--background`` starts the same server as its own
process, waits until it answers, and prints only the ``export`` lines, so that::

    eval "$(capacity-broker local --scenario demo --background)"

leaves a shell where the CLI, ``CapacityBroker.deployed()`` and a scheduler's own boto3
clients reach the local broker. ``eval "$(capacity-broker local --stop)"`` stops the broker
that ``AWS_ENDPOINT_URL`` names and unsets those variables again.

What is ``eval``'d is made here only: the endpoint comes from the server process through a
pipe (never read back from a file), must be ``http://127.0.0.1:<port>`` exactly, and every
value is shell-quoted. The background brokers' records live in a private, verified directory
(``local_state``). A second ``--background`` with the same settings reuses the running broker
and says so; with other settings it is refused, naming the one that runs.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import subprocess
import sys
import time
from typing import Annotated, Any

import typer

from .app import app
from .errors import EXIT_FAILED, EXIT_USAGE, err, fail
from .local_state import Record, StateDir, Unsafe, endpoint_port, identity, settings_of

DEFAULT_PORT = 5055
DEFAULT_PREFIX = "capacity-broker-local"
# Lambda's default account limit of concurrent executions (``capacity_broker.local``'s).
DEFAULT_CONCURRENCY = 1000
READY_SECONDS = 120
STOP_SECONDS = 15
EXPORTED = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "CAPACITY_BROKER_FUNCTION_PREFIX",
    "BROKER_STATE_TABLE",
)


def exports(endpoint: str, region: str, prefix: str) -> list[str]:
    """What a shell needs to reach the local broker (fake credentials: nothing is AWS), every
    value quoted for the shell that ``eval``s it."""
    from ..local import state_table_name

    q = shlex.quote
    return [
        f"export AWS_ENDPOINT_URL={q(endpoint)}",
        "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
        f"AWS_DEFAULT_REGION={q(region)}",
        f"export CAPACITY_BROKER_FUNCTION_PREFIX={q(prefix)}",
        # where `capacity-broker history` reads the functions' capacity memory
        f"export BROKER_STATE_TABLE={q(state_table_name(prefix))}",
    ]


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
        str | None,
        typer.Option(
            "--cluster-id",
            metavar="ID",
            help="The functions' BROKER_CLUSTER_ID (default: the scenario's cluster_id, the "
            "cluster its launch templates are tagged for; else local).",
            show_default=False,
        ),
    ] = None,
    iam: Annotated[
        bool,
        typer.Option(
            "--iam/--no-iam",
            help="Each function calls AWS as its deployed IAM role (synthesized from infra/) "
            "and the emulator evaluates that role's policies, as AWS would: what the "
            "deployed function may not do answers UnauthorizedOperation here too.",
        ),
    ] = True,
    region: Annotated[
        str, typer.Option("--region", metavar="REGION", help="The functions' own region.")
    ] = "us-east-1",
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            min=1,
            metavar="N",
            help="Invocations run at once, each in a container of its own as Lambda runs "
            "them (Lambda's default account limit); beyond it Lambda's 429 "
            "TooManyRequestsException.",
        ),
    ] = DEFAULT_CONCURRENCY,
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
            "unsets to eval when it is the one AWS_ENDPOINT_URL names.",
        ),
    ] = False,
    snapstart_asleep: Annotated[
        float,
        typer.Option(
            "--snapstart-asleep",
            metavar="SECONDS",
            min=0,
            help="Answer as a SnapStart version Lambda is re-initializing: every invoke is "
            "refused 409 SnapStartNotReadyException for SECONDS of the emulator's clock from "
            "the start (a version not invoked for 14 days).",
        ),
    ] = 0.0,
    snapstart_timeouts: Annotated[
        int,
        typer.Option(
            "--snapstart-timeouts",
            metavar="N",
            min=0,
            help="Then refuse the next N invokes 408 SnapStartTimeoutException (a snapshot "
            "restore that did not finish in time).",
        ),
    ] = 0,
    ready_fd: Annotated[
        int | None,
        typer.Option(
            "--ready-fd",
            hidden=True,
            min=3,
            help="--background's own: the pipe the server writes its endpoint to once it answers.",
        ),
    ] = None,
) -> None:
    """Serve the emulator and the five functions (Lambda Invoke API) on 127.0.0.1."""
    if stop:
        _stop(port)
        return
    snapstart = (snapstart_asleep, snapstart_timeouts)
    if background:
        _background(
            scenario, port or 0, function_prefix, cluster_id, region, iam, snapstart, concurrency
        )
        return
    _serve(
        scenario,
        DEFAULT_PORT if port is None else port,
        function_prefix,
        cluster_id,
        region,
        iam,
        ready_fd,
        snapstart,
        concurrency,
    )


def _serve(
    scenario: str | None,
    port: int,
    prefix: str,
    cluster_id: str | None,
    region: str,
    iam: bool,
    ready_fd: int | None = None,
    snapstart: tuple[float, int] = (0.0, 0),
    concurrency: int = DEFAULT_CONCURRENCY,
) -> None:
    try:
        from ..local import LocalBroker, SnapStart
    except ModuleNotFoundError as error:
        raise _no_emulator(error) from None
    broker = LocalBroker(
        scenario=scenario,
        port=port,
        prefix=prefix,
        cluster_id=cluster_id,
        region=region,
        iam=iam,
        snapstart=SnapStart(*snapstart),
        concurrency=concurrency,
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
        _comment(f"capacity-broker local: emulator and functions on {broker.endpoint}"),
        *exports(broker.endpoint, region, prefix),
        _comment(f"functions: {', '.join(broker.function_names)}"),
        _comment(
            f"cluster id: {broker.cluster_id}; regions: {','.join(broker.regions)}; IAM: "
            + ("the functions' deployed roles, evaluated" if iam else "not evaluated (--no-iam)")
        ),
        _comment(
            f"each function runs up to {concurrency} invocations at once, each in a container "
            "of its own, as Lambda does (--concurrency)"
        ),
        *(
            [
                _comment(
                    f"SnapStart: asleep {snapstart[0]:g} s of the emulator's clock (409 "
                    f"SnapStartNotReadyException), then {snapstart[1]} restore time-out(s) (408)"
                )
            ]
            if broker.route.snapstart.on
            else []
        ),
        "# Ctrl-C stops it.",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    if ready_fd is not None:
        os.write(ready_fd, f"{broker.endpoint}\n".encode())
        os.close(ready_fd)
    try:
        broker.serve_forever()
    except KeyboardInterrupt:
        broker.stop()


def _no_emulator(error: ModuleNotFoundError) -> typer.Exit:
    return fail(
        f"capacity-broker local needs the emulator extra ({error.name} is missing): "
        "pip install 'capacity-broker[emulator]'"
    )


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _comment(text: str) -> str:
    """A ``#`` line that stays one line (a control character in a setting cannot end it)."""
    return "# " + "".join(c if c.isprintable() else "?" for c in text)


# -- --background ----------------------------------------------------------------------------


def _state(create: bool = True) -> StateDir | None:
    """The verified state directory (``None``: not made yet and ``create`` false); a clear
    refusal when it cannot be trusted."""
    try:
        state = StateDir.open(create)
    except Unsafe as error:
        raise fail(str(error)) from None
    if state is not None and state.note:
        err.print(f"capacity-broker local: {state.note}", markup=False)
    return state


def _made_state() -> StateDir:
    state = _state(create=True)
    if state is None:  # StateDir.open(create=True) makes it or refuses
        raise fail("the state directory could not be made")
    return state


def _background(
    scenario: str | None,
    port: int,
    prefix: str,
    cluster_id: str | None,
    region: str,
    iam: bool,
    snapstart: tuple[float, int] = (0.0, 0),
    concurrency: int = DEFAULT_CONCURRENCY,
) -> None:
    """The foreground server as a process of its own session (it outlives this shell
    command and the terminal's Ctrl-C), its output in a log file; the exports once it
    answers. A broker already running with the same settings is reused."""
    settings = settings_of(
        {
            "scenario": scenario,
            "function_prefix": prefix,
            "cluster_id": cluster_id,
            "region": region,
            "iam": "on" if iam else "off",
            "snapstart_asleep": f"{snapstart[0]:g}" if snapstart[0] else "",
            "snapstart_timeouts": str(snapstart[1]) if snapstart[1] else "",
            "concurrency": concurrency,
        }
    )
    state = _made_state()
    with state, state.locked():
        running = state.running()
        # on the port asked for, or (none asked for) any
        here = [r for r in running if port in (0, r.port)]
        same = [r for r in here if r.settings == settings]
        if same:
            record, started = same[0], False
        elif here:
            raise _clash(here[0], settings)
        else:
            for other in running:
                err.print(
                    f"capacity-broker local: note: another local broker also runs on "
                    f"{other.endpoint} (pid {other.pid})",
                    markup=False,
                )
            record, started = _start(state, port, settings), True
    if started:
        err.print(
            f"capacity-broker local: started on {record.endpoint} (pid {record.pid}, log "
            f"{state.path / f'{record.port}.log'}); stop it with: "
            'eval "$(capacity-broker local --stop)"',
            markup=False,
        )
    else:
        err.print(
            f"capacity-broker local: already running on {record.endpoint} (pid {record.pid}) "
            "with these settings: reusing it, as it is (stop it first for a fresh world: "
            f'eval "$(capacity-broker local --stop --port {record.port})")',
            markup=False,
        )
    sys.stdout.write("\n".join(exports(record.endpoint, region, prefix)) + "\n")
    sys.stdout.flush()


def _clash(running: Record, wanted: dict[str, str]) -> typer.Exit:
    differ = ", ".join(
        f"{key} {running.settings.get(key) or '-'!r} (asked: {value or '-'!r})"
        for key, value in wanted.items()
        if running.settings.get(key) != value
    )
    return fail(
        f"a local broker already runs on {running.endpoint} (pid {running.pid}) with other "
        f'settings: {differ}. Stop it first (eval "$(capacity-broker local --stop --port '
        f'{running.port})"), or start another one on a port of its own with --port.'
    )


def _start(state: StateDir, port: int, settings: dict[str, str]) -> Record:
    """Start the server; its endpoint comes back through a pipe only it can write to."""
    command = [
        sys.executable,
        "-m",
        "capacity_broker.cli",
        "local",
        "--port",
        str(port),
        "--function-prefix",
        settings["function_prefix"],
        *(["--cluster-id", settings["cluster_id"]] if settings["cluster_id"] else []),
        "--region",
        settings["region"],
        "--iam" if settings.get("iam", "on") == "on" else "--no-iam",
        "--concurrency",
        settings.get("concurrency") or str(DEFAULT_CONCURRENCY),
        *(["--scenario", settings["scenario"]] if settings["scenario"] else []),
        *(
            ["--snapstart-asleep", settings["snapstart_asleep"]]
            if settings.get("snapstart_asleep")
            else []
        ),
        *(
            ["--snapstart-timeouts", settings["snapstart_timeouts"]]
            if settings.get("snapstart_timeouts")
            else []
        ),
    ]
    draft = f".starting-{os.getpid()}-{time.time_ns()}.log"
    log = state.create(draft)
    reader, writer = os.pipe()
    process: subprocess.Popen[bytes] | None = None
    try:
        process = subprocess.Popen(  # noqa: S603 - this interpreter, our own module
            [*command, "--ready-fd", str(writer)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(writer,),
            start_new_session=True,
        )
        os.close(writer)
        writer = -1
        started = identity(process.pid)
        handed = _handed_over(reader, log)
        used = endpoint_port(handed, port)
        if used is None:
            raise fail(
                f"capacity-broker local answered an endpoint that is not its own "
                f"(http://127.0.0.1:<port>): {handed!r}; it is stopped"
            )
        if started is None:
            raise fail(
                f"could not read the start time of the process it started (pid {process.pid}), "
                "so --stop could not tell it from another: it is stopped"
            )
        state.rename(draft, f"{used}.log")
        record = Record(used, process.pid, started, handed, settings)
        state.keep(record)
        return record
    except BaseException:
        if process is not None and process.poll() is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STOP_SECONDS)
        state.remove(draft)
        raise
    finally:
        for fd in (reader, writer, log):
            if fd >= 0:
                os.close(fd)


def _handed_over(reader: int, log: int) -> str:
    """The line the server writes to the pipe once it answers (at most 64 bytes)."""
    deadline = time.monotonic() + READY_SECONDS
    line = b""
    while b"\n" not in line and len(line) <= 64:
        left = deadline - time.monotonic()
        if left <= 0:
            raise fail(f"capacity-broker local did not answer within {READY_SECONDS} s")
        ready, _, _ = select.select([reader], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(reader, 128)
        if not chunk:  # it exited before it answered: say what it said
            said = os.pread(log, 16_384, max(0, os.fstat(log).st_size - 16_384))
            raise fail(f"capacity-broker local did not start:\n{said.decode(errors='replace')}")
        line += chunk
    return line.split(b"\n", 1)[0].decode("ascii", errors="replace")


# -- --stop ------------------------------------------------------------------------------------


def _stop(port: int | None) -> None:
    named = os.environ.get("AWS_ENDPOINT_URL", "")
    named_port = endpoint_port(named) if named else None
    if port is None and named_port is None:
        raise fail(
            (
                f"AWS_ENDPOINT_URL ({named}) is not a local broker's endpoint "
                "(http://127.0.0.1:<port>): give --port"
                if named
                else "no local broker named: set AWS_ENDPOINT_URL (the exports of "
                "--background) or give --port"
            ),
            EXIT_USAGE,
        )
    wanted = port if port is not None else named_port
    assert wanted is not None
    state = _state(create=False)
    if state is None:
        raise fail(f"no background broker recorded on port {wanted}", EXIT_FAILED)
    with state, state.locked():
        record = state.record(wanted)
        if record is None:
            state.forget(wanted)  # a record this version did not write (or none): its files
            raise fail(
                f"no background broker recorded on port {wanted} (in {state.path}); nothing "
                "was signalled",
                EXIT_FAILED,
            )
        if _terminate(record):
            said = f"stopped {record.endpoint} (pid {record.pid})"
        else:
            said = f"{record.endpoint} (pid {record.pid}) was not running: its record is removed"
        state.forget(wanted)
    err.print(f"capacity-broker local: {said}", markup=False)
    if named_port == record.port:
        sys.stdout.write(f"unset {' '.join(EXPORTED)}\n")
        sys.stdout.flush()
    elif named:
        err.print(
            f"capacity-broker local: AWS_ENDPOINT_URL still names {named}: left set",
            markup=False,
        )


def _terminate(record: Record) -> bool:
    """Stop the process the record started, and only it (``Record.signal``). Whether it was
    running."""
    if not record.signal(signal.SIGTERM):
        return False
    deadline = time.monotonic() + STOP_SECONDS
    while record.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    record.signal(signal.SIGKILL)
    return True
