"""A class at 9:00 (issue 23): N cold containers probing at once, against the emulator served
over HTTP with EC2's published buckets, eventual consistency and 50 ms per call. AWS's side
runs ahead of the containers for the CPU, as on AWS it runs on its own (``Served``: the state
table's DynamoDB in an emulator process of its own, the containers' workers niced).

Each container is a ``Root`` of its own (its session, clients, EC2 pacer, capacity memory),
built cold in a worker process before the start; the containers are spread over at most
``--burst-processes`` processes (each process imports boto3 and the broker once: 200
processes would need ~20 GB, and this machine is shared). Every container starts its probe at
the same wall-clock instant, with a 30 s Lambda budget. The world: 4 subnets, the first two
AZs empty, so the right answer is always the third subnet; capacity is plentiful there (the
skew and crash rows give the first subnet room for a few, so that order matters).

The default plan is issue 39's "Numbers", every class in the deployment's default (the state
table, grouping on; the shared EC2 budget that once leased the containers' tokens from the table
is gone, docs/performance.md): a cold one-type class of 40, 10 runs in a row, each interleaved
with the same class arriving spread evenly over 10 s (probe i at i*10/40 s); one one-type class
of 200 restored from SnapStart (its table bill is judged); a class whose containers' clocks are
off by up to 60 s next to the same class in step (the answers compared as a multiset); a
leader SIGKILLed after its create (``bench.crash``); and a lone probe with the table, without
it, and with a table that accepts and never answers (``bench.hung``). ``full_sizes`` (``--full``)
adds issue 23's matrix: one-type and mixed classes per size, cold and SnapStart, the largest
without a table, and the lone probe as deployed when issue 23 was filed.

What a run reports, from the answers and from the emulator's call log: wrong answers (an
``available`` answer the sequential oracle does not allow: ``wrong``), answers not
``available``, EC2 calls and throttled calls, mutating calls per desktop, p50/p99 of the probes'
wall time, reservations left holding that no answer flagged, and the workers' CPU seconds
against the wall; and what the class cost the state table as DynamoDB bills it (the table
emulator's meter, ``bench.table_bill``): write and read units per desktop and the busiest
partition key's write units in any one second, the table throttled as DynamoDB throttles a key
(the emulator's default).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .table_bill import per_desktop

REGION = "us-east-1"
CLUSTER = "bench-burst"
TABLE = "broker-state"
AZS = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]
SUBNETS = [
    "subnet-0a000000000009a01",
    "subnet-0b000000000009a02",
    "subnet-0c000000000009a03",
    "subnet-0d000000000009a04",
]
ONE_TYPE = "m7i.large"
MIXED_TYPES = ["m7i.large", "c7i.large", "r7i.large", "m6i.large", "c6i.large", "r6i.large"]
BUDGET_S = 30.0
CALL_S = 0.05  # every EC2 call (the 50 ms)
TABLE_CALL_S = 0.005  # DynamoDB's single-digit milliseconds
ROOT = Path(__file__).resolve().parents[1]
MUTATING = ("CreateCapacityReservation", "CancelCapacityReservation", "ModifyCapacityReservation")


# Free instances per subnet's AZ: the first two empty, plenty in the others (the right answer
# is then always the third subnet). The skew row uses a world where arrival order matters.
PLENTY = (0, 0, 100_000, 100_000)


def scenario(capacity: tuple[int, ...] = PLENTY) -> dict[str, Any]:
    return {
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "name": "burst",
                        "cidr": "10.9.0.0/16",
                        "subnets": [
                            {
                                "id": s,
                                "name": f"burst-{i}",
                                "availability_zone": az,
                                "cidr": f"10.9.{i}.0/24",
                            }
                            for i, (s, az) in enumerate(zip(SUBNETS, AZS, strict=True))
                        ],
                    }
                ],
                "pools": [
                    {"availability_zone": az, "instance_type": t, "capacity": cap}
                    for az, cap in zip(AZS, capacity, strict=True)
                    for t in MIXED_TYPES
                ],
            }
        }
    }


def bound_s(n: int) -> float:
    """The bucket's bound for n desktops one at a time: (n·2 − 50) / 5 s (≥ 0)."""
    return max(0.0, (n * 2 - 50) / 5)


# -- the worker (a process of containers) ---------------------------------------------------


def worker(spec: dict[str, Any]) -> None:
    """Build one cold root per ``spec['probes']`` entry, say ready, wait for the start instant
    on stdin, probe once per container at that instant plus the probe's ``offset`` (a class
    arriving spread over seconds), print the answers as JSON. A probe's ``skew`` sets its
    container's clocks that many seconds off (hosts whose clocks differ)."""
    started_cpu = time.process_time()
    os.nice(10)  # (AWS's side first: ``Served``)
    from capacity_broker.client.in_process import InProcessContext, handler_module
    from capacity_broker.config import Settings
    from capacity_broker.handlers._runtime import PLAIN, serve
    from capacity_broker.root import Root

    module = handler_module("probe")
    probes: list[dict[str, Any]] = spec["probes"]
    roots = [_root(Root, Settings.from_env(os.environ), float(p.get("skew", 0.0))) for p in probes]
    if spec.get("snapshot"):
        # Restored from a SnapStart snapshot: each container's own root holds what
        # ``before_snapshot`` leaves in it (``Root.prime``: the parsed API models and the first
        # clients, no connection), and nothing else.
        for root in roots:
            root.prime()
            root.clients.drop_connections()  # (``after_restore``'s)
    print(json.dumps({"ready": True}), flush=True)
    go_at = float(sys.stdin.readline())
    ready_cpu = time.process_time()  # the containers' cold start ends here: imports, roots
    answers: list[dict[str, Any]] = [{} for _ in probes]

    def one(i: int, root: Any, probe: dict[str, Any]) -> None:
        delay = go_at + float(probe.get("offset", 0.0)) - time.time()
        if delay > 0:
            time.sleep(delay)
        began = time.time()
        context = InProcessContext(function_name="capacity-broker-probe", timeout_ms=30_000)
        try:
            answer = dict(
                serve("probe", module.run, dict(probe["event"]), context, lambda: root, PLAIN)
            )
        except Exception as error:
            answer = {"status": "crash", "message": repr(error)[:300]}
        answers[i] = {
            "began": began,
            "ended": time.time(),
            "status": answer.get("status"),
            "subnet_id": answer.get("subnet_id"),
            "code": answer.get("error_code") or answer.get("code"),
            "group": answer.get("group"),
            "request_id": answer.get("request_id"),
            # The contract's flag for a hold the probe could not give back (the cleaner and
            # its EndDate take it): such a hold is not "left holding that no answer flagged".
            "cleanup": answer.get("cleanup"),
        }

    threads = [
        threading.Thread(target=one, args=(i, root, probe))
        for i, (root, probe) in enumerate(zip(roots, probes, strict=True))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for root in roots:
        root.close(timeout=2)
    print(
        json.dumps(
            {
                "answers": answers,
                "cpu_s": time.process_time() - started_cpu,
                "class_cpu_s": time.process_time() - ready_cpu,
                "maxrss_mb": _maxrss_mb(),
            }
        ),
        flush=True,
    )


def _root(root_type: Any, settings: Any, skew: float) -> Any:
    """A container's root; with ``skew``, its wall clock and its monotonic one that many
    seconds off the host's (as ``tests/integration/test_grouped_across_containers.py`` skews
    its containers): what a fleet of hosts out of step looks like to the protocol."""
    if not skew:
        return root_type(settings)
    from datetime import UTC, datetime, timedelta

    return root_type(
        settings,
        clock=lambda: datetime.now(UTC) + timedelta(seconds=skew),
        monotonic=lambda: time.monotonic() + skew,
    )


def _maxrss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- the parent --------------------------------------------------------------------------------


class Emulator:
    """``python -m emulator serve`` in a process of its own, and a client of its controls."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "emulator", "serve"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("AWS_ENDPOINT_URL="):
            raise RuntimeError(f"the emulator did not start: {line!r}")
        self.endpoint = line.partition("=")[2]
        from emulator.remote import RemoteEmulator

        self.emu = RemoteEmulator(self.endpoint)

    def cpu_s(self) -> float:
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Served:
    """The AWS the containers call: EC2 (and SSM) in one emulator process, the state table's
    DynamoDB in another (``AWS_ENDPOINT_URL_DYNAMODB``, which the SDK honours per service).

    AWS's services do not share a CPU; one emulator process serves every request under one
    interpreter lock, on one core at most. In a class of 200 it was that core's queue, not
    EC2's 50 ms or DynamoDB's few milliseconds, that the calls waited in: 2 to 10 s a round
    trip, while the emulator logged 10 to 20 ms for each (its accept loop and its handlers
    taking turns with hundreds of others), and the probes answered nothing in time."""

    def __init__(self) -> None:
        self.ec2 = Emulator()
        self.table = Emulator()
        self.endpoint = self.ec2.endpoint
        self.table_endpoint = self.table.endpoint
        self.emu = self.ec2.emu
        self.table_emu = self.table.emu

    def cpu_s(self) -> float:
        return self.ec2.cpu_s() + self.table.cpu_s()

    def stop(self) -> None:
        self.ec2.stop()
        self.table.stop()


def _fresh_world(served: Served, table: bool, capacity: tuple[int, ...] = PLENTY) -> None:
    import boto3

    emu = served.emu
    emu.reset()
    emu.load_scenario(scenario(capacity))
    emu.throttle(enabled=True)  # EC2's published buckets, on the real clock
    emu.latency(CALL_S)
    served.table_emu.reset()
    served.table_emu.latency(
        CALL_S,
        actions=dict.fromkeys(
            ("UpdateItem", "BatchGetItem", "GetItem", "PutItem", "BatchWriteItem"), TABLE_CALL_S
        ),
    )
    if table:
        boto3.client(
            "dynamodb", region_name=REGION, endpoint_url=served.table_endpoint
        ).create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    emu.clear_calls()
    served.table_emu.clear_calls()
    served.table_emu.clear_dynamodb_bill()


def run_class(
    served: Served,
    n: int,
    types: list[str],
    table: bool,
    grouping: bool,
    processes: int,
    snapshot: bool = False,
    *,
    offsets: list[float] | None = None,
    skews: list[float] | None = None,
    table_endpoint: str | None = None,
    capacity: tuple[int, ...] = PLENTY,
) -> dict[str, Any]:
    """One class of ``n`` desktops, all at once (or probe i at ``offsets[i]`` seconds after the
    start, its container's clocks ``skews[i]`` seconds off); what it measured. With ``table``,
    the state table is the containers' (their capacity memory and, with ``grouping``, their
    meeting), served at ``table_endpoint`` when given (a hung one, say) instead of the table's
    emulator."""
    begun = time.time()  # (the run's own cost, start to end: the bench's wall-time plan)
    _fresh_world(served, table, capacity)
    env = {
        **os.environ,
        # The workers import this checkout's broker and bench, whatever the venv has installed.
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "functions"), str(ROOT), os.environ.get("PYTHONPATH", "")]
        ),
        "AWS_ENDPOINT_URL": served.endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB": table_endpoint or served.table_endpoint,
        "BROKER_CLUSTER_ID": CLUSTER,
        "BROKER_PROBE_GROUPING": "true" if grouping else "false",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "ERROR"),
    }
    if table:
        env["BROKER_STATE_TABLE"] = TABLE
    else:
        env.pop("BROKER_STATE_TABLE", None)
    probes = [
        {
            "event": {
                "request_id": f"class-{n}-{i:04d}",
                "instance_type": types[i % len(types)],
                "subnet_ids": SUBNETS,
            },
            "offset": offsets[i] if offsets else 0.0,
            "skew": skews[i % len(skews)] if skews else 0.0,
        }
        for i in range(n)
    ]
    count = max(1, min(processes, n))
    shares = [probes[i::count] for i in range(count)]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.burst",
                "--worker",
                json.dumps({"probes": share, "snapshot": snapshot}),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for share in shares
    ]
    for w in workers:
        assert w.stdout is not None
        ready = w.stdout.readline()
        if '"ready"' not in ready:
            raise RuntimeError(f"a worker did not start: {ready!r}")
    emulator_cpu_before = served.cpu_s()
    go_at = time.time() + 1.0
    wall_start = go_at
    for w in workers:
        assert w.stdin is not None
        w.stdin.write(f"{go_at}\n")
        w.stdin.flush()
    reports = []
    for w, share in zip(workers, shares, strict=True):
        try:
            last = go_at + max(offsets or [0.0])
            out, _ = w.communicate(timeout=max(0.0, last + BUDGET_S * 6 - time.time()))
            reports.append(json.loads(out.strip().splitlines()[-1]))
        except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError):
            # A worker that did not finish: its probes count as unanswered (not available).
            w.kill()
            w.communicate()
            lost = {"began": go_at, "ended": time.time(), "status": "lost", "subnet_id": None}
            reports.append(
                {
                    "answers": [{**lost, "code": "WorkerLost", "group": None}] * len(share),
                    "cpu_s": 0.0,
                    "maxrss_mb": 0.0,
                }
            )
    wall = time.time() - wall_start
    time.sleep(1.0)  # cancels the answers left to finish in the background
    measured = _measure(served, n, reports, wall, served.cpu_s() - emulator_cpu_before, capacity)
    # Seconds the run took on this machine: before the start (the world, the workers' cold
    # start) and in all (what `make bench` pays for it).
    measured["setup_s"] = go_at - begun
    measured["run_s"] = time.time() - begun
    if offsets:
        measured["spread_s"] = max(offsets)
    if skews:
        measured["skews_s"] = sorted(set(skews))
    return measured


def _measure(
    served: Served,
    n: int,
    reports: list[dict[str, Any]],
    wall: float,
    emulator_cpu: float,
    capacity: tuple[int, ...] = PLENTY,
) -> dict[str, Any]:
    answers = [a for r in reports for a in r["answers"]]
    calls = served.emu.calls()
    ec2 = [c for c in calls if c.get("service", "ec2") == "ec2"]
    throttled = [c for c in ec2 if c.get("outcome") == "RequestLimitExceeded"]
    mutating = [c for c in ec2 if c.get("action") in MUTATING]
    seconds = sorted(a["ended"] - a["began"] for a in answers)
    available = [a for a in answers if a["status"] == "available"]
    holding, flagged = _left_holding(served, answers)
    return {
        "n": n,
        "statuses": _tally(a["status"] for a in answers),
        "codes": _tally(a["code"] for a in answers if a["code"]),
        "wrong": wrong(available, n, capacity),
        # Where the class was answered (subnet: desktops), to compare classes as multisets.
        "subnets": _tally(a["subnet_id"] for a in available),
        "not_available": n - len(available),
        "grouped": sum(1 for a in answers if a.get("group")),
        "ec2_calls": len(ec2),
        "throttled": len(throttled),
        "throttled_share": len(throttled) / len(ec2) if ec2 else 0.0,
        "mutating": len(mutating),
        "mutating_per_desktop": len(mutating) / n,
        "p50_s": _quantile(seconds, 0.5),
        "p99_s": _quantile(seconds, 0.99),
        "bound_s": bound_s(n),
        "left_holding": holding,
        "left_holding_flagged": flagged,
        "wall_s": wall,
        "workers_cpu_s": sum(r["cpu_s"] for r in reports),
        # Of which after the start instant: the probes themselves, not the cold start.
        "workers_class_cpu_s": sum(r.get("class_cpu_s", 0.0) for r in reports),
        "emulator_cpu_s": emulator_cpu,
        "worker_maxrss_mb": max(r["maxrss_mb"] for r in reports),
        "processes": len(reports),
        # The state table's calls by action (the groups' meetings, the capacity memory): what
        # a class costs DynamoDB, and the containers' CPU.
        "table_calls": _tally(c.get("action") for c in served.table_emu.calls(service="dynamodb")),
        # And what they cost as DynamoDB bills them (capacity units, the hottest key's second).
        "table_bill": per_desktop(served.table_emu.dynamodb_bill(), TABLE, n),
    }


def wrong(available: list[dict[str, Any]], n: int, capacity: tuple[int, ...]) -> int:
    """Available answers the sequential oracle does not allow (``domain.group_plan.oracle``: each
    desktop alone, in arrival order, the first subnet with room). Arrival order is the class's
    to choose, so the answers are compared as a multiset: those in excess of the oracle's count
    for their subnet are wrong. In the plentiful world that is every answer not the third."""
    from collections import Counter

    from capacity_broker.domain.group_plan import oracle

    allowed = Counter(SUBNETS[s] for s in oracle([1] * n, capacity) if s is not None)
    return sum((Counter(a["subnet_id"] for a in available) - allowed).values())


def _left_holding(served: Served, answers: list[dict[str, Any]]) -> tuple[int, int]:
    """The owned reservations still active or pending after the class: (those no answer
    flagged, those whose probe's answer said ``"cleanup": "pending"``). A group's hold is
    tagged with the group's part (``<group id>:<first>-<last>``): flagged when a member of
    that group said so."""
    import boto3

    pending = {a["request_id"] for a in answers if a.get("cleanup") == "pending"}
    pending |= {
        str(a["group"].get("id"))
        for a in answers
        if a.get("cleanup") == "pending" and isinstance(a.get("group"), dict)
    }
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=served.endpoint)
    found = ec2.describe_capacity_reservations(
        Filters=[{"Name": "state", "Values": ["active", "pending"]}]
    )["CapacityReservations"]
    unflagged = flagged = 0
    for reservation in found:
        tags = {t["Key"]: t["Value"] for t in reservation.get("Tags", [])}
        if tags.get("capacity-broker:cluster-id") != CLUSTER:
            continue
        request = tags.get("capacity-broker:request-id", "")
        if request in pending or request.partition(":")[0] in pending:
            flagged += 1
        else:
            unflagged += 1
    return unflagged, flagged


def _tally(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    index = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[index]


def grouping_available() -> bool:
    from capacity_broker.config import Settings

    return "probe_grouping" in Settings.model_fields


# Issue 39's rows: a container's clock this many seconds off the host's, by container in turn.
SKEWS = [-60.0, 60.0, 0.0, 45.0, -45.0, 60.0, -60.0, 30.0]


def spread(n: int, seconds: float) -> list[float]:
    """Start offsets of a class arriving evenly over ``seconds``: probe i at i*seconds/n."""
    return [i * seconds / n for i in range(n)]


def _lone(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "median_s": statistics.median(r["p50_s"] for r in runs),
        "seconds": [round(r["p50_s"], 3) for r in runs],
        "statuses": _tally(s for r in runs for s in r["statuses"]),
        "ec2_calls": [r["ec2_calls"] for r in runs],
        "table_calls": [sum(r["table_calls"].values()) for r in runs],
    }


def bench_burst(
    processes: int,
    lone_reps: int,
    *,
    class_size: int = 40,
    class_runs: int = 10,
    spread_s: float = 10.0,
    snapstart_size: int = 200,
    skew_size: int = 16,
    full_sizes: list[int] | None = None,
) -> dict[str, Any]:
    """Issue 39's rows, every class in the deployment's default (the state table, grouping on;
    the table metered and throttled as DynamoDB, the emulator's default): a cold one-type class
    of ``class_size`` ``class_runs`` times in a row, the same class arriving spread evenly over
    ``spread_s`` as many times, one SnapStart one-type class of ``snapstart_size``, a class of
    ``skew_size`` whose containers' clocks are off by up to 60 s next to the same class in step,
    a leader killed after its create (``bench.crash``), and lone probes with the table, without
    it and with a table that hangs. ``full_sizes``: issue 23's matrix too (one-type and mixed,
    cold and SnapStart, per size; the largest with no table; the lone probe as deployed then)."""
    from .crash import bench_crash
    from .hung import Hung

    served = Served()
    hung = Hung()
    try:
        grouping = grouping_available()
        one = [ONE_TYPE]
        classes: dict[str, list[dict[str, Any]]] = {"cold": [], "spread": []}
        # Interleaved, so the machine's load drifts over both alike.
        for _ in range(class_runs):
            classes["cold"].append(run_class(served, class_size, one, True, grouping, processes))
            classes["spread"].append(
                run_class(
                    served,
                    class_size,
                    one,
                    True,
                    grouping,
                    processes,
                    offsets=spread(class_size, spread_s),
                )
            )
        runs: dict[str, Any] = {}
        # Restored from a SnapStart snapshot (the deploy option for classes, docs/deploy.md):
        # each container's own session holds the parsed API models, so the 2 cores here spend
        # the start on the probes, not on N parses that Lambda would run on N containers' CPUs.
        runs[f"one-type/{snapstart_size}/snapstart"] = run_class(
            served, snapstart_size, one, True, grouping, processes, snapshot=True
        )
        for n in full_sizes or []:
            runs[f"one-type/{n}/default"] = run_class(served, n, one, True, grouping, processes)
            runs[f"mixed/{n}/default"] = run_class(
                served, n, MIXED_TYPES, True, grouping, processes
            )
            for kind, types in (("one-type", one), ("mixed", MIXED_TYPES)):
                if f"{kind}/{n}/snapstart" in runs:
                    continue  # (the default plan's SnapStart class: measured once is enough)
                runs[f"{kind}/{n}/snapstart"] = run_class(
                    served, n, types, True, grouping, processes, snapshot=True
                )
        if full_sizes:
            # Issue 23's behaviour for the record: no table, no grouping (the largest class).
            largest = max(full_sizes)
            runs[f"one-type/{largest}/alone"] = run_class(
                served, largest, one, False, False, processes
            )
        # Hosts out of step: room for half the class in the first subnet, so where each
        # desktop lands depends on the group's decisions, not only on the world.
        room = (skew_size // 2, 0, 100_000, 100_000)
        skew = {
            "in_step": run_class(served, skew_size, one, True, grouping, processes, capacity=room),
            "skewed": run_class(
                served, skew_size, one, True, grouping, processes, capacity=room, skews=SKEWS
            ),
            "capacity": list(room),
        }
        # A lone probe: in the deployment's default; with no table at all (a client or
        # `local` without one); and with a table that accepts and never answers (contract v4:
        # the table is advice). With ``full_sizes``, also as the stack deployed it when issue 23
        # was filed (main at 367ccc0: the table for the capacity memory, no grouping).
        # Interleaved, so the machine's load drifts over every variant alike.
        lone: dict[str, list[dict[str, Any]]] = {"default": [], "no_table": [], "hung_table": []}
        if full_sizes:
            lone["today"] = []
        for _ in range(lone_reps):
            lone["default"].append(run_class(served, 1, one, True, grouping, 1))
            lone["no_table"].append(run_class(served, 1, one, False, False, 1))
            lone["hung_table"].append(
                run_class(served, 1, one, True, grouping, 1, table_endpoint=hung.endpoint)
            )
            if full_sizes:
                lone["today"].append(run_class(served, 1, one, True, False, 1))
        crash = bench_crash(served)
        return {
            "grouping_available": grouping,
            "classes": {
                k: {"n": class_size, "spread_s": spread_s if k == "spread" else 0.0, "runs": v}
                for k, v in classes.items()
            },
            "runs": runs,
            "skew": skew,
            "crash": crash,
            "lone": {k: _lone(v) for k, v in lone.items()},
        }
    finally:
        hung.close()
        served.stop()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(json.loads(sys.argv[2]))
