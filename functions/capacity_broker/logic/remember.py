"""One answer per request id (contract: reserve and release are idempotent).

With the state table (``BROKER_STATE_TABLE``) settled answers are recorded and replayed, and a
concurrent duplicate waits for the first. Without it the flows find earlier work by the
request-id tag on their holds instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..adapters.aws import AwsError
from ..adapters.dynamodb import (
    BodyMismatch,
    RequestRecords,
    StillRunning,
    UnreadableRecord,
    Unsettled,
)
from ..domain.tokens import CHANGED_REQUEST, request_identity

log = logging.getLogger(__name__)

# Answers worth replaying; anything else (an error) is forgotten so a retry tries again.
SETTLED = frozenset(
    {"reserved", "provisioned", "unreserved", "no_capacity", "skipped", "rejected", "released"}
)


def remembered(
    records: RequestRecords | None,
    request_id: str | None,
    body: Mapping[str, Any],
    run: Callable[[], dict[str, Any]],
    deadline: float,
    context: Any = None,
    replay: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``run()``'s answer, recorded under ``request_id`` when a table and an id are given.
    An answer given from the record (an earlier invocation's) goes through ``replay``."""
    if records is None or request_id is None:
        return run()
    ran = False

    def settle() -> dict[str, Any]:
        nonlocal ran
        ran = True
        answer = run()
        if answer.get("status") not in SETTLED:
            raise Unsettled(answer)
        return answer

    def replayable(answer: Mapping[str, Any]) -> bool:
        # Only what ``settle`` lets through is ever recorded, under this very request id.
        return answer.get("status") in SETTLED and answer.get("request_id") == request_id

    try:
        answer = records.once(
            request_id, request_identity(body), settle, deadline, context, replayable=replayable
        )
        return answer if ran or replay is None else replay(answer)
    except Unsettled as unsettled:
        return unsettled.answer
    except UnreadableRecord as unreadable:
        # A record under this id that does not parse (corrupt, foreign, another version's) is
        # a clear error, not "no record": an earlier invocation may have held capacity under
        # this id, and running the flow again would rely on the ClientToken alone not to hold
        # twice, which a new invocation's new EndDate defeats (contract: common request
        # rules). The error holds nothing and changes nothing; it is not recorded, so a retry
        # asks the table again (a record that expires or is deleted clears it), and a new
        # request id is the caller's way out (the Slurm programs make one when they requeue).
        log.warning(
            "request record of %s unreadable: %s",
            request_id,
            unreadable.why,
            extra={"request_record": request_id},
        )
        return {
            "status": "error",
            "request_id": request_id,
            "error_code": "RequestRecordUnreadable",
            "message": f"The state table's record of request {request_id} cannot be read "
            f"({unreadable.why}); nothing was done. Ask again with a new request id."[:500],
        }
    except BodyMismatch:
        return {
            "status": "invalid_request",
            "request_id": request_id,
            "errors": [{"field": "request_id", "message": CHANGED_REQUEST}],
            "message": f"request_id {request_id} was used before with a different request",
        }
    except StillRunning:
        return {
            "status": "error",
            "request_id": request_id,
            "error_code": "RequestInProgress",
            "message": f"Request {request_id} is still being handled by another invocation; "
            "ask again shortly for its answer",
        }
    except AwsError as error:
        return {
            "status": "error",
            "request_id": request_id,
            "error_code": error.code or "StateTableUnavailable",
            "message": f"Could not read or write the request record: {error.message}"[:500],
        }
