"""A recorded answer given again (contract v3, "Request identity": "A replayed answer says
``"replayed": true`` and reports the hold's state now").

The state table keeps a settled answer for two hours; the hold it names may have been
released, consumed or expired since. The replay looks the reservation up in EC2 and says what
it is now, and creates nothing: the same request id keeps its one outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ...adapters.aws import AwsError
from ...models import ReserveResponse
from ..reservations import HOLDING_STATES, ReservationCore

GONE = "gone"


class Replay:
    """Answers a request id that already has its recorded answer."""

    def __init__(self, core: ReservationCore) -> None:
        self.core = core

    def replayed(self, recorded: Mapping[str, Any], deadline: float) -> dict[str, Any]:
        """``recorded`` marked as a replay, its reservation's state as EC2 shows it now."""
        try:
            response = ReserveResponse.model_validate(dict(recorded))
        except ValidationError:  # a record of another shape: said to be a replay, as it is
            return {**recorded, "replayed": True}
        response.replayed = True
        response.reservation_seconds = 0.0  # nothing was held by this invocation
        held = response.reservation
        note = "replayed answer of an earlier invocation of this request id"
        if held is not None:
            try:
                found = self.core.find(held.id, deadline)
            except AwsError as error:
                note += f"; the state of {held.id} now could not be read ({error.code})"
            else:
                held.state = found.state if found is not None else GONE
                if held.state in HOLDING_STATES:
                    note += f"; {held.id} is {held.state}"
                else:
                    note += (
                        f"; {held.id} no longer holds capacity ({held.state}), nothing new was made"
                    )
        response.message = f"{response.message} ({note})"[:1000]
        return response.to_json_dict()
