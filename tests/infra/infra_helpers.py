"""Helpers for the infra tests: one synthesized app and ways to read its template."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Template

from infra.app import build_app, cdk_json_context
from infra.stack import CapacityBrokerStack

FUNCTIONS = ("probe", "reserve", "release", "cleaner", "capacity")

CUSTOM_LAYER_ARN = (
    "arn:aws:lambda:us-east-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python314-arm64:42"
)
CUSTOM_CONTEXT: dict[str, Any] = {
    "clusterId": "soca-prod",
    "functionPrefix": "cb-prod",
    "parameterPrefix": "/hpc/broker",
    "stackNamePrefix": "prod-job-",
    "regions": "us-east-1,eu-west-1",
    "enableCapacityReservation": "false",
    "enforceStrictCapacityReservation": "TRUE",
    "instanceRoleArns": "arn:aws:iam::123456789012:role/compute-node,"
    "arn:aws:iam::123456789012:role/vdi-node",
    "imageParameters": "/golden-ami/*,arn:aws:ssm:us-east-1:210987654321:parameter/shared/ami",
    "alarmEmail": "hpc-ops@example.com",
    "holdLimitSeconds": "2400",
    "powertoolsLayerArn": CUSTOM_LAYER_ARN,
}


@dataclass(frozen=True)
class Synth:
    app: App
    stack: CapacityBrokerStack
    template: Template
    doc: dict[str, Any]

    def resources(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource
            for logical_id, resource in self.doc["Resources"].items()
            if resource["Type"] == cfn_type
        }

    def function(self, name: str) -> tuple[str, dict[str, Any]]:
        """(logical id, resource) of the Lambda function for entry point `name`."""
        handler = f"capacity_broker.handlers.{name}.handler"
        (match,) = [
            (logical_id, resource)
            for logical_id, resource in self.resources("AWS::Lambda::Function").items()
            if resource["Properties"]["Handler"] == handler
        ]
        return match

    def role_of(self, name: str) -> str:
        """Logical id of the execution role of function `name`."""
        _, resource = self.function(name)
        return str(resource["Properties"]["Role"]["Fn::GetAtt"][0])

    def statements_of(self, name: str) -> list[dict[str, Any]]:
        """Every statement of every IAM policy attached to function `name`'s role."""
        role = self.role_of(name)
        return [
            statement
            for policy in self.resources("AWS::IAM::Policy").values()
            if {"Ref": role} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]

    def allowed(self, name: str, action: str) -> list[dict[str, Any]]:
        """The Allow statements of function `name` that name `action`."""
        return [
            statement
            for statement in self.statements_of(name)
            if statement["Effect"] == "Allow" and action in as_list(statement["Action"])
        ]

    def every_statement(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(logical id, statement) for every policy document in the template."""
        documents = {
            "AWS::IAM::Policy": ("PolicyDocument",),
            "AWS::IAM::ManagedPolicy": ("PolicyDocument",),
            "AWS::IAM::Role": ("AssumeRolePolicyDocument",),
            "AWS::KMS::Key": ("KeyPolicy",),
            "AWS::SQS::QueuePolicy": ("PolicyDocument",),
            "AWS::SNS::TopicPolicy": ("PolicyDocument",),
            "AWS::Lambda::Permission": (),
        }
        for logical_id, resource in self.doc["Resources"].items():
            for key in documents.get(resource["Type"], ()):
                document = resource["Properties"].get(key)
                if document:
                    for statement in document["Statement"]:
                        yield logical_id, statement
            if resource["Type"] == "AWS::IAM::Role":
                for policy in resource["Properties"].get("Policies", []):
                    for statement in policy["PolicyDocument"]["Statement"]:
                        yield logical_id, statement


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def flat(value: Any) -> str:
    """A CloudFormation value as one string: Fn::Join flattened, Ref as <Name>."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if "Fn::Join" in value:
            delimiter, parts = value["Fn::Join"]
            return str(delimiter).join(flat(part) for part in parts)
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return "<{}.{}>".format(*value["Fn::GetAtt"])
    return repr(value)


def synthesize(overrides: Mapping[str, Any], *, outdir: Path) -> Synth:
    """Build the app like `cdk synth` does (cdk.json context + overrides), synthesize once."""
    context = {**cdk_json_context(), **overrides}
    # cdk-nag runs in its own test, on this same tree; here it would only cost time.
    app, stack = build_app(context, outdir=str(outdir), nag=False)
    template = Template.from_stack(stack)
    return Synth(app=app, stack=stack, template=template, doc=dict(template.to_json()))
