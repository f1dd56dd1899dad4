"""Capacity discovery rules: which reservations a listing shows, its summary, Capacity Block
durations and prices, accelerator facts, and the reservation-type decision guide.

Pure: EC2's answers come in as plain mappings and values; nothing here calls AWS or reads
the clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol


class ReservationKind(StrEnum):
    """EC2's ``ReservationType``: ``default`` is an On-Demand Capacity Reservation."""

    ODCR = "odcr"
    CAPACITY_BLOCK = "capacity-block"


def kind_of(reservation_type: str | None) -> ReservationKind:
    return (
        ReservationKind.CAPACITY_BLOCK
        if reservation_type == "capacity-block"
        else ReservationKind.ODCR
    )


def kinds_for(selection: str) -> frozenset[ReservationKind]:
    """``odcr`` | ``capacity-block`` | ``all`` (a request's ``reservation_type``)."""
    if selection == "all":
        return frozenset(ReservationKind)
    return frozenset({ReservationKind(selection)})


# What "active only" keeps (contract): ODCRs that can be launched into now and future-dated
# ones on their way (assessing, scheduled, delayed: capacity the team asked for, v3), and
# blocks that are running or booked (a scheduled block is capacity the team holds). An
# ``unsupported`` request will never be delivered: listed with --include-inactive only.
USABLE_STATES: Mapping[ReservationKind, frozenset[str]] = {
    ReservationKind.ODCR: frozenset({"active", "assessing", "scheduled", "delayed"}),
    ReservationKind.CAPACITY_BLOCK: frozenset({"active", "scheduled"}),
}
# A future-dated ODCR before delivery: EC2 reports TotalInstanceCount 0 ("The total instance
# count remains 0 ... in the scheduled state"); its size is CommitmentInfo's committed count.
FUTURE_WAITING_STATES = frozenset({"assessing", "scheduled", "delayed"})
# States in which EC2 places a reservation in its network topology (botocore's model,
# CapacityReservationTopology.NetworkNodes: "null or empty if ... the Capacity Reservation is
# in a state other than active or pending"): a block that has not started has none yet.
TOPOLOGY_STATES = frozenset({"active", "pending"})

# A Capacity Block before its start. EC2 User Guide, "View Capacity Blocks": "Before a Capacity
# Block reservation begins, the available capacity appears as zero. You can see how many
# instances will be available in your Capacity Block by the tag value for the tag key
# aws:ec2capacityreservation:incrementalRequestedQuantity" (TotalInstanceCount is 0 too).
BLOCK_NOT_STARTED = frozenset({"payment-pending", "scheduled"})
BLOCK_SIZE_TAG = "aws:ec2capacityreservation:incrementalRequestedQuantity"


def reserved_size(
    reservation_type: str | None,
    total_count: int,
    tags: Mapping[str, str],
    committed_count: int | None = None,
    state: str = "",
) -> int:
    """How many instances a reservation is for: EC2's TotalInstanceCount; for a Capacity
    Block the size tag when that says more (a block that has not started reports 0); for a
    future-dated ODCR on its way, the committed count."""
    if kind_of(reservation_type) is not ReservationKind.CAPACITY_BLOCK:
        if committed_count and state in FUTURE_WAITING_STATES:
            return max(total_count, committed_count)
        return total_count
    try:
        tagged = int(tags.get(BLOCK_SIZE_TAG, ""))
    except ValueError:
        tagged = 0
    return max(total_count, tagged, 0)


def is_usable(kind: ReservationKind, state: str) -> bool:
    return state in USABLE_STATES[kind]


# -- instance type patterns -----------------------------------------------------------------


def has_wildcard(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


def expand_pattern(pattern: str) -> list[str]:
    """EC2 wildcard patterns (``*`` any run, ``?`` one character) for what a user typed: a
    bare family (``p5``, ``p6``) means every size of it and of its variants (``p5.*``,
    ``p6-*.*``: p6-b200.48xlarge), never a longer family name (``p5e``)."""
    pattern = pattern.strip().lower()
    if pattern and not has_wildcard(pattern) and "." not in pattern:
        return [f"{pattern}.*", f"{pattern}-*.*"]
    return [pattern]


def expand_patterns(patterns: Iterable[str] | None) -> list[str]:
    return list(dict.fromkeys(p for pattern in patterns or () for p in expand_pattern(pattern)))


def wildcard_match(pattern: str, text: str) -> bool:
    """EC2 filter wildcards: ``*`` matches any run of characters, ``?`` exactly one."""
    p, t = 0, 0
    star, mark = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] in ("?", text[t]):
            p += 1
            t += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, t
            p += 1
        elif star >= 0:
            p = star + 1
            mark += 1
            t = mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def matches_any(instance_type: str, patterns: Iterable[str] | None) -> bool:
    """No patterns matches everything."""
    wanted = expand_patterns(patterns)
    return not wanted or any(wildcard_match(p, instance_type) for p in wanted)


def exact_types(patterns: Iterable[str] | None) -> list[str] | None:
    """The patterns when every one is a plain instance type (safe for EC2's exact-match
    filters and ``InstanceTypes`` parameters), else ``None``."""
    expanded = expand_patterns(patterns)
    if not expanded or any(has_wildcard(p) for p in expanded):
        return None
    return expanded


# -- durations ------------------------------------------------------------------------------

HOURS_PER_DAY = 24
MAX_BLOCK_DAYS = 182
DAILY_STEPS_UP_TO_DAYS = 14
WEEKLY_STEP_DAYS = 7
MAX_BLOCK_INSTANCES = 64
# The block sizes ``plan`` asks EC2 about when looking for the largest block on sale. The EC2
# User Guide's "Capacity Blocks for ML" page listed "Reservation instance quantity options of
# 1, 2, 4, 8, 16, 32, or 64 instances"; today's page says only "Each Capacity Block can have
# up to 64 instances" (and botocore's InstanceCount has no other bound). Under either reading
# these sizes are on sale, and asking only them takes at most three questions per Region (a
# search halving 1..63 took six), each from the Capacity Block bucket of 10 that refills at
# 0.15 a second. The user's own count is always asked as given.
BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64)


def tidy(value: float) -> float:
    """A whole number as an int (168, not 168.0), others to two decimals."""
    if float(value).is_integer():
        return int(value)
    return round(value, 2)


def duration_hours(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return tidy((end - start).total_seconds() / 3600)


def valid_block_hours(hours: int) -> bool:
    """EC2's Capacity Block durations: 1-day steps up to 14 days, then 7-day steps to 182."""
    if hours <= 0 or hours % HOURS_PER_DAY:
        return False
    days = hours // HOURS_PER_DAY
    if days <= DAILY_STEPS_UP_TO_DAYS:
        return True
    return days % WEEKLY_STEP_DAYS == 0 and days <= MAX_BLOCK_DAYS


def block_duration_error(hours: int) -> str | None:
    """Why ``hours`` is not a Capacity Block duration (``None`` when it is)."""
    if valid_block_hours(hours):
        return None
    return (
        f"{hours} hours is not a Capacity Block duration: use whole days, 1 to "
        f"{DAILY_STEPS_UP_TO_DAYS} days (24-{DAILY_STEPS_UP_TO_DAYS * 24} hours), or "
        f"multiples of 7 days up to {MAX_BLOCK_DAYS} days "
        f"({MAX_BLOCK_DAYS * HOURS_PER_DAY} hours)"
    )


def block_hours_for_days(days: float) -> int | None:
    """The shortest valid Capacity Block that covers ``days`` (``None`` beyond 182 days)."""
    whole_days = max(1, math.ceil(days))
    if whole_days > DAILY_STEPS_UP_TO_DAYS:
        whole_days = math.ceil(whole_days / WEEKLY_STEP_DAYS) * WEEKLY_STEP_DAYS
    if whole_days > MAX_BLOCK_DAYS:
        return None
    return whole_days * HOURS_PER_DAY


# -- prices ---------------------------------------------------------------------------------


def per_instance_hour(upfront_fee: float, instance_count: int, hours: float) -> float | None:
    """A Capacity Block's reservation fee per instance-hour (EC2 quotes the block total)."""
    if instance_count <= 0 or hours <= 0:
        return None
    return round(upfront_fee / (instance_count * hours), 4)


def savings_percent(spot_price: float, on_demand_price: float | None) -> float | None:
    if on_demand_price is None or on_demand_price <= 0:
        return None
    return round(100 * (1 - spot_price / on_demand_price), 1)


def parse_price(text: object) -> float | None:
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


# -- accelerators (EC2's GpuInfo / NeuronInfo / InferenceAcceleratorInfo) ---------------------


@dataclass(frozen=True)
class Accelerators:
    """What DescribeInstanceTypes says a type carries: never a list of family names, so new
    families (B200, B300, Trainium2, ...) count the day EC2 describes them."""

    gpus: int = 0
    # fractional GPUs (g6f: an eighth of an L4) report Count 0 and a partition size
    gpu_share: float = 0.0
    gpu_name: str | None = None
    gpu_manufacturer: str | None = None
    gpu_memory_mib: int = 0
    neuron_devices: int = 0
    neuron_name: str | None = None
    inference_accelerators: int = 0
    inference_name: str | None = None

    @property
    def accelerated(self) -> bool:
        """GPUs, AWS Trainium/Inferentia, or (older) inference accelerators."""
        return bool(
            self.gpus or self.gpu_share or self.neuron_devices or self.inference_accelerators
        )

    @property
    def label(self) -> str:
        if self.gpus or self.gpu_share:
            memory = f" ({self.gpu_memory_mib // 1024} GiB)" if self.gpu_memory_mib else ""
            maker = f"{self.gpu_manufacturer} " if self.gpu_manufacturer else ""
            count = f"{self.gpus}" if self.gpus else f"{self.gpu_share:g}"
            return f"{count}x {maker}{self.gpu_name or 'GPU'}{memory}"
        if self.neuron_devices:
            return f"{self.neuron_devices}x {self.neuron_name or 'Neuron'}"
        if self.inference_accelerators:
            return f"{self.inference_accelerators}x {self.inference_name or 'accelerator'}"
        return ""


def accelerators_of(info: Mapping[str, Any]) -> Accelerators:
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    neuron = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    inference = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    first_gpu = gpus[0] if gpus else {}
    return Accelerators(
        gpus=sum(int(g.get("Count") or 0) for g in gpus),
        gpu_share=sum(float(g.get("GpuPartitionSize") or 0) for g in gpus if not g.get("Count")),
        gpu_name=first_gpu.get("Name"),
        gpu_manufacturer=first_gpu.get("Manufacturer"),
        gpu_memory_mib=int((info.get("GpuInfo") or {}).get("TotalGpuMemoryInMiB") or 0),
        neuron_devices=sum(int(n.get("Count") or 0) for n in neuron),
        neuron_name=neuron[0].get("Name") if neuron else None,
        inference_accelerators=sum(int(a.get("Count") or 0) for a in inference),
        inference_name=inference[0].get("Name") if inference else None,
    )


@dataclass(frozen=True)
class InstanceFacts:
    instance_type: str
    vcpus: int
    memory_mib: int
    architectures: tuple[str, ...]
    accelerators: Accelerators
    current_generation: bool | None = None
    network_performance: str | None = None

    @property
    def memory_gib(self) -> float:
        return tidy(self.memory_mib / 1024)


def instance_facts(info: Mapping[str, Any]) -> InstanceFacts:
    return InstanceFacts(
        instance_type=str(info.get("InstanceType", "")),
        vcpus=int((info.get("VCpuInfo") or {}).get("DefaultVCpus") or 0),
        memory_mib=int((info.get("MemoryInfo") or {}).get("SizeInMiB") or 0),
        architectures=tuple((info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or ()),
        accelerators=accelerators_of(info),
        current_generation=info.get("CurrentGeneration"),
        network_performance=(info.get("NetworkInfo") or {}).get("NetworkPerformance"),
    )


def fits(
    facts: InstanceFacts,
    architecture: str | None = None,
    min_vcpus: int | None = None,
    min_memory_gib: float | None = None,
    gpu_only: bool = False,
) -> bool:
    if architecture and architecture not in facts.architectures:
        return False
    if min_vcpus is not None and facts.vcpus < min_vcpus:
        return False
    if min_memory_gib is not None and facts.memory_mib < min_memory_gib * 1024:
        return False
    return not gpu_only or facts.accelerators.accelerated


# -- the summary ----------------------------------------------------------------------------


class SummaryItem(Protocol):
    @property
    def reservation_type(self) -> str: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def total_capacity(self) -> int: ...
    @property
    def available_capacity(self) -> int: ...
    @property
    def used_capacity(self) -> int: ...
    @property
    def duration_hours(self) -> float | None: ...
    @property
    def ultra_cluster_placement(self) -> bool | None: ...


@dataclass(frozen=True)
class Summary:
    reservations: int = 0
    by_type: Mapping[str, int] = field(default_factory=dict)
    instance_types: tuple[str, ...] = ()
    by_instance_type: Mapping[str, int] = field(default_factory=dict)
    regions: tuple[str, ...] = ()
    total_capacity: int = 0
    available_capacity: int = 0
    used_capacity: int = 0
    free_percent: float = 0.0
    block_hours: tuple[float, float] | None = None
    ultra_cluster_placement: bool | None = None


def free_percent(total: int, available: int) -> float:
    return round(100 * available / total, 1) if total > 0 else 0.0


def summarize(items: Sequence[SummaryItem]) -> Summary:
    """Counts per reservation type and instance type, capacity with the free share, the
    blocks' duration range, and whether any block sits in an UltraCluster (as far as EC2's
    topology said: ``None`` when it said nothing about any of them)."""
    by_type: dict[str, int] = {}
    by_instance: dict[str, int] = {}
    total = available = used = 0
    block_hours: list[float] = []
    placements: list[bool] = []
    for item in items:
        by_type[item.reservation_type] = by_type.get(item.reservation_type, 0) + 1
        by_instance[item.instance_type] = by_instance.get(item.instance_type, 0) + 1
        total += item.total_capacity
        available += item.available_capacity
        # Not total - available: a block that has not started is neither free nor in use.
        used += item.used_capacity
        if item.reservation_type == ReservationKind.CAPACITY_BLOCK:
            if item.duration_hours is not None:
                block_hours.append(item.duration_hours)
            if item.ultra_cluster_placement is not None:
                placements.append(item.ultra_cluster_placement)
    return Summary(
        reservations=len(items),
        by_type=dict(sorted(by_type.items())),
        instance_types=tuple(sorted(by_instance)),
        by_instance_type=dict(sorted(by_instance.items())),
        regions=tuple(sorted({item.region for item in items})),
        total_capacity=total,
        available_capacity=available,
        used_capacity=used,
        free_percent=free_percent(total, available),
        block_hours=(min(block_hours), max(block_hours)) if block_hours else None,
        ultra_cluster_placement=any(placements) if placements else None,
    )


# -- ordering -------------------------------------------------------------------------------


def row_order(
    region: str,
    kind: str,
    instance_type: str,
    availability_zone: str | None,
    start: datetime | None,
    reservation_id: str,
) -> tuple[str, str, str, float, str, str]:
    # Within a type, by start: a running block before the one booked for next week.
    return (
        region,
        kind,
        instance_type,
        start.timestamp() if start else math.inf,
        availability_zone or "",
        reservation_id,
    )


def offering_order(
    price_per_instance_hour: float | None,
    upfront_fee: float | None,
    start: datetime | None,
    availability_zone: str | None,
    offering_id: str,
) -> tuple[float, float, float, str, str]:
    """Cheapest first, then soonest (an offering without a price goes last)."""
    return (
        price_per_instance_hour if price_per_instance_hour is not None else math.inf,
        upfront_fee if upfront_fee is not None else math.inf,
        start.timestamp() if start else math.inf,
        availability_zone or "",
        offering_id,
    )


@dataclass(frozen=True)
class PricePoint:
    instance_type: str
    availability_zone: str
    product_description: str
    price: float
    timestamp: datetime


def latest_prices(points: Iterable[PricePoint]) -> list[PricePoint]:
    """The newest price per (type, AZ, product): the price in effect now."""
    newest: dict[tuple[str, str, str], PricePoint] = {}
    for point in points:
        key = (point.instance_type, point.availability_zone, point.product_description)
        seen = newest.get(key)
        if seen is None or point.timestamp > seen.timestamp:
            newest[key] = point
    return list(newest.values())


# -- verdicts ---------------------------------------------------------------------------------


class Verdict(StrEnum):
    """The answer's word, the same in ``plan``, ``offerings`` and ``capacity`` (contract v3):
    ``ready`` held capacity covers it, ``buy`` an offering does, ``split`` several blocks do,
    ``extend`` a held block would if extended, ``unavailable`` nothing does."""

    READY = "ready"
    BUY = "buy"
    SPLIT = "split"
    EXTEND = "extend"
    UNAVAILABLE = "unavailable"

    @property
    def exists(self) -> bool:
        """What was asked exists (exit 0) or not (exit 4)."""
        return self is not Verdict.UNAVAILABLE


def listing_verdict(found: bool, when_found: Verdict) -> Verdict:
    """A listing's word: ``capacity`` says ``ready`` when it lists held capacity, ``offerings``
    ``buy`` when something is on sale; ``unavailable`` when nothing matched."""
    return when_found if found else Verdict.UNAVAILABLE


# -- the decision guide ---------------------------------------------------------------------


class Workload(StrEnum):
    TRAINING = "training"
    INFERENCE = "inference"
    DEV = "dev"


@dataclass(frozen=True)
class Recommendation:
    reservation_type: ReservationKind
    reasons: tuple[str, ...]
    block_hours: int | None = None
    notes: tuple[str, ...] = ()


def recommend(
    workload: Workload | str,
    instance_count: int,
    days: float | None,
    accelerated: bool | None,
    block_hours: int | None = None,
) -> Recommendation:
    """The seeds' decision tree, with EC2's actual limits.

    Training on a fixed schedule → Capacity Blocks (UltraCluster networking, booked up to
    eight weeks ahead, cannot be cancelled); continuous or unpredictable training, inference
    and development → ODCRs (no fixed end, cancel any time, pay only the On-Demand rate).
    A block must also exist for the type (GPU/Trainium) and fit in 182 days: ``block_hours``
    is the block the run needs, its end-of-block stop counted (``blocks.block_hours_for_run``;
    without it, whole days). More than 64 instances is several blocks (``plan``'s split).
    """
    workload = Workload(workload)
    if workload is not Workload.TRAINING:
        return Recommendation(
            ReservationKind.ODCR,
            (
                f"{workload.value} runs continuously or unpredictably: an ODCR has no fixed end "
                "date and can be created or cancelled at any time",
                "an ODCR bills the On-Demand rate while it is held, with no reservation fee",
            ),
        )
    if days is None:
        return Recommendation(
            ReservationKind.ODCR,
            (
                "training without a fixed schedule: an ODCR stays as long as needed, while a "
                "Capacity Block has fixed start and end dates",
            ),
        )
    hours = block_hours if block_hours is not None else block_hours_for_days(days)
    fallback: list[str] = []
    if accelerated is False:
        fallback.append(
            "Capacity Blocks are sold for accelerated (GPU/Trainium) instance types; EC2 "
            "describes no accelerator for this one"
        )
    if hours is None:
        fallback.append(f"{days:g} days exceed the longest Capacity Block ({MAX_BLOCK_DAYS} days)")
    if fallback:
        return Recommendation(ReservationKind.ODCR, tuple(fallback))
    assert hours is not None
    notes: list[str] = []
    if hours > days * HOURS_PER_DAY:
        notes.append(
            f"a {days:g}-day run needs a block of {hours // HOURS_PER_DAY} days: EC2 stops a "
            "block's instances before its end, and sells whole days (1 to 14, then weeks)"
        )
    if instance_count > MAX_BLOCK_INSTANCES:
        notes.append(
            f"{instance_count} instances exceed the {MAX_BLOCK_INSTANCES} one Capacity Block "
            "holds: several blocks (a split)"
        )
    return Recommendation(
        ReservationKind.CAPACITY_BLOCK,
        (
            f"fixed-schedule training for {days:g} days: a Capacity Block reserves the "
            "instances for exactly that period",
            "Capacity Blocks sit in EC2 UltraClusters (low-latency, non-blocking networking "
            "for distributed training)",
            "blocks can be booked up to 8 weeks ahead; they cannot be cancelled",
        ),
        block_hours=hours,
        notes=tuple(notes),
    )


def searched(
    instance_type: str,
    instance_count: int,
    ultraservers: int | None = None,
    ultraserver_type: str | None = None,
) -> str:
    """What an offering search asked for, in words: "8 x p5.48xlarge", or "2 UltraServers
    (u-p6e-gb200x72) of p6e-gb200.36xlarge"."""
    kind = f" ({ultraserver_type})" if ultraserver_type else ""
    if ultraservers is None:
        return f"{instance_count} x {instance_type}{kind}"
    servers = "UltraServer" if ultraservers == 1 else "UltraServers"
    return f"{ultraservers} {servers}{kind} of {instance_type}"
