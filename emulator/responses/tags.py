"""CreateTags, DeleteTags and every TagSpecifications, under EC2's tag rules (models.tags).

moto checks only the 50-tag limit on CreateTags (counting ``aws:`` tags, which EC2 does not);
EC2 also refuses ``aws:`` keys from callers, keys over 127 and values over 255 characters,
on CreateTags as on the TagSpecifications of any create call.
"""

from __future__ import annotations

from typing import Any

from moto.core.responses import ActionResult, EmptyResult
from moto.ec2.models import validate_resource_ids
from moto.ec2.responses._base_response import EC2BaseResponse

from ..models import tags as rules
from ..models.filters import matches
from ._base import CapacityResponse


class Tags(CapacityResponse):
    def create_tags(self) -> ActionResult:
        resource_ids = self._get_param("Resources", []) or []
        validate_resource_ids(resource_ids)
        self.ec2_backend.do_resources_exist(resource_ids)
        # "If you don't want the tag to have a value, ... we set the value to an empty string"
        new = {t["Key"]: t.get("Value") or "" for t in self._get_param("Tags", []) or []}
        rules.check_new(new)
        for resource_id in resource_ids:
            rules.check_count(self.ec2_backend.tags.get(resource_id, {}), new)
        self.error_on_dryrun()
        for resource_id in resource_ids:
            # Written directly: moto's own limit check counts aws: tags, EC2's does not.
            self.ec2_backend.tags[resource_id].update(new)
        return EmptyResult()

    def delete_tags(self) -> ActionResult:
        resource_ids = self._get_param("Resources", []) or []
        validate_resource_ids(resource_ids)
        tags = {t["Key"]: t.get("Value") for t in self._get_param("Tags", []) or []}
        rules.check_removable(tags)
        self.error_on_dryrun()
        self.ec2_backend.delete_tags(resource_ids, tags)
        return EmptyResult()

    def describe_tags(self) -> ActionResult:
        """moto's answer, with the ``tag:<key>`` filter it ignores applied: "The key/value
        combination of the tag. For example, specify "tag:Owner" for the filter name and
        "TeamA" for the filter value to find resources with the tag "Owner=TeamA"" (DescribeTags,
        botocore's model): the tags of the resources that have it."""
        filters = self._filters_from_querystring()
        self.error_on_dryrun()
        wanted = {k[4:]: v for k, v in filters.items() if k.startswith("tag:")}
        rest = {k: v for k, v in filters.items() if not k.startswith("tag:")}
        found = self.ec2_backend.describe_tags(filters=rest)
        if wanted:
            every = self.ec2_backend.tags
            found = [
                tag
                for tag in found
                if all(
                    key in every.get(tag["resource_id"], {})
                    and matches(values, every[tag["resource_id"]][key])
                    for key, values in wanted.items()
                )
            ]
        return ActionResult({"Tags": found})

    def _parse_tag_specification(self, expected_type: str | None = None) -> dict[str, Any]:
        parsed: dict[str, Any] = EC2BaseResponse._parse_tag_specification(self, expected_type)
        self._check_tag_specifications()
        return parsed
