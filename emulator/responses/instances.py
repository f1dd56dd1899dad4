"""DescribeInstances as EC2 answers it a moment after a launch: eventually consistent.

moto answers from its model at once. EC2 ("Eventual consistency in the Amazon EC2 API") may not
know an instance just launched to the next calls naming it (InvalidInstanceID.NotFound, the
page's own example), and a listing filtered by tag (how the broker finds a fleet's nodes by
their request tag) misses it while it settles (``emulator.models.consistency``). moto still does
the work; only what the call sees changes.
"""

from __future__ import annotations

import copy

from moto.core.responses import ActionResult
from moto.ec2.responses.instances import InstanceResponse

from ..models.consistency import filters_by_tag
from ..state import world
from ._base import CapacityResponse


class Instances(CapacityResponse):
    def describe_instances(self) -> ActionResult:
        ids = self._get_param("InstanceIds", []) or []
        # What EC2 has done by now on its own (the clock): an interruptible reservation's
        # reclaimed instances and a Capacity Block's last ones terminated.
        self.capacity.refresh()
        # By id: one launched a moment ago may be unknown yet (InvalidInstanceID.NotFound).
        self.capacity.named_instances(ids)
        result = InstanceResponse.describe_instances(self)
        if ids:
            return result
        answer = result.result
        assert isinstance(answer, dict)
        reservations = answer.get("Reservations") or []
        with world.lock:
            ids = [i.id for r in reservations for i in r.instances]
            lagging = self.capacity.propagation.listing(ids, world.clock.now())
        if not lagging or not filters_by_tag(self._filters_from_querystring()):
            return result
        shown = []
        for reservation in reservations:
            seen = [i for i in reservation.instances if i.id not in lagging]
            if seen:
                # A copy: moto's own reservation keeps all of its instances.
                view = copy.copy(reservation)
                view.instances = seen
                shown.append(view)
        return ActionResult({**answer, "Reservations": shown})
