"""The EC2 operations the broker calls: the only ones in the EC2 API model its own sessions load.

A cold container's first EC2 client costs about 0.1 s of CPU with botocore's full model
(830 operations, documentation included: 4.3 MB of JSON parsed, then a method built per
operation), more than importing boto3, and the broker calls a few dozen of them. So
``make ec2-model`` (``infra/ec2_model.py``) writes botocore's own model trimmed to these
operations and the shapes they reach into ``adapters/botocore_data``, and ``Clients`` puts that
directory first on the loader's search path of every session it makes itself
(docs/performance.md, "A smaller EC2 model").

The list was read off every EC2 call in ``functions/capacity_broker``: the adapters'
``_call``/``_pages``/``_call_once`` actions (``adapters/ec2``), ``DescribeRegions``
(``adapters/regions.py``) and the actions the pacer's buckets name (``domain/buckets.py``:
calls the broker makes or may make). An operation left out of it is a client without that
method (``AttributeError``), so ``tests/unit/adapters/test_ec2_model.py`` reads the source for
every EC2 operation name and method name in it and fails on one missing here.
"""

from __future__ import annotations

OPERATIONS: frozenset[str] = frozenset(
    {
        # Capacity Reservations: probes, holds, the cleaner, the listing, `ahead`.
        "CancelCapacityReservation",
        "CreateCapacityReservation",
        "CreateCapacityReservationCancellationQuote",
        "CreateCapacityReservationDateChangeQuote",
        "DescribeCapacityReservationCancellationQuotes",
        "DescribeCapacityReservationDateChangeQuotes",
        "DescribeCapacityReservationTopology",
        "DescribeCapacityReservations",
        "ModifyCapacityReservation",
        # Capacity Blocks: offerings, purchases, extensions, status.
        "DescribeCapacityBlockExtensionHistory",
        "DescribeCapacityBlockExtensionOfferings",
        "DescribeCapacityBlockOfferings",
        "DescribeCapacityBlockStatus",
        "PurchaseCapacityBlock",
        "PurchaseCapacityBlockExtension",
        # Launch templates and launches (reserve, release, the cleaner).
        "CreateFleet",
        "CreateLaunchTemplateVersion",
        "DeleteLaunchTemplateVersions",
        "DescribeLaunchTemplateVersions",
        "DescribeLaunchTemplates",
        "DescribeInstances",
        "RunInstances",
        "TerminateInstances",
        "CreateTags",
        # Look-ups: subnets, VPCs, images, instance types, zones, regions, Spot prices.
        "DescribeAvailabilityZones",
        "DescribeImages",
        "DescribeInstanceTypeOfferings",
        "DescribeInstanceTypes",
        "DescribeRegions",
        "DescribeSpotPriceHistory",
        "DescribeSubnets",
        "DescribeVpcs",
        # Named by the pacer's buckets (domain/buckets.py), not called today: kept so that a
        # call to one of them works the day it is written.
        "DeleteTags",
        "DescribeInstanceStatus",
        "DescribeInstanceTopology",
        "DescribeNetworkInterfaces",
        "DescribeSecurityGroups",
        "DescribeSnapshots",
        "DescribeSpotInstanceRequests",
        "DescribeVolumes",
        "ModifyLaunchTemplate",
    }
)
