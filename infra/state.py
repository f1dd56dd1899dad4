"""The DynamoDB table for request records (Powertools Idempotency's default schema)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct


class StateTable(Construct):
    """Idempotency records: partition key `id` (String), TTL attribute `expiration`."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
            time_to_live_attribute="expiration",
            # Traffic follows job submissions: bursty and mostly idle.
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # KMS key managed by AWS: auditable in CloudTrail, no key policy to maintain.
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            # Records only matter while a hold can live (minutes); they are worthless once the
            # broker is gone, and the generated table name never blocks a re-deploy.
            removal_policy=RemovalPolicy.DESTROY,
        )
