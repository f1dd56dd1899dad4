"""capacity: ODCRs and Capacity Blocks of 16 regions against one region, warm container,
100 ms a call. Each region costs two calls in sequence (the listing, then the blocks'
topology), so one region is about two round trips and the regions run side by side.

Two inventories: a realistic one (40 ODCRs and 4 blocks a region) and a light one (2 and 1),
where the emulator's own CPU (moto serializing the answers, in this process) is small enough
that what remains is the broker's fan-out.
"""

from __future__ import annotations

from typing import Any

from . import worlds
from .formulas import median, ratio
from .harness import (
    LATENCY,
    CpuMeter,
    CpuProfile,
    LambdaContext,
    captured_stdout,
    ec2_buckets_on,
    timed,
    world,
)

INVENTORIES = {"realistic": (worlds.ODCRS_PER_REGION, worlds.BLOCKS_PER_REGION), "light": (2, 1)}


def bench_capacity(reps: int) -> dict[str, Any]:
    return {
        "inventories": {
            name: _inventory(reps, odcrs, blocks) for name, (odcrs, blocks) in INVENTORIES.items()
        }
    }


def _inventory(reps: int, odcrs: int, blocks: int) -> dict[str, Any]:
    from capacity_broker.handlers.capacity import handler

    context = LambdaContext()
    all_regions = worlds.CAPACITY_REGIONS
    one_region = all_regions[:1]
    per_region = odcrs + blocks
    times: dict[str, list[float]] = {"one": [], "all": []}
    cpu: dict[str, list[tuple[float, float]]] = {"one": [], "all": []}
    calls_per_region: dict[str, int] = {}
    with world(worlds.capacity_world(odcrs, blocks)) as w:
        emu = w.emu

        def listing(regions: list[str]) -> tuple[float, CpuMeter]:
            ec2_buckets_on(emu)
            emu.clear_calls()
            with captured_stdout(), CpuMeter() as meter:
                seconds, answer = timed(
                    lambda: handler({"reservation_type": "all", "regions": regions}, context)
                )
            if answer["status"] != "ok" or answer["summary"]["reservations"] != per_region * len(
                regions
            ):
                raise AssertionError(f"capacity answered {answer['status']}: {answer['message']}")
            if len(regions) == len(all_regions):
                calls_per_region.clear()
                for call in emu.calls():
                    calls_per_region[call.region] = calls_per_region.get(call.region, 0) + 1
            return seconds, meter

        emu.latency(LATENCY)
        cold, _ = listing(all_regions)  # a cold container: a client per region is made on the way
        emu.latency(0)
        listing(all_regions)
        emu.latency(LATENCY)
        for i in range(reps):
            order = ["one", "all"] if i % 2 == 0 else ["all", "one"]
            for which in order:
                seconds, meter = listing(one_region if which == "one" else all_regions)
                times[which].append(seconds)
                cpu[which].append((meter.server, meter.client))
        parse = _parse_cost(emu) if odcrs >= 10 else None
        # Where the CPU goes when all regions are listed (one more run, profiled, not timed).
        ec2_buckets_on(emu)
        with captured_stdout(), CpuProfile() as profile:
            handler({"reservation_type": "all", "regions": all_regions}, context)
    return {
        "botocore_parse_one_page_ms": parse,
        "cpu_profile_all_regions": profile.summary(),
        "regions": len(all_regions),
        "reservations_per_region": per_region,
        "reps": reps,
        "latency_s": LATENCY,
        "one_region_s": times["one"],
        "all_regions_s": times["all"],
        "cold_container_all_regions_s": cold,
        "calls_per_region": sorted(set(calls_per_region.values())),
        "median": {"one": median(times["one"]), "all": median(times["all"])},
        "cpu_median_s": {
            which: {
                "emulator": median(s for s, _ in values),
                "broker_and_botocore": median(c for _, c in values),
            }
            for which, values in cpu.items()
        },
        "ratio": ratio(median(times["all"]), median(times["one"])),
        # A pessimistic model of the same listing without the emulator's CPU in this process
        # (on AWS that work runs on EC2's side): two round trips plus the client-side CPU,
        # with no overlap between them.
        "model_ratio_without_emulator_cpu": ratio(
            2 * LATENCY + median(c for _, c in cpu["all"]),
            2 * LATENCY + median(c for _, c in cpu["one"]),
        ),
    }


def _parse_cost(emu: Any, rounds: int = 30) -> dict[str, float]:
    """Client-side CPU of one region's answer: botocore parsing one DescribeCapacityReservations
    page of this inventory, with botocore's default timestamp parser (dateutil) and with
    ``datetime.fromisoformat`` (what a faster parser could save; not what the broker does)."""
    import time
    from datetime import UTC, datetime

    import botocore.parsers

    from .harness import client

    captured: dict[str, Any] = {}
    ec2 = client("ec2", worlds.CAPACITY_REGIONS[0])

    def keep(**kwargs: Any) -> None:
        captured.setdefault("response", kwargs["response_dict"])

    event = "before-parse.ec2.DescribeCapacityReservations"
    ec2.meta.events.register(event, keep, unique_id="bench-parse-cost")
    try:
        emu.latency(0)
        ec2.describe_capacity_reservations(MaxResults=1000)
    finally:
        emu.latency(LATENCY)
        ec2.meta.events.unregister(event, unique_id="bench-parse-cost")
    shape = ec2.meta.service_model.operation_model("DescribeCapacityReservations").output_shape

    def iso(value: Any) -> datetime:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))

    def per_page(parser: Any) -> float:
        started = time.perf_counter()
        for _ in range(rounds):
            parser.parse(captured["response"], shape)
        return (time.perf_counter() - started) / rounds * 1000

    return {
        "bytes": len(captured["response"]["body"]),
        "botocore_default": per_page(botocore.parsers.create_parser("ec2")),
        "fromisoformat_timestamps": per_page(botocore.parsers.EC2QueryParser(timestamp_parser=iso)),
    }
