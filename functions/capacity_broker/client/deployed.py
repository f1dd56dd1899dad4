"""The deployed transport: Lambda ``Invoke`` of ``<prefix>-<entry point>`` (or of its alias,
the stack's ``FunctionQualifier`` output, when the stack publishes versions for SnapStart or
provisioned concurrency).

Lambda's own failures (the call refused, throttled, unreachable) and a function that raised
become the client's errors; the function's JSON answer is returned as it came. A throttled
invoke (the account's or the function's reserved concurrency is used up, or EC2 throttled the
function's start) is asked again, with jittered exponential backoff, within the caller's
``Patience``: a class of desktops or a Slurm queue flushing meets it by design. So is an invoke
of a SnapStart version Lambda is waking up (``WAKING``): the first call after a quiet
fortnight meets it.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..domain import backoff
from ..logic.capacity import Progress
from ..models.capacity import CapacityResponse
from .results import (
    BrokerError,
    EntryPointUnavailable,
    FunctionError,
    InvokeFailed,
    RegionsFailed,
    typed,
)

# Where a wait is said (the Slurm programs send it to their log).
log = logging.getLogger(__name__)

# Lambda's longest timeout is 15 minutes; the client waits a little longer for an answer.
INVOKE_READ_TIMEOUT = 910


# Lambda's answers to an invoke it will take later: concurrency used up (the account's, or the
# function's reserved concurrency: docs/deploy.md), or EC2 throttling the function's start.
THROTTLED = frozenset({"TooManyRequestsException", "EC2ThrottledException"})
# A SnapStart version Lambda is (re)initializing: a version not invoked for 14 days, or one
# Lambda recycles, answers 409 "SnapStartNotReadyException" until its snapshot is ready again;
# a restore that did not finish in time answers 408 "SnapStartTimeoutException" (Lambda API
# reference, Invoke, Errors). Neither ran the function: asked again like a throttle. Not
# "SnapStartException" (the function's own afterRestore hook raised): that is the function's
# error, surfaced with its message.
WAKING = frozenset({"SnapStartNotReadyException", "SnapStartTimeoutException"})
ASKED_AGAIN = THROTTLED | WAKING


@dataclass(frozen=True)
class Patience:
    """How long a caller keeps asking a throttled Lambda: full-jitter exponential backoff
    (``domain.backoff``) from ``base`` to ``cap`` seconds, for at most ``seconds`` from the
    first try (then the throttle is the answer, as ``InvokeFailed``)."""

    seconds: float = 60.0
    base: float = 0.5
    cap: float = 8.0
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)


def lambda_client(session: Any, region: str) -> Any:
    """A Lambda client for invoking the broker's functions: one that waits as long as a
    function may run and retries what is safe to retry (every call carries a request id)."""
    import boto3
    from botocore.config import Config

    session = session or boto3.session.Session()
    return session.client(
        "lambda",
        region_name=getattr(session, "region_name", None) or region,
        config=Config(
            read_timeout=INVOKE_READ_TIMEOUT,
            connect_timeout=10,
            # Safe to retry: every call carries a request id (idempotency key).
            retries={"mode": "standard", "total_max_attempts": 3},
            user_agent_extra="capacity-broker-client",
        ),
    )


def invoke_function(
    lam: Callable[[], Any],
    prefix: str,
    entry: str,
    event: Mapping[str, Any],
    qualifier: str | None = None,
    patience: Patience | None = None,
) -> dict[str, Any]:
    """``<prefix>-<entry>``'s answer to ``event`` (``lam`` gives the Lambda client), from the
    alias ``qualifier`` when given (SnapStart and provisioned concurrency serve only
    published versions, never $LATEST). A throttled invoke, or one a SnapStart version waking
    up refused (``WAKING``), is asked again within
    ``patience`` (the same event: every call carries its request id)."""
    patience = patience or Patience()
    budget = backoff.Budget.starting(patience.monotonic(), patience.seconds)
    attempt = 0
    while True:
        try:
            return _invoke_once(lam, prefix, entry, event, qualifier)
        except InvokeFailed as failed:
            if failed.code not in ASKED_AGAIN:
                raise
            pause = backoff.delay(attempt, patience.base, patience.cap, patience.rng)
            if not budget.allows(pause, patience.monotonic()):
                raise
            attempt += 1
            log.info("%s; asking again in %.1f s", failed, pause)
            patience.sleep(pause)


def _invoke_once(
    lam: Callable[[], Any],
    prefix: str,
    entry: str,
    event: Mapping[str, Any],
    qualifier: str | None,
) -> dict[str, Any]:
    name = f"{prefix}-{entry}" + (f":{qualifier}" if qualifier else "")
    try:
        response = lam().invoke(
            FunctionName=f"{prefix}-{entry}",
            InvocationType="RequestResponse",
            Payload=json.dumps(event).encode(),
            **({"Qualifier": qualifier} if qualifier else {}),
        )
    except ClientError as error:
        details = error.response.get("Error", {})
        code = details.get("Code")
        if code == "ResourceNotFoundException":
            raise EntryPointUnavailable(f"function {name} does not exist: {error}") from None
        message = details.get("Message") or str(error)
        raise InvokeFailed(f"could not invoke {name}: {code}: {message}", code) from error
    except BotoCoreError as error:
        # No answer (unreachable, timed out, no credentials): after a timeout the function
        # may still have run, which the same request id again finds.
        raise InvokeFailed(f"could not invoke {name}: {type(error).__name__}: {error}") from error
    body = response["Payload"].read()
    if response.get("FunctionError"):
        raise FunctionError(f"{name} failed: {body.decode(errors='replace')[:1000]}")
    answer = json.loads(body or b"null")
    if not isinstance(answer, dict):
        raise FunctionError(f"{name} answered {str(answer)[:200]!r}, not a JSON object")
    return answer


class Deployed:
    """The deployed transport (``client.transport``): Lambda ``Invoke`` of
    ``<prefix>-<entry point>`` (through the alias ``qualifier`` when given) with the client
    ``lam`` gives. ``capacity`` asks the ``capacity`` function for the regions ``explicit``
    names (``None``: the function's ``BROKER_REGIONS``)."""

    mode = "deployed"

    def __init__(
        self,
        prefix: str,
        qualifier: str | None,
        lam: Callable[[], Any],
        explicit: Callable[[Sequence[str] | str | None], list[str] | None],
        patience: Callable[[], Patience] = Patience,
    ) -> None:
        self.prefix = prefix
        self.qualifier = qualifier
        self._lam = lam
        self._explicit = explicit
        # The caller's patience with a throttled Lambda, read at each call (a client's
        # ``patience`` may be changed after it is made).
        self._patience = patience

    def invoke(self, entry: str, event: Mapping[str, Any]) -> dict[str, Any]:
        return invoke_function(
            self._lam, self.prefix, entry, event, self.qualifier, self._patience()
        )

    def capacity(
        self,
        fields: dict[str, Any],
        regions: Sequence[str] | str | None,
        request_id: str,
        progress: Progress | None,
    ) -> CapacityResponse:
        explicit = self._explicit(regions)
        event = {**fields, **({"regions": explicit} if explicit else {}), "request_id": request_id}
        response = typed(CapacityResponse, self.invoke("capacity", event))
        if response.status == "error":
            raise (
                RegionsFailed(response.errors)
                if response.errors
                else BrokerError(response.message, response.to_json_dict())
            )
        return response
