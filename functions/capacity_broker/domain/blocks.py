"""How long a Capacity Block can run instances: the one home of EC2's end-of-block rule.

EC2 begins terminating a block's instances before the block ends: "Thirty minutes before the
reservation expires, we begin to terminate any instances that are still running in the
Capacity Block" (EC2 User Guide, "Work with Capacity Blocks"). UltraServer blocks stop an hour
before their end: 60 minutes for P6e-GB200 UltraServer blocks (the difference between
instance and UltraServer Capacity Blocks as dev.classmethod.jp summarises AWS's terms,
"ec2-capacity-blocks-for-ml-instance-cb-vs-ultraserver-cb", 2026; the EC2 User Guide page that
states it was not among the sources at hand), taken for every UltraServer type. A job is only
worth launching into a block if
it can finish before that moment, so everything that offers, validates or counts a block's
hours (reserve's bring-your-own check, ``plan``, the capacity listing's ``hours_left``) asks
``usable_until``, never the block's ``EndDate``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .clock import utc

RECLAIM_LEAD = timedelta(minutes=30)
ULTRASERVER_RECLAIM_LEAD = timedelta(minutes=60)
# The instance types EC2 sells only inside UltraServers (botocore 1.44.5's InstanceType enum):
# P6e-GB200 (u-p6e-gb200x36/x72) and Trn2 UltraServers (u-trn2x64). A block of them is an
# UltraServer block even when only DescribeCapacityReservations (no UltraserverType) shows it.
ULTRASERVER_FAMILIES = frozenset({"p6e-gb200", "trn2u"})


def is_ultraserver(instance_type: str, ultraserver_type: str | None = None) -> bool:
    """An UltraServer block: DescribeCapacityBlocks names its ``UltraserverType``, or its
    instance type is one EC2 sells only in UltraServers."""
    return bool(ultraserver_type) or instance_type.split(".", 1)[0] in ULTRASERVER_FAMILIES


def reclaim_lead(instance_type: str, ultraserver_type: str | None = None) -> timedelta:
    """How long before its end EC2 begins terminating the block's instances."""
    if is_ultraserver(instance_type, ultraserver_type):
        return ULTRASERVER_RECLAIM_LEAD
    return RECLAIM_LEAD


def usable_until(
    end_date: datetime, instance_type: str, ultraserver_type: str | None = None
) -> datetime:
    """The last moment the block's instances can run: its end less EC2's lead."""
    return utc(end_date, "end_date") - reclaim_lead(instance_type, ultraserver_type)


def usable_seconds(
    start_date: datetime | None,
    end_date: datetime,
    instance_type: str,
    now: datetime,
    ultraserver_type: str | None = None,
) -> float:
    """Seconds a job starting now (or at the block's start, if later) can run in it; 0 past
    ``usable_until``."""
    begin = max(utc(now), utc(start_date, "start_date")) if start_date else utc(now)
    left = usable_until(end_date, instance_type, ultraserver_type) - begin
    return max(0.0, left.total_seconds())


def usable_window_seconds(
    start_date: datetime,
    end_date: datetime,
    instance_type: str,
    ultraserver_type: str | None = None,
) -> float:
    """Seconds of the block's whole life its instances can run: the longest job it can ever
    take, whenever that job starts."""
    window = usable_until(end_date, instance_type, ultraserver_type) - utc(start_date, "start_date")
    return max(0.0, window.total_seconds())
