"""Launch templates and instant EC2 Fleets: how a hold turns into running nodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...domain.tags import TAG_REQUEST_ID
from ..aws import AwsError
from .base import Ec2Base


@dataclass(frozen=True)
class TemplateVersion:
    template_id: str
    version: int


@dataclass(frozen=True)
class FleetError:
    code: str
    message: str
    instance_type: str | None = None
    subnet_id: str | None = None


@dataclass(frozen=True)
class FleetResult:
    fleet_id: str | None
    instance_ids: list[str]
    errors: list[FleetError] = field(default_factory=list)


class LaunchesMixin(Ec2Base):
    def resolve_template_version(
        self, template_id: str, version: str, deadline: float | None = None
    ) -> int:
        """A version number for "$Latest", "$Default" or a number (which must exist)."""
        if version.isdigit():
            found = self._call(
                "DescribeLaunchTemplateVersions",
                deadline,
                LaunchTemplateId=template_id,
                Versions=[version],
            )["LaunchTemplateVersions"]
            if not found:
                raise AwsError(
                    "DescribeLaunchTemplateVersions",
                    "InvalidLaunchTemplateId.VersionNotFound",
                    f"version {version} of {template_id} does not exist",
                )
            return int(version)
        templates = self._call(
            "DescribeLaunchTemplates", deadline, LaunchTemplateIds=[template_id]
        )["LaunchTemplates"]
        if not templates:  # EC2 answers InvalidLaunchTemplateId.NotFound; some stand-ins []
            raise AwsError(
                "DescribeLaunchTemplates",
                "InvalidLaunchTemplateId.NotFound",
                f"launch template {template_id} does not exist",
            )
        template = templates[0]
        key = "LatestVersionNumber" if version == "$Latest" else "DefaultVersionNumber"
        return int(template[key])

    def create_template_version(
        self,
        template_id: str,
        source_version: int,
        data: Mapping[str, Any],
        description: str,
        client_token: str,
        deadline: float | None = None,
    ) -> TemplateVersion:
        """A new version built on ``source_version`` with ``data`` on top (EC2 merges)."""
        answer = self._call(
            "CreateLaunchTemplateVersion",
            deadline,
            ClientToken=client_token,
            LaunchTemplateId=template_id,
            SourceVersion=str(source_version),
            VersionDescription=description[:255],
            LaunchTemplateData=dict(data),
        )["LaunchTemplateVersion"]
        return TemplateVersion(answer["LaunchTemplateId"], int(answer["VersionNumber"]))

    def create_instant_fleet(
        self,
        template: TemplateVersion,
        instance_type: str,
        subnet_id: str,
        count: int,
        capacity_type: str,
        client_token: str,
        tags: Mapping[str, str],
        deadline: float | None = None,
    ) -> FleetResult:
        """All or nothing: one type, one AZ, ``MinTargetCapacity`` = ``count``."""
        tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
        target: dict[str, Any] = {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": capacity_type,
        }
        options: dict[str, Any] = {
            "SingleInstanceType": True,
            "SingleAvailabilityZone": True,
            "MinTargetCapacity": count,
        }
        if capacity_type == "on-demand":
            target["OnDemandTargetCapacity"] = count
            options["CapacityReservationOptions"] = {
                "UsageStrategy": "use-capacity-reservations-first"
            }
        # else a Capacity Block: EC2 refuses both of those with capacity-block (EC2 User Guide,
        # "Configure your EC2 Fleet to launch instances into Capacity Blocks").
        answer = self._call(
            "CreateFleet",
            deadline,
            ClientToken=client_token,
            Type="instant",
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateId": template.template_id,
                        "Version": str(template.version),
                    },
                    "Overrides": [{"InstanceType": instance_type, "SubnetId": subnet_id}],
                }
            ],
            TargetCapacitySpecification=target,
            OnDemandOptions=options,
            TagSpecifications=[
                {"ResourceType": "instance", "Tags": tag_list},
                {"ResourceType": "fleet", "Tags": tag_list},
            ],
        )
        ids = [i for item in answer.get("Instances", []) for i in item.get("InstanceIds", [])]
        errors = [
            FleetError(
                code=e.get("ErrorCode", "Unknown"),
                message=e.get("ErrorMessage", ""),
                instance_type=(e.get("LaunchTemplateAndOverrides") or {})
                .get("Overrides", {})
                .get("InstanceType"),
                subnet_id=(e.get("LaunchTemplateAndOverrides") or {})
                .get("Overrides", {})
                .get("SubnetId"),
            )
            for e in answer.get("Errors", [])
        ]
        return FleetResult(answer.get("FleetId"), ids, errors)

    def request_instances(self, request_id: str, deadline: float | None = None) -> list[str]:
        """Pending or running instances launched for a request (tagged with its id)."""
        return [
            instance["InstanceId"]
            for reservation in self._pages(
                "DescribeInstances",
                "Reservations",
                deadline,
                Filters=[
                    {"Name": f"tag:{TAG_REQUEST_ID}", "Values": [request_id]},
                    {"Name": "instance-state-name", "Values": ["pending", "running"]},
                ],
                MaxResults=1000,
            )
            for instance in reservation.get("Instances", [])
        ]
