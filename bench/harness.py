"""What every benchmark shares: the environment, a Lambda context, the emulator world with its
knobs, stdout kept off the terminal, and a sampler that shows where worker threads wait.

Everything runs in this process against ``emulator.mock`` (moto plus the capacity extension):
the handlers are called as Lambda would call them, through boto3, with latency and EC2's token
buckets switched on in the emulator.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLUSTER = "bench-cluster"
REGION = "us-east-1"
LATENCY = 0.1  # seconds added by the emulator to every call (EC2 and the rest)

# Variables the benchmark owns; anything the caller's shell set for them is ignored.
_OWNED = (
    "BROKER_REGIONS",
    "BROKER_EC2_RATE_SCALE",
    "BROKER_MAX_CONCURRENCY",
    "BROKER_STATE_TABLE",
    "BROKER_PARAMETER_PREFIX",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
)


def prepare_environment() -> None:
    """Before boto3 or the broker are imported: fake credentials, one region, no tracing."""
    for name in _OWNED:
        os.environ.pop(name, None)
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SECURITY_TOKEN": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
            "BROKER_CLUSTER_ID": CLUSTER,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_NAMESPACE": "CapacityBroker",
        }
    )


@dataclass
class LambdaContext:
    """Enough of Lambda's context object for the handlers (15 minutes: Lambda's maximum)."""

    function_name: str = "capacity-broker-bench"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = (
        "arn:aws:lambda:us-east-1:123456789012:function:capacity-broker-bench"
    )
    aws_request_id: str = "00000000-0000-0000-0000-00000000bench"
    remaining_ms: int = 900_000
    log_group_name: str = "/aws/lambda/bench"
    log_stream_name: str = "bench"
    extra: dict[str, Any] = field(default_factory=dict)

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class Captured:
    """What the handler wrote to stdout (log lines, EMF metrics) while captured."""

    def __init__(self) -> None:
        self.text = ""

    def metrics(self, name: str) -> list[float]:
        """Values of one EMF metric across the captured invocations."""
        found: list[float] = []
        for line in self.text.splitlines():
            if '"_aws"' not in line:
                continue
            try:
                blob = json.loads(line)
            except ValueError:
                continue
            value = blob.get(name)
            if isinstance(value, list):
                found.extend(float(v) for v in value)
            elif isinstance(value, int | float):
                found.append(float(value))
        return found


@contextlib.contextmanager
def captured_stdout() -> Iterator[Captured]:
    """File descriptor 1 into a temporary file: the handlers still format and write every log
    line and metric (that cost stays in the measurement), the terminal sees none of it."""
    result = Captured()
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield result
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            sink.seek(0)
            result.text = sink.read().decode("utf-8", errors="replace")


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@dataclass
class World:
    emu: Any  # emulator.Emulator
    ids: dict[str, str]  # scenario name -> reservation id
    seed_seconds: float


@contextlib.contextmanager
def world(scenario: dict[str, Any], env: Mapping[str, str] | None = None) -> Iterator[World]:
    """A fresh emulator seeded with ``scenario`` and a fresh broker container (built after
    ``env`` is set, so the pacer and the settings see it).

    The scenario goes in through the emulator's loader (its backend API, no API calls); what
    is measured afterwards goes through the handlers and boto3.
    """
    from capacity_broker.handlers._runtime import CONTAINER

    import emulator

    with environment(dict(env or {})), emulator.mock() as emu:
        seconds, ids = timed(lambda: emu.load_scenario(scenario))
        # A consistent EC2 for now: the naive sequential baseline (bench/sequential.py) cancels
        # and describes a reservation right after its create and does not wait for EC2 to know
        # it; the broker does. Comparing the two on an eventually consistent EC2 needs a baseline
        # that waits too (issue 12 follow-up), or the ratios would compare unlike things.
        emu.configure(eventual_consistency=False)
        CONTAINER.use(None)  # a new container: its root is built from ``env`` on first use
        try:
            yield World(emu, dict(ids.reservations), seconds)
        finally:
            CONTAINER.use(None)


def ec2_buckets_on(emu: Any, time_scale: float = 1.0, **knobs: Any) -> None:
    """EC2's published buckets in the emulator (each action its own), full, and a fresh pacer
    in the broker (at the published defaults again). ``knobs``: the emulator's ``raised`` or
    ``others``.

    Both sides start full before every timed run: each run then meets the account's budget as a
    request does when the account's average rate is below the refill rate.
    """
    emu.throttle(True, time_scale=time_scale, **knobs)
    broker_root().pacer.forget()


def broker_root() -> Any:
    """The root the broker's Lambda handlers run on in this process (``CONTAINER``'s), built
    from the environment on first use: its pacer, its clients, its memory."""
    from capacity_broker.handlers._runtime import CONTAINER

    return CONTAINER.root()


def use_root(**knobs: Any) -> Any:
    """A new root for the handlers, from the environment and ``knobs`` (a cleaner's clock)."""
    import os

    from capacity_broker.config import Settings
    from capacity_broker.handlers._runtime import CONTAINER
    from capacity_broker.root import Root

    root = Root(Settings.from_env(os.environ), **knobs)
    CONTAINER.use(root)
    return root


def client(service: str, region: str) -> Any:
    """The handlers' own client of ``service`` in ``region`` (their root's session)."""
    return broker_root().clients.client(service, region)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def load_average() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_gb = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "os": platform.platform(),
        "python": sys.version.split()[0],
    }


# -- where worker threads spend their time ------------------------------------------------------


class ThreadSampler:
    """Samples every thread's stack at ``hz`` and says what each broker worker was doing:
    waiting for the pacer's token (and for which region), waiting on EC2 (the emulator's
    latency), sleeping a retry backoff, or anything else (CPU, locks, the pool's queue)."""

    def __init__(self, prefixes: tuple[str, ...], hz: float = 50.0) -> None:
        self.prefixes = prefixes
        self.interval = 1.0 / hz
        self.states: Counter[str] = Counter()
        self.pacer_regions: Counter[str] = Counter()
        self.idle_while_others_wait = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def __enter__(self) -> ThreadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            names = {t.ident: t.name for t in threading.enumerate()}
            frames = sys._current_frames()
            self.samples += 1
            for ident, frame in frames.items():
                name = names.get(ident, "")
                if not name.startswith(self.prefixes):
                    continue
                state, region = _classify(frame)
                self.states[state] += 1
                if region:
                    self.pacer_regions[region] += 1

    def summary(self) -> dict[str, Any]:
        total = sum(self.states.values()) or 1
        return {
            "samples": self.samples,
            "worker_samples": sum(self.states.values()),
            "share": {k: round(v / total, 3) for k, v in self.states.most_common()},
            "pacer_wait_by_region": {
                k: round(v / total, 3) for k, v in self.pacer_regions.most_common()
            },
        }


def _classify(frame: Any) -> tuple[str, str | None]:
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    where = [(f.f_code.co_filename, f.f_code.co_name) for f in stack]
    for f, (filename, function) in zip(stack, where, strict=True):
        if filename.endswith("throttle.py") and function == "acquire" and "region" in f.f_locals:
            return "pacer wait (broker's client-side bucket)", str(f.f_locals["region"])
    if any(fn.endswith("faults.py") and name == "before" for fn, name in where[:2]):
        return "EC2 round trip (emulator latency)", None
    if any(fn.endswith("aws.py") and name == "run" for fn, name in where[:2]):
        return "retry backoff", None
    if any(name in ("_worker",) and fn.endswith("thread.py") for fn, name in where[:2]):
        return "idle (pool queue empty)", None
    return "running (CPU, locks)", None


# -- CPU on either side of the wire -------------------------------------------------------------


class CpuMeter:
    """CPU seconds spent in this process, split into the emulator's side of each call and the
    rest (the broker, boto3/botocore, the test harness).

    In-process, the emulator answers on the caller's thread and under the same GIL: work that
    AWS does on its own machines (running the action, serializing the XML answer) competes here
    with the broker's threads. The emulator's share is measured with ``time.thread_time()``
    around moto's ``BaseResponse._dispatch`` (parsing the request, the action, serializing the
    answer; moto's thin HTTP stub around it is not counted, so the emulator's share is a
    slight underestimate). The latency sleep is not CPU and is not counted either.
    """

    def __init__(self) -> None:
        self.server = 0.0
        self.calls = 0
        self.process = 0.0
        self._lock = threading.Lock()
        self._original: Any = None
        self._started = 0.0

    def __enter__(self) -> CpuMeter:
        from moto.core.responses import BaseResponse

        self._original = BaseResponse.__dict__["_dispatch"]
        original = self._original
        meter = self

        def dispatch(response: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return original(response, *args, **kwargs)
            finally:
                spent = time.thread_time() - started
                with meter._lock:
                    meter.server += spent
                    meter.calls += 1

        BaseResponse._dispatch = dispatch  # type: ignore[method-assign]
        self._started = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        from moto.core.responses import BaseResponse

        self.process = time.process_time() - self._started
        BaseResponse._dispatch = self._original  # type: ignore[method-assign]

    @property
    def client(self) -> float:
        return max(0.0, self.process - self.server)


# -- a CPU profile of every thread ---------------------------------------------------------------

# Which side of the wire a file's code runs on, in this process (first match wins).
_LAYERS = (
    ("/moto/", "emulator: moto"),
    ("/emulator/", "emulator: capacity model"),
    ("/xmltodict", "emulator: moto's XML writer (xmltodict)"),
    ("/werkzeug/", "emulator: moto's HTTP layer"),
    ("/responses/", "emulator: moto's HTTP layer"),
    ("/botocore/", "client: botocore"),
    ("/dateutil/", "client: botocore's timestamps (dateutil)"),
    ("/boto3/", "client: boto3"),
    ("/urllib3/", "client: urllib3"),
    ("capacity_broker", "broker: capacity_broker"),
    ("/aws_lambda_powertools/", "broker: Powertools"),
    ("/pydantic", "broker: pydantic"),
    ("/bench/", "bench harness"),
)


def layer_of(filename: str) -> str:
    for needle, layer in _LAYERS:
        if needle in filename:
            return layer
    if filename == "~" or filename.startswith("<"):
        return "builtins (either side)"
    return "stdlib (either side)"


class CpuProfile:
    """cProfile on every thread started while it is open (and this one), timed with
    ``time.thread_time`` so waiting (latency, locks, the pacer, the GIL) counts as nothing:
    what remains is CPU, summed per layer and per function."""

    def __init__(self) -> None:
        self._profiles: list[Any] = []
        self._lock = threading.Lock()

    def _new(self) -> Any:
        import cProfile

        profile = cProfile.Profile(time.thread_time)
        with self._lock:
            self._profiles.append(profile)
        return profile

    def __enter__(self) -> CpuProfile:
        def start(frame: Any, event: str, arg: Any) -> None:
            sys.setprofile(None)
            self._new().enable()

        threading.setprofile(start)
        self._main = self._new()
        self._main.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self._main.disable()
        threading.setprofile(None)  # type: ignore[arg-type]

    def summary(self, top: int = 12) -> dict[str, Any]:
        import pstats

        stats: Any = None
        for profile in self._profiles:
            try:
                if stats is None:
                    stats = pstats.Stats(profile)
                else:
                    stats.add(profile)
            except TypeError:  # a thread that never ran profiled code
                continue
        if stats is None:
            return {}
        layers: Counter[str] = Counter()
        functions: list[tuple[float, str]] = []
        sides = _Sides(stats.stats)
        for key, (_, _, own, _, _) in stats.stats.items():
            filename, line, name = key
            for layer, weight in sides.of(key).items():
                layers[layer] += own * weight
            short = filename.split("site-packages/")[-1].split("/work/main/")[-1]
            functions.append((own, f"{short}:{line}({name})"))
        total = sum(layers.values()) or 1.0
        functions.sort(reverse=True)
        return {
            "cpu_s": round(total, 3),
            "by_layer": {
                k: {"s": round(v, 3), "share": round(v / total, 3)} for k, v in layers.most_common()
            },
            "top_functions": [(f, round(s, 3)) for s, f in functions[:top]],
        }


_EITHER = ("builtins (either side)", "stdlib (either side)")


class _Sides:
    """Builtins and the standard library run for whoever calls them: their time goes to their
    callers' layers, in proportion to the time each caller spent in them (walking up through
    callers that are themselves builtins or stdlib)."""

    def __init__(self, stats: dict[Any, Any]) -> None:
        self.stats = stats
        self.known: dict[Any, Counter[str]] = {}

    def of(self, key: Any, seen: frozenset[Any] = frozenset()) -> Counter[str]:
        if key in self.known:
            return self.known[key]
        layer = layer_of(key[0])
        result: Counter[str] = Counter()
        entry = self.stats.get(key)
        callers = entry[4] if entry else {}
        total = sum(v[2] for v in callers.values()) if callers else 0.0
        if layer not in _EITHER or total <= 0 or key in seen or len(seen) > 8:
            result[layer] = 1.0
        else:
            for caller, values in callers.items():
                share = values[2] / total
                for side, weight in self.of(caller, seen | {key}).items():
                    result[side] += share * weight
        if not seen:
            self.known[key] = result
        return result
