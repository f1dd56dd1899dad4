"""cleaner: 2,000 owned leaked reservations among 2,000 foreign ones over three regions.

Time is compressed by ``S`` on both sides alike: the emulator's token buckets refill S times
faster (``throttle(time_scale=S)``) and so does the broker's pacer (``BROKER_EC2_RATE_SCALE=S``,
set before the container is built). Latency stays 100 ms a call, which makes the compressed run
harder than the real one (S times more calls in flight for the same rate).

The bound: per region r, the cancels beyond the bucket's burst at the refill rate, regions in
parallel:  T = max_r max(0, n_r - 50) / (5 * S)  seconds.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from . import worlds
from .formulas import EC2_MUTATING, busiest_share, ratio, sweep_bound
from .harness import (
    LATENCY,
    CpuProfile,
    LambdaContext,
    ThreadSampler,
    broker_root,
    captured_stdout,
    ec2_buckets_on,
    timed,
    use_root,
    world,
)


@dataclass
class Sweep:
    """One measured sweep: the answer, EC2's side (the emulator's call log, states, buckets)
    and the broker's (the pacer, where worker threads waited)."""

    seconds: float
    answer: dict[str, Any]
    calls: list[Any]  # the sweep's CancelCapacityReservation calls, throttled ones included
    timeline: dict[str, dict[str, Any]]
    overlap: dict[str, float]
    phases: dict[str, float]
    owned_left: list[str]
    foreign_touched: list[str]
    foreign_cancels: int
    seed_seconds: float
    dry_seconds: float
    worker_time: dict[str, Any]
    cpu_profile: dict[str, Any] | None
    cancel_bucket: tuple[float, float]  # the emulator's (burst, refill/s), time_scale included
    pacer: dict[str, dict[str, Any]]  # per region: the broker's cancel bucket at the end
    others: dict[str, dict[str, int]]  # what another client got from the shared buckets


def measure_sweep(
    spec: worlds.CleanerWorld,
    regions: list[str],
    scale: float,
    profile: bool = False,
    **knobs: Any,
) -> Sweep:
    """Seed ``spec``, warm the container (a dry run), then time one real sweep with EC2's
    buckets on (``knobs``: the emulator's ``raised``, ``others``) and a fresh pacer."""
    from capacity_broker.handlers import cleaner as module

    env = {"BROKER_REGIONS": ",".join(regions), "BROKER_EC2_RATE_SCALE": f"{scale:g}"}
    context = LambdaContext()
    with world(spec.scenario, env) as w:
        emu = w.emu
        owned_ids = {w.ids[name] for name in spec.owned_names}
        foreign_ids = {w.ids[name] for name in spec.foreign_names}
        use_root(cleaner_clock=emu.now)  # the cleaner's "now" is the emulator's (as the tests)
        owned = sum(spec.owned.values())

        # Warm the container (clients per region, the Cleaner) with a dry run, no latency.
        with captured_stdout():
            dry_seconds, dry = timed(
                lambda: module.handler({"action": "sweep", "dry_run": True}, context)
            )
        if len(dry["cancelled"]) != owned:
            raise AssertionError(f"the dry run would cancel {len(dry['cancelled'])} of {owned}")

        emu.latency(LATENCY)
        # Where the CPU of the phase before the first cancel goes (listing, deciding, the
        # answer): one more dry run, profiled, not timed.
        cpu_profile: dict[str, Any] | None = None
        if profile:
            with captured_stdout(), CpuProfile() as profiler:
                module.handler({"action": "sweep", "dry_run": True}, context)
            cpu_profile = profiler.summary()
        ec2_buckets_on(emu, time_scale=scale, **knobs)
        emu.clear_calls()
        started = time.monotonic()
        with ThreadSampler(("cleaner-io", "cleaner-region")) as sampler, captured_stdout():
            seconds, answer = timed(
                lambda: module.handler({"action": "sweep", "dry_run": False}, context)
            )

        calls = emu.calls("CancelCapacityReservation")
        states = {
            rid: r.state
            for region in regions
            for rid, r in emu.capacity(region).reservations.items()
        }
        timeline = {}
        for region in regions:
            mine = [c for c in calls if c.region == region]
            ok = [c for c in mine if c.outcome == "ok"]
            timeline[region] = {
                "cancels": len(ok),
                "throttled_by_emulator": sum(
                    1 for c in mine if c.outcome == "RequestLimitExceeded"
                ),
                "first_cancel_s": round(min(c.started for c in ok) - started, 3) if ok else None,
                "last_cancel_s": round(max(c.ended for c in ok) - started, 3) if ok else None,
            }
        pacer = {}
        for region in regions:
            bucket = broker_root().pacer.bucket(region, "CancelCapacityReservation")
            pacer[region] = {
                "start_per_s": bucket.start,
                "end_per_s": round(bucket.rate, 3),
                "share_per_s": None if bucket.limit is None else round(bucket.limit, 3),
                **bucket.counts,
            }
        burst, refill = emu.throttle_limits("CancelCapacityReservation")
        result = Sweep(
            seconds=seconds,
            answer=answer,
            calls=calls,
            timeline=timeline,
            overlap=regions_side_by_side(calls, started),
            phases={},
            owned_left=sorted(rid for rid in owned_ids if states.get(rid) != "cancelled"),
            foreign_touched=sorted(rid for rid in foreign_ids if states.get(rid) == "cancelled"),
            foreign_cancels=sum(
                1 for c in calls if c.params.get("CapacityReservationId") in foreign_ids
            ),
            seed_seconds=w.seed_seconds,
            dry_seconds=dry_seconds,
            worker_time=sampler.summary(),
            cpu_profile=cpu_profile,
            cancel_bucket=(burst, refill * scale),
            pacer=pacer,
            others=emu.throttled_others(),
        )

    firsts = [t["first_cancel_s"] for t in timeline.values() if t["first_cancel_s"] is not None]
    lasts = [t["last_cancel_s"] for t in timeline.values() if t["last_cancel_s"] is not None]
    # Before the first cancel: listing, stack lookups, decisions. After the last: the answer,
    # a log line per decision, the metrics. Neither depends on EC2's rates.
    listing = min(firsts) if firsts else seconds
    cancelling = (max(lasts) - listing) if lasts else 0.0
    result.phases = {
        "before_first_cancel": listing,
        "cancelling": cancelling,
        "after_last_cancel": max(0.0, seconds - listing - cancelling),
    }
    if answer["status"] != "ok" or result.owned_left or len(answer["cancelled"]) != owned:
        raise AssertionError(f"the sweep did not finish its work: {answer['status']}, {result}")
    return result


def bench_cleaner(scale: float, owned: int, foreign: int, profile: bool = True) -> dict[str, Any]:
    spec = worlds.cleaner_world(owned, foreign)
    run = measure_sweep(spec, worlds.CLEANER_REGIONS, scale, profile=profile)
    burst, refill = run.cancel_bucket
    bound = sweep_bound(spec.owned, burst, refill)
    unscaled_bound = sweep_bound(spec.owned, *EC2_MUTATING)
    seconds, phases = run.seconds, run.phases
    listing, cancelling, tail = (
        phases["before_first_cancel"],
        phases["cancelling"],
        phases["after_last_cancel"],
    )
    answer = run.answer
    return {
        "regions": worlds.CLEANER_REGIONS,
        "owned_per_region": spec.owned,
        "foreign_per_region": spec.foreign,
        "time_scale": scale,
        "latency_s": LATENCY,
        "seed_s": round(run.seed_seconds, 3),
        "dry_run_s": round(run.dry_seconds, 3),
        "sweep_s": seconds,
        "bound_s": bound,
        "bound_formula": "max over regions r of max(0, n_r - 50) / (5 * S)",
        "ratio_to_bound": ratio(seconds, bound),
        "phases_s": phases,
        "cancelling_to_bound": ratio(cancelling, bound),
        "unscaled": {
            "bound_s": unscaled_bound,
            # The fixed phases do not stretch with S; the cancelling phase does.
            "sweep_estimate_s": listing + tail + cancelling * scale,
            "ratio_estimate": ratio(listing + tail + cancelling * scale, unscaled_bound),
        },
        "status": answer["status"],
        "cancelled": len(answer["cancelled"]),
        "errors": len(answer["errors"]),
        "cancel_calls_ok": sum(1 for c in run.calls if c.outcome == "ok"),
        "foreign_cancels": run.foreign_cancels,
        "foreign_cancelled_in_emulator": len(run.foreign_touched),
        "owned_left_uncancelled": len(run.owned_left),
        "reasons": dict(Counter(item["reason"] for item in answer["cancelled"])),
        "timeline": run.timeline,
        "busiest_region_share_per_second": run.overlap,
        "pacer": run.pacer,
        "worker_time": run.worker_time,
        "cpu_profile_dry_run": run.cpu_profile,
    }


def regions_side_by_side(calls: list[Any], started: float) -> dict[str, float]:
    """Per second of the sweep, the share of its cancels that went to the busiest region:
    1.0 means one region at a time, 1/3 means the three side by side."""
    stamps = [(c.region, c.ended - started) for c in calls if c.outcome == "ok"]
    return busiest_share(stamps)
