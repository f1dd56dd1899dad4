"""The broker's handlers against the in-process emulator."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

CLUSTER = "demo-cluster"


@dataclass
class LambdaContext:
    """Enough of Lambda's context object for the handlers."""

    function_name: str = "capacity-broker-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = (
        "arn:aws:lambda:us-east-1:123456789012:function:capacity-broker-test"
    )
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    remaining_ms: int = 30_000
    log_group_name: str = "/aws/lambda/test"
    log_stream_name: str = "test"
    extra: dict[str, Any] = field(default_factory=dict)

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def context() -> LambdaContext:
    return LambdaContext()


@pytest.fixture
def broker(emu: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The emulator plus a broker configured for CLUSTER, with no state left from other tests."""
    from capacity_broker.handlers._runtime import reset_container

    monkeypatch.setenv("BROKER_CLUSTER_ID", CLUSTER)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CapacityBroker")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.delenv("BROKER_PARAMETER_PREFIX", raising=False)
    monkeypatch.delenv("BROKER_REGIONS", raising=False)
    reset_container()
    yield emu
    reset_container()


@pytest.fixture
def profile_template() -> Any:
    """``profile_template(ec2, iam, cluster_id)``: an instance profile (its role
    ``compute-node``) and a launch template of that cluster whose instances get it; answers
    (role ARN, template id). The clients say which world (in process, a local broker)."""

    def make(ec2: Any, iam: Any, cluster_id: str) -> tuple[str, str]:
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ec2.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        role = iam.create_role(RoleName="compute-node", AssumeRolePolicyDocument=json.dumps(trust))
        profile = iam.create_instance_profile(InstanceProfileName="compute-node")
        iam.add_role_to_instance_profile(
            InstanceProfileName="compute-node", RoleName="compute-node"
        )
        made = ec2.create_launch_template(
            LaunchTemplateName="with-profile",
            LaunchTemplateData={
                "ImageId": "ami-0de00000000000001",
                "InstanceType": "c7i.48xlarge",
                "IamInstanceProfile": {"Arn": profile["InstanceProfile"]["Arn"]},
            },
            TagSpecifications=[
                {
                    "ResourceType": "launch-template",
                    "Tags": [{"Key": "capacity-broker:cluster-id", "Value": cluster_id}],
                }
            ],
        )
        return role["Role"]["Arn"], made["LaunchTemplate"]["LaunchTemplateId"]

    return make
