"""What wakes the cleaner: a 5-minute schedule and the cluster's job-stack status changes."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import BrokerConfig
from infra.nag import acknowledge

SWEEP_INTERVAL = Duration.minutes(5)

# Statuses that need no action (contract: "nothing for *_IN_PROGRESS" while a stack is
# still being created or updated); filtering them here keeps the single cleaner slot free.
# DELETE_IN_PROGRESS and ROLLBACK_IN_PROGRESS stay: they already mean "orphaned".
IGNORED_STACK_STATUSES = (
    "CREATE_IN_PROGRESS",
    "UPDATE_IN_PROGRESS",
    "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
    "REVIEW_IN_PROGRESS",
    "IMPORT_IN_PROGRESS",
)


def stack_status_pattern(stack_name_prefix: str) -> events.EventPattern:
    """CloudFormation's `Stack Status Change` events for the cluster's job stacks.

    The event carries the stack ARN in `detail.stack-id`
    (`arn:aws:cloudformation:<region>:<account>:stack/<name>/<uuid>`) and the status in
    `detail.status-details.status`.
    """
    return events.EventPattern(
        source=["aws.cloudformation"],
        detail_type=["CloudFormation Stack Status Change"],
        detail={
            "stack-id": [{"wildcard": f"arn:*:cloudformation:*:*:stack/{stack_name_prefix}*"}],
            "status-details": {"status": [{"anything-but": list(IGNORED_STACK_STATUSES)}]},
        },
    )


def interruption_detail_types() -> list[dict[str, str]]:
    """EC2's interruption warnings, by the prefixes the cleaner matches them with (one home:
    ``capacity_broker.domain.pool.INTERRUPTION_PREFIXES``), as EventBridge prefix matches."""
    from capacity_broker.domain.pool import INTERRUPTION_PREFIXES

    return [{"prefix": prefix} for prefix in INTERRUPTION_PREFIXES]


class CleanerTriggers(Construct):
    """Schedule + stack events -> cleaner, with retries and one dead-letter queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: BrokerConfig,
        cleaner: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            queue_name=f"{config.function_prefix}-cleaner-dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of the cleaner's EventBridge targets and "
            "of its asynchronous invocations; a DLQ for a DLQ would only move the same messages "
            "again. Its depth is alarmed (observability).",
        )

        # A sweep that waited longer than this is superseded by a newer one.
        self.schedule = events.Rule(
            self,
            "SweepSchedule",
            description=f"Capacity broker {config.cluster_id}: cleaner sweep every 5 minutes",
            schedule=events.Schedule.rate(SWEEP_INTERVAL),
        )
        self.schedule.add_target(
            targets.LambdaFunction(
                cleaner,
                dead_letter_queue=self.dead_letter_queue,
                max_event_age=Duration.minutes(15),
                retry_attempts=2,
            )
        )

        # A missed stack event only delays a cancel until the next sweep, but the sooner the
        # cheaper: keep retrying for an hour.
        self.stack_events = events.Rule(
            self,
            "JobStackStatusChange",
            description=(
                f"Capacity broker {config.cluster_id}: job stacks "
                f"{config.stack_name_prefix}* changed status"
            ),
            event_pattern=stack_status_pattern(config.stack_name_prefix),
        )
        self.stack_events.add_target(
            targets.LambdaFunction(
                cleaner,
                dead_letter_queue=self.dead_letter_queue,
                max_event_age=Duration.hours(1),
                retry_attempts=8,
            )
        )

        # Interruption warnings of the nodes (issue 43): matched by prefix, so a new wording of
        # the same warning still arrives; the cleaner says which job and rung a node served.
        self.interruptions = events.Rule(
            self,
            "NodeInterruptionWarning",
            description=f"Capacity broker {config.cluster_id}: EC2 interruption warnings",
            event_pattern=events.EventPattern(source=["aws.ec2"]),
        )
        # CDK's EventPattern types detail-type as exact names; a prefix match is set on the
        # rule's template (EventBridge content filtering, "Prefix matching").
        rule = self.interruptions.node.default_child
        assert isinstance(rule, events.CfnRule)
        rule.add_property_override("EventPattern.detail-type", interruption_detail_types())
        self.interruptions.add_target(
            targets.LambdaFunction(
                cleaner,
                dead_letter_queue=self.dead_letter_queue,
                # A warning comes 2 minutes before EC2 stops the node: late, it says nothing.
                max_event_age=Duration.minutes(5),
                retry_attempts=2,
            )
        )

        # EventBridge invokes asynchronously: Lambda queues the event and retries it when the
        # single cleaner slot is busy (reserved concurrency 1) or the sweep fails.
        cleaner.configure_async_invoke(
            max_event_age=Duration.hours(1),
            retry_attempts=2,
            on_failure=destinations.SqsDestination(self.dead_letter_queue),
        )
