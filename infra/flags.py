"""The two feature flags of the contract, as SSM String parameters."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.config import BrokerConfig


class FeatureFlags(Construct):
    """`<prefix>/configuration/FeatureFlags/{EnableCapacityReservation,EnforceStrict...}`."""

    def __init__(self, scope: Construct, construct_id: str, *, config: BrokerConfig) -> None:
        super().__init__(scope, construct_id)
        self.path = config.flags_path
        self.enable_capacity_reservation = ssm.StringParameter(
            self,
            "EnableCapacityReservation",
            parameter_name=f"{self.path}/EnableCapacityReservation",
            string_value=_flag(config.enable_capacity_reservation),
            description=(
                "Capacity broker: create capacity reservations (true) or answer 'skipped' and "
                "leave placement unchanged (false)."
            ),
            tier=ssm.ParameterTier.STANDARD,
        )
        self.enforce_strict_capacity_reservation = ssm.StringParameter(
            self,
            "EnforceStrictCapacityReservation",
            parameter_name=f"{self.path}/EnforceStrictCapacityReservation",
            string_value=_flag(config.enforce_strict_capacity_reservation),
            description=(
                "Capacity broker: keep a job queued (no_capacity) unless its full capacity is "
                "held (true), or proceed unreserved when several placements are possible (false)."
            ),
            tier=ssm.ParameterTier.STANDARD,
        )
        self.parameters = (
            self.enable_capacity_reservation,
            self.enforce_strict_capacity_reservation,
        )
        # The path itself is the resource of ssm:GetParametersByPath.
        self.path_arn = Stack.of(self).format_arn(
            service="ssm", resource="parameter", resource_name=self.path.lstrip("/")
        )


def _flag(value: bool) -> str:
    return "true" if value else "false"
