"""Which regions exist (offline, from botocore's partition data) and which are enabled for
the account (EC2 ``DescribeRegions``)."""

from __future__ import annotations

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


def enabled_regions(home_region: str, clients: Clients) -> list[str]:
    """The regions enabled for the account (``DescribeRegions`` without ``AllRegions``
    leaves out the opt-in regions it has not opted in to), sorted."""
    ec2 = clients.client("ec2", home_region)
    answer = call("DescribeRegions", ec2.describe_regions)
    return sorted(r["RegionName"] for r in answer.get("Regions", []))
