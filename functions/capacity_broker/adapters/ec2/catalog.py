"""Which instance types EC2 offers in a region: the list a type name is checked against, asked
once per EC2 adapter (one per region of a root: once per Lambda container, once per client)."""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

from .base import Ec2Base

# DescribeInstanceTypeOfferings' largest page (botocore's model): a region's list is one call.
OFFERINGS_PER_PAGE = 1000


class CatalogMixin(Ec2Base):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._offered: frozenset[str] | None = None
        # Types EC2 confirmed it offers here, asked by name (``offers``): kept for the
        # adapter's life, as the whole list is.
        self._confirmed: set[str] = set()
        # Held while the list is asked: threads of one root that need it at once wait for the
        # one call instead of each making its own.
        self._offered_lock = threading.Lock()

    def offered_types(self, deadline: float | None = None) -> frozenset[str]:
        """Every instance type EC2 offers somewhere in this region (DescribeInstanceTypeOfferings
        with LocationType ``region``), asked of EC2 once for this adapter's life; a failed ask
        is not remembered (``AwsError`` is raised, and the next caller asks again)."""
        with self._offered_lock:
            if self._offered is None:
                self._offered = frozenset(
                    item["InstanceType"]
                    for item in self._pages(
                        "DescribeInstanceTypeOfferings",
                        "InstanceTypeOfferings",
                        deadline,
                        LocationType="region",
                        MaxResults=OFFERINGS_PER_PAGE,
                    )
                )
            return self._offered

    def offers(self, types: Collection[str], deadline: float | None = None) -> frozenset[str]:
        """Which of ``types`` EC2 offers somewhere in this region. From the region's list when
        this adapter has it, else asked by name: one DescribeInstanceTypeOfferings filtered on
        ``instance-type``, a row per type, where the region's list is some 900 rows of XML
        for every cold container to parse (in a class of 50 cold containers, serializing that
        list was the largest cost in the emulator's profile). A filter value may be a
        pattern (``*`` and ``?``), so only a row naming a type exactly confirms it. Confirmed
        types are kept; a type not confirmed is not remembered (the caller looks at the
        region's list to say what is wrong with it, ``offered_types``)."""
        wanted = frozenset(types)
        with self._offered_lock:  # (threads asking at once wait for the one call)
            if self._offered is not None:
                return wanted & self._offered
            missing = sorted(wanted - self._confirmed)
            if missing:
                found = {
                    item.get("InstanceType")
                    for item in self._pages(
                        "DescribeInstanceTypeOfferings",
                        "InstanceTypeOfferings",
                        deadline,
                        LocationType="region",
                        Filters=[{"Name": "instance-type", "Values": missing}],
                    )
                }
                self._confirmed.update(t for t in missing if t in found)
            return wanted & frozenset(self._confirmed)

    def knows_offered(self, types: Collection[str]) -> bool:
        """Whether ``types`` can be checked without a call: the region's list is known (a name
        not in it is refused from it), or every one was confirmed by name."""
        return self._offered is not None or all(t in self._confirmed for t in types)
