"""The one stack: assembles the constructs, one per concern, and publishes the outputs."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from infra.config import TAG_CLUSTER_ID, BrokerConfig
from infra.events import CleanerTriggers
from infra.flags import FeatureFlags
from infra.functions import BrokerFunctions
from infra.observability import Observability
from infra.permissions import BrokerPermissions
from infra.state import StateTable


class CapacityBrokerStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: BrokerConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description=(
                f"Capacity broker for cluster {config.cluster_id}: probe, hold and clean up "
                "EC2 On-Demand Capacity Reservations"
            ),
            **kwargs,
        )
        self.config = config
        # Cost allocation and ownership at a glance; reservations get their own tags at create.
        Tags.of(self).add(TAG_CLUSTER_ID, config.cluster_id)

        self.state = StateTable(self, "State")
        self.flags = FeatureFlags(self, "Flags", config=config)
        self.functions = BrokerFunctions(
            self, "Functions", config=config, state_table=self.state.table
        )
        self.permissions = BrokerPermissions(
            self,
            "Permissions",
            config=config,
            functions=self.functions,
            state_table=self.state.table,
            flags=self.flags,
        )
        self.triggers = CleanerTriggers(
            self, "Events", config=config, cleaner=self.functions["cleaner"].function
        )
        self.observability = Observability(
            self,
            "Observability",
            config=config,
            functions=self.functions,
            dead_letter_queue=self.triggers.dead_letter_queue,
        )

        # The scheduler integration needs the names; the ARNs are for IAM on the caller side.
        for broker_function in self.functions:
            title = broker_function.name.capitalize()
            CfnOutput(
                self,
                f"{title}FunctionName",
                value=broker_function.function.function_name,
                description=f"Name of the {broker_function.name} function",
            )
            CfnOutput(
                self,
                f"{title}FunctionArn",
                value=broker_function.function.function_arn,
                description=f"ARN of the {broker_function.name} function",
            )
        CfnOutput(
            self,
            "FunctionPrefix",
            value=config.function_prefix,
            description="CapacityBroker.deployed(function_prefix=...) / <prefix>-<name>",
        )
        CfnOutput(self, "StateTableName", value=self.state.table.table_name)
        CfnOutput(
            self, "CleanerDeadLetterQueueUrl", value=self.triggers.dead_letter_queue.queue_url
        )
        if self.observability.topic is not None:
            CfnOutput(self, "AlarmTopicArn", value=self.observability.topic.topic_arn)
