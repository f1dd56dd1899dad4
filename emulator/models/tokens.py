"""EC2's ClientToken rule, in one place.

A token seen before with the same parameters answers with what the first call made (nothing
new is created); the same token with other parameters is ``IdempotentParameterMismatch``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..exceptions import client_error
from ..state import world

T = TypeVar("T")


def fingerprint(params: Mapping[str, Any]) -> str:
    return json.dumps(
        {k: v for k, v in params.items() if k not in ("ClientToken", "DryRun")},
        sort_keys=True,
        default=str,
    )


class ClientTokens:
    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], tuple[str, Any]] = {}

    def once(
        self,
        action: str,
        token: str | None,
        params: Mapping[str, Any],
        make: Callable[[], T],
    ) -> tuple[T, bool]:
        """``make()``'s value for this token, made at most once: (value, replayed)."""
        if not token:
            return make(), False
        key = (action, token)
        wanted = fingerprint(params)
        with world.lock:
            seen = self._seen.get(key)
            if seen is not None:
                if seen[0] != wanted:
                    raise client_error(
                        "IdempotentParameterMismatch",
                        "The client token you have provided is associated with a resource "
                        "that is already deleted or has different parameters. Please use a "
                        "different client token.",
                    )
                return seen[1], True
            value = make()
            self._seen[key] = (wanted, value)
            return value, False

    def made(self, action: str) -> dict[str, Any]:
        """token -> what the first call with it made, for one action (tests read it)."""
        with world.lock:
            return {
                token: value for (kind, token), (_, value) in self._seen.items() if kind == action
            }
