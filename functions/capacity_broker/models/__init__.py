"""Typed requests and answers of the five entry points (the contract: docs/contract.md).

One module per entry point (``probe``, ``reserve``, ``release``, ``cleaner``, ``capacity``)
and for the capacity memory's ``history``; the discovery commands' answers in ``discovery``;
what probe and reserve share in ``attempt`` (an attempt of their answers) and ``placement``
(their requests' common fields); shared field types in ``common``; the ``invalid_request``
answer in ``invalid``; the per-item error of the answers that list failures in ``item_error``.

Importing the package builds no model: each name is imported from its module on first use, so a
handler builds only the models of its own entry point (pydantic builds validators when a model
class is created, which is most of a handler's own import time).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .attempt import Attempt
    from .capacity import (
        CapacityRequest,
        CapacityResponse,
        CapacityRow,
        CapacitySummary,
        DurationRange,
    )
    from .cleaner import CleanerItem, CleanerResponse, SweepRequest
    from .common import (
        RequestModel,
        ResponseModel,
        is_request_id,
        request_id_from,
        request_id_of,
    )
    from .history import HistoryRow
    from .invalid import ErrorResponse, FieldError, InvalidRequestResponse, invalid_request
    from .item_error import ItemError
    from .placement import PlacementFields
    from .probe import ProbeAttempt, ProbeRequest, ProbeResponse
    from .release import ReleaseRequest, ReleaseResponse, SkippedReservation
    from .reserve import (
        LaunchTemplateInfo,
        LaunchTemplateRef,
        ReservationInfo,
        ReserveAttempt,
        ReserveRequest,
        ReserveResponse,
    )

_HOME = {
    "Attempt": "attempt",
    "CapacityRequest": "capacity",
    "CapacityResponse": "capacity",
    "CapacityRow": "capacity",
    "CapacitySummary": "capacity",
    "CleanerItem": "cleaner",
    "CleanerResponse": "cleaner",
    "DurationRange": "capacity",
    "ErrorResponse": "invalid",
    "FieldError": "invalid",
    "HistoryRow": "history",
    "InvalidRequestResponse": "invalid",
    "ItemError": "item_error",
    "LaunchTemplateInfo": "reserve",
    "LaunchTemplateRef": "reserve",
    "PlacementFields": "placement",
    "ProbeAttempt": "probe",
    "ProbeRequest": "probe",
    "ProbeResponse": "probe",
    "ReleaseRequest": "release",
    "ReleaseResponse": "release",
    "RequestModel": "common",
    "ReservationInfo": "reserve",
    "ReserveAttempt": "reserve",
    "ReserveRequest": "reserve",
    "ReserveResponse": "reserve",
    "ResponseModel": "common",
    "SkippedReservation": "release",
    "SweepRequest": "cleaner",
    "invalid_request": "invalid",
    "is_request_id": "common",
    "request_id_from": "common",
    "request_id_of": "common",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Attempt",
    "CapacityRequest",
    "CapacityResponse",
    "CapacityRow",
    "CapacitySummary",
    "CleanerItem",
    "CleanerResponse",
    "DurationRange",
    "ErrorResponse",
    "FieldError",
    "HistoryRow",
    "InvalidRequestResponse",
    "ItemError",
    "LaunchTemplateInfo",
    "LaunchTemplateRef",
    "PlacementFields",
    "ProbeAttempt",
    "ProbeRequest",
    "ProbeResponse",
    "ReleaseRequest",
    "ReleaseResponse",
    "RequestModel",
    "ReservationInfo",
    "ReserveAttempt",
    "ReserveRequest",
    "ReserveResponse",
    "ResponseModel",
    "SkippedReservation",
    "SweepRequest",
    "invalid_request",
    "is_request_id",
    "request_id_from",
    "request_id_of",
]
