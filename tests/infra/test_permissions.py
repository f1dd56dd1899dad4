"""IAM: least privilege per function, and the ownership rules enforced by AWS, not by our code."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest
from infra_helpers import FUNCTIONS, Synth, as_list, flat

pytestmark = pytest.mark.infra

TAG_CLUSTER = "capacity-broker:cluster-id"
TAG_PURPOSE = "capacity-broker:purpose"

# Actions that EC2/X-Ray only authorize with Resource "*".
# The AWS Price List defines no resource types (Service Authorization Reference, "Actions,
# resources, and condition keys for AWS Price List"): GetProducts takes "*" only.
NO_RESOURCE_LEVEL = (
    "ec2:Describe*",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "pricing:GetProducts",
)


def grants(statement: dict[str, Any], action: str) -> bool:
    """Whether an Allow statement's Action (patterns included) covers `action`."""
    return statement["Effect"] == "Allow" and any(
        fnmatch.fnmatchcase(action.lower(), pattern.lower())
        for pattern in as_list(statement.get("Action", []))
    )


def identity_statements(synth: Synth) -> list[tuple[str, dict[str, Any]]]:
    return [(name, statement) for name in FUNCTIONS for statement in synth.statements_of(name)]


# -- global rules -----------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["broker", "custom"])
def test_no_wildcard_action_anywhere(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    offenders = [
        (logical_id, action)
        for logical_id, statement in synth.every_statement()
        if statement["Effect"] == "Allow"
        for action in as_list(statement.get("Action", []))
        if "*" in action
    ]
    assert offenders == []
    # NotAction/NotResource allow everything else: never on an Allow.
    assert not [
        logical_id
        for logical_id, statement in synth.every_statement()
        if statement["Effect"] == "Allow" and ({"NotAction", "NotResource"} & statement.keys())
    ]


@pytest.mark.parametrize("variant", ["broker", "custom"])
def test_no_managed_policies(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    assert synth.resources("AWS::IAM::ManagedPolicy") == {}
    for role in synth.resources("AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]


def test_roles_are_for_lambda_only(broker: Synth) -> None:
    roles = broker.resources("AWS::IAM::Role")
    assert len(roles) == 5
    for role in roles.values():
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}
        assert statement["Action"] == "sts:AssumeRole"


def test_star_resources_only_where_aws_allows_nothing_else(broker: Synth) -> None:
    for _, statement in identity_statements(broker):
        if "*" in as_list(statement["Resource"]):
            assert as_list(statement["Resource"]) == ["*"]
            for action in as_list(statement["Action"]):
                assert any(fnmatch.fnmatchcase(action, ok) for ok in NO_RESOURCE_LEVEL), action


def test_mutating_describe_grants_are_limited_to_the_broker_regions(
    broker: Synth, custom: Synth
) -> None:
    for synth, regions in (
        (broker, [{"Ref": "AWS::Region"}]),
        (custom, ["us-east-1", "eu-west-1"]),
    ):
        for name in ("probe", "reserve", "release", "cleaner"):
            (describe,) = [s for s in synth.statements_of(name) if s.get("Sid") == "DescribeEc2"]
            assert describe["Condition"] == {"StringEquals": {"aws:RequestedRegion": regions}}


def test_purchase_capacity_block_is_never_granted(custom: Synth) -> None:
    for name, statement in identity_statements(custom):
        assert not grants(statement, "ec2:PurchaseCapacityBlock"), name


# -- reservations: create only with the ownership tags ----------------------------------------


@pytest.mark.parametrize("variant", ["broker", "custom"])
def test_create_requires_the_ownership_tags(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    cluster_id = "demo" if variant == "broker" else "soca-prod"
    creators = {}
    for name, statement in identity_statements(synth):
        if grants(statement, "ec2:CreateCapacityReservation"):
            condition = statement["Condition"]
            assert set(condition) == {"StringEquals"}
            equals = condition["StringEquals"]
            assert equals[f"aws:RequestTag/{TAG_CLUSTER}"] == cluster_id
            purposes = as_list(equals[f"aws:RequestTag/{TAG_PURPOSE}"])
            assert set(purposes) <= {"probe", "hold"}
            creators[name] = purposes
    # Each function creates only its own kind of reservation.
    assert creators == {"probe": ["probe"], "reserve": ["hold"]}


def test_tags_only_while_creating(custom: Synth) -> None:
    """CreateTags only on create, but for one grant: reserve's done record of a reserved-first
    ladder, that one tag and value on this cluster's ladder nodes alone."""
    for name, statement in identity_statements(custom):
        if grants(statement, "ec2:CreateTags") and statement.get("Sid") == "MarkLaddersDone":
            assert name == "reserve"
            assert [flat(r).rsplit(":", 1)[-1] for r in as_list(statement["Resource"])] == [
                "instance/*",
                "instance/*",
            ]
            condition = statement["Condition"]
            assert condition["StringEquals"] == {
                "aws:ResourceTag/capacity-broker:cluster-id": "soca-prod",
                "aws:RequestTag/capacity-broker:ladder-state": "done",
            }
            assert as_list(condition["ForAllValues:StringEquals"]["aws:TagKeys"]) == [
                "capacity-broker:ladder-state"
            ]
            assert condition["Null"] == {"aws:ResourceTag/capacity-broker:ladder": "false"}
            assert set(condition) == {"StringEquals", "ForAllValues:StringEquals", "Null"}
            continue
        if grants(statement, "ec2:CreateTags"):
            actions = as_list(statement["Condition"]["StringEquals"]["ec2:CreateAction"])
            assert set(actions) <= {"CreateCapacityReservation", "CreateFleet", "RunInstances"}
            if any(":capacity-reservation/" in flat(r) for r in as_list(statement["Resource"])):
                assert actions == ["CreateCapacityReservation"], name


def test_instances_are_terminated_only_as_this_clusters(custom: Synth) -> None:
    """reserve ends its own partial launches (this cluster's nodes); the cleaner ends only
    this cluster's reserved-first ladder nodes (issue 43); no other function terminates."""
    found: dict[str, list[dict[str, Any]]] = {}
    for name, statement in identity_statements(custom):
        if grants(statement, "ec2:TerminateInstances"):
            found.setdefault(name, []).append(statement)
    assert set(found) == {"reserve", "cleaner"}
    for name, statements in found.items():
        (statement,) = statements
        assert {flat(r).rsplit(":", 1)[-1] for r in as_list(statement["Resource"])} == {
            "instance/*"
        }
        condition = statement["Condition"]
        assert condition["StringEquals"] == {
            "aws:ResourceTag/capacity-broker:cluster-id": "soca-prod"
        }
        if name == "cleaner":
            assert condition["Null"] == {"aws:ResourceTag/capacity-broker:ladder": "false"}
            # Never a node whose ladder is done (a retry may write the record after the
            # sweep listed the node and before it terminates).
            assert condition["StringNotEquals"] == {
                "aws:ResourceTag/capacity-broker:ladder-state": "done"
            }
            assert set(condition) == {"StringEquals", "Null", "StringNotEquals"}


# -- reservations: cancel only what this cluster owns -----------------------------------------


@pytest.mark.parametrize("variant", ["broker", "custom"])
@pytest.mark.parametrize(
    "action", ["ec2:CancelCapacityReservation", "ec2:ModifyCapacityReservation"]
)
def test_cancel_cannot_reach_an_untagged_reservation(
    variant: str, action: str, request: pytest.FixtureRequest
) -> None:
    """Every statement that could let a function cancel (or modify) a reservation requires,
    with plain StringEquals, the resource tag capacity-broker:cluster-id = this cluster.

    IAM evaluates StringEquals on a key the resource does not carry as false, so a reservation
    without the tag (or with another cluster's) matches no Allow and the call is denied; the
    *IfExists variants would let a missing tag through, hence the exact operator check.
    """
    synth: Synth = request.getfixturevalue(variant)
    cluster_id = "demo" if variant == "broker" else "soca-prod"
    cancellers = set()
    for name, statement in identity_statements(synth):
        if not grants(statement, action):
            continue
        cancellers.add(name)
        condition = statement.get("Condition", {})
        assert condition.get("StringEquals", {}).get(f"aws:ResourceTag/{TAG_CLUSTER}") == (
            cluster_id
        ), (name, statement)
        # Nothing else in the condition may widen it (a condition block is a conjunction,
        # but an IfExists/ForAnyValue twin of the key would be a second way in).
        for operator, keys in condition.items():
            for key in keys:
                if key.startswith("aws:ResourceTag/"):
                    assert operator == "StringEquals", (name, operator, key)
        purposes = as_list(condition["StringEquals"][f"aws:ResourceTag/{TAG_PURPOSE}"])
        assert set(purposes) <= {"probe", "hold"}
    if action == "ec2:CancelCapacityReservation":
        assert cancellers == {"probe", "reserve", "release", "cleaner"}
    else:
        assert cancellers == set()


def test_capacity_never_mutates(broker: Synth) -> None:
    actions = {
        action
        for statement in broker.statements_of("capacity")
        for action in as_list(statement["Action"])
        if action.startswith("ec2:")
    }
    assert actions
    assert all(action.startswith("ec2:Describe") for action in actions), actions
    for statement in broker.statements_of("capacity"):
        assert not grants(statement, "ec2:Cancel*")
        assert not grants(statement, "ec2:Create*")


# -- reserve: launch templates, fleets, roles ---------------------------------------------------


def test_launch_templates_must_be_tagged_for_the_cluster(custom: Synth) -> None:
    for name, statement in identity_statements(custom):
        resources = [flat(r) for r in as_list(statement["Resource"])]
        if grants(statement, "ec2:CreateLaunchTemplateVersion") or any(
            ":launch-template/" in r for r in resources
        ):
            # reserve makes versions; release and the cleaner only delete them.
            assert name == "reserve" or as_list(statement["Action"]) == [
                "ec2:DeleteLaunchTemplateVersions"
            ], (name, statement["Action"])
            assert statement["Condition"] == {
                "StringEquals": {f"aws:ResourceTag/{TAG_CLUSTER}": "soca-prod"}
            }


def test_run_instances_only_through_a_launch_template(custom: Synth) -> None:
    runners = [
        statement
        for name, statement in identity_statements(custom)
        if grants(statement, "ec2:RunInstances")
    ]
    assert runners
    for statement in runners:
        condition = statement["Condition"]
        assert "ArnLike" in condition or "StringEquals" in condition
        if "ArnLike" in condition:
            templates = [flat(arn) for arn in condition["ArnLike"]["ec2:LaunchTemplate"]]
            assert all(":launch-template/" in arn for arn in templates)


def test_only_reserve_launches(broker: Synth) -> None:
    for name, statement in identity_statements(broker):
        for action in ("ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplateVersion"):
            if grants(statement, action):
                assert name == "reserve"


def test_pass_role_only_for_configured_instance_roles(broker: Synth, custom: Synth) -> None:
    for _, statement in identity_statements(broker):
        assert not grants(statement, "iam:PassRole")
    (pass_role,) = [s for _, s in identity_statements(custom) if grants(s, "iam:PassRole")]
    assert pass_role in custom.statements_of("reserve")
    assert pass_role["Resource"] == [
        "arn:aws:iam::123456789012:role/compute-node",
        "arn:aws:iam::123456789012:role/vdi-node",
    ]
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}


# -- the rest: stacks, flags, table, logs ------------------------------------------------------


def test_cleaner_reads_only_the_job_stacks(broker: Synth, custom: Synth) -> None:
    (describe,) = broker.allowed("cleaner", "cloudformation:DescribeStacks")
    assert [flat(r) for r in as_list(describe["Resource"])] == [
        "arn:<AWS::Partition>:cloudformation:<AWS::Region>:<AWS::AccountId>:stack/demo-job-*/*"
    ]
    (describe,) = custom.allowed("cleaner", "cloudformation:DescribeStacks")
    assert sorted(flat(r) for r in as_list(describe["Resource"])) == [
        f"arn:<AWS::Partition>:cloudformation:{region}:<AWS::AccountId>:stack/prod-job-*/*"
        for region in ("eu-west-1", "us-east-1")
    ]
    for name in ("probe", "reserve", "release", "capacity"):
        assert broker.allowed(name, "cloudformation:DescribeStacks") == []


def test_reservation_grants_cover_each_configured_region(custom: Synth) -> None:
    (cancel,) = custom.allowed("cleaner", "ec2:CancelCapacityReservation")
    assert sorted(flat(r) for r in as_list(cancel["Resource"])) == [
        f"arn:<AWS::Partition>:ec2:{region}:<AWS::AccountId>:capacity-reservation/*"
        for region in ("eu-west-1", "us-east-1")
    ]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_flags_table_and_logs(broker: Synth, name: str) -> None:
    # probe and reserve read the flags, with one GetParametersByPath of their folder
    flags = broker.allowed(name, "ssm:GetParametersByPath")
    if name in ("probe", "reserve"):
        (statement,) = flags
        (resource,) = [flat(r) for r in as_list(statement["Resource"])]
        assert resource.endswith(":parameter/capacity-broker/demo/configuration/FeatureFlags")
    else:
        assert flags == []
    assert broker.allowed(name, "ssm:GetParameter") == []

    # Only reserve keeps request records (Powertools Idempotency's four actions).
    tables = broker.allowed(name, "dynamodb:PutItem")
    if name == "reserve":
        (table,) = tables
        (table_id,) = broker.resources("AWS::DynamoDB::Table")
        assert table["Resource"] == {"Fn::GetAtt": [table_id, "Arn"]}
        assert sorted(as_list(table["Action"])) == [
            "dynamodb:DeleteItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        ]
    else:
        assert tables == []
    # probe's containers meet in the table (grouped probes): only items under meet#, and no
    # PutItem (a group and each member's place in it are UpdateItems, the answers one
    # BatchWriteItem per 25).
    groups = broker.allowed(name, "dynamodb:BatchWriteItem")
    if name == "probe":
        (table,) = groups
        assert table["Condition"] == {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["meet#*"]}
        }
        assert sorted(as_list(table["Action"])) == [
            "dynamodb:BatchWriteItem",
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
        ]
    else:
        assert groups == []
    # probe and reserve keep the capacity memory in the same table (issue 13): one
    # BatchGetItem to read it, UpdateItem (ADD) to write; nothing else touches the table.
    memory = broker.allowed(name, "dynamodb:BatchGetItem")
    if name in ("probe", "reserve"):
        (statement,) = memory
        (table_id,) = broker.resources("AWS::DynamoDB::Table")
        assert statement["Resource"] == {"Fn::GetAtt": [table_id, "Arn"]}
        assert sorted(as_list(statement["Action"])) == [
            "dynamodb:BatchGetItem",
            "dynamodb:UpdateItem",
        ]
        # Only the memory's own items (a probe cannot rewrite reserve's request records).
        assert statement["Condition"] == {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["capacity-memory#*"]}
        }
    else:
        assert memory == []
        # No statement of the table at all (the shared EC2 rate budget, whose ledgers every
        # function could update, is gone: docs/performance.md).
        assert [
            s.get("Sid")
            for s in broker.statements_of(name)
            if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))
        ] == []
    assert not any(
        a in ("dynamodb:Scan", "dynamodb:Query", "dynamodb:*")
        for s in broker.statements_of(name)
        for a in as_list(s["Action"])
    )

    (logs,) = broker.allowed(name, "logs:PutLogEvents")
    _, function = broker.function(name)
    own_group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    assert logs["Resource"] == {"Fn::GetAtt": [own_group, "Arn"]}
    assert broker.allowed(name, "logs:CreateLogGroup") == []

    (xray,) = broker.allowed(name, "xray:PutTraceSegments")
    assert xray["Resource"] == "*"


# -- issue 12: what AWS asks for, and nothing else -------------------------------------------


@pytest.mark.parametrize("variant", ["broker", "custom"])
def test_no_service_linked_role_for_instant_fleets(
    variant: str, request: pytest.FixtureRequest
) -> None:
    """EC2 User Guide, EC2 Fleet prerequisites: "An instant EC2 Fleet does not require this
    role" (AWSServiceRoleForEC2Fleet); the reserve role used to be allowed to create it."""
    synth: Synth = request.getfixturevalue(variant)
    for name, statement in identity_statements(synth):
        assert not grants(statement, "iam:CreateServiceLinkedRole"), name


def test_create_capacity_reservation_names_only_reservations(custom: Synth) -> None:
    """The Service Authorization Reference lists capacity-reservation as the only resource of
    CreateCapacityReservation (a placement group is its ec2:PlacementGroup condition key); a
    second statement on placement-group/* used to be granted."""
    for name, statement in identity_statements(custom):
        if grants(statement, "ec2:CreateCapacityReservation"):
            resources = [flat(r) for r in as_list(statement["Resource"])]
            assert all(":capacity-reservation/" in r for r in resources), (name, resources)


@pytest.mark.parametrize("action", ["ec2:RunInstances", "ec2:CreateFleet"])
@pytest.mark.parametrize("shared", ["capacity-reservation", "security-group", "subnet"])
def test_launches_may_use_resources_shared_from_another_account(
    custom: Synth, action: str, shared: str
) -> None:
    """A reservation or security group shared through AWS RAM (or a shared VPC's subnet) has
    the owner's account in its ARN; grants pinned to this account refused them."""
    # the statements for what the launch uses (another one names the cluster's templates;
    # reservations have their own, scoped by cluster tag)
    resources = [
        flat(r)
        for s in custom.allowed("reserve", action)
        if any(f":{shared}/" in flat(r) for r in as_list(s["Resource"]))
        for r in as_list(s["Resource"])
    ]
    for region in ("us-east-1", "eu-west-1"):
        assert f"arn:<AWS::Partition>:ec2:{region}:*:{shared}/*" in resources


def test_images_from_ssm_parameters_can_be_resolved(broker: Synth, custom: Synth) -> None:
    """EC2 User Guide (launch templates, "Use a Systems Manager parameter instead of an AMI
    ID"): "Anyone who uses the launch template also needs the ssm:GetParameters permission";
    reserve had none, so a template whose image is resolve:ssm:... could not be launched."""
    (default,) = broker.allowed("reserve", "ssm:GetParameters")
    assert [flat(r) for r in as_list(default["Resource"])] == [
        "arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/*"
    ]
    (configured,) = custom.allowed("reserve", "ssm:GetParameters")
    assert sorted(flat(r) for r in as_list(configured["Resource"])) == sorted(
        [
            "arn:<AWS::Partition>:ssm:us-east-1::parameter/aws/service/*",
            "arn:<AWS::Partition>:ssm:eu-west-1::parameter/aws/service/*",
            "arn:<AWS::Partition>:ssm:us-east-1:<AWS::AccountId>:parameter/golden-ami/*",
            "arn:<AWS::Partition>:ssm:eu-west-1:<AWS::AccountId>:parameter/golden-ami/*",
            "arn:aws:ssm:us-east-1:210987654321:parameter/shared/ami",
        ]
    )
    for name in ("probe", "release", "cleaner", "capacity"):
        assert broker.allowed(name, "ssm:GetParameters") == []


def _allows_reservation(statement: dict[str, Any], tags: dict[str, str]) -> bool:
    """Whether a statement's aws:ResourceTag conditions let a reservation with ``tags``
    through, as IAM evaluates them: StringEquals needs the key ("If the key that you specify
    in a policy condition is not present in the request context, the values do not match"),
    the ...IfExists forms are true without it. Other condition keys (the launch template)
    are taken as met: only the reservation's tags differ between the cases compared."""
    for operator, keys in statement.get("Condition", {}).items():
        for key, wanted in keys.items():
            if not key.startswith("aws:ResourceTag/"):
                continue
            value = tags.get(key.split("/", 1)[1])
            if operator == "StringEquals":
                ok = value is not None and value in as_list(wanted)
            elif operator == "StringEqualsIfExists":
                ok = value is None or value in as_list(wanted)
            else:
                raise AssertionError(f"unexpected operator {operator} on {key}")
            if not ok:
                return False
    return True


@pytest.mark.parametrize("variant", ["broker", "custom"])
@pytest.mark.parametrize("action", ["ec2:RunInstances", "ec2:CreateFleet"])
def test_launches_reach_only_this_clusters_or_untagged_reservations(
    variant: str, action: str, request: pytest.FixtureRequest
) -> None:
    """Contract v3, "Other clusters": reserve may launch into its own holds and the caller's
    untagged ODCRs and Capacity Blocks, never into a reservation tagged for another broker
    cluster (that cluster's cleaner would cancel it as consumed)."""
    synth: Synth = request.getfixturevalue(variant)
    cluster_id = "demo" if variant == "broker" else "soca-prod"
    reaching = [
        statement
        for name, statement in identity_statements(synth)
        if grants(statement, action)
        and any(
            fnmatch.fnmatchcase("arn:aws:ec2:us-east-1:111122223333:capacity-reservation/cr-1", r)
            or ":capacity-reservation/" in r
            for r in (flat(x) for x in as_list(statement["Resource"]))
        )
    ]
    assert reaching, f"nothing lets reserve {action} into a reservation"

    def allowed(tags: dict[str, str]) -> bool:
        return any(_allows_reservation(statement, tags) for statement in reaching)

    assert allowed({TAG_CLUSTER: cluster_id, TAG_PURPOSE: "hold"})  # its own hold
    assert allowed({})  # the caller's untagged ODCR or Capacity Block
    assert allowed({"team": "cfd"})
    assert not allowed({TAG_CLUSTER: "another-cluster", TAG_PURPOSE: "hold"})
    assert not allowed({TAG_CLUSTER: ""})


def test_the_pool_groups_are_read_only_by_the_functions_that_need_them(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """poolGroups (issue 43): reserve, release and the cleaner may list those groups' members
    (and only those groups); no role gets the grant without the option."""
    import json

    from infra_helpers import synthesize

    with_pool = synthesize(
        {"clusterId": "demo", "poolGroups": "hpc-pool,gpu-pool", "poolTag": "pool=hpc"},
        outdir=tmp_path_factory.mktemp("cdk-pool"),
    )
    for name in FUNCTIONS:
        allowed = [
            s
            for s in with_pool.statements_of(name)
            if grants(s, "resource-groups:ListGroupResources")
        ]
        if name in ("reserve", "release", "cleaner"):
            (statement,) = allowed
            resources = json.dumps(as_list(statement["Resource"]))
            assert "group/hpc-pool" in resources and "group/gpu-pool" in resources
            assert '"*"' not in resources
        else:
            assert allowed == []
        _, function = with_pool.function(name)
        env = function["Properties"]["Environment"]["Variables"]
        assert env["BROKER_POOL_GROUPS"] == "hpc-pool,gpu-pool"
        assert env["BROKER_POOL_TAG"] == "pool=hpc"


def test_no_pool_no_group_grant(broker: Synth) -> None:
    for name in FUNCTIONS:
        assert not [
            s for s in broker.statements_of(name) if grants(s, "resource-groups:ListGroupResources")
        ]
