"""The cleaner's direct call and its answer (contract, "cleaner: the ODCRCleaner")."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Regions, RequestId, RequestModel, ResponseModel, empty_list
from .item_error import ItemError


class SweepRequest(RequestModel):
    """``{"action": "sweep", "dry_run": ..., "regions": [...]}``. ``dry_run`` defaults to true:
    an operator who forgets it sees what would be cancelled instead of cancelling it.
    ``regions`` defaults to BROKER_REGIONS."""

    action: Literal["sweep"]
    dry_run: bool = True
    regions: Regions | None = None
    request_id: RequestId | None = None


class CleanerItem(ResponseModel):
    id: str
    region: str
    reason: str
    hours_saved: float | None = None


class InterruptedNode(ResponseModel):
    """A node of this cluster EC2 warned it will stop (an interruption warning, issue 43)."""

    instance_id: str
    region: str
    job_id: str | None = None
    rung: str | None = None
    capacity_reservation_id: str | None = None
    termination_time: str | None = None


class TerminatedNode(ResponseModel):
    """A node of a reserved-first ladder left half-done, terminated by the sweep (issue 43):
    its ladder (the job's request id), its rung, and how long ago the ladder's youngest node
    was launched."""

    instance_id: str
    region: str
    ladder: str
    rung: str | None = None
    reason: str
    age_seconds: float


class CleanerResponse(ResponseModel):
    status: Literal["ok", "partial", "error", "invalid_request"]
    request_id: str
    dry_run: bool
    regions: list[str] = Field(default_factory=empty_list)
    examined: int = 0
    cancelled: list[CleanerItem] = Field(default_factory=empty_list)
    kept: list[CleanerItem] = Field(default_factory=empty_list)
    # This cluster's launch template versions nothing can launch from any more
    # (id "lt-…:<version>"), deleted (or, in a dry run, that would be); absent when none.
    template_versions_deleted: list[CleanerItem] | None = None
    errors: list[ItemError] = Field(default_factory=empty_list)
    # Versions that could not be looked over or deleted (the next sweep tries again); they
    # do not change ``status``, which the contract ties to the cancels.
    template_version_errors: list[ItemError] | None = None
    hours_saved: float | None = None
    # An interruption warning's node, when it is this cluster's.
    interrupted: list[InterruptedNode] | None = None
    # The nodes of abandoned reserved-first ladders the sweep terminated (a dry run: would).
    ladder_nodes_terminated: list[TerminatedNode] | None = None
    # Ladders that could not be listed or ended (also in ``errors``; the next sweep tries
    # again), as ``template_version_errors`` are.
    ladder_errors: list[ItemError] | None = None
    message: str
