"""cleaner under the account's real bucket: 600 leaked reservations among 600 foreign ones, in
one region, with the pacer starting at EC2's published default (a fresh container) and
EC2's cancel bucket (the emulator's) in three states:

- **raised**: 10x the default, raised the way EC2's "Request a limit increase" advises (the
  refill rate first, the bucket with it once the rate passes it): burst 50, 50 a second;
- **default**: the published default, burst 50, 5 a second;
- **shared**: the default, with another client of the account taking half of its refill (2.5
  tokens a second, each as soon as the bucket has it: the sweep gets the other half).

The bound of a sweep through one bucket (burst B, refill R per second) that must make n
mutating calls: the least time T with B + R x T >= n, i.e. T = max(0, n - B) / R. Here n is the
owned reservations to cancel (every one is a CancelCapacityReservation; no other mutating
call is made), B and R the emulator's bucket as raised. For **shared**, the figure of record
is the share of the sweep's cancel calls EC2 throttled; its time is shown against the bound of
the half left to it (R / 2).

One region on purpose: with three, a bucket 10x the default would hold a third of the cancels
in its burst and the bound would be a few seconds of listing, not of pacing.

**raised** runs at EC2's real rates (``raised_scale`` 1) whatever the others' time scale: at x5
its bucket refills 250 cancels a second, more than one process sends through the in-process
emulator (100 ms latency and the CPU of each call, botocore's and the emulator's under one GIL,
do not compress with the time scale), so the row measured this process's cancel throughput, not
the pacing (docs/performance.md, issue 44). **default** and **shared** refill 25 and 12.5 a
second at x5, inside it on a quiet machine (156-168 cancels a second measured there).
"""

from __future__ import annotations

from typing import Any

from . import worlds
from .formulas import bucket_seconds, ratio
from .harness import LATENCY, REGION
from .sweep import measure_sweep

CASES: dict[str, dict[str, Any]] = {
    "raised": {"raised": 10.0},
    "default": {},
    "shared": {"others": {"CancelCapacityReservation": 0.5}},
}
OTHERS_SHARE = 0.5


def bench_pacing(
    owned: int, foreign: int, scale: float = 1.0, raised_scale: float = 1.0
) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    for name, knobs in CASES.items():
        scale_of_case = raised_scale if name == "raised" else scale
        spec = worlds.cleaner_world(owned, foreign, regions_swept=[REGION])
        # The phase before the first cancel is the same in every case: profile it once, in the
        # case whose figure of record (the throttled share) does not depend on its time: the
        # profiled dry run comes right before the timed sweep, in the same process (whether it
        # slows the listing after it was not shown: docs/performance.md, issue 44).
        profile = name == "shared"
        run = measure_sweep(spec, [REGION], scale_of_case, profile=profile, **knobs)
        burst, refill = run.cancel_bucket
        n = spec.owned[REGION]
        bound = bucket_seconds(n, burst, refill)
        calls = len(run.calls)
        throttled = sum(1 for c in run.calls if c.outcome == "RequestLimitExceeded")
        result: dict[str, Any] = {
            "region": REGION,
            "owned": n,
            "foreign": spec.foreign[REGION],
            "emulator_knobs": knobs,
            "time_scale": scale_of_case,
            "latency_s": LATENCY,
            "cancel_bucket": {"burst": burst, "refill_per_s": refill},
            "bound_s": bound,
            "bound_formula": "max(0, n - burst) / refill",
            "sweep_s": run.seconds,
            "ratio_to_bound": ratio(run.seconds, bound),
            "phases_s": run.phases,
            "cancelling_to_bound": ratio(run.phases["cancelling"], bound),
            "cancel_calls": calls,
            "throttled_calls": throttled,
            "throttled_share": ratio(throttled, calls),
            "cancelled": len(run.answer["cancelled"]),
            "errors": len(run.answer["errors"]),
            "foreign_cancels": run.foreign_cancels,
            "pacer": run.pacer[REGION],
            "other_client": run.others,
            "worker_time": run.worker_time,
            "cpu_profile_dry_run": run.cpu_profile,
        }
        if name == "shared":
            left = bucket_seconds(n, burst, refill * (1 - OTHERS_SHARE))
            result["bound_of_the_share_s"] = left
            result["ratio_to_the_share_bound"] = ratio(run.seconds, left)
        runs[name] = result
    return {"runs": runs}
