"""Launch templates and instant EC2 Fleets: how a hold turns into running nodes.

``Launches`` is an adapter of its own beside ``Ec2`` (same region, clients, pacer and retry
policy; the root makes one per region on first use, ``root.Adapters.launches``): only reserve,
release and the cleaner (and ``slurm check``) touch launch templates or launch, so a probe or
a listing never imports this module. What a launch asks and answers is ``fleets``'s: only
reserve launches (``create_instant_fleet`` and ``run_instances`` import it)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...domain.tags import TAG_CLUSTER_ID, TAG_REQUEST_ID, tag_dict
from ..aws import AwsError
from .base import Ec2Base
from .filters import Filters

if TYPE_CHECKING:
    from ...domain.templates import Version
    from .fleets import FleetResult, LaunchSpec

# DescribeLaunchTemplateVersions and DescribeLaunchTemplates: "between 1 and 200";
# DeleteLaunchTemplateVersions: "up to 200 launch template version numbers".
PAGE = 200


@dataclass(frozen=True)
class TemplateVersion:
    """One version of a launch template."""

    template_id: str
    version: int


@dataclass(frozen=True)
class LaunchTemplate:
    """A launch template: its latest and default version numbers, and its tags."""

    id: str
    latest: int
    default: int
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """A version DeleteLaunchTemplateVersions did not delete, and EC2's reason."""

    number: int
    code: str
    message: str


class Launches(Ec2Base):
    """Launch templates, their versions and launches in one region."""

    # -- launch templates ---------------------------------------------------------------
    def launch_template(self, template_id: str, deadline: float | None = None) -> LaunchTemplate:
        """The template's latest and default version numbers and its tags (EC2 answers an
        unknown id with InvalidLaunchTemplateId.NotFound; some stand-ins answer [])."""
        templates = self._call(
            "DescribeLaunchTemplates", deadline, LaunchTemplateIds=[template_id]
        )["LaunchTemplates"]
        if not templates:
            raise AwsError(
                "DescribeLaunchTemplates",
                "InvalidLaunchTemplateId.NotFound",
                f"launch template {template_id} does not exist",
            )
        found = templates[0]
        return LaunchTemplate(
            found["LaunchTemplateId"],
            int(found["LatestVersionNumber"]),
            int(found["DefaultVersionNumber"]),
            tag_dict(found.get("Tags")),
        )

    def cluster_templates(self, cluster_id: str, deadline: float | None = None) -> list[str]:
        """The ids of the templates tagged as this cluster's, every page: the ones the broker
        may make versions in (IAM grants CreateLaunchTemplateVersion on those only)."""
        wanted = Filters({f"tag:{TAG_CLUSTER_ID}": [cluster_id]})
        return [
            item["LaunchTemplateId"]
            for item in self._pages(
                "DescribeLaunchTemplates",
                "LaunchTemplates",
                deadline,
                Filters=wanted.params(),
                MaxResults=PAGE,
            )
            if wanted.admit(tag_dict(item.get("Tags")), {})
        ]

    def template_versions(
        self,
        template_id: str,
        numbers: Iterable[str] | None = None,
        after: int | None = None,
        up_to: int | None = None,
        deadline: float | None = None,
    ) -> list[Version]:
        """Versions of one template, every page: those named (numbers, "$Latest",
        "$Default"), or those numbered in (after, up_to]. Their data comes back shaped as a
        request would send it (see ``request_data``)."""
        # Imported here: only the flows that write templates use them (cold import, issue 16).
        from ...domain.templates import Version

        params: dict[str, Any] = {"LaunchTemplateId": template_id}
        wanted = list(numbers or [])
        if wanted:
            params["Versions"] = wanted
        else:
            params["MaxResults"] = PAGE
            # EC2: "MinVersion: the version number after which to describe"; the filter
            # below keeps the window exact whichever way a stand-in reads it.
            if after is not None and after > 0:
                params["MinVersion"] = str(after)
            if up_to is not None:
                params["MaxVersion"] = str(up_to)
        found = [
            Version(
                template_id=item["LaunchTemplateId"],
                number=int(item["VersionNumber"]),
                description=item.get("VersionDescription"),
                data=self.request_data(item.get("LaunchTemplateData") or {}),
                is_default=bool(item.get("DefaultVersion")),
                created=item.get("CreateTime"),
            )
            for item in self._pages(
                "DescribeLaunchTemplateVersions", "LaunchTemplateVersions", deadline, **params
            )
        ]
        if wanted:
            return found
        return [
            v
            for v in found
            if (after is None or v.number > after) and (up_to is None or v.number <= up_to)
        ]

    def request_data(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """A version's data as CreateLaunchTemplateVersion takes it: DescribeLaunchTemplate
        Versions answers with a few fields a request may not carry (e.g. MetadataOptions.State,
        Operator.Managed); only the members of botocore's RequestLaunchTemplateData shape
        are kept, at every depth."""
        shaped: dict[str, Any] = _shaped(
            dict(data), _request_shape(self._client.meta.service_model)
        )
        return shaped

    def create_template_version(
        self,
        template_id: str,
        source_version: int | None,
        data: Mapping[str, Any],
        description: str,
        client_token: str,
        deadline: float | None = None,
    ) -> TemplateVersion:
        """A new version: ``data`` on top of ``source_version`` (EC2 merges), or ``data``
        alone when there is no source."""
        params: dict[str, Any] = {
            "ClientToken": client_token,
            "LaunchTemplateId": template_id,
            "VersionDescription": description[:255],
            "LaunchTemplateData": dict(data),
        }
        if source_version is not None:
            params["SourceVersion"] = str(source_version)
        answer = self._call("CreateLaunchTemplateVersion", deadline, **params)
        made = answer["LaunchTemplateVersion"]
        return TemplateVersion(made["LaunchTemplateId"], int(made["VersionNumber"]))

    def delete_template_versions(
        self, template_id: str, numbers: Iterable[int], deadline: float | None = None
    ) -> tuple[list[int], list[Refused]]:
        """Delete versions, 200 per call; EC2 answers each version on its own."""
        wanted = sorted(set(numbers))
        deleted: list[int] = []
        refused: list[Refused] = []
        for start in range(0, len(wanted), PAGE):
            answer = self._call(
                "DeleteLaunchTemplateVersions",
                deadline,
                LaunchTemplateId=template_id,
                Versions=[str(n) for n in wanted[start : start + PAGE]],
            )
            deleted += [
                int(item["VersionNumber"])
                for item in answer.get("SuccessfullyDeletedLaunchTemplateVersions", [])
            ]
            for item in answer.get("UnsuccessfullyDeletedLaunchTemplateVersions", []):
                error = item.get("ResponseError") or {}
                refused.append(
                    Refused(
                        int(item.get("VersionNumber", 0)),
                        str(error.get("Code", "unexpectedError")),
                        str(error.get("Message", "")),
                    )
                )
        return deleted, refused

    # -- instant fleets -----------------------------------------------------------------
    def create_instant_fleet(self, spec: LaunchSpec, deadline: float | None = None) -> FleetResult:
        """All or nothing into an On-Demand Capacity Reservation: one type, one AZ,
        ``MinTargetCapacity`` = ``count`` (a Capacity Block is launched into with
        ``run_instances``: EC2 honours no minimum for a block fleet). From a version that
        targets no reservation, the same call is an untargeted On-Demand launch (a
        reserved-first ladder's ``on-demand`` rung).

        No ``CapacityReservationOptions``: the template version targets the one reservation
        (``capacity-reservations-only``), and EC2 Fleet does not use a template that targets a
        reservation under ``use-capacity-reservations-first`` (the EC2 User Guide wants an
        "Open" or "Target by group" template with that strategy; Karpenter's designs/odcr.md
        records the measured result). Without the strategy the fleet launches through the
        template's target, and a full reservation is ReservationCapacityExceeded, never
        On-Demand beside it.

        ``client_token`` makes the call idempotent (EC2 "Ensuring idempotency" lists
        CreateFleet): a retry after a lost answer gets the first fleet back, never a second.
        """
        from .fleets import FleetError, FleetResult  # see ``fleets``

        count = spec.count
        target: dict[str, Any] = {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": "on-demand",
            "OnDemandTargetCapacity": count,
        }
        answer = self._call(
            "CreateFleet",
            deadline,
            ClientToken=spec.client_token,
            Type="instant",
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateId": spec.template.template_id,
                        "Version": str(spec.template.version),
                    },
                    "Overrides": [{"InstanceType": spec.instance_type, "SubnetId": spec.subnet_id}],
                }
            ],
            TargetCapacitySpecification=target,
            OnDemandOptions={
                "SingleInstanceType": True,
                "SingleAvailabilityZone": True,
                "MinTargetCapacity": count,
            },
            TagSpecifications=spec.tag_specification("instance", "fleet"),
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

    def run_instances(self, spec: LaunchSpec, deadline: float | None = None) -> FleetResult:
        """All or nothing: ``MinCount`` = ``MaxCount`` = ``count`` ("If Amazon EC2 can't
        launch at least MinCount instances, no instances are launched", RunInstances), from
        the version that targets the reservation. How the broker launches into a Capacity
        Block: EC2 documents a block fleet as one that "fulfills as much capacity as it can"
        (no minimum honoured), and AWS ParallelCluster launches into a targeted reservation
        with RunInstances MinCount=MaxCount ("CapacityReservationId is not supported by
        create-fleet", aws/aws-parallelcluster#5862). A failure is
        EC2's error (``AwsError``); ``client_token`` makes a retry idempotent."""
        from .fleets import FleetResult  # see ``fleets``

        answer = self._call(
            "RunInstances",
            deadline,
            ClientToken=spec.client_token,
            LaunchTemplate={
                "LaunchTemplateId": spec.template.template_id,
                "Version": str(spec.template.version),
            },
            InstanceType=spec.instance_type,
            SubnetId=spec.subnet_id,
            MinCount=spec.count,
            MaxCount=spec.count,
            TagSpecifications=spec.tag_specification("instance"),
        )
        return FleetResult(None, [item["InstanceId"] for item in answer.get("Instances", [])])

    def request_instances(
        self, cluster_id: str, request_id: str, deadline: float | None = None
    ) -> list[str]:
        """Pending or running instances launched for a request of this cluster (tagged with
        its id and the cluster's: a request id is the caller's, and another cluster in the
        account may use the same one).

        DescribeInstances is eventually consistent: what it shows exists, but an empty answer
        proves nothing (a fleet launched a moment ago may not show yet)."""
        wanted = Filters(
            {
                f"tag:{TAG_CLUSTER_ID}": [cluster_id],
                f"tag:{TAG_REQUEST_ID}": [request_id],
                "instance-state-name": ["pending", "running"],
            }
        )
        return [
            instance["InstanceId"]
            for reservation in self._pages(
                "DescribeInstances",
                "Reservations",
                deadline,
                Filters=wanted.params(),
                MaxResults=1000,
            )
            for instance in reservation.get("Instances", [])
            if wanted.admit(
                tag_dict(instance.get("Tags")),
                {"instance-state-name": (instance.get("State") or {}).get("Name")},
            )
        ]


@functools.cache
def _request_shape(model: Any) -> Any:
    return model.shape_for("RequestLaunchTemplateData")


def _shaped(value: Any, shape: Any) -> Any:
    """``value`` with only what ``shape`` (a botocore shape) lets a request carry."""
    kind = getattr(shape, "type_name", None)
    if kind == "structure" and isinstance(value, Mapping):
        members = shape.members
        return {k: _shaped(v, members[k]) for k, v in value.items() if k in members}
    if kind == "list" and isinstance(value, list):
        return [_shaped(item, shape.member) for item in value]
    return value
