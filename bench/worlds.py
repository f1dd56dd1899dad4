"""The worlds the benchmarks run in, as emulator scenarios (seeded through the loader, which
uses the emulator's backend directly: thousands of reservations in well under a second)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .formulas import split_evenly
from .harness import CLUSTER, REGION

AZ_LETTERS = "abcdef"

# -- probe and reserve ----------------------------------------------------------------------------

PROBE_TYPE = "g6.xlarge"
RESERVE_TYPES = ["c7i.48xlarge", "hpc7a.96xlarge", "c6i.32xlarge", "m7i.48xlarge"]
RESERVE_COUNT = 8
SUBNETS = [f"subnet-0b{i:015x}" for i in range(6)]
AZS = [f"{REGION}{letter}" for letter in AZ_LETTERS]


def placement_world(capacity: dict[tuple[str, str], int | None]) -> dict[str, Any]:
    """One VPC, six subnets (one per AZ of us-east-1), and On-Demand pools: ``capacity`` maps
    (AZ, instance type) to free instances; every pool not named there is empty."""
    types = sorted({PROBE_TYPE, *RESERVE_TYPES})
    return {
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "name": "bench",
                        "cidr": "10.40.0.0/16",
                        "subnets": [
                            {
                                "id": s,
                                "name": f"s{i}",
                                "availability_zone": az,
                                "cidr": f"10.40.{i}.0/24",
                            }
                            for i, (s, az) in enumerate(zip(SUBNETS, AZS, strict=True))
                        ],
                    }
                ],
                "pools": [
                    {
                        "availability_zone": az,
                        "instance_type": t,
                        "capacity": capacity.get((az, t), 0),
                    }
                    for az in AZS
                    for t in types
                ],
            }
        }
    }


def probe_world() -> dict[str, Any]:
    """Capacity for the probed type only in the last subnet's AZ."""
    return placement_world({(AZS[-1], PROBE_TYPE): 64})


def reserve_world() -> dict[str, Any]:
    """Capacity only for the last (type, subnet) pair: the last type in the last AZ."""
    return placement_world({(AZS[-1], RESERVE_TYPES[-1]): 64})


# -- the cleaner ----------------------------------------------------------------------------------

CLEANER_REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]


@dataclass
class CleanerWorld:
    scenario: dict[str, Any]
    owned: dict[str, int]  # region -> owned reservations the sweep must cancel
    foreign: dict[str, int]  # region -> reservations it must not touch
    owned_names: set[str] = field(default_factory=set)
    foreign_names: set[str] = field(default_factory=set)


def _tags(purpose: str | None, cluster: str | None, n: int) -> dict[str, str]:
    tags = {"capacity-broker:request-id": f"bench-{n}", "capacity-broker:subnet-id": SUBNETS[0]}
    if cluster is not None:
        tags["capacity-broker:cluster-id"] = cluster
    if purpose is not None:
        tags["capacity-broker:purpose"] = purpose
    return tags


def cleaner_world(
    owned: int = 2000, foreign: int = 2000, regions_swept: list[str] | None = None
) -> CleanerWorld:
    """``owned`` leaked reservations of this cluster and ``foreign`` others, dealt evenly over
    ``regions_swept`` (three regions unless told).

    Owned, in thirds: probes older than the probe grace (``leaked_probe``), holds without a
    stack idle past the idle grace (``idle``), holds past their EndDate that EC2 still shows
    active (``past_end_date``). Foreign, in quarters: another cluster's reservations carrying
    every broker tag, reservations with this cluster id but no purpose (not owned by the
    contract), untagged ones, and Capacity Blocks carrying this cluster's full tags (never
    cancelled).
    """
    swept = regions_swept or CLEANER_REGIONS
    owned_split = split_evenly(owned, swept)
    foreign_split = split_evenly(foreign, swept)
    regions: dict[str, dict[str, list[dict[str, Any]]]] = {}
    result = CleanerWorld({}, owned_split, foreign_split)
    n = 0
    for region in swept:
        spec = regions.setdefault(region, {"reservations": [], "capacity_blocks": []})
        for i in range(owned_split[region]):
            n += 1
            name = f"owned-{region}-{i}"
            kind = i % 3
            item: dict[str, Any] = {
                "name": name,
                "instance_type": "c7i.large",
                "availability_zone": f"{region}{AZ_LETTERS[i % 3]}",
                "count": 1,
                "match": "targeted",
            }
            if kind == 0:
                item |= {"created": "-10m", "end_date": "+1h", "tags": _tags("probe", CLUSTER, n)}
            elif kind == 1:
                item |= {"created": "-15m", "end_date": "+1h", "tags": _tags("hold", CLUSTER, n)}
            else:
                item |= {"created": "-8m", "end_date": "-3m", "tags": _tags("hold", CLUSTER, n)}
            spec["reservations"].append(item)
            result.owned_names.add(name)
        for i in range(foreign_split[region]):
            n += 1
            name = f"foreign-{region}-{i}"
            kind = i % 4
            az = f"{region}{AZ_LETTERS[i % 3]}"
            if kind == 3:
                spec["capacity_blocks"].append(
                    {
                        "name": name,
                        "instance_type": "p5.48xlarge",
                        "availability_zone": az,
                        "count": 1,
                        "start": "-1d",
                        "duration_hours": 168,
                        "tags": _tags("hold", CLUSTER, n),
                    }
                )
            else:
                tags = (
                    _tags("probe", "another-cluster", n)
                    if kind == 0
                    else _tags(None, CLUSTER, n)
                    if kind == 1
                    else {"team": "render-farm"}
                )
                spec["reservations"].append(
                    {
                        "name": name,
                        "instance_type": "c7i.large",
                        "availability_zone": az,
                        "count": 1,
                        "created": "-2h",
                        "end_date": "-30m" if kind == 0 else None,
                        "match": "targeted",
                        "tags": tags,
                    }
                )
                if spec["reservations"][-1]["end_date"] is None:
                    del spec["reservations"][-1]["end_date"]
            result.foreign_names.add(name)
    # EC2 keeps a limited reservation up to an hour past its EndDate: so does the emulator here.
    result.scenario = {"settings": {"expiry_lag_seconds": 3600}, "regions": regions}
    return result


# -- capacity listing -----------------------------------------------------------------------------

CAPACITY_REGIONS = [
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "ca-central-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eu-central-1",
    "eu-north-1",
    "ap-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-northeast-1",
    "ap-northeast-2",
    "sa-east-1",
]
# Two AZs each region has in the emulator (moto's map: ap-northeast-1 has no "b").
SECOND_AZ = {"ap-northeast-1": "c"}
ODCRS_PER_REGION = 40
BLOCKS_PER_REGION = 4


def capacity_world(
    odcrs_per_region: int = ODCRS_PER_REGION, blocks_per_region: int = BLOCKS_PER_REGION
) -> dict[str, Any]:
    """Every region alike: ODCRs of a few types (some used, some the broker's) and Capacity
    Blocks, active and scheduled."""
    types = ["c7i.large", "m7i.large", "g6.xlarge", "c7i.48xlarge"]
    regions: dict[str, Any] = {}
    for region in CAPACITY_REGIONS:
        odcrs = [
            {
                "instance_type": types[i % len(types)],
                "availability_zone": f"{region}{'a' if i % 2 else SECOND_AZ.get(region, 'b')}",
                "count": 4,
                "used": i % 3,
                "match": "open" if i % 2 else "targeted",
                "tags": _tags("hold", CLUSTER, i) if i % 5 == 0 else {"team": "hpc"},
            }
            for i in range(odcrs_per_region)
        ]
        blocks = [
            {
                "instance_type": "p5.48xlarge",
                "availability_zone": f"{region}a",
                "count": 2,
                "start": "-1d" if i % 2 == 0 else "+2d",
                "duration_hours": 24 * (2 + i),
            }
            for i in range(blocks_per_region)
        ]
        regions[region] = {"reservations": odcrs, "capacity_blocks": blocks}
    return {"regions": regions}
