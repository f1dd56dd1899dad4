"""CloudFormation: the status of the job stacks the cleaner's holds were made for.

Only DescribeStacks by name. "Does not exist" is an answer (the stack was never created, or
was deleted: by name CloudFormation no longer shows a deleted stack), told apart from a lookup
that failed; the caller decides what each means.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..domain.cleaner import STACK_MISSING, StackLookup
from .aws import AwsError, Clients, RetryPolicy, call


@dataclass(frozen=True)
class Stack:
    stack_id: str
    name: str
    status: str
    created: datetime | None = None


class CloudFormation:
    """DescribeStacks in one region, retried on throttling and 5xx under the caller's deadline.

    Not paced: the cleaner asks once per distinct stack name per sweep (cached by the caller),
    far below CloudFormation's request rates, and the retry loop absorbs a throttle.
    """

    def __init__(self, region: str, clients: Clients, retry: RetryPolicy | None = None) -> None:
        self.region = region
        self.clients = clients
        self.retry = retry or RetryPolicy()

    @property
    def _client(self) -> Any:
        return self.clients.client("cloudformation", self.region)

    def stack(self, name: str, deadline: float | None = None) -> Stack | StackLookup:
        """The stack called ``name``, or STACK_MISSING; raises ``AwsError`` when the lookup
        failed (throttled past the retries, denied, timed out)."""

        def once() -> Any:
            return call("DescribeStacks", self._client.describe_stacks, StackName=name)

        try:
            answer = self.retry.run("DescribeStacks", once, deadline=deadline)
        except AwsError as error:
            if is_missing(error):
                return STACK_MISSING
            raise
        stacks = answer.get("Stacks") or []
        if not stacks:
            return STACK_MISSING
        found = stacks[0]
        return Stack(
            stack_id=str(found.get("StackId", "")),
            name=str(found.get("StackName", name)),
            status=str(found.get("StackStatus", "")),
            created=found.get("CreationTime"),
        )


def is_missing(error: AwsError) -> bool:
    """CloudFormation answers an unknown (or deleted) stack name with a 400 ValidationError
    "Stack with id NAME does not exist"; every other ValidationError is a malformed request."""
    return error.code == "ValidationError" and "does not exist" in (error.message or "")
