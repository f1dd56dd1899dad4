"""IAM offline: the functions' roles as infra/ deploys them (emulator/iam/roles.json), evaluated
by the emulator on every call made with them.

Two halves:

- the core flows (probe, reserve with provision, release, cleaner sweep and stack event,
  capacity), each handler run as its own role: no call is refused, and every call was
  decided by IAM; the roles grant what the code needs, by evaluation (beside the static
  tests/infra/test_grants_cover_calls.py);
- one test per refusal the deploy guide promises (docs/deploy.md, sections 2 and 4), made as
  a function's role would make it: what AWS answers, ``UnauthorizedOperation`` and the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from capacity_broker.client import ENTRY_POINTS, InProcessContext
from capacity_broker.config import Settings
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.root import Root

from emulator.state import world

pytestmark = [
    pytest.mark.integration,
    # moto's serializer warns that CloudFormation's model has no AccessDenied shape.
    pytest.mark.filterwarnings("ignore:Exception\\(AnyServiceError\\):UserWarning"),
]

CLUSTER = "demo"
PREFIX = "capacity-broker-demo"
TABLE = f"{PREFIX}-state"
EAST, WEST = "us-east-1", "us-west-2"
EVENTS = Path(__file__).resolve().parents[2] / "events"
TEMPLATE = "lt-0f000000000000001"  # the demo's, tagged capacity-broker:cluster-id=demo
IMAGE = "ami-0de00000000000001"
SUBNET_B, SUBNET_C = "subnet-01b0000000000000b", "subnet-01c0000000000000c"
CLUSTER_TAG = "capacity-broker:cluster-id"
PURPOSE_TAG = "capacity-broker:purpose"
REFUSED = {"UnauthorizedOperation", "AccessDeniedException"}
NO_RETRIES = Config(retries={"total_max_attempts": 1})


@pytest.fixture
def demo(emu: Any, monkeypatch: pytest.MonkeyPatch, container: Any) -> Any:
    """The demo account, its state table, and the functions' roles for cluster demo in the
    broker's one region."""
    emu.load_scenario("demo")
    boto3.client("dynamodb", region_name=EAST).create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    emu.enforce_roles(
        CLUSTER, function_prefix=PREFIX, region=EAST, regions=[EAST], state_table=TABLE
    )
    for key, value in {
        "BROKER_CLUSTER_ID": CLUSTER,
        "BROKER_STATE_TABLE": TABLE,
        "BROKER_REGIONS": EAST,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }.items():
        monkeypatch.setenv(key, value)
    container.fresh()
    return emu


def as_role(emu: Any, entry: str, service: str = "ec2", region: str = EAST) -> Any:
    """A client that calls as function ``entry``'s role session."""
    key, secret, token = emu.role_credentials(entry)
    return boto3.client(
        service,
        region_name=region,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=NO_RETRIES,
    )


def refused(call: Any, code: str = "UnauthorizedOperation", status: int = 403) -> str:
    """The call answers what AWS answers a call IAM refuses; its message."""
    with pytest.raises(ClientError) as raised:
        call()
    error = raised.value.response["Error"]
    assert (error["Code"], raised.value.response["ResponseMetadata"]["HTTPStatusCode"]) == (
        code,
        status,
    ), error
    return str(error["Message"])


@contextlib.contextmanager
def functions_as_roles(emu: Any) -> Iterator[None]:
    """Each handler run here is served from a root of its own whose session is its function's
    role session, as ``capacity-broker local`` runs them (and Lambda: a container per
    function, with its execution role's credentials)."""
    settings = Settings.from_env(os.environ)
    for entry in ENTRY_POINTS:
        key, secret, token = emu.role_credentials(entry)
        session = boto3.session.Session(
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            aws_session_token=token,
            region_name=EAST,
        )
        CONTAINER.use(Root(settings, session=session), function=entry)
    try:
        yield
    finally:
        for entry in ENTRY_POINTS:
            own = CONTAINER.use(None, function=entry)
            if own is not None:
                own.close()


def invoke(entry: str, event: dict[str, Any]) -> dict[str, Any]:
    import importlib

    handler = importlib.import_module(f"capacity_broker.handlers.{entry}").handler
    answer: dict[str, Any] = handler(event, InProcessContext(f"{PREFIX}-{entry}"))
    return answer


def sample(name: str, **changes: Any) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return {**event, **changes}


def hold_tags(purpose: str, cluster: str = CLUSTER, **more: str) -> list[dict[str, str]]:
    tags = {CLUSTER_TAG: cluster, PURPOSE_TAG: purpose, **more}
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def create(ec2: Any, tags: list[dict[str, str]] | None = None, zone: str = "us-east-1b") -> str:
    params: dict[str, Any] = {
        "InstanceType": "g6.xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": zone,
        "InstanceCount": 1,
    }
    if tags is not None:
        params["TagSpecifications"] = [{"ResourceType": "capacity-reservation", "Tags": tags}]
    return str(
        ec2.create_capacity_reservation(**params)["CapacityReservation"]["CapacityReservationId"]
    )


# -- the core flows, decided by IAM ------------------------------------------------------------


def test_the_core_flows_need_nothing_their_roles_do_not_grant(demo: Any) -> None:
    """Each function's calls, in the flows a cluster runs, made as its role: none is refused,
    and every one of them was decided under that role's policies (not let through)."""
    probe_tags = {CLUSTER_TAG: CLUSTER, PURPOSE_TAG: "probe", "capacity-broker:subnet-id": SUBNET_B}
    leak = {  # an hour-old probe nobody cancelled: the sweep's to cancel
        "name": "leaked-probe",
        "instance_type": "g6.xlarge",
        "availability_zone": "us-east-1b",
        "count": 1,
        "created": "-1h",
        "end_date": "+1h",
        "match": "targeted",
        "tags": probe_tags,
    }
    leaked = demo.load_scenario({"regions": {EAST: {"reservations": [leak]}}}).reservations[
        "leaked-probe"
    ]
    boto3.client("cloudformation", region_name=EAST).create_stack(
        StackName="demo-job-1234",
        TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}),
    )
    demo.clear_calls()
    answers = {}
    with functions_as_roles(demo):
        answers["probe"] = invoke("probe", sample("probe_several_subnets"))
        answers["probe image"] = invoke("probe", sample("probe_from_image"))
        answers["reserve"] = invoke("reserve", sample("reserve_provision"))
        answers["reserve stack"] = invoke(
            "reserve",
            sample("reserve", instance_count=2, stack_name="demo-job-1234", request_id="job-2-a"),
        )
        answers["release"] = invoke("release", {"request_id": "rel-1235", "job_id": "1235"})
        answers["sweep"] = invoke(
            "cleaner", {"action": "sweep", "dry_run": False, "request_id": "sweep-1"}
        )
        stack = sample("cleaner_stack_delete_complete")
        stack_id = stack["detail"]["stack-id"].replace("soca-demo-job-1234", "demo-job-1234")
        stack = {
            **stack,
            "resources": [stack_id],
            "detail": {**stack["detail"], "stack-id": stack_id},
        }
        answers["stack"] = invoke("cleaner", stack)
        answers["capacity"] = invoke("capacity", {"reservation_type": "all"})

    assert answers["probe"]["status"] == "available", answers["probe"]
    assert answers["probe image"]["status"] == "available", answers["probe image"]
    assert answers["reserve"]["status"] == "provisioned", answers["reserve"]
    assert answers["reserve stack"]["status"] == "reserved", answers["reserve stack"]
    assert answers["release"]["status"] == "released", answers["release"]
    assert answers["release"]["template_versions_deleted"], answers["release"]
    assert leaked in [c["id"] for c in answers["sweep"]["cancelled"]], answers["sweep"]
    assert answers["sweep"]["errors"] == [], answers["sweep"]
    assert answers["stack"]["status"] == "ok", answers["stack"]
    assert answers["stack"]["errors"] == [], answers["stack"]
    assert answers["capacity"]["status"] == "ok", answers["capacity"]

    calls = [c for s in ("ec2", "ssm", "dynamodb", "cloudformation") for c in demo.calls(service=s)]
    assert not [(c.service, c.action, c.outcome) for c in calls if c.outcome in REFUSED]
    decided = Counter(d.request.action for _, d in world.iam.decisions if d.allowed)
    made = Counter(f"{c.service}:{c.action}" for c in calls)
    # every call was decided (a fleet is decided on each resource it uses: more decisions)
    assert all(decided[action] >= count for action, count in made.items()), (made, decided)
    functions = {entry for entry, _ in world.iam.decisions}
    assert functions == {"probe", "reserve", "release", "cleaner", "capacity"}


def test_the_same_flows_under_another_clusters_roles_are_refused(demo: Any) -> None:
    """The control: roles deployed for another cluster id refuse this cluster's work (its
    first call, the flags under /capacity-broker/demo), and the refusal reaches the answer."""
    demo.enforce_roles(
        "other", function_prefix=PREFIX, region=EAST, regions=[EAST], state_table=TABLE
    )
    with functions_as_roles(demo):
        answer = invoke("probe", sample("probe"))
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "AccessDeniedException", answer
    assert "ssm:GetParametersByPath" in answer["message"], answer
    assert not demo.calls("CreateCapacityReservation")


# -- what AWS refuses (docs/deploy.md) -----------------------------------------------------------


def test_a_reservation_is_created_only_with_the_ownership_tags(demo: Any) -> None:
    """ "IAM refuses a create without those tags": the cluster id, and the function's own
    purpose (probe makes probes, reserve holds)."""
    probe, reserve = as_role(demo, "probe"), as_role(demo, "reserve")
    message = refused(lambda: create(probe))
    assert "ec2:CreateCapacityReservation on resource: arn:aws:ec2:us-east-1:" in message
    assert "because no identity-based policy allows" in message
    refused(lambda: create(probe, hold_tags("probe", cluster="another-cluster")))
    refused(lambda: create(probe, hold_tags("hold")))
    refused(lambda: create(reserve, hold_tags("probe")))
    assert create(probe, hold_tags("probe")).startswith("cr-")
    assert create(reserve, hold_tags("hold")).startswith("cr-")
    refused(lambda: create(as_role(demo, "capacity"), hold_tags("probe")))


def test_tags_are_only_set_while_a_reservation_is_created(demo: Any) -> None:
    """ec2:CreateTags is granted with ec2:CreateAction only (tags on create): a function
    cannot tag an existing reservation, e.g. to make another's its own."""
    team = team_odcr()
    refused(
        lambda: as_role(demo, "reserve").create_tags(
            Resources=[team], Tags=[{"Key": CLUSTER_TAG, "Value": CLUSTER}]
        )
    )


def team_odcr() -> str:
    """The demo account's ML team ODCR (no broker tag)."""
    return next(
        r["CapacityReservationId"]
        for r in boto3.client("ec2", region_name=EAST).describe_capacity_reservations()[
            "CapacityReservations"
        ]
        if {"Key": "team", "Value": "ml-inference"} in r.get("Tags", []) and r["State"] == "active"
    )


def test_a_cancel_reaches_only_this_clusters_reservations(demo: Any) -> None:
    """ "every cancel is limited to reservations tagged with this cluster id": a team's own
    ODCR and another cluster's hold stay; the cluster's own is cancelled."""
    ec2 = boto3.client("ec2", region_name=EAST)
    team = team_odcr()
    others = create(ec2, hold_tags("hold", cluster="another-cluster"))
    mine = create(ec2, hold_tags("hold"))
    demo.settle(EAST)
    for entry in ("reserve", "release", "cleaner"):
        cancel = as_role(demo, entry).cancel_capacity_reservation
        refused(lambda c=cancel: c(CapacityReservationId=team))
        refused(lambda c=cancel: c(CapacityReservationId=others))
    states = {
        r["CapacityReservationId"]: r["State"]
        for r in ec2.describe_capacity_reservations(CapacityReservationIds=[team, others])[
            "CapacityReservations"
        ]
    }
    assert states == {team: "active", others: "active"}
    assert as_role(demo, "release").cancel_capacity_reservation(CapacityReservationId=mine)[
        "Return"
    ]


def test_no_function_buys_a_capacity_block(demo: Any) -> None:
    """ "The broker can never ... buy a Capacity Block": no role grants the purchase."""
    for entry in ("probe", "reserve", "release", "cleaner", "capacity"):
        refused(
            lambda e=entry: as_role(demo, e).purchase_capacity_block(
                CapacityBlockOfferingId="cbr-0123456789abcdef0", InstancePlatform="Linux/UNIX"
            )
        )


def test_versions_and_fleets_only_in_the_clusters_templates(demo: Any) -> None:
    """ "IAM lets it do both only on launch templates tagged for the cluster": a version in,
    a fleet from, or a version deleted from an untagged template or another cluster's is
    refused; the cluster's own template takes them."""
    ec2 = boto3.client("ec2", region_name=EAST)
    data = {"ImageId": IMAGE, "InstanceType": "c7i.48xlarge"}
    untagged = ec2.create_launch_template(LaunchTemplateName="untagged", LaunchTemplateData=data)
    other = ec2.create_launch_template(
        LaunchTemplateName="theirs",
        LaunchTemplateData=data,
        TagSpecifications=[
            {"ResourceType": "launch-template", "Tags": [{"Key": CLUSTER_TAG, "Value": "other"}]}
        ],
    )
    reserve = as_role(demo, "reserve")
    for template in (untagged, other):
        template_id = template["LaunchTemplate"]["LaunchTemplateId"]
        message = refused(
            lambda t=template_id: reserve.create_launch_template_version(
                LaunchTemplateId=t,
                SourceVersion="1",
                LaunchTemplateData={"InstanceType": "c7i.large"},
            )
        )
        assert (
            f"on resource: arn:aws:ec2:us-east-1:123456789012:launch-template/{template_id}"
            in message
        )
        refused(lambda t=template_id: reserve.create_fleet(**fleet(t)))
        ec2.create_launch_template_version(LaunchTemplateId=template_id, LaunchTemplateData=data)
        for entry in ("release", "cleaner"):
            refused(
                lambda t=template_id, e=entry: as_role(demo, e).delete_launch_template_versions(
                    LaunchTemplateId=t, Versions=["2"]
                )
            )
    made = reserve.create_launch_template_version(
        LaunchTemplateId=TEMPLATE,
        SourceVersion="1",
        LaunchTemplateData={"InstanceType": "c7i.large"},
    )
    number = str(made["LaunchTemplateVersion"]["VersionNumber"])
    deleted = as_role(demo, "release").delete_launch_template_versions(
        LaunchTemplateId=TEMPLATE, Versions=[number]
    )
    assert deleted["SuccessfullyDeletedLaunchTemplateVersions"]


def fleet(template_id: str, subnet: str = SUBNET_C, count: int = 1) -> dict[str, Any]:
    return {
        "Type": "instant",
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateId": template_id,
                    "Version": "$Latest",
                },
                "Overrides": [{"SubnetId": subnet, "InstanceType": "c7i.48xlarge"}],
            }
        ],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": "on-demand",
        },
    }


def test_instances_only_through_a_launch_template(demo: Any) -> None:
    """ "ec2:RunInstances is granted only through a launch template": a launch that names its
    own image and subnet is refused."""
    refused(
        lambda: as_role(demo, "reserve").run_instances(
            ImageId=IMAGE, InstanceType="c7i.48xlarge", SubnetId=SUBNET_C, MinCount=1, MaxCount=1
        )
    )


def template_targeting(ec2: Any, demo: Any, tags: list[dict[str, str]] | None) -> str:
    """A new reservation in us-east-1c with ``tags``, and TEMPLATE's new version targeting it."""
    reservation = create(ec2, tags, zone="us-east-1c")
    demo.settle(EAST)
    spec = {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": reservation},
    }
    ec2.create_launch_template_version(
        LaunchTemplateId=TEMPLATE,
        SourceVersion="1",
        LaunchTemplateData={"CapacityReservationSpecification": spec},
    )
    return reservation


def test_launches_only_into_this_clusters_or_untagged_reservations(demo: Any) -> None:
    """Launches "may use reservations tagged with this cluster id or carrying no
    capacity-broker:cluster-id tag at all ... never another broker cluster's"."""
    ec2 = boto3.client("ec2", region_name=EAST)
    reserve = as_role(demo, "reserve")

    def target(tags: list[dict[str, str]] | None) -> None:
        template_targeting(ec2, demo, tags)
        reserve.create_fleet(**fleet(TEMPLATE))

    message = refused(lambda: target(hold_tags("hold", cluster="another-cluster")))
    assert ":capacity-reservation/cr-" in message
    target(hold_tags("hold"))  # this cluster's hold
    target(None)  # the caller's own ODCR
    target([{"Key": "team", "Value": "cfd"}])


def test_an_instance_profile_needs_its_role_listed(demo: Any, profile_template: Any) -> None:
    """ "If those templates carry an instance profile, list its role in -c
    instanceRoleArns=…, otherwise the launch is refused for iam:PassRole" (the default
    deployment lists none)."""
    ec2, iam = (boto3.client(service, region_name=EAST) for service in ("ec2", "iam"))
    role_arn, template_id = profile_template(ec2, iam, CLUSTER)
    message = refused(lambda: as_role(demo, "reserve").create_fleet(**fleet(template_id)))
    assert f"iam:PassRole on resource: {role_arn}" in message


def test_an_image_parameter_needs_its_parameter_listed(demo: Any) -> None:
    """A template whose image is ``resolve:ssm:<parameter>``: "Anyone who uses the launch
    template also needs the ssm:GetParameters permission" (EC2 Auto Scaling User Guide), and
    so does whoever specifies it in a version. The default deployment lists no parameter of the
    account's own (docs/deploy.md, imageParameters): the fleet and the version are refused."""
    boto3.client("ssm", region_name=EAST).put_parameter(
        Name="/golden-ami/rhel9", Value=IMAGE, Type="String", DataType="aws:ec2:image"
    )
    parameter = "arn:aws:ssm:us-east-1:123456789012:parameter/golden-ami/rhel9"
    made = boto3.client("ec2", region_name=EAST).create_launch_template(
        LaunchTemplateName="golden",
        LaunchTemplateData={"ImageId": "resolve:ssm:/golden-ami/rhel9:1"},
        TagSpecifications=[
            {"ResourceType": "launch-template", "Tags": [{"Key": CLUSTER_TAG, "Value": CLUSTER}]}
        ],
    )
    template_id = made["LaunchTemplate"]["LaunchTemplateId"]
    reserve = as_role(demo, "reserve")
    message = refused(lambda: reserve.create_fleet(**fleet(template_id)))
    assert f"ssm:GetParameters on resource: {parameter} " in message
    message = refused(
        lambda: reserve.create_launch_template_version(
            LaunchTemplateId=TEMPLATE,
            SourceVersion="1",
            LaunchTemplateData={"ImageId": "resolve:ssm:/golden-ami/rhel9"},
        )
    )
    assert f"ssm:GetParameters on resource: {parameter} " in message


def test_a_version_naming_an_instance_profile_needs_its_role_listed(
    demo: Any, profile_template: Any
) -> None:
    """CreateLaunchTemplateVersion's dependent action is iam:PassRole (Service Authorization
    Reference, Amazon EC2): a version whose data names a profile whose role is not in
    instanceRoleArns is refused, as the launch from it would be."""
    ec2, iam = (boto3.client(service, region_name=EAST) for service in ("ec2", "iam"))
    role_arn, _ = profile_template(ec2, iam, CLUSTER)
    profile = iam.get_instance_profile(InstanceProfileName="compute-node")["InstanceProfile"]
    message = refused(
        lambda: as_role(demo, "reserve").create_launch_template_version(
            LaunchTemplateId=TEMPLATE,
            SourceVersion="1",
            LaunchTemplateData={"IamInstanceProfile": {"Arn": profile["Arn"]}},
        )
    )
    assert f"iam:PassRole on resource: {role_arn} " in message


def test_a_fleet_is_not_decided_on_what_its_template_specifies(demo: Any) -> None:
    """CreateFleet: "Resource-level permissions for this action do not include the resources
    specified in a launch template ... you must include the resources in the RunInstances
    action statement" (Service Authorization Reference, Amazon EC2). The fleet is decided on
    itself, its instances and what it names (template, override subnet); RunInstances on
    everything each launch uses."""
    world.iam.decisions.clear()
    as_role(demo, "reserve").create_fleet(**fleet(TEMPLATE))
    kinds: dict[str, set[str]] = {}
    for _, decision in world.iam.decisions:
        kind = decision.request.resource.split(":")[-1].split("/")[0]
        kinds.setdefault(decision.request.action, set()).add(kind)
    assert kinds["ec2:CreateFleet"] == {"fleet", "instance", "launch-template", "subnet"}
    assert {"launch-template", "subnet", "image", "instance", "volume", "network-interface"} <= (
        kinds["ec2:RunInstances"]
    )


def test_a_launchs_reservation_carries_only_aws_resource_tags(demo: Any) -> None:
    """RunInstances' capacity-reservation resource lists aws:ResourceTag/${TagKey}, not
    ec2:ResourceTag/${TagKey} (Service Authorization Reference, Amazon EC2): a grant written
    with the latter would never match it on AWS, so it matches nothing here either."""
    ec2 = boto3.client("ec2", region_name=EAST)
    reservation = template_targeting(ec2, demo, hold_tags("hold"))
    world.iam.decisions.clear()
    as_role(demo, "reserve").create_fleet(**fleet(TEMPLATE))
    (keys,) = [
        d.request.keys
        for _, d in world.iam.decisions
        if d.request.action == "ec2:RunInstances" and reservation in d.request.resource
    ]
    assert keys[f"aws:ResourceTag/{CLUSTER_TAG}"] == (CLUSTER,)
    assert not [k for k in keys if k.startswith("ec2:ResourceTag/")]


def test_reservations_only_in_the_brokers_regions(demo: Any) -> None:
    """ "IAM grants for creating/cancelling reservations cover exactly these regions", and
    the mutating functions' describes are limited to them; capacity describes any region."""
    west = as_role(demo, "probe", region=WEST)
    refused(lambda: create(west, hold_tags("probe"), zone="us-west-2a"))
    refused(lambda: west.describe_capacity_reservations())
    capacity = as_role(demo, "capacity", region=WEST)
    assert capacity.describe_capacity_reservations()["CapacityReservations"]


def test_the_cleaner_reads_only_the_clusters_job_stacks(demo: Any) -> None:
    """ "only stacks under stackNamePrefix can be looked up (IAM)": demo's prefix is
    ``demo-job-``; SOCA's older ``soca-demo-job-`` names are outside it."""
    cloudformation = boto3.client("cloudformation", region_name=EAST)
    body = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})
    for name in ("demo-job-7", "soca-demo-job-7"):
        cloudformation.create_stack(StackName=name, TemplateBody=body)
    cleaner = as_role(demo, "cleaner", "cloudformation")
    assert cleaner.describe_stacks(StackName="demo-job-7")["Stacks"]
    message = refused(
        lambda: cleaner.describe_stacks(StackName="soca-demo-job-7"), "AccessDeniedException", 400
    )
    assert "cloudformation:DescribeStacks on resource: arn:aws:cloudformation:us-east-1:" in message
    release = as_role(demo, "release", "cloudformation")
    refused(lambda: release.describe_stacks(StackName="demo-job-7"), "AccessDeniedException", 400)


# -- the refusal itself, and who is evaluated -------------------------------------------------


def test_a_refusal_decodes_as_sts_says(demo: Any) -> None:
    """EC2's message ends with the encoded authorization failure message; STS's
    DecodeAuthorizationMessage gives "whether the request was denied due to an explicit deny
    or due to the absence of an explicit allow", the principal, the action, the resource and
    the condition keys of the request."""
    message = refused(lambda: create(as_role(demo, "probe"), hold_tags("hold")))
    assert message.startswith("You are not authorized to perform this operation. User: ")
    encoded = message.rsplit("Encoded authorization failure message: ", 1)[1]
    decoded = json.loads(
        boto3.client("sts", region_name=EAST).decode_authorization_message(EncodedMessage=encoded)[
            "DecodedMessage"
        ]
    )
    assert decoded["allowed"] is False and decoded["explicitDeny"] is False
    context = decoded["context"]
    assert context["principal"]["arn"] == (
        f"arn:aws:sts::123456789012:assumed-role/{PREFIX}-probe/{PREFIX}-probe"
    )
    assert context["action"] == "ec2:CreateCapacityReservation"
    assert context["resource"] == "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/*"
    keys = {
        item["key"]: [v["value"] for v in item["values"]["items"]]
        for item in context["conditions"]["items"]
    }
    assert keys[f"aws:RequestTag/{PURPOSE_TAG}"] == ["hold"]
    assert keys["aws:RequestedRegion"] == [EAST]
    with pytest.raises(ClientError) as raised:
        boto3.client("sts", region_name=EAST).decode_authorization_message(EncodedMessage="nope")
    assert raised.value.response["Error"]["Code"] == "InvalidAuthorizationMessageException"


def test_other_services_refuse_in_their_own_words(demo: Any) -> None:
    """DynamoDB, SSM and CloudFormation answer AccessDeniedException (400), their API
    references' common error: probe keeps no request records (only reserve does), release
    reads no flags."""
    table = f"arn:aws:dynamodb:us-east-1:123456789012:table/{TABLE}"
    message = refused(
        lambda: as_role(demo, "probe", "dynamodb").put_item(
            TableName=TABLE, Item={"id": {"S": "x"}}
        ),
        "AccessDeniedException",
        400,
    )
    assert f"dynamodb:PutItem on resource: {table}" in message
    refused(
        lambda: as_role(demo, "release", "ssm").get_parameters_by_path(
            Path=f"/capacity-broker/{CLUSTER}/configuration/FeatureFlags"
        ),
        "AccessDeniedException",
        400,
    )


def test_only_the_functions_roles_are_evaluated_and_the_knob_turns_it_off(demo: Any) -> None:
    """The operator's (or a test's) own credentials are not the functions': not evaluated.
    ``iam_evaluation=False`` lets the functions' calls through as before."""
    assert create(boto3.client("ec2", region_name=EAST)).startswith("cr-")
    probe = as_role(demo, "probe")
    refused(lambda: create(probe))
    demo.configure(iam_evaluation=False)
    assert create(probe).startswith("cr-")


def test_a_fresh_world_keeps_the_roles_only_when_asked(demo: Any) -> None:
    """The control API's reset (capacity-broker local's own world) remakes the roles, with
    new sessions; a plain reset leaves no roles."""
    before = demo.role_credentials("probe")
    demo.reset(keep_roles=True)
    demo.load_scenario("demo")
    after = demo.role_credentials("probe")
    assert after is not None and after != before
    refused(lambda: create(as_role(demo, "probe")))
    demo.reset()
    assert demo.role_credentials("probe") is None


# -- IAM's policy simulator (iam:SimulatePrincipalPolicy) ----------------------------------------


def simulate(role_arn: str, action: str, resources: list[str], **context: str) -> dict[str, Any]:
    iam = boto3.client("iam", region_name=EAST)
    entries = [
        {
            "ContextKeyName": k.replace("__", ":"),
            "ContextKeyValues": [v],
            "ContextKeyType": "string",
        }
        for k, v in context.items()
    ]
    [result] = iam.simulate_principal_policy(
        PolicySourceArn=role_arn,
        ActionNames=[action],
        ResourceArns=resources,
        ContextEntries=entries,
    )["EvaluationResults"]
    return dict(result)


def test_the_simulator_answers_what_the_launch_path_enforces(
    demo: Any, profile_template: Any
) -> None:
    """The simulator and enforcement read the same policies the same way: every request a
    launch was allowed, simulated with its condition keys, is ``allowed``; the launch refused
    for a profile's role is ``implicitDeny`` until the role gets the grant a deploy with that
    role in instanceRoleArns has, and then the launch goes through too."""
    reserve_role = world.iam.sessions["reserve"].role_arn
    world.iam.decisions.clear()
    as_role(demo, "reserve").create_fleet(**fleet(TEMPLATE))
    decided = [d for _, d in world.iam.decisions]
    assert decided
    iam = boto3.client("iam", region_name=EAST)
    for decision in decided:
        request = decision.request
        [result] = iam.simulate_principal_policy(
            PolicySourceArn=reserve_role,
            ActionNames=[request.action],
            ResourceArns=[request.resource],
            ContextEntries=[
                {"ContextKeyName": k, "ContextKeyValues": list(v), "ContextKeyType": "stringList"}
                for k, v in request.keys.items()
            ],
        )["EvaluationResults"]
        [specific] = result["ResourceSpecificResults"]
        assert specific["EvalResourceDecision"] == "allowed", request

    ec2 = boto3.client("ec2", region_name=EAST)
    role_arn, template_id = profile_template(ec2, iam, CLUSTER)
    refused(lambda: as_role(demo, "reserve").create_fleet(**fleet(template_id)))
    passed = {"iam__PassedToService": "ec2.amazonaws.com"}
    result = simulate(reserve_role, "iam:PassRole", [role_arn], **passed)
    assert result["EvalDecision"] == "implicitDeny"
    assert result["ResourceSpecificResults"][0]["EvalResourceName"] == role_arn
    iam.put_role_policy(
        RoleName=f"{PREFIX}-reserve",
        PolicyName="instance-roles",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "iam:PassRole",
                        "Resource": role_arn,
                        "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
                    }
                ],
            }
        ),
    )
    result = simulate(reserve_role, "iam:PassRole", [role_arn], **passed)
    assert result["EvalDecision"] == "allowed"
    assert result["MatchedStatements"] == [
        {"SourcePolicyId": "instance-roles", "SourcePolicyType": "role"}
    ]
    as_role(demo, "reserve").create_fleet(**fleet(template_id))
    # Without the key the condition asks about: undecided for want of it, and said so.
    result = simulate(reserve_role, "iam:PassRole", [role_arn])
    [specific] = result["ResourceSpecificResults"]
    assert specific["EvalResourceDecision"] == "implicitDeny"
    assert specific["MissingContextValues"] == ["iam:PassedToService"]


@pytest.mark.filterwarnings("ignore:Exception\\(NotEmulated\\):UserWarning")
def test_the_simulator_per_resource_deny_and_refusals(demo: Any) -> None:
    """ "Each API in the ActionNames parameter is evaluated for each resource in this list";
    an explicit deny decides; a role that does not exist is NoSuchEntity; what the emulator
    does not simulate is refused, never ignored."""
    reserve_role = world.iam.sessions["reserve"].role_arn
    public = "arn:aws:ssm:us-east-1::parameter/aws/service/ami-amazon-linux-latest/x"
    own = "arn:aws:ssm:us-east-1:123456789012:parameter/golden-ami/rhel9"
    result = simulate(reserve_role, "ssm:GetParameters", [public, own])
    assert [
        (r["EvalResourceName"], r["EvalResourceDecision"])
        for r in result["ResourceSpecificResults"]
    ] == [
        (public, "allowed"),
        (own, "implicitDeny"),
    ]
    assert result["EvalDecision"] == "implicitDeny"  # the most restrictive (chosen)
    iam = boto3.client("iam", region_name=EAST)
    iam.put_role_policy(
        RoleName=f"{PREFIX}-reserve",
        PolicyName="no-public",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Deny", "Action": "ssm:*", "Resource": public}],
            }
        ),
    )
    result = simulate(reserve_role, "ssm:GetParameters", [public])
    assert result["EvalDecision"] == "explicitDeny"
    assert result["MatchedStatements"] == [
        {"SourcePolicyId": "no-public", "SourcePolicyType": "role"}
    ]
    with pytest.raises(ClientError) as missing:
        simulate("arn:aws:iam::123456789012:role/nobody", "ssm:GetParameters", [public])
    assert missing.value.response["Error"]["Code"] == "NoSuchEntity"
    with pytest.raises(ClientError) as refused_here:
        iam.simulate_principal_policy(
            PolicySourceArn=reserve_role,
            ActionNames=["ssm:GetParameters"],
            ResourcePolicy=json.dumps({"Version": "2012-10-17", "Statement": []}),
        )
    assert refused_here.value.response["Error"]["Code"] == "UnsupportedOperation"


# -- reserved-first ladders (issue 43): the done record and the cleaner's terminate -----------

LADDER_TAG = "capacity-broker:ladder"
LADDER_STATE_TAG = "capacity-broker:ladder-state"


def node(tags: dict[str, str]) -> str:
    """An instance launched by the account (not a function), tagged ``tags``."""
    launched = boto3.client("ec2", region_name=EAST).run_instances(
        ImageId=IMAGE,
        InstanceType="c7i.48xlarge",
        SubnetId=SUBNET_C,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )
    return str(launched["Instances"][0]["InstanceId"])


def test_the_cleaner_terminates_only_this_clusters_ladder_nodes(demo: Any) -> None:
    """The cleaner's ec2:TerminateInstances: instances tagged with this cluster's id and with a
    ladder, nothing else (not this cluster's other nodes, not another cluster's ladder)."""
    own = node({CLUSTER_TAG: CLUSTER, LADDER_TAG: "job-1"})
    not_a_ladder = node({CLUSTER_TAG: CLUSTER})
    other = node({CLUSTER_TAG: "another-cluster", LADDER_TAG: "job-1"})
    untagged = node({"team": "cfd"})
    demo.settle(EAST)
    cleaner = as_role(demo, "cleaner")
    for refused_id in (not_a_ladder, other, untagged):
        message = refused(lambda i=refused_id: cleaner.terminate_instances(InstanceIds=[i]))
        assert f":instance/{refused_id}" in message
    ended = cleaner.terminate_instances(InstanceIds=[own])["TerminatingInstances"]
    assert [i["InstanceId"] for i in ended] == [own]
    # No other function may end a ladder node but reserve (its own partial launches).
    for entry in ("probe", "release", "capacity"):
        refused(lambda e=entry: as_role(demo, e).terminate_instances(InstanceIds=[not_a_ladder]))


def test_reserve_tags_existing_nodes_only_with_the_ladders_done_record(demo: Any) -> None:
    """reserve's one grant to tag an existing resource: capacity-broker:ladder-state=done,
    alone, on this cluster's ladder nodes."""
    own = node({CLUSTER_TAG: CLUSTER, LADDER_TAG: "job-2"})
    not_a_ladder = node({CLUSTER_TAG: CLUSTER})
    other = node({CLUSTER_TAG: "another-cluster", LADDER_TAG: "job-2"})
    demo.settle(EAST)
    reserve = as_role(demo, "reserve")

    def tag(instance_id: str, **tags: str) -> None:
        reserve.create_tags(
            Resources=[instance_id], Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
        )

    done = {LADDER_STATE_TAG: "done"}
    refused(lambda: tag(not_a_ladder, **done))
    refused(lambda: tag(other, **done))
    refused(lambda: tag(own, **{LADDER_STATE_TAG: "started"}))
    refused(lambda: tag(own, **done, **{CLUSTER_TAG: "another-cluster"}))
    refused(lambda: tag(own, **{LADDER_TAG: "job-3"}))
    tag(own, **done)
    described = boto3.client("ec2", region_name=EAST).describe_instances(InstanceIds=[own])
    tags = described["Reservations"][0]["Instances"][0]["Tags"]
    assert {"Key": LADDER_STATE_TAG, "Value": "done"} in tags


def test_the_cleaner_cannot_end_a_ladder_whose_done_record_landed_after_its_listing(
    demo: Any,
) -> None:
    """A retry of a reserved-first request finishes its old ladder (writes the done record and
    answers provisioned) between the sweep's listing (no record yet: abandoned) and the
    sweep's terminate. Only IAM decides at the moment of the terminate: the cleaner's grant
    reaches a ladder node only while it carries no done record, so the job's node lives and
    the sweep says what it could not do."""
    demo.advance(-3600)
    old = node({CLUSTER_TAG: CLUSTER, LADDER_TAG: "race-1"})
    demo.advance(3600)
    demo.settle(EAST)
    reserve = as_role(demo, "reserve")

    def retry_finishes(**_: Any) -> None:
        reserve.create_tags(Resources=[old], Tags=[{"Key": LADDER_STATE_TAG, "Value": "done"}])

    with functions_as_roles(demo):
        root = CONTAINER.use(None, function="cleaner")
        assert root is not None
        CONTAINER.use(root, function="cleaner")
        for events in (
            root.clients.client("ec2", EAST).meta.events,
            getattr(root.clients.session, "_session", root.clients.session).get_component(
                "event_emitter"
            ),
        ):
            events.register_first("before-call.ec2.TerminateInstances", retry_finishes)
        swept = invoke("cleaner", {"action": "sweep", "dry_run": False})
    assert "ladder_nodes_terminated" not in swept, swept
    (error,) = swept["ladder_errors"]
    assert (error["id"], error["error_code"]) == ("race-1", "UnauthorizedOperation")
    described = boto3.client("ec2", region_name=EAST).describe_instances(InstanceIds=[old])
    assert described["Reservations"][0]["Instances"][0]["State"]["Name"] == "running"


def test_the_cleaner_cannot_end_a_done_ladders_node(demo: Any) -> None:
    """Its grant reaches a ladder node only while the node carries no done record."""
    done = node({CLUSTER_TAG: CLUSTER, LADDER_TAG: "job-4", LADDER_STATE_TAG: "done"})
    demo.settle(EAST)
    cleaner = as_role(demo, "cleaner")
    for instance_id in (done,):
        refused(lambda i=instance_id: cleaner.terminate_instances(InstanceIds=[i]))


@pytest.mark.parametrize("no_hold", [False, True])
def test_a_reserved_first_ladder_needs_nothing_reserves_role_does_not_grant(
    demo: Any, no_hold: bool
) -> None:
    """The sample reserved-first events run as reserve's role: the pool's part, the hold's
    (or, with no hold to be had, the On-Demand shortfall: an untargeted instant fleet) and the
    done record, none refused."""
    if no_hold:
        demo.fail("CreateCapacityReservation", "InsufficientInstanceCapacity", times=999)
    with functions_as_roles(demo):
        answer = invoke("reserve", sample("reserve_reserved_first_on_demand"))
    assert answer["status"] == "provisioned", (answer.get("error_code"), answer.get("message"))
    assert not [(c.service, c.action) for c in demo.calls() if c.outcome in REFUSED]
    assert demo.calls("CreateTags")  # the done record, written as the role
    rungs = {s["rung"] for s in answer["served"]}
    assert ("on-demand" in rungs) == no_hold, answer["served"]
