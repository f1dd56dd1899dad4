"""Which regions exist (offline, from botocore's partition data) and which are enabled for
the account (EC2 ``DescribeRegions``)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from functools import lru_cache

from .aws import Clients, call


@lru_cache(maxsize=1)
def known_regions() -> frozenset[str]:
    """Every region of every AWS partition that the installed botocore knows
    (``botocore/data/partitions.json``: ``aws``, ``aws-cn``, ``aws-us-gov``, ...), without
    the ``aws-global``-style pseudo regions. Read from disk, no call: a typo can be refused
    before it costs a connection time-out."""
    import botocore.loaders

    data = botocore.loaders.Loader().load_data("partitions")
    return frozenset(
        name
        for partition in data.get("partitions", [])
        for name in partition.get("regions", {})
        if not name.endswith("-global")
    )


def unknown_regions(names: Iterable[str]) -> dict[str, list[str]]:
    """The names AWS does not have (``known_regions``), each with the nearest real names: the
    one rule every caller refuses a region by (the client and the CLI, the Slurm programs'
    configuration, the stack's ``-c regions=``)."""
    known = known_regions()
    return {
        name: difflib.get_close_matches(name, sorted(known), n=2, cutoff=0.8)
        for name in dict.fromkeys(names)
        if name not in known
    }


def unknown_region_message(name: str, close: Iterable[str] = ()) -> str:
    """How a region AWS does not have is refused, with the nearest real names."""
    close = list(close)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return f"{name!r} is not an AWS region{hint}"


def enabled_regions(home_region: str, clients: Clients) -> list[str]:
    """The regions enabled for the account (``DescribeRegions`` without ``AllRegions``
    leaves out the opt-in regions it has not opted in to), sorted."""
    ec2 = clients.client("ec2", home_region)
    answer = call("DescribeRegions", ec2.describe_regions)
    return sorted(r["RegionName"] for r in answer.get("Regions", []))
