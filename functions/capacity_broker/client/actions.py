"""The broker's actions: ``probe``, ``reserve``, ``release`` and ``clean``, through the
broker's transport (the handlers in this process, or the deployed functions)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..models.cleaner import CleanerResponse
from ..models.probe import ProbeResponse
from ..models.release import ReleaseResponse
from ..models.reserve import ReserveResponse
from . import regions as where
from .base import BrokerBase, _event


class Actions(BrokerBase):
    """The calls that hold and give back capacity (the contract's entry points)."""

    def probe(
        self,
        instance_type: str,
        subnet_ids: Sequence[str] | str,
        instance_count: int = 1,
        *,
        request_id: str | None = None,
        instance_platform: str | None = None,
        image_id: str | None = None,
        tenancy: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> ProbeResponse:
        event = _event(
            instance_type=instance_type,
            subnet_ids=where.names(subnet_ids),
            instance_count=instance_count,
            request_id=request_id or f"probe-{uuid.uuid4().hex[:20]}",
            instance_platform=instance_platform,
            image_id=image_id,
            tenancy=tenancy,
            tags=dict(tags) if tags else None,
        )
        return self._typed(ProbeResponse, self.invoke("probe", event))

    def reserve(
        self,
        job_id: str,
        instance_types: Sequence[str] | str,
        subnet_ids: Sequence[str] | str,
        instance_count: int,
        *,
        request_id: str | None = None,
        **options: Any,
    ) -> ReserveResponse:
        """``options``: the contract's other reserve fields (``stack_name``,
        ``launch_template``, ``capacity_reservation_id``, ``provision``, ``strict``, ...)."""
        event = _event(
            job_id=job_id,
            instance_types=where.names(instance_types),
            subnet_ids=where.names(subnet_ids),
            instance_count=instance_count,
            request_id=request_id or f"job-{job_id}-{uuid.uuid4().hex[:12]}",
            **options,
        )
        return self._typed(ReserveResponse, self.invoke("reserve", event))

    def release(
        self,
        job_id: str | None = None,
        stack_name: str | None = None,
        reservation_id: str | None = None,
        *,
        request_id: str | None = None,
    ) -> ReleaseResponse:
        event = _event(
            job_id=job_id,
            stack_name=stack_name,
            reservation_id=reservation_id,
            request_id=request_id or f"release-{uuid.uuid4().hex[:20]}",
        )
        return self._typed(ReleaseResponse, self.invoke("release", event))

    def clean(
        self,
        dry_run: bool = True,
        regions: Sequence[str] | str | None = None,
        *,
        request_id: str | None = None,
    ) -> CleanerResponse:
        """A cleaner sweep; ``dry_run`` (default) reports what would be cancelled."""
        event = self.clean_event(dry_run, regions, request_id=request_id)
        return self._typed(CleanerResponse, self.invoke("cleaner", event))

    def clean_event(
        self,
        dry_run: bool = True,
        regions: Sequence[str] | str | None = None,
        *,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """The cleaner's sweep request: ``regions`` (else the client's own; ``all`` = every
        enabled region) expanded to names, none meaning the function's BROKER_REGIONS."""
        return _event(
            action="sweep",
            dry_run=dry_run,
            regions=self._explicit(regions),
            request_id=request_id or f"clean-{uuid.uuid4().hex[:20]}",
        )
