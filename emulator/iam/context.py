"""What a call asks of IAM: the action on each resource it uses, with the condition keys the
service puts in the request context.

EC2 (EC2 User Guide, "Identity-based policies for Amazon EC2", "Grant permission to tag
resources during creation", "Example policies"; the IAM User Guide, ``...IfExists``: "The
entire statement is evaluated against every resource that is required to launch the
instance"):

- a resource the call creates is ``arn:…:<type>/*`` with the tags the request gives it
  (``aws:RequestTag/<key>``, ``aws:TagKeys``); an existing one is its ARN (the owner's account;
  none for an AMI or snapshot) with its tags (``aws:ResourceTag/<key>``, ``ec2:ResourceTag/<key>``);
- tags on create are a second authorization, ``ec2:CreateTags`` with ``ec2:CreateAction`` =
  the creating action, "only evaluated if tags are applied during the resource-creating
  action"; tags in a launch template count too;
- an instant fleet is ``ec2:CreateFleet`` on the fleet, its instances and what the request
  names (the template, each override's subnet, image and placement group), never on what the
  template specifies ("Resource-level permissions for this action do not include the resources
  specified in a launch template", Service Authorization Reference), and
  ``ec2:RunInstances`` (with ``ec2:LaunchTemplate``) on what each launch uses: the template,
  subnet, security groups, image, key pair, placement group, the targeted reservation (its
  ``aws:ResourceTag`` keys only), and the instances, volumes and interfaces it creates;
- the launch path's dependent actions: an instance profile is ``iam:PassRole`` on its role
  (``iam:PassedToService`` ``ec2.amazonaws.com``) for RunInstances, CreateFleet and a
  CreateLaunchTemplateVersion whose data names one; an image given as ``resolve:ssm:…`` is
  ``ssm:GetParameters`` on its parameter for the same calls;
- a call that names a resource that does not exist is left to EC2's own answer (NotFound):
  there is nothing whose tags IAM could read (chosen; EC2 documents no order);
- ``Describe*`` and every action not modelled here: ``Resource: *``.

Other services: SSM parameters (``arn:…:parameter/<name>``, AWS's public ones with no
account), DynamoDB tables (every table of a batch or transaction; an item-level call with
``dynamodb:LeadingKeys``, the partition-key values of its items), CloudFormation stacks
(``stack/<name>/<id>``, ``stack/<name>/*`` for a name not found). Every request carries the
global keys ``aws:RequestedRegion``, ``aws:PrincipalArn``, ``aws:PrincipalAccount``,
``aws:PrincipalType``, ``aws:userid``, ``aws:CurrentTime`` and ``aws:EpochTime``.

Resource groups: the group a call names, ``arn:…:resource-groups:<region>:<account>:group/<name>``
("Minimum permissions ... resource-groups:GroupResources", AWS Resource Groups API Reference;
the Service Authorization Reference lists ``group`` as the resource of GroupResources,
UngroupResources and ListGroupResources).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from moto.ec2.models import EC2Backend, ec2_backends
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

from ..models import capacity_backend
from ..models import launch_templates as versions
from .policy import Request, context


@dataclass(frozen=True)
class Caller:
    """Who calls, where and when: the request's global condition keys."""

    principal_arn: str  # the role's ARN (aws:PrincipalArn)
    session_arn: str  # arn:aws:sts::<account>:assumed-role/<role>/<session>
    user_id: str  # <role id>:<session>
    account: str
    region: str
    now: datetime
    partition: str = "aws"

    def keys(self) -> dict[str, str]:
        return {
            "aws:RequestedRegion": self.region,
            "aws:PrincipalArn": self.principal_arn,
            "aws:PrincipalAccount": self.account,
            "aws:PrincipalType": "AssumedRole",
            "aws:userid": self.user_id,
            "aws:CurrentTime": self.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "aws:EpochTime": str(int(self.now.timestamp())),
        }


def requests(service: str, action: str, params: Mapping[str, Any], caller: Caller) -> list[Request]:
    """Every authorization the call needs, the call's own action first."""
    build = _SERVICES.get(service)
    found = build(action, params, caller) if build is not None else None
    if found is None:
        found = [_request(f"{service}:{action}", "*", caller)]
    unique: dict[tuple[str, str, tuple[tuple[str, tuple[str, ...]], ...]], Request] = {}
    for request in found:
        key = (request.action, request.resource, tuple(sorted(request.keys.items())))
        unique.setdefault(key, request)
    return list(unique.values())


def _request(
    action: str, resource: str, caller: Caller, keys: Mapping[str, Any] | None = None
) -> Request:
    return Request(action, resource, context({**caller.keys(), **(keys or {})}))


# -- EC2 -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Resource:
    """One EC2 resource a call uses: its ARN and its own condition keys."""

    arn: str
    keys: Mapping[str, Any]


class _Ec2:
    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self.backend: EC2Backend = ec2_backends[caller.account][caller.region]

    def arn(self, kind: str, ident: str, account: str | None = None) -> str:
        owner = self.caller.account if account is None else account
        return f"arn:{self.caller.partition}:ec2:{self.caller.region}:{owner}:{kind}/{ident}"

    def created(self, kind: str, tags: Mapping[str, str]) -> _Resource:
        return _Resource(
            self.arn(kind, "*"), {"ec2:Region": self.caller.region, **_request_tags(tags)}
        )

    def existing(self, kind: str, ident: str, account: str | None = None) -> _Resource:
        tags = self.backend.tags.get(ident, {})
        return _Resource(
            self.arn(kind, ident, account),
            {
                "ec2:Region": self.caller.region,
                **{f"aws:ResourceTag/{k}": v for k, v in tags.items()},
                **{f"ec2:ResourceTag/{k}": v for k, v in tags.items()},
            },
        )

    def requests(
        self, action: str, resources: Iterable[_Resource], extra: Mapping[str, Any] | None = None
    ) -> list[Request]:
        return [
            _request(f"ec2:{action}", r.arn, self.caller, {**r.keys, **(extra or {})})
            for r in resources
        ]

    def tag_on_create(self, creating: str, resource: _Resource) -> list[Request]:
        if not any(k.startswith("aws:RequestTag/") for k in resource.keys):
            return []
        return self.requests("CreateTags", [resource], {"ec2:CreateAction": creating})

    # -- resources by id --------------------------------------------------------------
    def reservation(self, reservation_id: str) -> _Resource | None:
        found = capacity_backend(self.backend).reservations.get(reservation_id)
        if found is None:
            return None
        return self.existing("capacity-reservation", found.id, found.owner_id)

    def template(self, spec: Mapping[str, Any]) -> Any:
        try:
            if spec.get("LaunchTemplateId"):
                return self.backend.get_launch_template(spec["LaunchTemplateId"])
            if spec.get("LaunchTemplateName"):
                return self.backend.get_launch_template_by_name(spec["LaunchTemplateName"])
        except Exception:  # noqa: BLE001 - unknown: EC2 answers it (NotFound)
            return None
        return None

    def template_resource(self, template: Any) -> _Resource:
        return self.existing("launch-template", template.id)

    def named(self, override: Mapping[str, Any]) -> list[_Resource]:
        """What a fleet's override names itself: its subnet, image and placement group."""
        used: list[_Resource] = []
        subnet_id = override.get("SubnetId")
        subnet = _quiet(lambda: self.backend.get_subnet(subnet_id)) if subnet_id else None
        if subnet is not None:
            used.append(self.existing("subnet", subnet.id, _owner(subnet, self.caller)))
        image_id = override.get("ImageId")
        if image_id and not str(image_id).startswith(_SSM_IMAGE):
            used.append(self.existing("image", str(image_id), account=""))
        group_name = (override.get("Placement") or {}).get("GroupName")
        if group_name:
            used.append(self.existing("placement-group", str(group_name)))
        return used

    def launch(
        self,
        data: Mapping[str, Any],
        tag_specs: Mapping[str, Mapping[str, str]],
        template: Any = None,
    ) -> list[_Resource]:
        """What one launch uses and makes (RunInstances' resources)."""
        used: list[_Resource] = []
        if template is not None:
            used.append(self.template_resource(template))
        nics = data.get("NetworkInterfaces") or []
        subnets = [data.get("SubnetId"), *(n.get("SubnetId") for n in nics)]
        for subnet_id in filter(None, subnets):
            subnet = _quiet(lambda s=subnet_id: self.backend.get_subnet(s))
            if subnet is not None:
                used.append(self.existing("subnet", subnet.id, _owner(subnet, self.caller)))
        groups = [*(data.get("SecurityGroupIds") or [])]
        for nic in nics:
            groups += nic.get("Groups") or []
        for group_id in dict.fromkeys(groups):
            group = self.backend.get_security_group_from_id(group_id)
            if group is not None:
                used.append(self.existing("security-group", group.id, _owner(group, self.caller)))
        image_id = data.get("ImageId")
        if image_id and not str(image_id).startswith(_SSM_IMAGE):
            used.append(self.existing("image", image_id, account=""))
        if data.get("KeyName"):
            used.append(self.existing("key-pair", str(data["KeyName"])))
        group_name = (data.get("Placement") or {}).get("GroupName")
        if group_name:
            used.append(self.existing("placement-group", str(group_name)))
        spec = data.get("CapacityReservationSpecification") or {}
        target = (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")
        if target:
            used.append(self.launch_reservation(target))
        for kind in ("instance", "volume", "network-interface"):
            used.append(self.created(kind, tag_specs.get(kind, {})))
        return used

    def launch_reservation(self, reservation_id: str) -> _Resource:
        """A reservation a launch runs in, as RunInstances' resource: its capacity-reservation
        lists aws:ResourceTag, ec2:IsLaunchTemplateResource, ec2:LaunchTemplate and
        ec2:Region, no ec2:ResourceTag (Service Authorization Reference, Amazon EC2,
        RunInstances): a launch's reservation carries no such key."""
        found = self.reservation(reservation_id) or self.existing(
            "capacity-reservation", reservation_id
        )
        keys = {k: v for k, v in found.keys.items() if not k.startswith("ec2:ResourceTag/")}
        return _Resource(found.arn, keys)

    def image_parameter(self, data: Mapping[str, Any]) -> list[Request]:
        """An image given as ``resolve:ssm:<parameter>[:<version or label>]``: ``ssm:GetParameters``
        on the parameter, asked of the caller (EC2 Auto Scaling User Guide, "Use AWS Systems
        Manager parameters instead of AMI IDs in launch templates": "To specify a parameter
        from the Parameter Store in a launch template, you must have the ssm:GetParameters
        permission for the specified parameter. Anyone who uses the launch template also needs
        the ssm:GetParameters permission in order for the parameter value to be validated")."""
        image_id = str(data.get("ImageId") or "")
        if not image_id.startswith(_SSM_IMAGE):
            return []
        name = _parameter_name(image_id[len(_SSM_IMAGE) :])
        return [_request("ssm:GetParameters", _parameter_arn(name, self.caller), self.caller)]

    def pass_role(self, data: Mapping[str, Any]) -> list[Request]:
        """An instance profile: ``iam:PassRole`` on its role (EC2 User Guide, IAM roles for
        Amazon EC2: "the user launching ... must have permission to pass the role")."""
        profile = data.get("IamInstanceProfile") or {}
        if not profile:
            return []
        from moto.iam.models import iam_backends

        iam = iam_backends[self.caller.account][self.caller.partition]
        found = _quiet(
            lambda: (
                iam.get_instance_profile_by_arn(profile["Arn"])
                if profile.get("Arn")
                else iam.get_instance_profile(profile.get("Name"))
            )
        )
        if found is None:
            return []
        return [
            _request(
                "iam:PassRole", role.arn, self.caller, {"iam:PassedToService": "ec2.amazonaws.com"}
            )
            for role in found.roles
        ]


# "resolve:ssm:<parameter>" (EC2 User Guide, "Use a Systems Manager parameter instead of an AMI
# ID"), the parameter being a name or, shared from another account, its ARN, either one
# optionally followed by ":<version>" or ":<label>".
_SSM_IMAGE = "resolve:ssm:"


def _parameter_name(reference: str) -> str:
    """The parameter a ``resolve:ssm:`` reference names, without its version or label: a name
    holds no ':' (Systems Manager allows letters, digits, '.', '-', '_' and '/' in one), an
    ARN's resource part begins after its fifth ':'."""
    if reference.startswith("arn:"):
        parts = reference.split(":")
        return ":".join(parts[:6])
    return reference.split(":", 1)[0]


def _quiet(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except Exception:  # noqa: BLE001 - not there: EC2's own check answers it
        return None


def _owner(resource: Any, caller: Caller) -> str:
    return str(getattr(resource, "owner_id", None) or caller.account)


def _request_tags(tags: Mapping[str, str]) -> dict[str, Any]:
    if not tags:
        return {}
    return {**{f"aws:RequestTag/{k}": v for k, v in tags.items()}, "aws:TagKeys": list(tags)}


def _tag_specs(specs: Any) -> dict[str, dict[str, str]]:
    """TagSpecifications by resource type."""
    found: dict[str, dict[str, str]] = {}
    for spec in specs if isinstance(specs, list) else [specs] if specs else []:
        if isinstance(spec, Mapping):
            tags = {str(t.get("Key")): str(t.get("Value", "")) for t in spec.get("Tags") or []}
            found.setdefault(str(spec.get("ResourceType")), {}).update(tags)
    return found


def _ec2(action: str, params: Mapping[str, Any], caller: Caller) -> list[Request] | None:
    builder = _EC2.get(action)
    return builder(_Ec2(caller), params) if builder is not None else None


def _create_reservation(ec2: _Ec2, params: Mapping[str, Any]) -> list[Request]:
    tags = _tag_specs(params.get("TagSpecifications")).get("capacity-reservation", {})
    made = ec2.created("capacity-reservation", tags)
    return [
        *ec2.requests("CreateCapacityReservation", [made]),
        *ec2.tag_on_create("CreateCapacityReservation", made),
    ]


def _named_reservation(action: str) -> Callable[[_Ec2, Mapping[str, Any]], list[Request]]:
    def build(ec2: _Ec2, params: Mapping[str, Any]) -> list[Request]:
        found = ec2.reservation(str(params.get("CapacityReservationId") or ""))
        return ec2.requests(action, [found]) if found is not None else []

    return build


def _named_template(action: str) -> Callable[[_Ec2, Mapping[str, Any]], list[Request]]:
    def build(ec2: _Ec2, params: Mapping[str, Any]) -> list[Request]:
        template = ec2.template(params)
        if template is None:
            return []
        return ec2.requests(action, [ec2.template_resource(template)])

    return build


def _create_version(ec2: _Ec2, params: Mapping[str, Any]) -> list[Request]:
    """The template; the image parameter the new version's own data names ("To specify a
    parameter ... in a launch template, you must have the ssm:GetParameters permission");
    the role of the instance profile it names (Service Authorization Reference, Amazon EC2,
    CreateLaunchTemplateVersion: dependent action ``iam:PassRole``). What the version inherits
    from its source is not named by this call and not evaluated (chosen: the pages are silent)."""
    out = _named_template("CreateLaunchTemplateVersion")(ec2, params)
    if not out:
        return out
    data = params.get("LaunchTemplateData") or {}
    return out + ec2.image_parameter(data) + ec2.pass_role(data)


def _template_data(ec2: _Ec2, spec: Mapping[str, Any]) -> tuple[Any, dict[str, Any]] | None:
    template = ec2.template(spec)
    if template is None:
        return None
    version = _quiet(lambda: versions.version(template, spec.get("Version") or "$Default"))
    if version is None:
        return None
    return template, dict(version.data)


def _create_fleet(ec2: _Ec2, params: Mapping[str, Any]) -> list[Request]:
    """``ec2:CreateFleet`` on the fleet, the instances it launches and what the request itself
    names (the template, each override's subnet, image and placement group), never on what the
    template specifies: "Resource-level permissions for this action do not include the
    resources specified in a launch template. To specify resource-level permissions for
    resources specified in a launch template, you must include the resources in the
    RunInstances action statement" (Service Authorization Reference, Amazon EC2, CreateFleet;
    its resource types: fleet*, image, instance*, launch-template, placement-group, subnet,
    volume). ``ec2:RunInstances`` on everything each launch uses, the template's included."""
    fleet_specs = _tag_specs(params.get("TagSpecifications"))
    fleet = ec2.created("fleet", fleet_specs.get("fleet", {}))
    out = [*ec2.requests("CreateFleet", [fleet]), *ec2.tag_on_create("CreateFleet", fleet)]
    instances = ec2.created("instance", fleet_specs.get("instance", {}))
    # A reserved-capacity fleet's reservations launch its instances as a template's target
    # does (chosen: the pages name no other resource for them).
    named = ((params.get("ReservedCapacityOptions") or {}).get("CapacityReservationTarget")) or {}
    reserved = [ec2.launch_reservation(str(i)) for i in named.get("CapacityReservationIds") or []]
    for config in params.get("LaunchTemplateConfigs") or []:
        found = _template_data(ec2, config.get("LaunchTemplateSpecification") or {})
        if found is None:
            continue
        template, data = found
        template_specs = _tag_specs(data.get("TagSpecifications"))
        # Instances and volumes carry the template's tags and the fleet's own for them.
        specs = {
            kind: {**template_specs.get(kind, {}), **fleet_specs.get(kind, {})}
            for kind in ("instance", "volume", "network-interface")
        }
        launch_template = {"ec2:LaunchTemplate": ec2.template_resource(template).arn}
        for override in config.get("Overrides") or [{}]:
            own = {k: v for k, v in override.items() if k != "Priority"}
            merged = {**data, **own}
            named = [ec2.template_resource(template), *ec2.named(own), instances]
            out += ec2.requests("CreateFleet", named)
            used = ec2.launch(merged, specs, template) + reserved
            out += ec2.requests("RunInstances", used, launch_template)
            for kind in ("instance", "volume", "network-interface"):
                made = ec2.created(kind, specs[kind])
                creating = "CreateFleet" if fleet_specs.get(kind) else "RunInstances"
                out += ec2.tag_on_create(creating, made)
            out += ec2.image_parameter(merged)
            out += ec2.pass_role(merged)
    return out


def _run_instances(ec2: _Ec2, params: Mapping[str, Any]) -> list[Request]:
    spec = params.get("LaunchTemplate") or {}
    found = _template_data(ec2, spec) if spec else None
    template, data = found if found is not None else (None, {})
    merged = {**data, **{k: v for k, v in params.items() if v is not None}}
    specs = {
        **_tag_specs(data.get("TagSpecifications")),
        **_tag_specs(params.get("TagSpecifications")),
    }
    used = ec2.launch(merged, specs, template)
    extra = {"ec2:LaunchTemplate": ec2.template_resource(template).arn} if template else {}
    out = ec2.requests("RunInstances", used, extra)
    for kind in ("instance", "volume", "network-interface"):
        out += ec2.tag_on_create("RunInstances", ec2.created(kind, specs.get(kind, {})))
    return out + ec2.image_parameter(merged) + ec2.pass_role(merged)


def _tags(action: str) -> Callable[[_Ec2, Mapping[str, Any]], list[Request]]:
    def build(ec2: _Ec2, params: Mapping[str, Any]) -> list[Request]:
        given = {str(t.get("Key")): str(t.get("Value", "")) for t in params.get("Tags") or []}
        resources = []
        for ident in params.get("Resources") or []:
            kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(str(ident)) or "")
            if kind == "capacity-reservation":
                found = ec2.reservation(str(ident))
                if found is not None:
                    resources.append(found)
            elif kind:
                resources.append(ec2.existing(kind, str(ident)))
        return ec2.requests(action, resources, _request_tags(given))

    return build


def _instances(action: str) -> Callable[[_Ec2, Mapping[str, Any]], list[Request]]:
    def build(ec2: _Ec2, params: Mapping[str, Any]) -> list[Request]:
        ids = [str(i) for i in params.get("InstanceIds") or []]
        known = [i for i in ids if _quiet(lambda i=i: ec2.backend.get_instance(i)) is not None]
        return ec2.requests(action, [ec2.existing("instance", i) for i in known])

    return build


_EC2: dict[str, Callable[[_Ec2, Mapping[str, Any]], list[Request]]] = {
    "CreateCapacityReservation": _create_reservation,
    "CancelCapacityReservation": _named_reservation("CancelCapacityReservation"),
    "ModifyCapacityReservation": _named_reservation("ModifyCapacityReservation"),
    # On the source reservation they name (its interruptible allocation).
    "CreateInterruptibleCapacityReservationAllocation": _named_reservation(
        "CreateInterruptibleCapacityReservationAllocation"
    ),
    "UpdateInterruptibleCapacityReservationAllocation": _named_reservation(
        "UpdateInterruptibleCapacityReservationAllocation"
    ),
    "CreateLaunchTemplateVersion": _create_version,
    "DeleteLaunchTemplateVersions": _named_template("DeleteLaunchTemplateVersions"),
    "ModifyLaunchTemplate": _named_template("ModifyLaunchTemplate"),
    "DeleteLaunchTemplate": _named_template("DeleteLaunchTemplate"),
    "CreateFleet": _create_fleet,
    "RunInstances": _run_instances,
    "CreateTags": _tags("CreateTags"),
    "DeleteTags": _tags("DeleteTags"),
    "TerminateInstances": _instances("TerminateInstances"),
    "StopInstances": _instances("StopInstances"),
    "StartInstances": _instances("StartInstances"),
}


# -- SSM, DynamoDB, CloudFormation -----------------------------------------------------


def _parameter_arn(name: str, caller: Caller) -> str:
    if name.startswith("arn:"):
        return name
    path = name.lstrip("/")
    # AWS's public parameters belong to no account (arn:aws:ssm:<region>::parameter/aws/...).
    account = "" if path.startswith("aws/service/") else caller.account
    return f"arn:{caller.partition}:ssm:{caller.region}:{account}:parameter/{path}"


def _ssm(action: str, params: Mapping[str, Any], caller: Caller) -> list[Request] | None:
    if action == "GetParametersByPath":
        names: Sequence[str] = [str(params.get("Path") or "/")]
    elif params.get("Names"):
        names = [str(n) for n in params["Names"]]
    elif params.get("Name"):
        names = [str(params["Name"])]
    else:
        return None
    return [_request(f"ssm:{action}", _parameter_arn(n, caller), caller) for n in names]


def _dynamodb(action: str, params: Mapping[str, Any], caller: Caller) -> list[Request] | None:
    tables = []
    if params.get("TableName"):
        tables = [str(params["TableName"])]
    elif isinstance(params.get("RequestItems"), Mapping):
        tables = [str(t) for t in params["RequestItems"]]
    elif isinstance(params.get("TransactItems"), list):
        for item in params["TransactItems"]:
            for operation in item.values():
                if isinstance(operation, Mapping) and operation.get("TableName"):
                    tables.append(str(operation["TableName"]))
    if not tables:
        return None
    arn = f"arn:{caller.partition}:dynamodb:{caller.region}:{caller.account}:table/"
    return [
        _request(f"dynamodb:{action}", arn + t, caller, _leading_keys(action, params, t, caller))
        for t in dict.fromkeys(tables)
    ]


def _leading_keys(
    action: str, params: Mapping[str, Any], table: str, caller: Caller
) -> dict[str, Any] | None:
    """``dynamodb:LeadingKeys``: the partition-key values of the items an item-level call uses
    (DynamoDB Developer Guide, "Using IAM policy conditions for fine-grained access control":
    "represents the partition key attribute of a table", multivalued: every item of a batch).
    A table that does not exist is left to DynamoDB's own answer; calls that name no item
    (Scan, Query) carry no such key."""
    hash_key = _quiet(lambda: _hash_key(table, caller))
    if not hash_key:
        return None
    keys: list[Any] = []
    if action in ("GetItem", "DeleteItem", "UpdateItem"):
        keys = [params.get("Key")]
    elif action == "PutItem":
        keys = [params.get("Item")]
    elif action == "BatchWriteItem":
        for request in (params.get("RequestItems") or {}).get(table) or []:
            if isinstance(request, Mapping):
                put, delete = request.get("PutRequest") or {}, request.get("DeleteRequest") or {}
                keys.append(put.get("Item") if put else delete.get("Key"))
    elif action == "BatchGetItem":
        keys = list(((params.get("RequestItems") or {}).get(table) or {}).get("Keys") or [])
    else:
        return None
    values = []
    for item in keys:
        value = item.get(hash_key) if isinstance(item, Mapping) else None
        scalar = next(iter(value.values()), None) if isinstance(value, Mapping) else None
        if scalar is not None:
            values.append(str(scalar))
    return {"dynamodb:LeadingKeys": values} if values else None


def _hash_key(table: str, caller: Caller) -> str | None:
    from moto.dynamodb.models import dynamodb_backends

    found = dynamodb_backends[caller.account][caller.region].get_table(table)
    names = found.hash_key_names
    return str(names[0]) if names else None


def _cloudformation(action: str, params: Mapping[str, Any], caller: Caller) -> list[Request] | None:
    name = params.get("StackName")
    if not name:
        return None
    name = str(name)
    if not name.startswith("arn:"):
        from moto.cloudformation.models import cloudformation_backends

        backend = cloudformation_backends[caller.account][caller.region]
        stack = _quiet(lambda: backend.get_stack(name))
        base = f"arn:{caller.partition}:cloudformation:{caller.region}:{caller.account}:stack"
        name = stack.stack_id if stack is not None else f"{base}/{name}/*"
    return [_request(f"cloudformation:{action}", name, caller)]


_SERVICES: dict[str, Callable[[str, Mapping[str, Any], Caller], list[Request] | None]] = {
    "ec2": _ec2,
    "ssm": _ssm,
    "dynamodb": _dynamodb,
    "cloudformation": _cloudformation,
}


# -- Resource Groups (issue 43: a cluster's reserved pool) ----------------------------


def _resource_groups(
    action: str, params: Mapping[str, Any], caller: Caller
) -> list[Request] | None:
    """The group the call names (by name or ARN); ``*`` for a call that names none
    (ListGroups, CreateGroup's new group is its name's ARN)."""
    named = params.get("Group") or params.get("GroupName") or params.get("Name")
    if not named:
        return None
    named = str(named)
    arn = (
        named
        if named.startswith("arn:")
        else (
            f"arn:{caller.partition}:resource-groups:{caller.region}:{caller.account}:group/{named}"
        )
    )
    return [_request(f"resource-groups:{action}", arn, caller)]


_SERVICES["resource-groups"] = _resource_groups
