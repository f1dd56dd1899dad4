"""Published versions behind one alias, for the cold-start options (docs/deploy.md).

SnapStart snapshots a function when a version is published and restores new execution
environments of that version from it; provisioned concurrency keeps environments of a version
initialized. Neither applies to $LATEST, so with either option each function gets a version
of its current code and configuration and the alias ``live`` pointing at it, and every invoker
(the cleaner's schedule and stack events, the stack's outputs that the Python client and the
Slurm programs are configured from) calls the alias. Without either option nothing is
published and the invokers call the functions as before.
"""

from __future__ import annotations

from aws_cdk import Annotations
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import BrokerConfig
from infra.functions import BrokerFunctions


class LiveAliases(Construct):
    """One version and one ``live`` alias per function (only when an option needs them)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: BrokerConfig,
        functions: BrokerFunctions,
    ) -> None:
        super().__init__(scope, construct_id)
        self.by_name: dict[str, lambda_.Alias] = {}
        alias_name = config.live_alias
        if alias_name is None:
            return
        for broker_function in functions:
            name = broker_function.name
            # current_version: a new version whenever the code or configuration changes (its
            # logical id hashes them), so a deploy publishes (and SnapStart snapshots) once.
            version = broker_function.function.current_version
            if config.snap_start:
                # CDK warns that SnapStart needs a published version: this is the one.
                Annotations.of(broker_function.function).acknowledge_warning(
                    "@aws-cdk/aws-lambda:snapStartRequirePublish",
                    "published here (current_version) and invoked through the alias",
                )
            provisioned = config.probe_provisioned_concurrency if name == "probe" else 0
            self.by_name[name] = lambda_.Alias(
                self,
                f"{name.capitalize()}Alias",
                alias_name=alias_name,
                version=version,
                description=f"What invokers of the {name} function call ({config.cluster_id})",
                provisioned_concurrent_executions=provisioned or None,
            )

    def target(self, name: str, function: lambda_.IFunction) -> lambda_.IFunction:
        """What an invoker of ``name`` should call: its alias when there is one."""
        return self.by_name.get(name, function)
