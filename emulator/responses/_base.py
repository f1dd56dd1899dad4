"""Shared helpers for the emulator's EC2 response classes."""

from __future__ import annotations

import base64
from typing import Any

from moto.ec2.responses._base_response import EC2BaseResponse

from ..exceptions import client_error
from ..models import CapacityBackend, capacity_backend


class CapacityResponse(EC2BaseResponse):
    @property
    def capacity(self) -> CapacityBackend:
        return capacity_backend(self.ec2_backend)

    def _page(
        self, items: list[Any], default: int = 1000, maximum: int = 1000
    ) -> tuple[list[Any], str | None]:
        """EC2-style MaxResults/NextToken over a stable list."""
        max_results = self._get_param("MaxResults")
        token = self._get_param("NextToken")
        if max_results is not None and not 1 <= int(max_results) <= maximum:
            raise client_error(
                "InvalidParameterValue",
                f"Value ({max_results}) for parameter maxResults is invalid. "
                f"Expecting a value between 1 and {maximum}.",
            )
        start = 0
        if token:
            try:
                start = int(base64.urlsafe_b64decode(token.encode()).decode().split(":", 1)[1])
            except (ValueError, IndexError):
                raise client_error("InvalidParameterValue", "Invalid NextToken") from None
        size = int(max_results or default)
        page = items[start : start + size]
        following = start + size
        next_token = None
        if following < len(items):
            next_token = base64.urlsafe_b64encode(f"offset:{following}".encode()).decode()
        return page, next_token

    def _tags_for(self, resource_type: str) -> dict[str, str]:
        return self._parse_tag_specification(expected_type=resource_type).get(resource_type, {})
