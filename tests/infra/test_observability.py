"""Alarms, the optional alarm topic, and the dashboard."""

from __future__ import annotations

from typing import Any

import pytest
from infra_helpers import FUNCTIONS, Synth, as_list, flat

pytestmark = pytest.mark.infra


def alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        resource["Properties"]["AlarmName"]: resource["Properties"]
        for resource in synth.resources("AWS::CloudWatch::Alarm").values()
    }


def test_alarm_set(broker: Synth) -> None:
    expected = {
        "capacity-broker-demo-cleaner-sweep-errors",
        "capacity-broker-demo-reservation-held-too-long",
        "capacity-broker-demo-cleaner-not-running",
        "capacity-broker-demo-cleaner-dead-letters",
    } | {
        f"capacity-broker-demo-{name}-{kind}"
        for name in FUNCTIONS
        for kind in ("errors", "throttles")
    }
    assert set(alarms(broker)) == expected
    for alarm in alarms(broker).values():
        assert alarm["AlarmDescription"]


def test_cleaner_errors_metric(broker: Synth) -> None:
    alarm = alarms(broker)["capacity-broker-demo-cleaner-sweep-errors"]
    assert alarm["Namespace"] == "CapacityBroker"
    assert alarm["MetricName"] == "CleanerErrors"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "cleaner"}]
    assert alarm["Statistic"] == "Sum"
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == 0
    assert alarm["TreatMissingData"] == "notBreaching"


def test_reservation_alive_past_the_hold_limit(broker: Synth, custom: Synth) -> None:
    alarm = alarms(broker)["capacity-broker-demo-reservation-held-too-long"]
    assert alarm["Namespace"] == "CapacityBroker"
    assert alarm["MetricName"] == "OldestOwnedReservationAgeSeconds"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "cleaner"}]
    assert alarm["Statistic"] == "Maximum"
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Threshold"] == 1800
    # The threshold follows holdLimitSeconds.
    assert alarms(custom)["cb-prod-reservation-held-too-long"]["Threshold"] == 2400


@pytest.mark.parametrize("name", FUNCTIONS)
def test_errors_and_throttles_of_every_function(broker: Synth, name: str) -> None:
    logical_id, _ = broker.function(name)
    for kind, metric in (("errors", "Errors"), ("throttles", "Throttles")):
        alarm = alarms(broker)[f"capacity-broker-demo-{name}-{kind}"]
        assert alarm["Namespace"] == "AWS/Lambda"
        assert alarm["MetricName"] == metric
        assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": logical_id}}]
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert alarm["Threshold"] == 0


def test_cleaner_silence_and_dead_letters(broker: Synth) -> None:
    silent = alarms(broker)["capacity-broker-demo-cleaner-not-running"]
    assert silent["MetricName"] == "Invocations"
    assert silent["ComparisonOperator"] == "LessThanThreshold"
    assert silent["TreatMissingData"] == "breaching"
    dead = alarms(broker)["capacity-broker-demo-cleaner-dead-letters"]
    assert dead["Namespace"] == "AWS/SQS"
    assert dead["MetricName"] == "ApproximateNumberOfMessagesVisible"


def test_no_topic_unless_an_email_is_given(broker: Synth) -> None:
    assert broker.resources("AWS::SNS::Topic") == {}
    for alarm in alarms(broker).values():
        assert "AlarmActions" not in alarm


def test_alarm_topic_is_encrypted_tls_only_and_used_by_every_alarm(custom: Synth) -> None:
    ((topic_id, topic),) = custom.resources("AWS::SNS::Topic").items()
    ((key_id, key),) = custom.resources("AWS::KMS::Key").items()
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    key_statements = key["Properties"]["KeyPolicy"]["Statement"]
    assert {
        "Sid": "CloudWatchAlarmsEncryptNotifications",
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": "*",
    } in key_statements

    (policy,) = custom.resources("AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    deny = [s for s in statements if s["Effect"] == "Deny"]
    assert deny
    assert deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    publish = [s for s in statements if s["Effect"] == "Allow"]
    assert [s["Principal"] for s in publish] == [{"Service": "cloudwatch.amazonaws.com"}]

    (subscription,) = custom.resources("AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "hpc-ops@example.com"

    for name, alarm in alarms(custom).items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}], name
        assert alarm["OKActions"] == [{"Ref": topic_id}], name


def test_dashboard_shows_outcomes_cancels_and_reservation_hours(broker: Synth) -> None:
    (dashboard,) = broker.resources("AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"] == "capacity-broker-demo"
    body = flat(dashboard["Properties"]["DashboardBody"])
    for metric in (
        "ProbeAvailable",
        "ProbeUnavailable",
        "ProbeSkipped",
        "ProbeError",
        "HoldsReserved",
        "HoldsNoCapacity",
        "HoldsReleased",
        "CancelledLeakedProbe",
        "CancelledConsumed",
        "CancelledOrphaned",
        "CancelledIdle",
        "CancelledStale",
        "CancelledPastEndDate",
        "ReservationSecondsHeld",
        "ReservationHoursSaved",
        "OldestOwnedReservationAgeSeconds",
        "ProbeGrouped",
        "ProbeGroupsFormed",
    ):
        assert f'"{metric}"' in body, metric
    assert "(probe + reserve) / 3600" in body
    assert '"CapacityBroker"' in body


def test_alarms_go_to_an_existing_topic_without_a_new_one(existing_topic: Synth) -> None:
    """-c alarmTopicArn=arn:aws:sns:...: every alarm (and its OK) notifies that topic; the
    stack makes no topic, key, policy or subscription of its own."""
    arn = "arn:aws:sns:us-east-1:123456789012:hpc-ops-alarms"
    for kind in ("AWS::SNS::Topic", "AWS::SNS::TopicPolicy", "AWS::SNS::Subscription"):
        assert existing_topic.resources(kind) == {}, kind
    assert existing_topic.resources("AWS::KMS::Key") == {}
    found = alarms(existing_topic)
    assert found
    for name, alarm in found.items():
        assert alarm["AlarmActions"] == [arn], name
        assert alarm["OKActions"] == [arn], name
    assert existing_topic.doc["Outputs"]["AlarmTopicArn"]["Value"] == arn


def test_stack_outputs_the_alarm_topic_when_present(custom: Synth) -> None:
    assert "AlarmTopicArn" in custom.doc["Outputs"]
    assert as_list(custom.doc["Outputs"]["AlarmTopicArn"]["Value"])


def test_dashboard_shows_reservation_seconds_per_type_and_their_estimated_cost(
    broker: Synth,
) -> None:
    (dashboard,) = broker.resources("AWS::CloudWatch::Dashboard").values()
    body = flat(dashboard["Properties"]["DashboardBody"])
    # Every instance type the handlers measured, without listing them at deploy time.
    assert (
        "SEARCH('{CapacityBroker,InstanceType,service} MetricName=\\\"ReservationSeconds\\\"'"
        in body
    )
    # cdk.json's prices: instance-seconds of probe and reserve, per hour, times the rate.
    assert "(FILL(probe0, 0) + FILL(reserve0, 0)) / 3600 * 0.8048" in body
    assert "(FILL(probe1, 0) + FILL(reserve1, 0)) / 3600 * 55.04" in body
    assert '"InstanceSeconds"' in body and '"p5.48xlarge"' in body
    assert "cost0 + cost1" in body
