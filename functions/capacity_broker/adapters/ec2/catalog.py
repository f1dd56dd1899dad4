"""Which instance types EC2 offers in a region: the list a type name is checked against, asked
once per EC2 adapter (one per region of a root: once per Lambda container, once per client)."""

from __future__ import annotations

import threading
from typing import Any

from .base import Ec2Base

# DescribeInstanceTypeOfferings' largest page (botocore's model): a region's list is one call.
OFFERINGS_PER_PAGE = 1000


class CatalogMixin(Ec2Base):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._offered: frozenset[str] | None = None
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

    def knows_offered_types(self) -> bool:
        """Whether the region's list is already known to this adapter (no call to check a name)."""
        return self._offered is not None
