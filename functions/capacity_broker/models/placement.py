"""The fields probe's and reserve's requests share (contract, "Common request rules").

A module apart from ``common``: only probe and reserve build it, and the other handlers import
``common`` (cold import, issue 44).
"""

from __future__ import annotations

from ..domain.platform import DEFAULT_PLATFORM
from .common import ImageId, Platform, RequestId, RequestModel, Tags, Tenancy


class PlacementFields(RequestModel):
    """Fields shared by probe and reserve (contract, "Common request rules").

    ``instance_platform`` reads as ``Linux/UNIX`` when not given; with ``image_id`` the
    platform comes from the image instead (see :attr:`platform`), and giving both is refused.
    """

    request_id: RequestId | None = None
    instance_platform: Platform = DEFAULT_PLATFORM
    image_id: ImageId | None = None
    tenancy: Tenancy = "default"
    tags: Tags | None = None

    @property
    def named_types(self) -> list[tuple[str, str]]:
        """Each instance type the request names, with its field (each is checked against the
        types EC2 offers in the region: ``logic.placement``)."""
        return []

    @property
    def platform(self) -> str | None:
        """The reservation platform asked for; ``None`` means "derive it from image_id"."""
        return None if self.image_id is not None else self.instance_platform

    @property
    def platform_chosen(self) -> bool:
        """The caller said which platform (``instance_platform`` or ``image_id``); otherwise
        reserve takes it from its launch template's image, when it has one."""
        return self.image_id is not None or "instance_platform" in self.model_fields_set

    def _check_platform_source(self) -> None:
        if "instance_platform" in self.model_fields_set and self.image_id is not None:
            raise ValueError("give instance_platform or image_id, not both")
