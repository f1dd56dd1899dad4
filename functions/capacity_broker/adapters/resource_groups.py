"""AWS Resource Groups: the members of a Capacity Reservation resource group (a cluster's
reserved pool, named by the operator).

Only ``ListGroupResources``, every page. A Capacity Reservation group is a service-linked
group of type ``AWS::EC2::CapacityReservationPool`` whose members are Capacity Reservations
(since 2026-08-25 also Capacity Blocks and interruptible reservations: EC2 User Guide, "Work
with Capacity Reservation groups"); its members are asked by listing, never by a query.
"""

from __future__ import annotations

from typing import Any

from .aws import Clients, RetryPolicy, call

# A member's resource type (ListGroupResources' ResourceIdentifier.ResourceType).
RESERVATION_TYPE = "AWS::EC2::CapacityReservation"
# ListGroupResources: "MaxResults ... minimum value of 1. Maximum value of 50."
PAGE = 50


class ResourceGroups:
    """ListGroupResources in one region, retried on throttling and 5xx under the caller's
    deadline. Not paced: one listing per group per reserve, far below the service's rate."""

    def __init__(self, region: str, clients: Clients, retry: RetryPolicy | None = None) -> None:
        self.region = region
        self.clients = clients
        self.retry = retry or RetryPolicy()

    @property
    def _client(self) -> Any:
        return self.clients.client("resource-groups", self.region)

    def reservation_ids(self, group: str, deadline: float | None = None) -> list[str]:
        """The ids of the Capacity Reservations in ``group`` (a name or an ARN), every page,
        in the order listed; other members are left out. Raises ``AwsError``."""
        found: list[str] = []
        token: str | None = None
        while True:
            params: dict[str, Any] = {"Group": group, "MaxResults": PAGE}
            if token:
                params["NextToken"] = token

            def once(params: dict[str, Any] = params) -> Any:
                return call("ListGroupResources", self._client.list_group_resources, **params)

            answer = self.retry.run("ListGroupResources", once, deadline=deadline)
            for item in answer.get("Resources") or []:
                identifier = item.get("Identifier") or {}
                if identifier.get("ResourceType") != RESERVATION_TYPE:
                    continue
                arn = str(identifier.get("ResourceArn", ""))
                # arn:aws:ec2:<region>:<account>:capacity-reservation/cr-…
                reservation_id = arn.rsplit("/", 1)[-1]
                if reservation_id.startswith("cr-") and reservation_id not in found:
                    found.append(reservation_id)
            token = answer.get("NextToken")
            if not token:
                return found
