"""One reservation attempt, as probe's and reserve's answers list them.

A module of its own, not in ``probe`` nor ``common``: the reserve's answer and the shared
attempt loop (``logic.attempts``) use it, and neither a reserve handler should build probe's
models to get it, nor the other handlers build it with the shared field types (cold import,
issue 44).
"""

from __future__ import annotations

from ..domain.errors import Outcome
from .common import ResponseModel


class Attempt(ResponseModel):
    """One reservation attempt: a subnet for probe, an (instance type, subnet) pair for
    reserve. ``message`` carries EC2's error message (shortened) when there was one.

    ``outcome`` is the domain's StrEnum: a plain string ("available") is accepted too,
    comparisons work both ways, and the JSON carries the plain value."""

    subnet_id: str
    instance_type: str | None = None
    availability_zone: str | None = None
    availability_zone_id: str | None = None
    outcome: Outcome
    error_code: str | None = None
    message: str | None = None
    reservation_id: str | None = None
    cancelled: bool | None = None
