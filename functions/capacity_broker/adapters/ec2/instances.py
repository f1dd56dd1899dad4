"""Instances the broker launched: read them, name them, and terminate them.

The Slurm programs bind a node name to each launched instance and give the instances back
when Slurm powers the nodes down. EC2 is eventually consistent: an instance launched a moment
ago may still be unknown to the next call (``InvalidInstanceID.NotFound``, "Eventual
consistency in the Amazon EC2 API", EC2 API Reference), so reading, tagging and terminating
one the caller knows was made a moment ago retry that answer until the caller's deadline
instead of taking it for "gone". An id EC2 may rightly not know (terminated long ago) is not
waited for: the caller says which ids are which.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from ...domain.tags import tag_dict
from ..aws import AwsError
from .base import Ec2Base
from .filters import Filters, Wanted

T = TypeVar("T")

# EC2: "DescribeInstances ... up to 1000 instance IDs"; filters take at most 200 values.
_IDS_PER_CALL = 1000
_FILTER_VALUES = 200
_NOT_YET_KNOWN = frozenset({"InvalidInstanceID.NotFound"})
# States in which an instance still runs or can be started again: what "give back" ends.
LIVE_STATES = ("pending", "running", "stopping", "stopped")


@dataclass(frozen=True)
class Instance:
    """One instance as DescribeInstances has it."""

    instance_id: str
    state: str
    private_ip: str | None
    private_dns: str | None
    tags: Mapping[str, str] = field(default_factory=dict)
    instance_type: str | None = None
    # The reservation the instance runs in, as EC2 reports it (DescribeInstances'
    # CapacityReservationId): how an answer tells which rung served a node.
    capacity_reservation_id: str | None = None
    # DescribeInstances' LaunchTime: how the cleaner tells a ladder no invocation can still
    # be finishing (``domain.cleaner.abandoned_ladders``).
    launched: datetime | None = None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Instance:
        return cls(
            instance_id=data["InstanceId"],
            state=(data.get("State") or {}).get("Name", "unknown"),
            private_ip=data.get("PrivateIpAddress") or None,
            private_dns=data.get("PrivateDnsName") or None,
            tags=tag_dict(data.get("Tags")),
            instance_type=data.get("InstanceType") or None,
            capacity_reservation_id=data.get("CapacityReservationId") or None,
            launched=data.get("LaunchTime") or None,
        )


def _chunks(items: Sequence[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


class InstancesMixin(Ec2Base):
    def tagged_instances(
        self,
        tags: Mapping[str, Sequence[Wanted]],
        states: Sequence[str] = LIVE_STATES,
        deadline: float | None = None,
    ) -> list[Instance]:
        """Instances carrying each tag key with one of its values (exactly, or starting with
        a ``Prefix``: ``filters.Filters``), in one of ``states``."""
        keyed = [(key, list(values)) for key, values in tags.items()]
        # One key may list more values than a filter takes: ask per slice of the longest.
        longest = max(range(len(keyed)), key=lambda i: len(keyed[i][1])) if keyed else None
        slices = _chunks(keyed[longest][1], _FILTER_VALUES) if longest is not None else iter([[]])
        found: dict[str, Instance] = {}
        for part in slices:
            wanted = Filters(
                {
                    **{
                        f"tag:{key}": part if i == longest else values
                        for i, (key, values) in enumerate(keyed)
                    },
                    "instance-state-name": list(states),
                }
            )
            for data in self._instances(deadline, Filters=wanted.params(), MaxResults=1000):
                instance = Instance.from_api(data)
                if wanted.admit(instance.tags, {"instance-state-name": instance.state}):
                    found[instance.instance_id] = instance
        return list(found.values())

    def tag_instance(
        self, instance_id: str, tags: Mapping[str, str], deadline: float | None = None
    ) -> None:
        self._until_known(
            deadline,
            lambda: self._call(
                "CreateTags",
                deadline,
                Resources=[instance_id],
                Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
            ),
        )

    def tag_instances(
        self,
        instance_ids: Sequence[str],
        tags: Mapping[str, str],
        deadline: float | None = None,
        wait_for: Collection[str] = (),
    ) -> list[str]:
        """Tag existing instances; answers the ids EC2 confirmed tagging (a call that
        answered). An id EC2 does not know is left out (asked again until ``deadline`` when
        it is in ``wait_for``): the caller compares what it asked with what it got."""
        tagged: list[str] = []

        def mark(ids: list[str]) -> None:
            self._call(
                "CreateTags",
                deadline,
                Resources=ids,
                Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
            )
            tagged.extend(ids)

        # CreateTags: "Up to 1000 resource IDs" per call.
        for chunk in _chunks(list(dict.fromkeys(instance_ids)), _IDS_PER_CALL):
            self._each_known(chunk, mark, wait_for, deadline)
        return tagged

    def known_instances(
        self,
        instance_ids: Sequence[str],
        deadline: float | None = None,
        wait_for: Collection[str] = (),
    ) -> dict[str, Instance]:
        """The instances by id that EC2 knows; an id it does not know is left out at once,
        unless it is in ``wait_for`` (made a moment ago): that one is asked again until
        ``deadline``."""
        found: dict[str, Instance] = {}

        def ask(ids: list[str]) -> None:
            for data in self._instances(deadline, InstanceIds=ids):
                found[data["InstanceId"]] = Instance.from_api(data)

        for chunk in _chunks(list(dict.fromkeys(instance_ids)), _IDS_PER_CALL):
            self._each_known(chunk, ask, wait_for, deadline)
        return found

    def terminate_instances(
        self,
        instance_ids: Sequence[str],
        deadline: float | None = None,
        wait_for: Collection[str] = (),
    ) -> list[str]:
        """Terminate; answers the ids EC2 confirmed shutting down or terminated. An id EC2
        does not know is not an error (nothing of it is left to end), unless it is in
        ``wait_for`` (made a moment ago): that one is asked again until ``deadline``, and
        stays unconfirmed if EC2 still does not know it."""
        confirmed: list[str] = []

        def end(ids: list[str]) -> None:
            answer = self._call("TerminateInstances", deadline, InstanceIds=ids)
            confirmed.extend(
                item["InstanceId"]
                for item in answer.get("TerminatingInstances", [])
                if (item.get("CurrentState") or {}).get("Name") in ("shutting-down", "terminated")
            )

        for chunk in _chunks(list(dict.fromkeys(instance_ids)), _IDS_PER_CALL):
            self._each_known(chunk, end, wait_for, deadline)
        return confirmed

    # -- plumbing -----------------------------------------------------------------------
    def _instances(self, deadline: float | None, **params: Any) -> Iterator[dict[str, Any]]:
        for reservation in self._pages("DescribeInstances", "Reservations", deadline, **params):
            yield from reservation.get("Instances", [])

    def _each_known(
        self,
        ids: list[str],
        call: Callable[[list[str]], None],
        wait_for: Collection[str],
        deadline: float | None,
    ) -> None:
        """``call(ids)``, leaving out the ids EC2 does not know. One unknown id fails the
        whole call ("If you specify multiple instances and the request fails (for example,
        because of a single incorrect instance ID), none of the instances are terminated",
        TerminateInstances), so the ids are halved until the unknown one is alone; it is
        asked again until ``deadline`` when the caller waits for it, else dropped."""
        try:
            call(ids)
            return
        except AwsError as error:
            if error.code not in _NOT_YET_KNOWN:
                raise
        if len(ids) > 1:
            half = len(ids) // 2
            self._each_known(ids[:half], call, wait_for, deadline)
            self._each_known(ids[half:], call, wait_for, deadline)
            return
        if ids[0] not in wait_for:
            return
        try:
            self._until_known(deadline, lambda: call(ids))
        except AwsError as error:
            if error.code not in _NOT_YET_KNOWN:
                raise

    def _until_known(self, deadline: float | None, call: Callable[[], T]) -> T:
        pause = 0.25
        while True:
            try:
                return call()
            except AwsError as error:
                if error.code not in _NOT_YET_KNOWN:
                    raise
                if deadline is None or time.monotonic() + pause >= deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
