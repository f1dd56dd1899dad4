"""The cleaner's triggers: the 5-minute schedule, job-stack status events, retries, DLQ."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest
from infra_helpers import Synth, flat

pytestmark = pytest.mark.infra


def rules(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        "schedule": next(
            r["Properties"]
            for r in synth.resources("AWS::Events::Rule").values()
            if "ScheduleExpression" in r["Properties"]
        ),
        "stacks": next(
            r["Properties"]
            for r in synth.resources("AWS::Events::Rule").values()
            if r["Properties"].get("EventPattern", {}).get("source") == ["aws.cloudformation"]
        ),
        "interruptions": next(
            r["Properties"]
            for r in synth.resources("AWS::Events::Rule").values()
            if r["Properties"].get("EventPattern", {}).get("source") == ["aws.ec2"]
        ),
    }


def test_interruption_warnings_reach_the_cleaner_matched_by_prefix(broker: Synth) -> None:
    rule = rules(broker)["interruptions"]
    assert rule["EventPattern"] == {
        "source": ["aws.ec2"],
        "detail-type": [
            {"prefix": "EC2 Capacity Reservation Instance Interruption"},
            {"prefix": "EC2 Spot Instance Interruption"},
        ],
    }
    (target,) = rule["Targets"]
    cleaner_id, _ = broker.function("cleaner")
    assert target["Arn"] == {"Fn::GetAtt": [cleaner_id, "Arn"]}


def dead_letter_queue(synth: Synth) -> str:
    (queue_id,) = synth.resources("AWS::SQS::Queue")
    return queue_id


def test_cleaner_sweeps_every_five_minutes(broker: Synth) -> None:
    schedule = rules(broker)["schedule"]
    assert schedule["ScheduleExpression"] == "rate(5 minutes)"
    assert schedule["State"] == "ENABLED"
    (target,) = schedule["Targets"]
    cleaner_id, _ = broker.function("cleaner")
    assert target["Arn"] == {"Fn::GetAtt": [cleaner_id, "Arn"]}


def test_stack_status_changes_of_the_job_stacks_reach_the_cleaner(broker: Synth) -> None:
    stacks = rules(broker)["stacks"]
    assert stacks["EventPattern"] == {
        "source": ["aws.cloudformation"],
        "detail-type": ["CloudFormation Stack Status Change"],
        "detail": {
            "stack-id": [{"wildcard": "arn:*:cloudformation:*:*:stack/demo-job-*"}],
            "status-details": {
                "status": [
                    {
                        "anything-but": [
                            "CREATE_IN_PROGRESS",
                            "UPDATE_IN_PROGRESS",
                            "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
                            "REVIEW_IN_PROGRESS",
                            "IMPORT_IN_PROGRESS",
                        ]
                    }
                ]
            },
        },
    }
    (target,) = stacks["Targets"]
    cleaner_id, _ = broker.function("cleaner")
    assert target["Arn"] == {"Fn::GetAtt": [cleaner_id, "Arn"]}


def matches(synth: Synth, event: dict[str, Any]) -> bool:
    """EventBridge semantics for the two operators the rule uses (wildcard, anything-but)."""
    pattern = rules(synth)["stacks"]["EventPattern"]
    if event["source"] not in pattern["source"]:
        return False
    if event["detail-type"] not in pattern["detail-type"]:
        return False
    (wildcard,) = pattern["detail"]["stack-id"]
    (anything_but,) = pattern["detail"]["status-details"]["status"]
    return fnmatch.fnmatchcase(event["detail"]["stack-id"], wildcard["wildcard"]) and (
        event["detail"]["status-details"]["status"] not in anything_but["anything-but"]
    )


def stack_event(stack_name: str, status: str) -> dict[str, Any]:
    """The shape documented in the CloudFormation User Guide (Stack Status Change detail)."""
    stack_id = (
        f"arn:aws:cloudformation:us-east-1:111122223333:stack/{stack_name}/"
        "6a7e8feb-b491-4cf7-a9f1-bf3703467718"
    )
    return {
        "version": "0",
        "detail-type": "CloudFormation Stack Status Change",
        "source": "aws.cloudformation",
        "account": "111122223333",
        "region": "us-east-1",
        "resources": [stack_id],
        "detail": {
            "stack-id": stack_id,
            "status-details": {"status": status, "status-reason": ""},
            "client-request-token": "",
        },
    }


@pytest.mark.parametrize(
    ("stack_name", "status", "expected"),
    [
        ("demo-job-1234", "CREATE_COMPLETE", True),
        ("demo-job-1234", "UPDATE_COMPLETE", True),
        ("demo-job-1234", "CREATE_FAILED", True),
        ("demo-job-1234", "ROLLBACK_IN_PROGRESS", True),
        ("demo-job-1234", "DELETE_COMPLETE", True),
        ("demo-job-1234", "DELETE_IN_PROGRESS", True),
        ("demo-job-1234", "CREATE_IN_PROGRESS", False),
        ("other-job-1234", "CREATE_COMPLETE", False),
        # another cluster's ids around this one's: "soca-demo", "demo-x"
        ("soca-demo-job-1234", "CREATE_COMPLETE", False),
        ("demo-x-job-1234", "CREATE_COMPLETE", False),
        ("capacity-broker-demo", "UPDATE_COMPLETE", False),
    ],
)
def test_event_pattern_selects_terminal_changes_of_our_job_stacks(
    broker: Synth, stack_name: str, status: str, expected: bool
) -> None:
    assert matches(broker, stack_event(stack_name, status)) is expected


def test_stack_name_prefix_override(custom: Synth) -> None:
    pattern = rules(custom)["stacks"]["EventPattern"]
    assert pattern["detail"]["stack-id"] == [
        {"wildcard": "arn:*:cloudformation:*:*:stack/prod-job-*"}
    ]
    assert matches(custom, stack_event("prod-job-77", "CREATE_COMPLETE"))


def test_both_targets_retry_and_dead_letter(broker: Synth) -> None:
    queue_id = dead_letter_queue(broker)
    policies = {}
    for kind, rule in rules(broker).items():
        (target,) = rule["Targets"]
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [queue_id, "Arn"]}}
        policies[kind] = target["RetryPolicy"]
    assert policies == {
        "schedule": {"MaximumEventAgeInSeconds": 900, "MaximumRetryAttempts": 2},
        "stacks": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 8},
        # A warning comes 2 minutes before EC2 stops the node: late, it says nothing.
        "interruptions": {"MaximumEventAgeInSeconds": 300, "MaximumRetryAttempts": 2},
    }


def test_dead_letter_queue_is_encrypted_and_tls_only(broker: Synth) -> None:
    queue_id = dead_letter_queue(broker)
    queue = broker.doc["Resources"][queue_id]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    (policy,) = broker.resources("AWS::SQS::QueuePolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert {
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Action": "sqs:*",
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        "Resource": {"Fn::GetAtt": [queue_id, "Arn"]},
    } in statements
    # EventBridge may only send dead letters from our two rules.
    senders = [s for s in statements if s["Effect"] == "Allow"]
    assert senders
    for statement in senders:
        assert statement["Principal"] == {"Service": "events.amazonaws.com"}
        assert statement["Action"] == "sqs:SendMessage"
        assert "aws:SourceArn" in statement["Condition"]["ArnEquals"]


def test_failed_async_invocations_of_the_cleaner_are_kept(broker: Synth) -> None:
    (config,) = broker.resources("AWS::Lambda::EventInvokeConfig").values()
    props = config["Properties"]
    cleaner_id, _ = broker.function("cleaner")
    assert props["FunctionName"] == {"Ref": cleaner_id}
    assert props["MaximumRetryAttempts"] == 2
    assert props["MaximumEventAgeInSeconds"] == 3600
    assert props["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [dead_letter_queue(broker), "Arn"]
    }


def test_only_the_cleaner_is_triggered(broker: Synth) -> None:
    cleaner_id, _ = broker.function("cleaner")
    for permission in broker.resources("AWS::Lambda::Permission").values():
        assert permission["Properties"]["FunctionName"] == {"Fn::GetAtt": [cleaner_id, "Arn"]}
        assert permission["Properties"]["Principal"] == "events.amazonaws.com"
        assert flat(permission["Properties"]["SourceArn"]).startswith("<")
