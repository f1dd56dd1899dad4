"""Launch template versions: create (honouring SourceVersion and ClientToken), describe,
delete, and the template's latest/default numbers, as EC2 keeps them.

moto ignores ``SourceVersion`` and ``ClientToken``, cannot delete a version, and pages
nothing; the bookkeeping (tombstones, the version limit) is ``models.launch_templates``.
"""

from __future__ import annotations

import copy
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError, InvalidLaunchTemplateVersionNotFound
from moto.ec2.responses.launch_templates import LaunchTemplates as MotoLaunchTemplates

from ..exceptions import client_error
from ..models import launch_templates as versions
from ..state import world
from ._base import CapacityResponse

# DescribeLaunchTemplateVersions: "This value can be between 1 and 200."
MAX_VERSIONS_PAGE = 200


class LaunchTemplateVersions(CapacityResponse):
    def _template(self) -> Any:
        template_id = self._get_param("LaunchTemplateId")
        name = self._get_param("LaunchTemplateName")
        if template_id and name:
            raise client_error(
                "InvalidParameterCombination",
                "Specify either the launch template ID or the launch template name, not both.",
            )
        if template_id:
            return self.ec2_backend.get_launch_template(template_id)
        if name:
            return self.ec2_backend.get_launch_template_by_name(name)
        raise client_error(
            "MissingParameter", "The request must contain LaunchTemplateId or LaunchTemplateName"
        )

    # -- CreateLaunchTemplateVersion ----------------------------------------------------
    def create_launch_template_version(self) -> ActionResult:
        # A retry (same ClientToken, same parameters) gets the version the first call made.
        made, _ = self.capacity.client_tokens.once(
            "CreateLaunchTemplateVersion",
            self._get_param("ClientToken"),
            self.params,
            self._new_template_version,
        )
        return ActionResult({"LaunchTemplateVersion": self._version_item(*made)})

    def _new_template_version(self) -> tuple[str, int]:
        template = self._template()
        versions.check_room(template)
        source = self._get_param("SourceVersion")
        if source:
            base = copy.deepcopy(versions.version(template, source).data)
            # EC2: parameters given in LaunchTemplateData replace the source's; the rest is
            # inherited.
            base.update(self._get_param("LaunchTemplateData", {}) or {})
            self.params["LaunchTemplateData"] = base
        made = MotoLaunchTemplates.create_launch_template_version(self).result
        version = made["LaunchTemplateVersion"]  # type: ignore[index]
        # Created at the emulator's time (moto stamps the wall clock), like everything else.
        template.versions[int(version["VersionNumber"]) - 1].create_time = world.clock.now()
        return version["LaunchTemplateId"], int(version["VersionNumber"])

    def _version_item(self, template_id: str, number: int) -> dict[str, Any]:
        template = self.ec2_backend.get_launch_template(template_id)
        return self._describe(template, template.versions[number - 1])

    def _describe(self, template: Any, version: Any) -> dict[str, Any]:
        return {
            "CreateTime": version.create_time,
            "CreatedBy": f"arn:{self.partition}:iam::{self.current_account}:root",
            "DefaultVersion": template.is_default(version),
            "LaunchTemplateData": version.data,
            "LaunchTemplateId": template.id,
            "LaunchTemplateName": template.name,
            "VersionDescription": version.description,
            "VersionNumber": version.number,
        }

    # -- DescribeLaunchTemplateVersions -------------------------------------------------
    def describe_launch_template_versions(self) -> ActionResult:
        self.error_on_dryrun()
        wanted = [str(v) for v in self._get_param("Versions", []) or []]
        if not (self._get_param("LaunchTemplateId") or self._get_param("LaunchTemplateName")):
            found = self._latest_or_default_everywhere(wanted)
        else:
            found = self._of_one_template(self._template(), wanted)
        # Every documented filter, applied before paging (a page holds matches only).
        chosen = self._filters_from_querystring()
        if chosen:
            found = [(t, v) for t, v in found if versions.matches_filters(t, v, chosen)]
        page, token = self._page(found, default=MAX_VERSIONS_PAGE, maximum=MAX_VERSIONS_PAGE)
        result: dict[str, Any] = {"LaunchTemplateVersions": [self._describe(*p) for p in page]}
        if token:
            result["NextToken"] = token
        return ActionResult(result)

    def _of_one_template(self, template: Any, wanted: list[str]) -> list[tuple[Any, Any]]:
        if wanted:
            return [(template, versions.version(template, v)) for v in wanted]
        # "MinVersion: the version number after which to describe"; "MaxVersion: the version
        # number up to which to describe".
        low = self._get_int_param("MinVersion")
        high = self._get_int_param("MaxVersion")
        return [
            (template, v)
            for v in versions.live(template)
            if (low is None or v.number > low) and (high is None or v.number <= high)
        ]

    def _latest_or_default_everywhere(self, wanted: list[str]) -> list[tuple[Any, Any]]:
        if not wanted or any(v.lower() not in ("$latest", "$default") for v in wanted):
            raise client_error(
                "InvalidParameterValue",
                "To describe the versions of every launch template, specify only $Latest "
                "and/or $Default; to describe one template's versions, name the template.",
            )
        found = []
        for template in self.ec2_backend.launch_templates.values():
            for spec in dict.fromkeys(v.lower() for v in wanted):
                found.append((template, versions.version(template, spec)))
        return found

    # -- DescribeLaunchTemplates / ModifyLaunchTemplate ---------------------------------
    def describe_launch_templates(self) -> ActionResult:
        result = MotoLaunchTemplates.describe_launch_templates(self)
        for item in result.result["LaunchTemplates"]:  # type: ignore[index]
            template = self.ec2_backend.get_launch_template(item["LaunchTemplateId"])
            item["LatestVersionNumber"] = versions.latest(template).number
        return result

    def modify_launch_template(self) -> ActionResult:
        default = self._get_param("SetDefaultVersion") or self._get_param("DefaultVersion")
        if default is not None:
            # A deleted version cannot become the default (moto only checks the number).
            template = self._template()
            if str(default).lower() in ("$latest", "$default"):
                raise InvalidLaunchTemplateVersionNotFound(str(default), template.id)
            versions.version(template, default)
        return MotoLaunchTemplates.modify_launch_template(self)

    # -- DeleteLaunchTemplateVersions ---------------------------------------------------
    def delete_launch_template_versions(self) -> ActionResult:
        self.error_on_dryrun()
        numbers = [str(v) for v in self._get_param("Versions", []) or []]
        try:
            template = self._template()
        except EC2ClientError as error:
            if "NotFound" not in str(error.code):
                raise
            # An unknown template fails each version on its own (ResponseError codes).
            code = (
                "launchTemplateIdDoesNotExist"
                if self._get_param("LaunchTemplateId")
                else "launchTemplateNameDoesNotExist"
            )
            return ActionResult(
                {
                    "SuccessfullyDeletedLaunchTemplateVersions": [],
                    "UnsuccessfullyDeletedLaunchTemplateVersions": [
                        self._refused(None, number, code) for number in numbers
                    ],
                }
            )
        done, failed = versions.delete_versions(template, numbers)
        return ActionResult(
            {
                "SuccessfullyDeletedLaunchTemplateVersions": [
                    {
                        "LaunchTemplateId": template.id,
                        "LaunchTemplateName": template.name,
                        "VersionNumber": number,
                    }
                    for number in done
                ],
                "UnsuccessfullyDeletedLaunchTemplateVersions": [
                    self._refused(template, number, code) for number, code in failed
                ],
            }
        )

    def _refused(self, template: Any, number: str, code: str) -> dict[str, Any]:
        messages = {
            "launchTemplateVersionDoesNotExist": "The specified launch template version does "
            "not exist.",
            "unexpectedError": "Cannot delete the default version of a launch template; set "
            "another version as the default first.",
            "launchTemplateIdDoesNotExist": "The specified launch template ID does not exist.",
            "launchTemplateNameDoesNotExist": "The specified launch template name does not exist.",
        }
        item: dict[str, Any] = {
            "LaunchTemplateId": template.id if template else self._get_param("LaunchTemplateId"),
            "LaunchTemplateName": template.name
            if template
            else self._get_param("LaunchTemplateName"),
            "ResponseError": {"Code": code, "Message": messages[code]},
        }
        if number.isdigit():
            item["VersionNumber"] = int(number)
        return {k: v for k, v in item.items() if v is not None}
