"""Alarms, where they notify (a new encrypted SNS topic for an e-mail address, or the
operator's existing topic, or none), and the operator's dashboard."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import METRICS_NAMESPACE, BrokerConfig
from infra.functions import BrokerFunctions

PERIOD = Duration.minutes(5)

# Full action names, no wildcards: enough to administer, rotate, re-policy and delete the key.
KEY_ADMIN_ACTIONS = (
    "kms:CancelKeyDeletion",
    "kms:CreateAlias",
    "kms:CreateGrant",
    "kms:DeleteAlias",
    "kms:DescribeKey",
    "kms:DisableKey",
    "kms:DisableKeyRotation",
    "kms:EnableKey",
    "kms:EnableKeyRotation",
    "kms:GetKeyPolicy",
    "kms:GetKeyRotationStatus",
    "kms:ListAliases",
    "kms:ListGrants",
    "kms:ListKeyPolicies",
    "kms:ListResourceTags",
    "kms:PutKeyPolicy",
    "kms:RetireGrant",
    "kms:RevokeGrant",
    "kms:RotateKeyOnDemand",
    "kms:ScheduleKeyDeletion",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:UpdateAlias",
    "kms:UpdateKeyDescription",
)

PROBE_OUTCOMES = (
    "ProbeAvailable",
    "ProbeUnavailable",
    "ProbeSkipped",
    "ProbeError",
    "ProbeInvalid",
)
HOLD_OUTCOMES = (
    "HoldsReserved",
    "HoldsProvisioned",
    "HoldsUnreserved",
    "HoldsNoCapacity",
    "HoldsRejected",
    "HoldsError",
)
CANCEL_REASONS = (
    "CancelledPastEndDate",
    "CancelledLeakedProbe",
    "CancelledConsumed",
    "CancelledOrphaned",
    "CancelledIdle",
    "CancelledStale",
)


def broker_metric(
    service: str,
    name: str,
    *,
    statistic: str = cloudwatch.Stats.SUM,
    period: Duration = PERIOD,
    label: str | None = None,
) -> cloudwatch.Metric:
    """A Powertools metric: namespace CapacityBroker, dimension `service` = function name."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=period,
        label=label,
    )


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: BrokerConfig,
        functions: BrokerFunctions,
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.topic = self._alarm_topic(config)
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        # Custom metrics: the cleaner's own view of what it could not do or saw too old.
        self._alarm(
            "cleaner-sweep-errors",
            broker_metric("cleaner", "CleanerErrors"),
            threshold=0,
            description=(
                "The cleaner could not finish part of a sweep (a cancel failed after retries, "
                "or a region/API call failed). Owned reservations may stay billed until EndDate."
            ),
        )
        self._alarm(
            "reservation-held-too-long",
            broker_metric(
                "cleaner", "OldestOwnedReservationAgeSeconds", statistic=cloudwatch.Stats.MAXIMUM
            ),
            threshold=config.hold_limit_seconds,
            description=(
                "An owned reservation has been alive longer than the hold limit "
                f"({config.hold_limit_seconds} s): the cleaner is not cancelling it (failing, "
                "throttled, missing permissions, or a region missing from BROKER_REGIONS). "
                "It is billed until cancelled."
            ),
        )

        # Lambda's own metrics, per function.
        for broker_function in functions:
            name = broker_function.name
            function = broker_function.function
            self._alarm(
                f"{name}-errors",
                function.metric_errors(period=PERIOD, statistic=cloudwatch.Stats.SUM),
                threshold=0,
                description=(
                    f"The {name} function raised (unhandled error or timeout): its callers got "
                    "no answer. See its log group."
                ),
            )
            # The cleaner runs one at a time by design: a stack event during a sweep is
            # throttled and retried by Lambda. Only a backlog that lasts is a problem.
            sustained = 3 if name == "cleaner" else 1
            self._alarm(
                f"{name}-throttles",
                function.metric_throttles(period=PERIOD, statistic=cloudwatch.Stats.SUM),
                threshold=0,
                periods=sustained,
                description=(
                    f"Invocations of the {name} function were throttled"
                    + (
                        " in 3 consecutive 5-minute periods: sweeps overrun their slot or the "
                        "account's concurrency is exhausted; events wait in Lambda's queue."
                        if name == "cleaner"
                        else ": the account's concurrency is exhausted; synchronous callers "
                        "got a TooManyRequestsException."
                    )
                ),
            )

        # The cleaner is the backstop for every leak: notice when it stops running.
        self._alarm(
            "cleaner-not-running",
            functions["cleaner"].function.metric_invocations(
                period=Duration.minutes(15), statistic=cloudwatch.Stats.SUM
            ),
            threshold=1,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,
            description=(
                "The cleaner has not run for 15 minutes although it is scheduled every 5: the "
                "schedule rule is disabled or the function cannot be invoked. Leaked "
                "reservations are not being cancelled."
            ),
        )
        self._alarm(
            "cleaner-dead-letters",
            dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=PERIOD, statistic=cloudwatch.Stats.MAXIMUM
            ),
            threshold=0,
            description=(
                "A schedule or stack-status event never reached the cleaner, or its invocation "
                "failed after retries; the message is in the dead-letter queue. Inspect it, "
                "then purge."
            ),
        )

        self.dashboard = self._dashboard(functions)

    # -- alarms ---------------------------------------------------------------------------

    def _alarm(
        self,
        suffix: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        ),
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
        periods: int = 1,
    ) -> cloudwatch.Alarm:
        construct_id = "".join(part.capitalize() for part in suffix.split("-")) + "Alarm"
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=f"{self._config.function_prefix}-{suffix}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            treat_missing_data=missing,
        )
        if self.topic is not None:
            action = cw_actions.SnsAction(self.topic)
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        self.alarms[suffix] = alarm
        return alarm

    def _alarm_topic(self, config: BrokerConfig) -> sns.ITopic | None:
        """The operator's topic (alarmTopicArn), else, when an e-mail is configured, a new
        encrypted, TLS-only topic; else none. The stack changes nothing on an existing topic:
        its policy (and its key's, when encrypted) must let CloudWatch publish
        (docs/deploy.md)."""
        if config.alarm_topic_arn is not None:
            return sns.Topic.from_topic_arn(self, "ExistingAlarmTopic", config.alarm_topic_arn)
        if config.alarm_email is None:
            return None
        # CloudWatch cannot publish to a topic encrypted with the AWS managed aws/sns key, so
        # the topic gets its own key. Explicit policy (it replaces CDK's default "kms:*" for
        # the account): key administration for the account, data-key use for CloudWatch.
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description=f"Capacity broker {config.cluster_id}: alarm notifications",
            enable_key_rotation=True,
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.DESTROY,
            policy=iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        sid="AccountAdministersKey",
                        principals=[iam.AccountRootPrincipal()],
                        actions=list(KEY_ADMIN_ACTIONS),
                        resources=["*"],
                    ),
                    iam.PolicyStatement(
                        sid="CloudWatchAlarmsEncryptNotifications",
                        principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                        actions=["kms:Decrypt", "kms:GenerateDataKey"],
                        resources=["*"],
                    ),
                ]
            ),
        )
        topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"Capacity broker {config.cluster_id} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        # The TLS-only topic policy replaces SNS's default one: say who may publish.
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {
                        "aws:SourceArn": (
                            f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:"
                            f"{config.function_prefix}-*"
                        )
                    },
                },
            )
        )
        topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        return topic

    # -- dashboard ------------------------------------------------------------------------

    def _dashboard(self, functions: BrokerFunctions) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=self._config.function_prefix,
            default_interval=Duration.hours(24),
        )
        hour = Duration.hours(1)
        reservation_hours = cloudwatch.MathExpression(
            expression="(probe + reserve) / 3600",
            using_metrics={
                "probe": broker_metric("probe", "ReservationSecondsHeld", period=hour),
                "reserve": broker_metric("reserve", "ReservationSecondsHeld", period=hour),
            },
            label="Reservation-hours held (probe + reserve)",
            period=hour,
        )
        hours_saved = broker_metric(
            "cleaner", "ReservationHoursSaved", period=hour, label="Reservation-hours saved"
        )
        dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    f"# Capacity broker `{self._config.cluster_id}`\n"
                    "Probes (VDI), holds (HPC), what the cleaner cancelled and why, and the "
                    "reservation-hours we paid for. Alarms: see docs/deploy.md."
                ),
                width=24,
                height=2,
            ),
            _graph("Probes by outcome", "probe", ("ProbeRequests", *PROBE_OUTCOMES)),
            _graph("Holds by outcome", "reserve", ("HoldRequests", *HOLD_OUTCOMES)),
        )
        dashboard.add_widgets(
            # Grouped probes (contract v3): answers groups gave and groups formed; their
            # ratio is the mean group size.
            _graph("Grouped probes", "probe", ("ProbeGrouped", "ProbeGroupsFormed")),
        )
        dashboard.add_widgets(
            _graph(
                "Cleaner cancels by reason",
                "cleaner",
                CANCEL_REASONS,
                stacked=True,
            ),
            cloudwatch.GraphWidget(
                title="Released holds and failed cancels",
                left=[
                    broker_metric("release", "HoldsReleased", label="released"),
                    broker_metric("probe", "CancelFailures", label="cancel failures (probe)"),
                    broker_metric("reserve", "CancelFailures", label="cancel failures (reserve)"),
                    broker_metric("release", "CancelFailures", label="cancel failures (release)"),
                    broker_metric("cleaner", "CleanerErrors", label="cleaner errors"),
                ],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Reservation-hours",
                left=[reservation_hours, hours_saved],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Oldest owned reservation (s) and sweep volume",
                left=[
                    broker_metric(
                        "cleaner",
                        "OldestOwnedReservationAgeSeconds",
                        statistic=cloudwatch.Stats.MAXIMUM,
                        label="oldest owned reservation age",
                    )
                ],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=self._config.hold_limit_seconds, label="hold limit"
                    )
                ],
                right=[
                    broker_metric("cleaner", "ReservationsExamined", label="examined"),
                    broker_metric("cleaner", "ReservationsCancelled", label="cancelled"),
                ],
                width=12,
            ),
        )
        dashboard.add_widgets(*self._spending_widgets(hour))
        everyone = list(functions)
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lambda errors and throttles",
                left=[
                    f.function.metric_errors(label=f"{f.name} errors", period=PERIOD)
                    for f in everyone
                ],
                right=[
                    f.function.metric_throttles(label=f"{f.name} throttles", period=PERIOD)
                    for f in everyone
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Lambda duration p99 (ms)",
                left=[
                    f.function.metric_duration(
                        label=f.name, period=PERIOD, statistic=cloudwatch.Stats.p(99)
                    )
                    for f in everyone
                ],
                width=12,
            ),
            cloudwatch.AlarmStatusWidget(
                title="Alarms",
                alarms=list(self.alarms.values()),
                width=24,
            ),
        )
        return dashboard

    def _spending_widgets(self, hour: Duration) -> list[cloudwatch.IWidget]:
        """What probe's and reserve's reservations cost, per instance type (the handlers'
        ``ReservationSeconds`` and ``InstanceSeconds``, dimensions service and InstanceType;
        see handlers/_spending.py). The cost is estimated from the context's
        ``onDemandPrices``: reservations bill per second at the On-Demand rate."""
        seconds = cloudwatch.MathExpression(
            expression=(
                f"SEARCH('{{{METRICS_NAMESPACE},InstanceType,service}} "
                "MetricName=\"ReservationSeconds\"', 'Sum', 3600)"
            ),
            using_metrics={},
            label="",
            period=hour,
        )
        costs: dict[str, cloudwatch.IMetric] = {}
        for index, (instance_type, price) in enumerate(self._config.on_demand_prices):
            spent = {
                f"{service}{index}": cloudwatch.Metric(
                    namespace=METRICS_NAMESPACE,
                    metric_name="InstanceSeconds",
                    dimensions_map={"service": service, "InstanceType": instance_type},
                    statistic=cloudwatch.Stats.SUM,
                    period=hour,
                )
                for service in ("probe", "reserve")
            }
            costs[f"cost{index}"] = cloudwatch.MathExpression(
                expression="("
                + " + ".join(f"FILL({name}, 0)" for name in spent)
                + f") / 3600 * {price:g}",
                using_metrics=spent,
                label=f"{instance_type} (${price:g}/h)",
                period=hour,
            )
        if costs:
            costs["total"] = cloudwatch.MathExpression(
                expression=" + ".join(costs),
                using_metrics=dict(costs),
                label="total",
                period=hour,
            )
        priced = ", ".join(t for t, _ in self._config.on_demand_prices) or "no type"
        return [
            cloudwatch.GraphWidget(
                title="Reservation-seconds of probes and holds given back, by instance type",
                left=[seconds],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title=f"Estimated cost of those reservations, USD per hour ({priced})",
                left=list(costs.values()),
                left_y_axis=cloudwatch.YAxisProps(label="USD", show_units=False),
                width=12,
            ),
        ]


def _graph(
    title: str, service: str, names: Sequence[str], *, stacked: bool = False
) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(
        title=title,
        left=[broker_metric(service, name, label=name) for name in names],
        stacked=stacked,
        width=12,
    )
