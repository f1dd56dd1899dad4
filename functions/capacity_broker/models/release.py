"""``release`` request and answer (contract, "release: give a job's hold back")."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from .common import (
    JobId,
    RequestId,
    RequestModel,
    ReservationId,
    ResponseModel,
    StackName,
    empty_list,
)
from .item_error import ItemError

SELECTORS = ("job_id", "stack_name", "reservation_id")


class ReleaseRequest(RequestModel):
    """Give back the holds of one job, one stack, or one reservation (exactly one)."""

    request_id: RequestId | None = None
    job_id: JobId | None = None
    stack_name: StackName | None = None
    reservation_id: ReservationId | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        given = [name for name in SELECTORS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of job_id, stack_name, reservation_id"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self

    @property
    def selector(self) -> tuple[str, str]:
        """(field name, value) of the one selector given."""
        for name in SELECTORS:
            value = getattr(self, name)
            if value is not None:
                return name, str(value)
        raise AssertionError("validated: exactly one selector")  # pragma: no cover


class SkippedReservation(ResponseModel):
    id: str
    reason: str


class ReleaseResponse(ResponseModel):
    status: Literal["released", "partial", "error", "invalid_request"]
    request_id: str
    cancelled: list[str] = Field(default_factory=empty_list)
    skipped: list[SkippedReservation] = Field(default_factory=empty_list)
    # Launch template versions made for the job that nothing can launch from any more
    # ("lt-…:<version>"), deleted with the hold; absent when none were.
    template_versions_deleted: list[str] | None = None
    errors: list[ItemError] = Field(default_factory=empty_list)
    # Versions that could not be looked over or deleted (the cleaner's sweep tries again);
    # they do not change ``status``, which is about the holds.
    template_version_errors: list[ItemError] | None = None
    error_code: str | None = None
    message: str
