"""IAM's policy evaluation as the IAM User Guide describes it (``emulator/iam/policy.py``),
statement by statement: the grammar the broker's policies use, and the rules around it."""

from __future__ import annotations

from typing import Any

import pytest
from moto.iam.access_control import IAMPolicyStatement, PermissionResult

from emulator.iam.policy import Policy, Request, UnsupportedPolicy, context, decide, load

pytestmark = pytest.mark.emulator

RESERVATION = "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0123456789abcdef0"


def policy(*statements: dict[str, Any]) -> Policy:
    return load({"Version": "2012-10-17", "Statement": list(statements)})


def allow(**fields: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": "ec2:*", "Resource": "*", **fields}


def allowed(
    p: Policy,
    action: str = "ec2:CancelCapacityReservation",
    resource: str = RESERVATION,
    **keys: Any,
) -> bool:
    return decide([p], Request(action, resource, context(keys))).allowed


def tag(key: str) -> str:
    return f"aws:ResourceTag/{key}"


# -- Action and Resource ------------------------------------------------------------------------


def test_actions_ignore_case_and_take_wildcards() -> None:
    """Policy elements, Action: "The prefix and the action name are case insensitive";
    ``*`` and ``?`` are wildcards, nothing else is (moto read ``.`` as one)."""
    p = policy(allow(Action=["EC2:cancelcapacityreservation", "ec2:Describe?mages"]))
    assert allowed(p, "ec2:CancelCapacityReservation")
    assert allowed(p, "ec2:DescribeImages", "*")
    assert not allowed(p, "ec2:DescribeIIImages", "*")
    assert not allowed(policy(allow(Action="ec2:Describe.mages")), "ec2:DescribeImages", "*")
    assert not allowed(p, "ec2:CreateCapacityReservation")


def test_not_action_allows_every_other_action() -> None:
    p = policy({"Effect": "Allow", "NotAction": "ec2:Purchase*", "Resource": "*"})
    assert allowed(p, "ec2:CreateCapacityReservation")
    assert not allowed(p, "ec2:PurchaseCapacityBlock")


@pytest.mark.parametrize(
    ("pattern", "resource", "expected"),
    [
        ("*", RESERVATION, True),
        ("arn:aws:ec2:*:*:capacity-reservation/*", RESERVATION, True),
        ("arn:aws:ec2:us-east-?:123456789012:capacity-reservation/cr-*", RESERVATION, True),
        # a segment's wildcard stays in its segment ("the parts separated by colons")
        ("arn:aws:ec2:*:capacity-reservation/*", RESERVATION, False),
        # ... but spans a "/" inside it
        ("arn:aws:s3:::bucket/*/test/*", "arn:aws:s3:::bucket/1/2/test/3/object.jpg", True),
        # ARNs are case-sensitive
        ("arn:aws:ec2:us-east-1:123456789012:Capacity-Reservation/*", RESERVATION, False),
        # another account, another type
        ("arn:aws:ec2:us-east-1:210987654321:capacity-reservation/*", RESERVATION, False),
        ("arn:aws:ec2:us-east-1:123456789012:launch-template/*", RESERVATION, False),
        # a statement with ARNs does not cover a call on "*" (a Describe)
        ("arn:aws:ec2:*:*:*", "*", False),
        # fewer segments: the last one covers the rest
        ("arn:aws:ec2:*", RESERVATION, True),
    ],
)
def test_resources_match_segment_by_segment(pattern: str, resource: str, expected: bool) -> None:
    p = policy(allow(Resource=pattern))
    assert allowed(p, resource=resource) is expected


def test_not_resource() -> None:
    p = policy(
        {"Effect": "Allow", "Action": "ec2:*", "NotResource": "arn:aws:ec2:*:*:launch-template/*"}
    )
    assert allowed(p)
    assert not allowed(p, resource="arn:aws:ec2:us-east-1:123456789012:launch-template/lt-1")


# -- conditions -----------------------------------------------------------------------------


OWNED = {"StringEquals": {tag("capacity-broker:cluster-id"): "demo"}}


def test_string_equals_needs_the_key() -> None:
    """ "If the key that you specify in a policy condition is not present in the request
    context, the values do not match and the condition is false" (Condition operators)."""
    p = policy(allow(Condition=OWNED))
    assert allowed(p, **{tag("capacity-broker:cluster-id"): "demo"})
    assert not allowed(p, **{tag("capacity-broker:cluster-id"): "other"})
    assert not allowed(p)
    assert not allowed(p, **{tag("capacity-broker:cluster-id"): ""})
    # condition values are case-sensitive with StringEquals ...
    assert not allowed(p, **{tag("capacity-broker:cluster-id"): "Demo"})
    # ... condition key names are not ("the condition key is not case-sensitive")
    assert allowed(p, **{"AWS:resourcetag/Capacity-Broker:Cluster-ID": "demo"})


def test_if_exists_is_true_without_the_key() -> None:
    """ "If the key is not present, evaluate the condition element as true" (...IfExists);
    a key that is present, even empty, is compared."""
    p = policy(
        allow(Condition={"StringEqualsIfExists": {tag("capacity-broker:cluster-id"): "demo"}})
    )
    assert allowed(p)
    assert allowed(p, **{tag("team"): "cfd"})
    assert allowed(p, **{tag("capacity-broker:cluster-id"): "demo"})
    assert not allowed(p, **{tag("capacity-broker:cluster-id"): "another-cluster"})
    assert not allowed(p, **{tag("capacity-broker:cluster-id"): ""})


def test_negated_operators_are_true_without_the_key() -> None:
    """ "If the policy condition requires that the key is not matched, such as StringNotLike
    ..., and the right key is not present, the condition is true"; several values must all
    miss ("the effective permissions work like a logical AND")."""
    p = policy(allow(Condition={"StringNotEquals": {tag("team"): ["ml", "llm"]}}))
    assert allowed(p)
    assert allowed(p, **{tag("team"): "cfd"})
    assert not allowed(p, **{tag("team"): "llm"})


def test_several_values_or_several_keys_and() -> None:
    p = policy(
        allow(
            Condition={
                "StringEquals": {
                    tag("capacity-broker:cluster-id"): "demo",
                    tag("capacity-broker:purpose"): ["probe", "hold"],
                },
                "StringLike": {tag("capacity-broker:job-id"): "job-?*"},
            }
        )
    )
    ok = {
        tag("capacity-broker:cluster-id"): "demo",
        tag("capacity-broker:purpose"): "hold",
        tag("capacity-broker:job-id"): "job-7",
    }
    assert allowed(p, **ok)
    assert not allowed(p, **{**ok, tag("capacity-broker:purpose"): "other"})
    assert not allowed(p, **{**ok, tag("capacity-broker:job-id"): "job-"})
    assert not allowed(p, **{k: v for k, v in ok.items() if "job-id" not in k})


def test_null_tests_presence() -> None:
    absent = policy(allow(Condition={"Null": {tag("capacity-broker:cluster-id"): "true"}}))
    present = policy(allow(Condition={"Null": {tag("capacity-broker:cluster-id"): "false"}}))
    assert allowed(absent) and not allowed(present)
    assert allowed(present, **{tag("capacity-broker:cluster-id"): "demo"})
    assert not allowed(absent, **{tag("capacity-broker:cluster-id"): "demo"})


def test_set_operators() -> None:
    """ForAllValues: true "if every key value in the request matches at least one value in
    the policy", and with no keys; ForAnyValue: one match, false with none."""
    every = policy(allow(Condition={"ForAllValues:StringEquals": {"aws:TagKeys": ["a", "b"]}}))
    some = policy(allow(Condition={"ForAnyValue:StringEquals": {"aws:TagKeys": ["a", "b"]}}))
    assert allowed(every) and not allowed(some)
    assert allowed(every, **{"aws:TagKeys": ["a"]}) and allowed(some, **{"aws:TagKeys": ["a"]})
    assert not allowed(every, **{"aws:TagKeys": ["a", "c"]})
    assert allowed(some, **{"aws:TagKeys": ["a", "c"]})
    assert not allowed(some, **{"aws:TagKeys": ["c"]})


def test_arn_like_compares_segments() -> None:
    """ArnLike: "Each of the six colon-delimited components of the ARN is checked separately"
    (the guide's own example: StringLike matches, ArnLike does not)."""
    key = "ec2:LaunchTemplate"
    arn_like = policy(allow(Condition={"ArnLike": {key: "arn:aws:ec2:*:launch-template/*"}}))
    string_like = policy(allow(Condition={"StringLike": {key: "arn:aws:ec2:*:launch-template/*"}}))
    template = "arn:aws:ec2:us-east-1:123456789012:launch-template/lt-1"
    assert not allowed(arn_like, **{key: template})
    assert allowed(string_like, **{key: template})
    fine = policy(allow(Condition={"ArnLike": {key: "arn:aws:ec2:*:*:launch-template/*"}}))
    assert allowed(fine, **{key: template})
    assert not allowed(fine)


def test_an_explicit_deny_wins_and_nothing_is_allowed_by_default() -> None:
    """Policy evaluation logic: an applicable Deny overrides every Allow; without an
    applicable Allow the request is implicitly denied."""
    p = policy(
        allow(),
        {
            "Effect": "Deny",
            "Action": "ec2:Cancel*",
            "Resource": "*",
            "Condition": {"StringEquals": {tag("team"): "ml"}},
        },
    )
    assert allowed(p)
    decision = decide(
        [p], Request("ec2:CancelCapacityReservation", RESERVATION, context({tag("team"): "ml"}))
    )
    assert not decision.allowed and decision.explicit_deny
    assert "explicit deny" in decision.reason
    nothing = decide(
        [policy(allow(Action="s3:*"))], Request("ec2:CancelCapacityReservation", RESERVATION)
    )
    assert not nothing.allowed and not nothing.explicit_deny
    assert nothing.reason == (
        "because no identity-based policy allows the ec2:CancelCapacityReservation action"
    )


def test_a_failed_condition_is_not_a_deny_through_motos_interface() -> None:
    """moto's IAMPolicyStatement answers DENIED when an Allow's condition does not hold,
    which would turn a second statement's Allow into an explicit deny; through the same
    interface the extension answers NEUTRAL."""
    statement = allow(Condition=OWNED)
    other = {tag("capacity-broker:cluster-id"): "other"}
    assert (
        IAMPolicyStatement(statement).is_action_permitted(
            "ec2:CancelCapacityReservation", "*", None, other
        )
        == PermissionResult.DENIED
    )
    p = policy(statement, allow(Action="ec2:CancelCapacityReservation"))
    assert (
        p.is_action_permitted("ec2:CancelCapacityReservation", RESERVATION, None, other)
        == PermissionResult.PERMITTED
    )
    assert (
        policy(statement).is_action_permitted(
            "ec2:CancelCapacityReservation", RESERVATION, None, other
        )
        == PermissionResult.NEUTRAL
    )


@pytest.mark.parametrize(
    "statement",
    [
        allow(Condition={"NumericLessThan": {"ec2:InstanceCount": "8"}}),
        allow(Condition={"DateGreaterThan": {"aws:CurrentTime": "2026-01-01T00:00:00Z"}}),
        allow(Condition={"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}),
        allow(Condition={"ForAllValues:NullIfExists": {"aws:TagKeys": "true"}}),
        allow(Resource="arn:aws:ec2:*:*:instance/${aws:username}"),
        allow(Principal={"AWS": "*"}),
        allow(NotResource="arn:aws:ec2:*:*:launch-template/*"),  # Resource and NotResource
        {"Effect": "Allow", "Resource": "*"},  # no Action
    ],
)
def test_what_the_emulator_does_not_evaluate_is_refused_when_loaded(
    statement: dict[str, Any],
) -> None:
    with pytest.raises(UnsupportedPolicy):
        policy(statement)
