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
from infra.versions import LiveAliases


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
        # Versions and the alias the invokers call, when a cold-start option needs them.
        self.aliases = LiveAliases(self, "Versions", config=config, functions=self.functions)
        self.triggers = CleanerTriggers(
            self,
            "Events",
            config=config,
            cleaner=self.aliases.target("cleaner", self.functions["cleaner"].function),
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
            invoked = self.aliases.target(broker_function.name, broker_function.function)
            CfnOutput(
                self,
                f"{title}FunctionName",
                value=broker_function.function.function_name,
                description=f"Name of the {broker_function.name} function",
            )
            CfnOutput(
                self,
                f"{title}FunctionArn",
                # The alias's ARN when there is one: what a caller's IAM and invoke should name.
                value=invoked.function_arn,
                description=f"ARN of the {broker_function.name} function (what to invoke)",
            )
        CfnOutput(
            self,
            "FunctionPrefix",
            value=config.function_prefix,
            description="CapacityBroker.deployed(function_prefix=...) / <prefix>-<name>",
        )
        if config.live_alias is not None:
            CfnOutput(
                self,
                "FunctionQualifier",
                value=config.live_alias,
                description="Invoke the alias: CapacityBroker.deployed(..., qualifier=...), "
                "slurm function_qualifier, CAPACITY_BROKER_FUNCTION_QUALIFIER",
            )
        CfnOutput(self, "StateTableName", value=self.state.table.table_name)
        CfnOutput(
            self, "CleanerDeadLetterQueueUrl", value=self.triggers.dead_letter_queue.queue_url
        )
        if self.observability.topic is not None:
            CfnOutput(self, "AlarmTopicArn", value=self.observability.topic.topic_arn)
