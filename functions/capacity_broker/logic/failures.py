"""One table from a flow's failure to its typed answer's fields (``domain.failures``).

A flow catches ``BrokerFailure`` once and answers with ``failed(failure)`` (the whole request
failed: ``status``, ``error_code``, ``message``) or, for one item of a list it works through,
``item_error(failure, id)``. ``step`` names what a flow was doing when an AWS call failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..adapters.aws import AwsError
from ..domain.failures import BrokerFailure, Refused, StepFailed

if TYPE_CHECKING:
    from ..models.item_error import ItemError

MAX_MESSAGE = 500  # characters of an answer's message
MAX_ITEM_MESSAGE = 300  # of one item's


def failed(failure: BrokerFailure) -> dict[str, Any]:
    """The fields of the answer to a request ``failure`` stopped. (Not ``InvalidInput``: a
    flow lets it through to the handler, whose answer is ``invalid_request`` with each field's
    error, ``models.invalid``.) A refusal (``Refused``) is ``rejected``, its detail the reason,
    with no error code: nothing failed, the request asks for what the broker will not do."""
    if isinstance(failure, Refused):
        return {
            "status": "rejected",
            "error_code": None,
            "reason": failure.detail,
            "message": failure.detail[:MAX_MESSAGE],
        }
    return {
        "status": "error",
        "error_code": failure.error_code,
        "message": failure.detail[:MAX_MESSAGE],
    }


def item_error(failure: BrokerFailure, item_id: str | None = None) -> ItemError:
    """One item of a list that ``failure`` stopped (the rest go on)."""
    # Imported here: only the flows that answer item by item (release, the cleaner) make one,
    # and their answers' models have imported it; probe and reserve, whose flows import this
    # module for ``failed`` and ``step``, never build it.
    from ..models.item_error import ItemError

    return ItemError(
        id=item_id, error_code=failure.error_code, message=failure.detail[:MAX_ITEM_MESSAGE]
    )


@contextlib.contextmanager
def step(what: str, *, unanswered: str = "RequestTimeout") -> Iterator[None]:
    """An AWS error inside becomes ``StepFailed`` saying ``what`` the flow was doing;
    ``unanswered`` is its code when AWS gave none (no answer at all)."""
    try:
        yield
    except AwsError as error:
        raise StepFailed(what, error.code or unanswered, error.message) from error
