"""How a ``CapacityBroker`` reaches the broker's entry points, chosen once when it is made.

Two transports answer the same questions with the same JSON (the contract's answers):

- ``in_process.InProcess`` (direct mode, ``CapacityBroker(...)``): the entry points run in
  this process on the broker's own root (``root.Root``), through the Lambda handlers' own
  entry function (``handlers._runtime.serve``); ``capacity`` lists with the broker's session.
- ``deployed.Deployed`` (``CapacityBroker.deployed(...)``): Lambda ``Invoke`` of
  ``<prefix>-<entry point>``.

The broker's calls never ask which one they have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..logic.capacity import Progress
from ..models.capacity import CapacityResponse


class Transport(Protocol):
    @property
    def mode(self) -> str:
        """``direct`` or ``deployed`` (what ``CapacityBroker.mode`` says)."""
        ...

    def invoke(self, entry: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """One entry point's raw JSON answer to ``event``."""
        ...

    def capacity(
        self,
        fields: dict[str, Any],
        regions: Sequence[str] | str | None,
        request_id: str,
        progress: Progress | None,
    ) -> CapacityResponse:
        """The ``capacity`` entry point's answer (contract) for the request ``fields`` in
        ``regions`` (``None``: the broker's own, else where the transport looks by default);
        every region failing raises ``RegionsFailed``."""
        ...
