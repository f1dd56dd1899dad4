"""cdk-nag 3 helpers: acknowledgments with reasons, named exactly as cdk-nag names findings."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one finding on `scope` (and everything below it)."""
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def wildcard_finding(scope: IConstruct, resource: str) -> str:
    """The id cdk-nag gives an IAM5 finding for `resource`, e.g. `AwsSolutions-IAM5[Resource::*]`.

    cdk-nag 3 only accepts per-finding acknowledgments, and names a tokenized ARN by
    flattening its CloudFormation form (`<AWS::Region>`, `<Logical.Arn>`); resolving the same
    way here keeps each acknowledgment tied to the statement that needs it.
    """
    return (
        f"AwsSolutions-IAM5[Resource::{flatten_cfn_reference(Stack.of(scope).resolve(resource))}]"
    )


def flatten_cfn_reference(node: Any) -> str:
    """Python port of cdk-nag's `flattenCfnReference` (utils/flatten-cfn-reference.ts)."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(flatten_cfn_reference(item) for item in items)
        if "Fn::Sub" in node:
            return flatten_cfn_reference(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{flatten_cfn_reference(resource)}.{flatten_cfn_reference(attribute)}>"
        if "Fn::ImportValue" in node:
            return flatten_cfn_reference(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{flatten_cfn_reference(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))
