"""EC2's request buckets, as EC2 publishes them ("Request throttling for the Amazon EC2 API",
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/throttling.html): which bucket each call
draws from, and its default size. Each account and region has its own buckets, shared by every
container and tool of the account; accounts get them raised on request, so these are where
the pacer (``adapters.throttle``) starts, not what it must stay at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class Limits(NamedTuple):
    """A token bucket: ``burst`` tokens at most, refilled at ``refill`` tokens a second."""

    burst: float
    refill: float


# EC2's published request buckets (the page above, "Request token bucket sizes and refill rates").
NON_MUTATING = Limits(100, 20)
UNFILTERED_NON_MUTATING = Limits(50, 10)
MUTATING = Limits(50, 5)
NON_MUTATING_PREFIXES = ("Describe", "List", "Search", "Get")
# Smaller bucket when called with neither a filter nor pagination.
UNFILTERED_ACTIONS = frozenset(
    {
        "DescribeInstances",
        "DescribeInstanceStatus",
        "DescribeNetworkInterfaces",
        "DescribeSecurityGroups",
        "DescribeSnapshots",
        "DescribeSpotInstanceRequests",
        "DescribeVolumes",
    }
)
# "Uncategorized actions" with their own sizes, of those the broker calls or may call
# (every other action takes its category's).
OWN_LIMITS: Mapping[str, Limits] = {
    "DescribeCapacityBlockOfferings": Limits(10, 0.15),
    "DescribeCapacityBlockExtensionOfferings": Limits(10, 0.15),
    "PurchaseCapacityBlock": Limits(10, 0.15),
    "PurchaseCapacityBlockExtension": Limits(10, 0.15),
    "CreateLaunchTemplateVersion": Limits(100, 5),
    "ModifyLaunchTemplate": Limits(100, 5),
    "CreateTags": Limits(100, 10),
    "DeleteTags": Limits(100, 10),
    "DescribeInstanceTopology": Limits(1, 1),
    "RunInstances": Limits(5, 2),
    "TerminateInstances": Limits(100, 5),
}
_FILTER_OR_PAGE = ("Filters", "MaxResults", "NextToken")


def bucket_of(action: str, params: Mapping[str, Any] | None = None) -> tuple[str, Limits]:
    """The bucket an EC2 call draws from (its name) and its published default size."""
    own = OWN_LIMITS.get(action)
    if own is not None:
        return action, own
    if not action.startswith(NON_MUTATING_PREFIXES):
        return action, MUTATING
    if action in UNFILTERED_ACTIONS and not any((params or {}).get(k) for k in _FILTER_OR_PAGE):
        return f"{action} (unfiltered)", UNFILTERED_NON_MUTATING
    return action, NON_MUTATING
