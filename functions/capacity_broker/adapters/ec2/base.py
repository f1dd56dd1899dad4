"""The EC2 client as the adapters use it: pacing, retries under a deadline, pagination."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..aws import Clients, RetryPolicy, call
from ..throttle import Pacer

# A purchase (or an accepted quote) is never repeated by the broker: Capacity Blocks and their
# extensions cannot be undone and their purchase calls have no ClientToken (botocore already
# makes one attempt per call).
NO_RETRY = RetryPolicy(max_attempts=1)


class Ec2Base:
    def __init__(
        self,
        region: str,
        clients: Clients,
        pacer: Pacer,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.region = region
        # The root's clients (its session) and its pacer: every EC2 call of a root draws from
        # the same per-region buckets, whichever flow makes it.
        self.clients = clients
        self.pacer = pacer
        self.retry = retry or RetryPolicy()

    @property
    def _client(self) -> Any:
        return self.clients.client("ec2", self.region)

    def budget_short(self, action: str) -> bool:
        """Whether the bucket ``action`` draws from has no token to spare now (the pacer's
        word): a call made only in case another fails would take the next caller's."""
        return self.pacer.short(self.region, action)

    def _call(self, action: str, deadline: float | None = None, **params: Any) -> Any:
        return self.retry.run(action, self._attempt(action, params, deadline), deadline=deadline)

    def _attempt(
        self, action: str, params: dict[str, Any], deadline: float | None = None
    ) -> Callable[[], Any]:
        """One attempt of a call, paced: every attempt (a retry's too) waits for the region's
        bucket, no later than the deadline, and tells it what EC2 answered, so a throttle the
        retry loop sees also slows the root's other calls down."""
        # (A client whose read timeout fits in the time left: a hung socket must not hold the
        # invocation past its deadline.)
        client = (
            self._client
            if deadline is None
            else self.clients.client("ec2", self.region, deadline - self.pacer.now())
        )
        method = getattr(client, _snake(action))

        def once() -> Any:
            return self.pacer.call(
                self.region, action, params, lambda: call(action, method, **params), deadline
            )

        return once

    def _call_once(self, action: str, **params: Any) -> Any:
        """One paced attempt, never retried: for calls that must not happen twice."""
        return NO_RETRY.run(action, self._attempt(action, params))

    def _pages(
        self, action: str, key: str, deadline: float | None = None, **params: Any
    ) -> Iterator[Any]:
        token: str | None = None
        while True:
            page = self._call(action, deadline, **params, **({"NextToken": token} if token else {}))
            yield from page.get(key, [])
            token = page.get("NextToken")
            if not token:
                return


def _snake(action: str) -> str:
    out = []
    for i, ch in enumerate(action):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
