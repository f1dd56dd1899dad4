"""EC2's request throttling, as the EC2 API reference's "Request throttling" page describes it
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/throttling.html):

- every API action has its own token bucket per account and region ("each API is evaluated
  individually ... requests for other API are not affected"; "Limits are applied to
  individual API actions, not API action categories");
- its size comes from the action's category (non-mutating ``Describe*``/``List*``/``Search*``/
  ``Get*``: burst 100, refill 20/s; seven describes called with neither a filter nor
  pagination: 50, 10/s; mutating and resource-intensive: 50, 5/s) or, for the "uncategorized
  actions", from the page's own table (``DescribeCapacityBlockOfferings`` and
  ``PurchaseCapacityBlock``: 10, 0.15/s, for example);
- an empty bucket answers ``RequestLimitExceeded`` (HTTP 503) and the call does nothing.

Knobs, beyond EC2's defaults: ``buckets`` (sizes by category or action), ``groups`` (actions
made to share one bucket), ``time_scale`` (refill faster: benchmarks compress time), ``clock``
(what the buckets refill by: the real clock, or the emulator's for a caller run on it),
``raised`` (every limit raised N times, the way the page's "Request a limit increase" advises:
the refill rate first, the bucket raised with it when the rate would pass it) and ``others``
(another client of the same account taking a share of a bucket's refill: the tokens it is
owed, each as soon as the bucket has it).

The resource token buckets of ``RunInstances``/``StartInstances``/``StopInstances``/
``TerminateInstances`` (instances, not requests) are not emulated.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

# Bucket maximum capacity and refill rate per category (the page's first table).
CATEGORY_LIMITS: dict[str, tuple[float, float]] = {
    "non_mutating": (100, 20.0),
    "unfiltered_non_mutating": (50, 10.0),
    "mutating": (50, 5.0),
    "resource_intensive": (50, 5.0),
}
NON_MUTATING_PREFIXES = ("Describe", "List", "Search", "Get")
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
RESOURCE_INTENSIVE_ACTIONS = frozenset(
    {
        "AcceptVpcPeeringConnection",
        "AuthorizeSecurityGroupIngress",
        "CancelSpotInstanceRequests",
        "CreateKeyPair",
        "CreateVpcPeeringConnection",
        "DeleteVpcPeeringConnection",
        "RejectVpcPeeringConnection",
        "RevokeSecurityGroupIngress",
        "RequestSpotInstances",
    }
)
# "Uncategorized actions": their own bucket maximum capacity and refill rate (the page's
# second table, whole).
UNCATEGORIZED_LIMITS: dict[str, tuple[float, float]] = {
    "AcceptVpcEndpointConnections": (10, 1),
    "AdvertiseByoipCidr": (1, 0.1),
    "AssignIpv6Addresses": (100, 5),
    "AssignPrivateIpAddresses": (100, 5),
    "AssignPrivateNatGatewayAddress": (10, 1),
    "AssociateCapacityReservationBillingOwner": (1, 0.5),
    "AssociateEnclaveCertificateIamRole": (10, 1),
    "AssociateIamInstanceProfile": (100, 5),
    "AssociateNatGatewayAddress": (10, 1),
    "AttachVerifiedAccessTrustProvider": (10, 2),
    "AuthorizeClientVpnIngress": (5, 2),
    "CancelDeclarativePoliciesReport": (1, 1),
    "CopyImage": (100, 1),
    "CreateClientVpnRoute": (5, 2),
    "CreateCoipCidr": (5, 1),
    "CreateCoipPool": (5, 1),
    "CreateDefaultSubnet": (1, 1),
    "CreateDefaultVpc": (1, 1),
    "CreateLaunchTemplateVersion": (100, 5),
    "CreateNatGateway": (10, 1),
    "CreateNetworkInterface": (100, 5),
    "CreateRestoreImageTask": (50, 0.1),
    "CreateSnapshot": (100, 5),
    "CreateSnapshots": (100, 5),
    "CreateSpotDatafeedSubscription": (50, 3),
    "CreateStoreImageTask": (50, 0.1),
    "CreateSubnetCidrReservation": (5, 1),
    "CreateTags": (100, 10),
    "CreateVerifiedAccessEndpoint": (20, 4),
    "CreateVerifiedAccessGroup": (10, 2),
    "CreateVerifiedAccessInstance": (10, 2),
    "CreateVerifiedAccessTrustProvider": (10, 2),
    "CreateVolume": (100, 5),
    "CreateVpcEndpoint": (4, 0.3),
    "CreateVpcEndpointServiceConfiguration": (10, 1),
    "DeleteClientVpnRoute": (5, 2),
    "DeleteCoipCidr": (5, 1),
    "DeleteCoipPool": (5, 1),
    "DeleteCoipPoolPermission": (5, 1),
    "DeleteNatGateway": (10, 1),
    "DeleteNetworkInterface": (100, 5),
    "DeleteSnapshot": (100, 5),
    "DeleteSpotDatafeedSubscription": (50, 3),
    "DeleteSubnetCidrReservation": (5, 1),
    "DeleteQueuedReservedInstances": (5, 5),
    "DeleteTags": (100, 10),
    "DeleteVerifiedAccessEndpoint": (20, 4),
    "DeleteVerifiedAccessGroup": (10, 2),
    "DeleteVerifiedAccessInstance": (10, 2),
    "DeleteVerifiedAccessTrustProvider": (10, 2),
    "DeleteVolume": (100, 5),
    "DeleteVpcEndpoints": (4, 0.3),
    "DeleteVpcEndpointServiceConfigurations": (10, 1),
    "DeprovisionByoipCidr": (1, 0.1),
    "DeregisterImage": (100, 5),
    "DescribeAggregateIdFormat": (10, 10),
    "DescribeByoipCidrs": (1, 0.5),
    "DescribeCapacityBlockExtensionOfferings": (10, 0.15),
    "DescribeCapacityBlockOfferings": (10, 0.15),
    "DescribeDeclarativePoliciesReports": (5, 5),
    "DescribeHostReservations": (5, 2),
    "DescribeHostReservationOfferings": (5, 2),
    "DescribeIdentityIdFormat": (10, 10),
    "DescribeIdFormat": (10, 10),
    "DescribeInstanceTopology": (1, 1),
    "DescribeMovingAddresses": (1, 1),
    "DescribePrincipalIdFormat": (10, 10),
    "DescribeReservedInstancesOfferings": (10, 10),
    "DescribeSecurityGroupReferences": (20, 5),
    "DescribeSpotDatafeedSubscription": (100, 13),
    "DescribeSpotFleetInstances": (100, 5),
    "DescribeSpotFleetRequestHistory": (100, 5),
    "DescribeSpotFleetRequests": (50, 3),
    "DescribeStaleSecurityGroups": (20, 5),
    "DescribeStoreImageTasks": (50, 0.5),
    "DescribeVerifiedAccessInstanceLoggingConfigurations": (10, 2),
    "DetachVerifiedAccessTrustProvider": (10, 2),
    "DisableFastLaunch": (5, 2),
    "DisableImageBlockPublicAccess": (1, 0.1),
    "DisableSnapshotBlockPublicAccess": (1, 0.1),
    "DisassociateCapacityReservationBillingOwner": (1, 0.5),
    "DisassociateEnclaveCertificateIamRole": (10, 1),
    "DisassociateIamInstanceProfile": (100, 5),
    "DisassociateNatGatewayAddress": (10, 1),
    "EnableFastLaunch": (5, 2),
    "EnableImageBlockPublicAccess": (1, 0.1),
    "EnableSnapshotBlockPublicAccess": (1, 0.1),
    "GetAssociatedEnclaveCertificateIamRoles": (10, 1),
    "GetDeclarativePoliciesReportSummary": (5, 5),
    "GetHostReservationPurchasePreview": (5, 2),
    "ModifyImageAttribute": (100, 5),
    "ModifyInstanceMetadataDefaults": (2, 2),
    "ModifyInstanceMetadataOptions": (100, 5),
    "ModifyLaunchTemplate": (100, 5),
    "ModifyNetworkInterfaceAttribute": (100, 5),
    "ModifySnapshotAttribute": (100, 5),
    "ModifyVerifiedAccessEndpoint": (20, 4),
    "ModifyVerifiedAccessEndpointPolicy": (20, 4),
    "ModifyVerifiedAccessGroup": (10, 2),
    "ModifyVerifiedAccessGroupPolicy": (20, 4),
    "ModifyVerifiedAccessInstance": (10, 2),
    "ModifyVerifiedAccessInstanceLoggingConfiguration": (10, 2),
    "ModifyVerifiedAccessTrustProvider": (10, 2),
    "ModifyVpcEndpoint": (4, 0.3),
    "ModifyVpcEndpointServiceConfiguration": (10, 1),
    "MoveAddressToVpc": (1, 1),
    "ProvisionByoipCidr": (1, 0.1),
    "PurchaseCapacityBlock": (10, 0.15),
    "PurchaseCapacityBlockExtension": (10, 0.15),
    "PurchaseHostReservation": (5, 2),
    "PurchaseReservedInstancesOffering": (5, 5),
    "RejectVpcEndpointConnections": (10, 1),
    "RestoreAddressToClassic": (1, 1),
    "RevokeClientVpnIngress": (5, 2),
    "RunInstances": (5, 2),
    "StartDeclarativePoliciesReport": (1, 1),
    "StartInstances": (5, 2),
    "TerminateInstances": (100, 5),
    "UnassignPrivateIpAddresses": (100, 5),
    "UnassignPrivateNatGatewayAddress": (10, 1),
    "WithdrawByoipCidr": (1, 0.1),
}
_FILTER_OR_PAGE = ("Filters", "MaxResults", "NextToken")


def category(action: str, params: Mapping[str, Any] | None = None) -> str:
    """The page's category of an action ("uncategorized" for those with their own sizes)."""
    if action in UNCATEGORIZED_LIMITS:
        return "uncategorized"
    if action in RESOURCE_INTENSIVE_ACTIONS:
        return "resource_intensive"
    if not action.startswith(NON_MUTATING_PREFIXES):
        return "mutating"
    if action in UNFILTERED_ACTIONS and not any((params or {}).get(k) for k in _FILTER_OR_PAGE):
        return "unfiltered_non_mutating"
    return "non_mutating"


def bucket_name(action: str, params: Mapping[str, Any] | None = None) -> str:
    """Each action its own bucket; an unfiltered, unpaginated describe a smaller one."""
    if category(action, params) == "unfiltered_non_mutating":
        return f"{action} (unfiltered)"
    return action


def published_limits(action: str, params: Mapping[str, Any] | None = None) -> tuple[float, float]:
    """(bucket maximum capacity, refill per second) EC2 publishes for an action."""
    own = UNCATEGORIZED_LIMITS.get(action)
    return own if own is not None else CATEGORY_LIMITS[category(action, params)]


def raise_limits(limits: tuple[float, float], times: float) -> tuple[float, float]:
    """A limit increase of ``times`` as the page advises one: the refill rate first; the bucket
    raised with it when the new rate would pass it."""
    burst, refill = limits
    refill *= times
    return max(burst, refill), refill


class TokenBucket:
    """One bucket. ``other_rate``: tokens per second another client of the account takes from
    it, a client that wants one every ``1 / other_rate`` seconds and takes each as soon as the
    bucket has it (it paces itself and is first in line): the bucket leaves the rest of its
    refill to the caller of ``take``. ``other_taken``: tokens it took; ``other_waiting``: its
    calls still waiting for one."""

    def __init__(
        self,
        capacity: float,
        refill_per_second: float,
        time_scale: float = 1.0,
        other_rate: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self.refill = refill_per_second * time_scale
        self.tokens = capacity
        self._clock = clock
        self.stamp = clock()
        self._other_gap = 1 / (other_rate * time_scale) if other_rate > 0 and time_scale > 0 else 0
        self._next_call = self.stamp + self._other_gap if self._other_gap else math.inf
        self.other_waiting = 0
        self.other_taken = 0

    def _fill_to(self, at: float) -> None:
        if at > self.stamp:
            self.tokens = min(self.capacity, self.tokens + (at - self.stamp) * self.refill)
            self.stamp = at

    def _next_whole_token(self) -> float:
        if self.tokens >= 1:
            return self.stamp
        if self.refill <= 0:
            return math.inf
        return self.stamp + (1 - self.tokens) / self.refill

    def _other_client(self, now: float) -> None:
        """The other client's calls up to ``now``, in order with the refill."""
        while True:
            token_at = self._next_whole_token() if self.other_waiting else math.inf
            at = min(token_at, self._next_call)
            if at > now:
                return
            self._fill_to(at)
            if token_at <= self._next_call:
                self.tokens = max(0.0, self.tokens - 1)
                self.other_waiting -= 1
                self.other_taken += 1
            else:
                self.other_waiting += 1
                self._next_call += self._other_gap

    def take(self) -> bool:
        now = self._clock()
        self._other_client(now)
        self._fill_to(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class _CallClock:
    """One bucket's own time: each read (one per call the bucket serves) moves it on by
    ``step`` seconds."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class Throttling:
    """EC2's buckets per account, region and bucket, at EC2's published sizes: on by default
    (the realistic behaviour), ``configure(enabled=False)`` turns them off."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._real_clock = clock
        self._clock = clock
        self._lock = threading.Lock()
        self.configure(enabled=True)

    def configure(
        self,
        enabled: bool = True,
        buckets: Mapping[str, tuple[float, float]] | None = None,
        groups: Mapping[str, str] | None = None,
        time_scale: float = 1.0,
        raised: float = 1.0,
        others: Mapping[str, float] | None = None,
        clock: Callable[[], float] | None = None,
        seconds_per_call: float | None = None,
    ) -> None:
        """``buckets`` maps a category or an action (or a ``groups`` name) to (burst,
        refill/s); ``others`` maps an action, a category or ``"*"`` to the share of a bucket's
        refill rate another client takes; ``clock`` (seconds) is what the buckets refill by,
        the real clock when None. Every bucket starts full.

        ``seconds_per_call``: the buckets' time moves on only with the calls they serve, this
        many seconds a call, never with any clock: which calls are throttled then depends on
        how many calls came, not on how fast they came (a test's verdict may not depend on the
        machine's speed). It wins over ``clock``."""
        if raised <= 0:
            raise ValueError("raised must be > 0")
        if seconds_per_call is not None and seconds_per_call <= 0:
            raise ValueError("seconds_per_call must be > 0")
        for key, share in (others or {}).items():
            if not 0 <= share <= 1:
                raise ValueError(f"others[{key!r}] must be a share between 0 and 1")
        with self._lock:
            self.enabled = enabled
            self.buckets_config = {
                k: (float(v[0]), float(v[1])) for k, v in (buckets or {}).items()
            }
            self.group_overrides = dict(groups or {})
            self.time_scale = time_scale
            self.raised = raised
            self.others = dict(others or {})
            self._clock = clock or self._real_clock
            self.seconds_per_call = seconds_per_call
            self._buckets: dict[tuple[str, str, str], TokenBucket] = {}

    def limits(self, action: str, params: Mapping[str, Any] | None = None) -> tuple[float, float]:
        """The (burst, refill/s) an action's bucket has with the knobs applied."""
        group = self.group_overrides.get(action)
        cat = category(action, params)
        for key in (action, group, cat):
            if key is not None and key in self.buckets_config:
                return raise_limits(self.buckets_config[key], self.raised)
        return raise_limits(published_limits(action, params), self.raised)

    def _other_share(self, action: str, params: Mapping[str, Any] | None) -> float:
        for key in (action, self.group_overrides.get(action), category(action, params), "*"):
            if key is not None and key in self.others:
                return self.others[key]
        return 0.0

    def allow(
        self,
        account: str,
        region: str,
        action: str,
        params: Callable[[], Mapping[str, Any]],
    ) -> bool:
        """Take a token for one call; False: EC2 answers ``RequestLimitExceeded``."""
        if not self.enabled:
            return True
        values = params() if action in UNFILTERED_ACTIONS else None
        name = self.group_overrides.get(action) or bucket_name(action, values)
        key = (account, region, name)
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                burst, refill = self.limits(action, values)
                other = self._other_share(action, values) * refill
                clock = self._clock
                if self.seconds_per_call is not None:
                    clock = _CallClock(self.seconds_per_call)
                bucket = self._buckets[key] = TokenBucket(
                    burst, refill, self.time_scale, other, clock
                )
            return bucket.take()

    def others_report(self) -> dict[str, dict[str, int]]:
        """Per bucket that another client shares ("account/region/bucket"): the tokens it took
        and its calls still waiting for one (up to the bucket's last call)."""
        with self._lock:
            return {
                "/".join(key): {"taken": b.other_taken, "waiting": b.other_waiting}
                for key, b in self._buckets.items()
                if b.other_taken or b.other_waiting
            }
