"""Availability Zones as the client's ``az`` look-up lists them (``DiscoveryMixin.zones``).

A module of its own beside ``discovery``: no Lambda handler lists zones, so none makes this
record at its cold import."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Zone:
    """An Availability Zone as DescribeAvailabilityZones has it: its name, id, type and state."""

    name: str
    zone_id: str
    zone_type: str
    state: str
