"""Shared helpers for the emulator's EC2 response classes."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from moto.ec2.responses._base_response import EC2BaseResponse

from ..exceptions import client_error
from ..models import CapacityBackend, capacity_backend
from ..models import tags as tag_rules
from ..models.filters import matches


def wildcard_matcher(values: list[str]) -> Callable[[Any], bool]:
    """EC2's filter values (``models.filters``): any value may match."""
    wanted = [str(v) for v in values]
    return lambda text: matches(wanted, text)


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

    def _check_tag_specifications(self) -> None:
        """Every TagSpecification of this request under EC2's tag rules (models.tags): tags
        for a new resource, so the 50-tag count is theirs alone."""
        specs = self._get_param("TagSpecifications") or self._get_param("TagSpecification") or []
        for spec in specs if isinstance(specs, list) else [specs]:
            if not isinstance(spec, dict):
                continue
            new = {t.get("Key", ""): t.get("Value") for t in spec.get("Tags") or []}
            tag_rules.check_new(new)
            tag_rules.check_count({}, new)

    def _tags_for(self, resource_type: str) -> dict[str, str]:
        return self._parse_tag_specification(expected_type=resource_type).get(resource_type, {})
