"""Instances the broker launched: read them, name them, and terminate them.

The Slurm programs bind a node name to each launched instance and give the instances back
when Slurm powers the nodes down. EC2 is eventually consistent: an instance launched a moment
ago may still be unknown to the next call (``InvalidInstanceID.NotFound``, "Eventual
consistency in the Amazon EC2 API", EC2 API Reference), so reading and tagging one retry that
answer until the caller's deadline instead of taking it for "gone".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..aws import AwsError
from .base import Ec2Base

T = TypeVar("T")

# EC2: "DescribeInstances ... up to 1000 instance IDs"; filters take at most 200 values.
_IDS_PER_CALL = 1000
_FILTER_VALUES = 200
_NOT_YET_KNOWN = frozenset({"InvalidInstanceID.NotFound"})
# States in which an instance still runs or can be started again: what "give back" ends.
LIVE_STATES = ("pending", "running", "stopping", "stopped")


@dataclass(frozen=True)
class Instance:
    instance_id: str
    state: str
    private_ip: str | None
    private_dns: str | None
    tags: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Instance:
        return cls(
            instance_id=data["InstanceId"],
            state=(data.get("State") or {}).get("Name", "unknown"),
            private_ip=data.get("PrivateIpAddress") or None,
            private_dns=data.get("PrivateDnsName") or None,
            tags={t["Key"]: t["Value"] for t in data.get("Tags") or []},
        )


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


class InstancesMixin(Ec2Base):
    def describe_instances(
        self, instance_ids: Sequence[str], deadline: float | None = None
    ) -> dict[str, Instance]:
        """The instances by id. An id EC2 does not know yet is asked again until
        ``deadline`` (then ``AwsError`` with ``InvalidInstanceID.NotFound``)."""
        found: dict[str, Instance] = {}
        for chunk in _chunks(list(dict.fromkeys(instance_ids)), _IDS_PER_CALL):

            def ask(ids: list[str] = chunk) -> list[dict[str, Any]]:
                return list(self._instances(deadline, InstanceIds=ids))

            for data in self._until_known(deadline, ask):
                found[data["InstanceId"]] = Instance.from_api(data)
        return found

    def tagged_instances(
        self,
        tags: Mapping[str, Sequence[str]],
        states: Sequence[str] = LIVE_STATES,
        deadline: float | None = None,
    ) -> list[Instance]:
        """Instances carrying each tag key with one of its values, in one of ``states``.
        Values may use EC2's filter wildcards, ``*`` and ``?`` (EC2 User Guide, "List and
        filter using the CLI and API": docs.aws.amazon.com/AWSEC2/latest/UserGuide/
        Using_Filtering.html)."""
        keyed = [(key, list(values)) for key, values in tags.items()]
        # One key may list more values than a filter takes: ask per slice of the longest.
        longest = max(range(len(keyed)), key=lambda i: len(keyed[i][1])) if keyed else None
        slices = _chunks(keyed[longest][1], _FILTER_VALUES) if longest is not None else iter([[]])
        found: dict[str, Instance] = {}
        for part in slices:
            filters = [
                {"Name": f"tag:{key}", "Values": part if i == longest else values}
                for i, (key, values) in enumerate(keyed)
            ]
            filters.append({"Name": "instance-state-name", "Values": list(states)})
            for data in self._instances(deadline, Filters=filters, MaxResults=1000):
                found[data["InstanceId"]] = Instance.from_api(data)
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

    def terminate_instances(
        self, instance_ids: Sequence[str], deadline: float | None = None
    ) -> list[str]:
        """Terminate; answers the ids EC2 confirmed shutting down or terminated. An id EC2
        does not know (any more) is not an error: nothing of it is left to end."""
        confirmed: list[str] = []
        for chunk in _chunks(list(dict.fromkeys(instance_ids)), _IDS_PER_CALL):
            try:
                answer = self._call("TerminateInstances", deadline, InstanceIds=chunk)
            except AwsError as error:
                if error.code not in _NOT_YET_KNOWN:
                    raise
                if len(chunk) > 1:
                    # One unknown id fails the whole call: end the others one by one.
                    for instance_id in chunk:
                        confirmed += self.terminate_instances([instance_id], deadline)
                continue
            confirmed += [
                item["InstanceId"]
                for item in answer.get("TerminatingInstances", [])
                if (item.get("CurrentState") or {}).get("Name") in ("shutting-down", "terminated")
            ]
        return confirmed

    # -- plumbing -----------------------------------------------------------------------
    def _instances(self, deadline: float | None, **params: Any) -> Iterator[dict[str, Any]]:
        for reservation in self._pages("DescribeInstances", "Reservations", deadline, **params):
            yield from reservation.get("Instances", [])

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
