"""probe (6 subnets) and reserve (4 types x 6 subnets), capacity only in the last place.

Each repetition times, in rotating order, the broker's handler (a warm container, as Lambda
keeps one), the sequential baseline and the floor (one create and one cancel where there is
capacity), all through the same boto3 client and emulator with 100 ms per call and EC2's
published token buckets, full at the start of every timed run.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from . import worlds
from .formulas import median, ratio, rounds
from .harness import (
    LATENCY,
    REGION,
    CpuMeter,
    LambdaContext,
    captured_stdout,
    ec2_buckets_on,
    environment,
    timed,
    world,
)
from .sequential import Place, first_with_capacity, floor


def _places(emu: Any, types: Sequence[str]) -> list[Place]:
    zones = emu.capacity(REGION).zones
    return [
        Place(t, subnet, zones[az])
        for t in types
        for subnet, az in zip(worlds.SUBNETS, worlds.AZS, strict=True)
    ]


def _cpu_medians(values: list[tuple[float, float]]) -> dict[str, float]:
    """Median CPU of a run on the emulator's side and on the rest (broker, botocore)."""
    return {
        "emulator": median(s for s, _ in values),
        "broker_and_botocore": median(c for _, c in values),
    }


def _rotate(items: list[str], i: int) -> list[str]:
    k = i % len(items)
    return items[k:] + items[:k]


def _held_seconds(emu: Any, reservation_id: str) -> float:
    """EC2's view of how long the probe reservation existed: from the create that made it to
    the cancel that ended it (the emulator acts at the end of each call's latency)."""
    creates = [c for c in emu.calls("CreateCapacityReservation") if c.outcome == "ok"]
    cancels = [
        c
        for c in emu.calls("CancelCapacityReservation")
        if c.params.get("CapacityReservationId") == reservation_id and c.outcome == "ok"
    ]
    if len(creates) != 1 or len(cancels) != 1:
        raise AssertionError(f"expected one winning create and its cancel: {creates} {cancels}")
    return float(cancels[0].ended - creates[0].ended)


def _rounds(emu: Any) -> list[dict[str, object]]:
    """The calls of the last run (every service), grouped into round trips."""
    calls = [
        (c.action, c.started) for service in ("ec2", "ssm") for c in emu.calls(service=service)
    ]
    return rounds(calls)


def _no_active_left(emu: Any) -> None:
    alive = [
        r.id for r in emu.capacity(REGION).reservations.values() if r.state in ("active", "pending")
    ]
    if alive:
        raise AssertionError(f"reservations left behind: {alive}")


def _cancel_quietly(emu: Any, reservation_id: str | None) -> None:
    """Give a kept hold back through the emulator's backend (not timed, no API call)."""
    if reservation_id:
        emu.capacity(REGION).cancel_capacity_reservation(reservation_id)


# -- probe ----------------------------------------------------------------------------------------


COLD_SAMPLES = 3


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose time is the median (its rounds and CPU, not a mix of several runs')."""
    ordered = sorted(runs, key=lambda r: float(r["s"]))
    return dict(ordered[len(ordered) // 2])


def _cold_container(emu: Any, places: list[Place], *, snapshot: bool) -> None:
    """A broker container as Lambda starts one, against an emulator that is not cold itself.

    The emulator's own first calls cost about 0.4 s of CPU (moto building its SSM and EC2
    backends and response handlers), which no AWS endpoint has: a session of the bench's own
    pays them first, for every action the probe calls. The broker then starts with nothing
    made: a new boto3 session (its API models parsed again), no clients, no caches. With
    ``snapshot``, as restored from a SnapStart snapshot: the broker's before-snapshot hook has
    run (``Root.prime``: the models parsed, the flows' modules imported, the first clients
    made), nothing else.
    """
    import boto3
    from capacity_broker.handlers import _runtime

    emu.latency(0)
    own = boto3.session.Session(region_name=REGION)
    own.client("ssm").get_parameters_by_path(Path="/bench-warm-up", Recursive=True)
    ec2 = own.client("ec2")
    subnets = ec2.describe_subnets(SubnetIds=worlds.SUBNETS)["Subnets"]
    ec2.describe_vpcs(VpcIds=sorted({s["VpcId"] for s in subnets}))
    floor(ec2, places[-1], 1, "probe")
    _runtime.CONTAINER.use(None)  # a cold container: a new root, a new session
    hook = getattr(_runtime, "before_snapshot", None)  # older brokers had none
    if snapshot and hook is not None:
        hook()


def bench_probe(reps: int) -> dict[str, Any]:
    from capacity_broker.handlers.probe import handler

    from .harness import client

    event = {"instance_type": worlds.PROBE_TYPE, "subnet_ids": worlds.SUBNETS}
    context = LambdaContext()
    broker: list[float] = []
    sequential: list[float] = []
    floors: list[float] = []
    round_trips: list[float] = []
    held: list[float] = []
    held_reported: list[float] = []
    held_sequential: list[float] = []
    cpu: list[tuple[float, float]] = []
    cold = 0.0
    with world(worlds.probe_world()) as w:
        emu = w.emu
        places = _places(emu, [worlds.PROBE_TYPE])
        ec2 = client("ec2", REGION)

        def probe_once(tag: str) -> tuple[float, dict[str, Any], list[float]]:
            ec2_buckets_on(emu)
            emu.clear_calls()
            with captured_stdout() as out, CpuMeter() as meter:
                seconds, answer = timed(
                    lambda: handler(
                        {**event, "request_id": f"{tag}-{uuid.uuid4().hex[:8]}"}, context
                    )
                )
            if answer["status"] != "available" or answer["subnet_id"] != worlds.SUBNETS[-1]:
                raise AssertionError(f"probe answered {answer}")
            outcomes = [a["outcome"] for a in answer["attempts"]]
            if outcomes != ["insufficient_capacity"] * 5 + ["available"]:
                raise AssertionError(f"probe attempts {outcomes}")
            _no_active_left(emu)
            cpu.append((meter.server, meter.client))
            return seconds, answer, out.metrics("ReservationSecondsHeld")

        # Cold containers first (the first invocation also makes the clients and reads the
        # flags and the subnets): one as Lambda starts it on demand, one restored from a
        # SnapStart snapshot (the API models parsed before the snapshot, by the broker's hook).
        # One cold start is one sample on a shared machine: take the median of a few, in turn.
        samples: dict[str, list[dict[str, Any]]] = {"on_demand": [], "snapstart": []}
        for i in range(COLD_SAMPLES):
            for kind in _rotate(list(samples), i):
                _cold_container(emu, places, snapshot=(kind == "snapstart"))
                emu.latency(LATENCY)
                seconds, _, _ = probe_once(f"cold-{kind}")
                samples[kind].append(
                    {
                        "s": seconds,
                        "rounds": _rounds(emu),
                        "cpu_s": dict(
                            zip(("emulator", "broker_and_botocore"), cpu.pop(), strict=True)
                        ),
                    }
                )
        cold_runs: dict[str, Any] = {
            kind: {**_median_run(runs), "samples_s": [r["s"] for r in runs]}
            for kind, runs in samples.items()
        }
        ec2 = client("ec2", REGION)
        cold = cold_runs["on_demand"]["s"]
        cold_cpu = tuple(cold_runs["on_demand"]["cpu_s"].values())
        cold_rounds = cold_runs["on_demand"]["rounds"]
        # Then warm: the steady state of a Lambda container.
        emu.latency(0)
        first_with_capacity(ec2, places, 1, "probe", "warm", keep=False)
        floor(ec2, places[-1], 1, "probe")
        emu.latency(LATENCY)

        def run_broker() -> None:
            seconds, answer, reported = probe_once("bench")
            broker.append(seconds)
            held.append(_held_seconds(emu, answer["attempts"][-1]["reservation_id"]))
            held_reported.extend(reported)

        def run_sequential() -> None:
            ec2_buckets_on(emu)
            emu.clear_calls()
            seconds, outcome = timed(
                lambda: first_with_capacity(
                    ec2, places, 1, "probe", f"seq-{uuid.uuid4().hex[:8]}", keep=False
                )
            )
            if outcome.place != places[-1] or outcome.calls != 8 or not outcome.reservation_id:
                raise AssertionError(f"sequential probe: {outcome}")
            sequential.append(seconds)
            held_sequential.append(_held_seconds(emu, outcome.reservation_id))
            _no_active_left(emu)

        def run_floor() -> None:
            ec2_buckets_on(emu)
            create, cancel = floor(ec2, places[-1], 1, "probe")
            floors.append(create + cancel)
            round_trips.extend([create, cancel])

        _repeat(reps, {"broker": run_broker, "sequential": run_sequential, "floor": run_floor})
    return {
        "subnets": len(worlds.SUBNETS),
        "reps": reps,
        "latency_s": LATENCY,
        "broker_s": broker,
        "sequential_s": sequential,
        "floor_s": floors,
        "round_trip_s": round_trips,
        "held_s": held,
        "held_reported_by_broker_s": held_reported,
        "held_sequential_s": held_sequential,
        "cold_container_s": cold,
        "cold_container_rounds": cold_rounds,
        "cold_container_cpu_s": {"emulator": cold_cpu[0], "broker_and_botocore": cold_cpu[1]},
        "cold_containers": cold_runs,
        "cpu_median_s": _cpu_medians(cpu),
        "median": {
            "broker": median(broker),
            "sequential": median(sequential),
            "floor": median(floors),
            "round_trip": median(round_trips),
            "held": median(held),
            "held_sequential": median(held_sequential),
        },
        "ratios": {
            "to_floor": ratio(median(broker), median(floors)),
            "to_sequential": ratio(median(broker), median(sequential)),
            "held_to_round_trip": ratio(median(held), median(round_trips)),
            "sequential_held_to_round_trip": ratio(median(held_sequential), median(round_trips)),
            "cold_to_floor": ratio(cold, median(floors)),
            "cold_snapstart_to_floor": ratio(cold_runs["snapstart"]["s"], median(floors)),
        },
    }


def _repeat(reps: int, runs: dict[str, Callable[[], None]]) -> None:
    names = list(runs)
    for i in range(reps):
        for name in _rotate(names, i):
            runs[name]()


# -- reserve --------------------------------------------------------------------------------------


def bench_reserve(reps: int, concurrencies: Sequence[int]) -> dict[str, Any]:
    from capacity_broker.handlers._runtime import CONTAINER
    from capacity_broker.handlers.reserve import handler

    from .harness import client

    event = {
        "job_id": "4242",
        "instance_types": worlds.RESERVE_TYPES,
        "subnet_ids": worlds.SUBNETS,
        "instance_count": worlds.RESERVE_COUNT,
    }
    pairs = len(worlds.RESERVE_TYPES) * len(worlds.SUBNETS)
    context = LambdaContext()
    broker: dict[int, list[float]] = {c: [] for c in concurrencies}
    calls_in_rounds: dict[int, list[dict[str, object]]] = {}
    cpu: dict[int, list[tuple[float, float]]] = {c: [] for c in concurrencies}
    sequential: list[float] = []
    floors: list[float] = []
    with world(worlds.reserve_world()) as w:
        emu = w.emu
        places = _places(emu, worlds.RESERVE_TYPES)
        winner = places[-1]

        def reserve_once(tag: str) -> tuple[float, dict[str, Any], tuple[float, float]]:
            ec2_buckets_on(emu)
            emu.clear_calls()
            with captured_stdout(), CpuMeter() as meter:
                seconds, answer = timed(
                    lambda: handler(
                        {**event, "request_id": f"{tag}-{uuid.uuid4().hex[:8]}"}, context
                    )
                )
            reservation = answer.get("reservation") or {}
            if (
                answer["status"] != "reserved"
                or reservation.get("instance_type") != winner.instance_type
                or answer["subnet_ids"] != [winner.subnet_id]
            ):
                raise AssertionError(f"reserve answered {answer}")
            creates = emu.calls("CreateCapacityReservation")
            if len(creates) != pairs or sum(c.outcome == "ok" for c in creates) != 1:
                raise AssertionError(f"reserve made {len(creates)} creates")
            _cancel_quietly(emu, reservation["id"])
            return seconds, answer, (meter.server, meter.client)

        ec2 = client("ec2", REGION)
        emu.latency(0)
        kept = first_with_capacity(ec2, places, worlds.RESERVE_COUNT, "hold", "warm", keep=True)
        _cancel_quietly(emu, kept.reservation_id)
        emu.latency(LATENCY)

        def run_broker(concurrency: int) -> Callable[[], None]:
            def run() -> None:
                with environment({"BROKER_MAX_CONCURRENCY": str(concurrency)}):
                    # A warm container with this concurrency: built, caches filled, untimed.
                    CONTAINER.use(None)
                    emu.latency(0)
                    reserve_once("warm")
                    emu.latency(LATENCY)
                    seconds, _, spent = reserve_once(f"bench{concurrency}")
                broker[concurrency].append(seconds)
                cpu[concurrency].append(spent)
                calls_in_rounds[concurrency] = _rounds(emu)

            return run

        def run_sequential() -> None:
            ec2_buckets_on(emu)
            seconds, outcome = timed(
                lambda: first_with_capacity(
                    ec2,
                    places,
                    worlds.RESERVE_COUNT,
                    "hold",
                    f"seq-{uuid.uuid4().hex[:8]}",
                    keep=True,
                )
            )
            if outcome.place != winner or outcome.calls != pairs + 1:
                raise AssertionError(f"sequential reserve: {outcome}")
            sequential.append(seconds)
            _cancel_quietly(emu, outcome.reservation_id)

        def run_floor() -> None:
            ec2_buckets_on(emu)
            create, cancel = floor(ec2, winner, worlds.RESERVE_COUNT, "hold")
            floors.append(create + cancel)

        runs: dict[str, Callable[[], None]] = {f"broker{c}": run_broker(c) for c in concurrencies}
        runs |= {"sequential": run_sequential, "floor": run_floor}
        _repeat(reps, runs)
    return {
        "pairs": pairs,
        "instance_count": worlds.RESERVE_COUNT,
        "reps": reps,
        "latency_s": LATENCY,
        "broker_s": {str(c): v for c, v in broker.items()},
        "rounds_of_a_run": {str(c): v for c, v in calls_in_rounds.items()},
        "cpu_median_s": {str(c): _cpu_medians(v) for c, v in cpu.items()},
        "sequential_s": sequential,
        "floor_s": floors,
        "median": {
            **{f"broker_concurrency_{c}": median(v) for c, v in broker.items()},
            "sequential": median(sequential),
            "floor": median(floors),
        },
        "ratios": {
            str(c): {
                "to_floor": ratio(median(v), median(floors)),
                "to_sequential": ratio(median(v), median(sequential)),
            }
            for c, v in broker.items()
        },
    }
