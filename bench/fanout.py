"""Issue 13's figures: what the fan-out policy (``domain.fanout``) and the capacity memory cost
and save, with 100 ms per EC2 call and EC2's published buckets (as ``bench.placement``).

- probe, 6 subnets, capacity everywhere: the reservation-seconds the answer reports, its wall
  time and its mutating EC2 calls, against one round trip and the floor (one create + one
  cancel);
- probe, 6 subnets, capacity only in the last, memory forgotten before every run (the warm-memory
  case is ``bench.placement``'s probe: its container remembers the earlier runs);
- reserve, 4 types x 6 subnets, capacity everywhere: reservation-seconds against a round trip;
- quota room for one reservation at a time, capacity everywhere, the first AZ's create leaving
  the broker 300 ms late: probe and reserve against the sequential way, answers compared.

Every repetition runs broker, baseline and floor in rotating order (``placement._repeat``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from . import worlds
from .formulas import median, ratio
from .harness import LATENCY, REGION, LambdaContext, captured_stdout, ec2_buckets_on, timed, world
from .placement import _cancel_quietly, _no_active_left, _places, _repeat
from .sequential import Place, first_with_capacity, floor

MUTATING = ("CreateCapacityReservation", "CancelCapacityReservation")
# How much later than the others the first AZ's create leaves the broker (quota runs).
LATE = 0.3


def _everywhere() -> dict[str, Any]:
    types = [worlds.PROBE_TYPE, *worlds.RESERVE_TYPES]
    return worlds.placement_world({(az, t): 64 for az in worlds.AZS for t in types})


def _quota_world() -> dict[str, Any]:
    """Capacity everywhere; On-Demand quotas with room for one probe reservation of one
    g6.xlarge (4 vCPUs of the G limit) or one hold of 8 x c7i.48xlarge (1,536 vCPUs of the
    Standard limit) at a time: EC2 counts unused reservations toward them."""
    scenario = _everywhere()
    scenario["regions"][REGION]["quotas"] = {"vcpus": {"G": 4, "Standard": 1536}}
    return scenario


def _mutating(emu: Any) -> int:
    return sum(len(emu.calls(action)) for action in MUTATING)


def _handler(entry: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    if entry == "probe":
        from capacity_broker.handlers.probe import handler

        return handler
    from capacity_broker.handlers.reserve import handler as reserve

    return reserve


def _invoke(entry: str, event: dict[str, Any], tag: str) -> tuple[float, dict[str, Any]]:
    handler = _handler(entry)
    with captured_stdout():
        return timed(  # type: ignore[no-any-return]
            lambda: handler(
                {**event, "request_id": f"{tag}-{uuid.uuid4().hex[:8]}"}, LambdaContext()
            )
        )


def _forget_probe_memory() -> None:
    from .harness import broker_root

    broker_root().memory.forget()


PROBE_EVENT = {"instance_type": worlds.PROBE_TYPE, "subnet_ids": worlds.SUBNETS}
RESERVE_EVENT = {
    "job_id": "4343",
    "instance_types": worlds.RESERVE_TYPES,
    "subnet_ids": worlds.SUBNETS,
    "instance_count": worlds.RESERVE_COUNT,
}


def _probe_everywhere(reps: int) -> dict[str, Any]:
    from .harness import client

    wall: list[float] = []
    spent: list[float] = []
    calls: list[int] = []
    floors: list[float] = []
    trips: list[float] = []
    with world(_everywhere()) as w:
        emu = w.emu
        places = _places(emu, [worlds.PROBE_TYPE])
        ec2 = client("ec2", REGION)
        _invoke("probe", PROBE_EVENT, "warm")  # a warm container (latency 0)
        floor(ec2, places[0], 1, "probe")
        emu.latency(LATENCY)

        def run_broker() -> None:
            ec2_buckets_on(emu)
            emu.clear_calls()
            seconds, answer = _invoke("probe", PROBE_EVENT, "everywhere")
            if answer["status"] != "available" or answer["subnet_id"] != worlds.SUBNETS[0]:
                raise AssertionError(f"probe answered {answer}")
            _no_active_left(emu)
            wall.append(seconds)
            spent.append(float(answer["reservation_seconds"]))
            calls.append(_mutating(emu))

        def run_floor() -> None:
            ec2_buckets_on(emu)
            create, cancel = floor(ec2, places[0], 1, "probe")
            floors.append(create + cancel)
            trips.extend([create, cancel])

        _repeat(reps, {"broker": run_broker, "floor": run_floor})
    return {
        "broker_s": wall,
        "reservation_seconds": spent,
        "mutating_calls": calls,
        "floor_s": floors,
        "round_trip_s": trips,
        "median": {
            "broker": median(wall),
            "reservation_seconds": median(spent),
            "mutating_calls": median([float(c) for c in calls]),
            "floor": median(floors),
            "round_trip": median(trips),
        },
        "ratios": {
            "held_to_round_trip": ratio(median(spent), median(trips)),
            "to_floor": ratio(median(wall), median(floors)),
        },
    }


def _probe_no_memory(reps: int) -> dict[str, Any]:
    from .harness import client

    wall: list[float] = []
    spent: list[float] = []
    floors: list[float] = []
    with world(worlds.probe_world()) as w:
        emu = w.emu
        places = _places(emu, [worlds.PROBE_TYPE])
        ec2 = client("ec2", REGION)
        _invoke("probe", PROBE_EVENT, "warm")
        floor(ec2, places[-1], 1, "probe")
        emu.latency(LATENCY)

        def run_broker() -> None:
            _forget_probe_memory()  # a container that knows nothing of these subnets
            ec2_buckets_on(emu)
            emu.clear_calls()
            seconds, answer = _invoke("probe", PROBE_EVENT, "nomemory")
            if answer["status"] != "available" or answer["subnet_id"] != worlds.SUBNETS[-1]:
                raise AssertionError(f"probe answered {answer}")
            _no_active_left(emu)
            wall.append(seconds)
            spent.append(float(answer["reservation_seconds"]))

        def run_floor() -> None:
            ec2_buckets_on(emu)
            create, cancel = floor(ec2, places[-1], 1, "probe")
            floors.append(create + cancel)

        _repeat(reps, {"broker": run_broker, "floor": run_floor})
    return {
        "broker_s": wall,
        "reservation_seconds": spent,
        "floor_s": floors,
        "median": {"broker": median(wall), "floor": median(floors)},
        "ratios": {"to_floor": ratio(median(wall), median(floors))},
    }


def _reserve_everywhere(reps: int) -> dict[str, Any]:
    from .harness import client

    wall: list[float] = []
    spent: list[float] = []
    calls: list[int] = []
    trips: list[float] = []
    with world(_everywhere()) as w:
        emu = w.emu
        places = _places(emu, worlds.RESERVE_TYPES)
        ec2 = client("ec2", REGION)
        _, warm = _invoke("reserve", RESERVE_EVENT, "warm")
        _cancel_quietly(emu, (warm.get("reservation") or {}).get("id"))
        emu.latency(LATENCY)

        def run_broker() -> None:
            ec2_buckets_on(emu)
            emu.clear_calls()
            seconds, answer = _invoke("reserve", RESERVE_EVENT, "everywhere")
            reservation = answer.get("reservation") or {}
            if (
                answer["status"] != "reserved"
                or reservation.get("instance_type") != worlds.RESERVE_TYPES[0]
                or answer["subnet_ids"] != [worlds.SUBNETS[0]]
            ):
                raise AssertionError(f"reserve answered {answer}")
            wall.append(seconds)
            spent.append(float(answer["reservation_seconds"]))
            calls.append(_mutating(emu))
            _cancel_quietly(emu, reservation["id"])

        def run_floor() -> None:
            ec2_buckets_on(emu)
            create, cancel = floor(ec2, places[0], worlds.RESERVE_COUNT, "hold")
            trips.extend([create, cancel])

        _repeat(reps, {"broker": run_broker, "floor": run_floor})
    return {
        "broker_s": wall,
        "reservation_seconds": spent,
        "mutating_calls": calls,
        "round_trip_s": trips,
        "median": {
            "broker": median(wall),
            "reservation_seconds": median(spent),
            "mutating_calls": median([float(c) for c in calls]),
            "round_trip": median(trips),
        },
        "ratios": {"held_to_round_trip": ratio(median(spent), median(trips))},
    }


def _first_leaves_late(emu: Any, place: Place) -> None:
    """The create for ``place`` leaves the process ``LATE`` seconds after it is started, every
    time (a botocore hook on the one EC2 client the broker and the baseline share)."""
    from .harness import client

    def before(params: dict[str, Any], model: Any, **_: Any) -> None:
        if (
            model.name == "CreateCapacityReservation"
            and params.get("AvailabilityZoneId") == place.availability_zone_id
            and params.get("InstanceType") == place.instance_type
        ):
            time.sleep(LATE)

    client("ec2", REGION).meta.events.register(
        "before-parameter-build.ec2.CreateCapacityReservation", before
    )


def _quota(reps: int, entry: str) -> dict[str, Any]:
    from .harness import client

    probe = entry == "probe"
    event = PROBE_EVENT if probe else RESERVE_EVENT
    types = [worlds.PROBE_TYPE] if probe else worlds.RESERVE_TYPES
    count = 1 if probe else worlds.RESERVE_COUNT
    purpose = "probe" if probe else "hold"
    wall: list[float] = []
    sequential: list[float] = []
    answers: list[str] = []
    with world(_quota_world()) as w:
        emu = w.emu
        places = _places(emu, types)
        _first_leaves_late(emu, places[0])
        ec2 = client("ec2", REGION)
        emu.latency(LATENCY)

        def where(answer: dict[str, Any]) -> str:
            if probe:
                return f"{worlds.PROBE_TYPE}@{answer.get('subnet_id')}"
            reservation = answer.get("reservation") or {}
            return f"{reservation.get('instance_type')}@{(answer.get('subnet_ids') or [''])[0]}"

        def run_broker() -> None:
            ec2_buckets_on(emu)
            emu.clear_calls()
            seconds, answer = _invoke(entry, event, "quota")
            answers.append(where(answer))
            wall.append(seconds)
            if not probe:
                _cancel_quietly(emu, (answer.get("reservation") or {}).get("id"))
            _no_active_left(emu)

        def run_sequential() -> None:
            ec2_buckets_on(emu)
            seconds, outcome = timed(
                lambda: first_with_capacity(
                    ec2, places, count, purpose, f"seq-{uuid.uuid4().hex[:8]}", keep=not probe
                )
            )
            if outcome.place != places[0]:
                raise AssertionError(f"sequential {entry}: {outcome}")
            sequential.append(seconds)
            if not probe:
                _cancel_quietly(emu, outcome.reservation_id)

        # The container's first request (cold: it also looks up the subnets and the flags) is
        # kept apart; the timed runs are a warm container's, which remembers its latencies.
        run_broker()
        first = {"broker_s": wall.pop(), "answer": answers.pop()}
        _repeat(reps, {"broker": run_broker, "sequential": run_sequential})
    expected = f"{places[0].instance_type}@{places[0].subnet_id}"
    return {
        "late_s": LATE,
        "broker_s": wall,
        "sequential_s": sequential,
        "answers": answers,
        "expected_answer": expected,
        "answers_equal": all(a == expected for a in answers) and first["answer"] == expected,
        "first_request": first,
        "median": {"broker": median(wall), "sequential": median(sequential)},
        "ratios": {
            "to_sequential": ratio(median(wall), median(sequential)),
            "first_request_to_sequential": ratio(first["broker_s"], median(sequential)),
        },
    }


def bench_fanout(reps: int) -> dict[str, Any]:
    return {
        "probe_everywhere": _probe_everywhere(reps),
        "probe_no_memory": _probe_no_memory(reps),
        "reserve_everywhere": _reserve_everywhere(max(3, reps - 2)),
        "quota_probe": _quota(reps, "probe"),
        "quota_reserve": _quota(max(3, reps - 2), "reserve"),
    }
