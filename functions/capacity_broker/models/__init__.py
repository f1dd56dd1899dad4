"""Typed requests and answers of the five entry points (contract).

One module per entry point (``probe``, ``reserve``, ``release``, ``cleaner``, ``capacity``);
shared field types in ``common``; the ``invalid_request`` answer in ``invalid``.
"""

from .capacity import CapacityRequest, CapacityResponse, CapacityRow, CapacitySummary, DurationRange
from .cleaner import CleanerItem, CleanerResponse, SweepRequest
from .common import (
    ItemError,
    PlacementFields,
    RequestModel,
    ResponseModel,
    is_request_id,
    request_id_from,
    request_id_of,
)
from .invalid import ErrorResponse, FieldError, InvalidRequestResponse, invalid_request
from .probe import Attempt, ProbeAttempt, ProbeRequest, ProbeResponse
from .release import ReleaseRequest, ReleaseResponse, SkippedReservation
from .reserve import (
    LaunchTemplateInfo,
    LaunchTemplateRef,
    ReservationInfo,
    ReserveAttempt,
    ReserveRequest,
    ReserveResponse,
)

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
