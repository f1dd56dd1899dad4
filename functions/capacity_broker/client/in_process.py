"""The direct transport: the broker's own entry points, run in this process.

``probe``, ``reserve``, ``release`` and ``clean`` of a direct ``CapacityBroker`` call the same
entry function the Lambda handler calls (``handlers._runtime.serve``, with the entry point's
``run``) on the broker's own root, with a context object as Lambda's, so the answer is
exactly what the deployed function would give. Nothing of the process is changed for it (no
environment, no lock): runs of one broker, or of many, go on at once in any threads. Their
log lines are plain records of ``FUNCTION_LOG`` (warnings and errors) and they emit no metrics.
``capacity-broker local`` serves the Lambda handlers themselves behind a Lambda ``Invoke``
endpoint (``invoke_in_process``).
"""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..handlers._runtime import FUNCTION_LOG, PLAIN, serve
from ..logic.capacity import Progress
from ..models.capacity import CapacityRequest, CapacityResponse
from .results import EntryPointUnavailable, RegionsFailed, validated

if TYPE_CHECKING:
    from ..logic.capacity import CapacityLister
    from ..root import Root

ENTRY_POINTS = ("probe", "reserve", "release", "cleaner", "capacity")
DEFAULT_REGION = "us-east-1"
# In-process runs get the time budget of the longest deployed function (the cleaner).
IN_PROCESS_TIMEOUT_MS = 300_000

__all__ = [
    "FUNCTION_LOG",
    "InProcess",
    "InProcessContext",
    "handler_module",
    "invoke_in_process",
    "run_function",
]


@dataclass
class InProcessContext:
    """The parts of Lambda's context object the handlers (and Powertools) read."""

    function_name: str
    timeout_ms: int = IN_PROCESS_TIMEOUT_MS
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    region: str = DEFAULT_REGION
    account_id: str = "000000000000"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account_id}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"in-process/{self.aws_request_id}"

    def get_remaining_time_in_millis(self) -> int:
        elapsed = int((time.monotonic() - self.started) * 1000)
        return max(self.timeout_ms - elapsed, 0)


def handler_module(entry: str) -> Any:
    """``capacity_broker.handlers.<entry>``, or :class:`EntryPointUnavailable`."""
    if entry not in ENTRY_POINTS:
        raise EntryPointUnavailable(f"unknown entry point {entry!r}")
    name = f"capacity_broker.handlers.{entry}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != name:
            raise
        raise EntryPointUnavailable(
            f"the {entry} entry point is not part of this installation"
        ) from None


def invoke_in_process(
    entry: str,
    event: Any,
    function_name: str,
    region: str,
    timeout_ms: int,
    account_id: str = "000000000000",
    request_id: str | None = None,
) -> Any:
    """Call ``capacity_broker.handlers.<entry>.handler`` as Lambda would (``request_id``: the
    invocation's, as Lambda gives it; a new one when None)."""
    module = handler_module(entry)
    context = InProcessContext(
        function_name=function_name, timeout_ms=timeout_ms, region=region, account_id=account_id
    )
    if request_id is not None:
        context.aws_request_id = request_id
    return module.handler(event, context)


def run_function(entry: str, event: Mapping[str, Any], root: Root) -> dict[str, Any]:
    """One entry point's answer, its entry function run here on ``root`` (a broker's own),
    as the deployed function would run it: a context object with the longest function's
    budget, plain log records, no metrics."""
    module = handler_module(entry)
    context = InProcessContext(
        function_name=f"capacity-broker-{entry}",
        timeout_ms=IN_PROCESS_TIMEOUT_MS,
        region=root.settings.region,
    )
    answer = serve(entry, module.run, dict(event), context, lambda: root, PLAIN)
    return dict(answer)


class InProcess:
    """The direct transport (``client.transport``): a broker's entry points run here, on the
    root ``root`` gives (the broker's own, built on its first action), and its ``capacity``
    listed with ``lister`` over the regions ``resolve`` names."""

    mode = "direct"

    def __init__(
        self,
        root: Callable[[], Root],
        lister: Callable[[], CapacityLister],
        resolve: Callable[[Sequence[str] | str | None], list[str]],
    ) -> None:
        self._root = root
        self._lister = lister
        self._resolve = resolve

    def invoke(self, entry: str, event: Mapping[str, Any]) -> dict[str, Any]:
        return run_function(entry, event, self._root())

    def capacity(
        self,
        fields: dict[str, Any],
        regions: Sequence[str] | str | None,
        request_id: str,
        progress: Progress | None,
    ) -> CapacityResponse:
        request = validated(CapacityRequest, {**fields, "regions": self._resolve(regions)})
        response = self._lister().answer(request, request_id, progress=progress)
        if response.status == "error":
            raise RegionsFailed(response.errors)
        return response
