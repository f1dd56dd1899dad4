"""The functions' IAM policies as the emulator evaluates them offline (``emulator/iam``).

The emulator cannot run the CDK (it is not installed with it), so the policies are
synthesized here, from this app, and kept in ``emulator/iam/roles.json``: each function's
role, its policy documents, with what differs per deployment left as placeholders the
emulator fills in for the broker it serves (``emulator.iam.catalogue``):

- ``${Partition}``, ``${Account}``, ``${Region}`` (the deploy region: ``AWS::Region``);
- ``${BrokerRegion}``: each region of the broker (``-c regions``), one list entry per region,
  as the CDK writes them;
- ``${ClusterId}``, ``${StackNamePrefix}``;
- ``${StateTableArn}``, ``${LogGroupArn}`` (the function's own), ``${DeadLetterQueueArn}``.

The app is synthesized with a cluster id and two regions no other value contains, which
become the placeholders. ``make iam-roles`` writes the file; ``tests/infra/test_emulated_roles``
fails when it differs from a fresh synth, so the roles the emulator evaluates are always the
ones ``make deploy`` would create.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from infra.app import REPO_ROOT, build_app, cdk_json_context
from infra.config import FUNCTION_NAMES

ROLES_FILE = REPO_ROOT / "emulator" / "iam" / "roles.json"
# Values no other part of the template contains; they become placeholders.
CLUSTER_ID = "cbsentinelcluster"
REGIONS = ("ap-southeast-4", "il-central-1")
CONTEXT = {"clusterId": CLUSTER_ID, "regions": ",".join(REGIONS)}
# What a Fn::GetAtt [<resource>, Arn] names, by the resource's type.
ARNS_BY_TYPE = {
    "AWS::DynamoDB::Table": "${StateTableArn}",
    "AWS::Logs::LogGroup": "${LogGroupArn}",
    "AWS::SQS::Queue": "${DeadLetterQueueArn}",
}
PSEUDO = {
    "AWS::Partition": "${Partition}",
    "AWS::AccountId": "${Account}",
    "AWS::Region": "${Region}",
}


class NotExportable(ValueError):
    """The template holds something the placeholders cannot say."""


def synthesized_template() -> dict[str, Any]:
    from aws_cdk.assertions import Template

    with tempfile.TemporaryDirectory(prefix="cb-roles-") as outdir:
        _, stack = build_app({**cdk_json_context(), **CONTEXT}, outdir=outdir, nag=False)
        return dict(Template.from_stack(stack).to_json())


def roles(template: Mapping[str, Any]) -> dict[str, Any]:
    """Each function's role: its trust policy and its policy documents, placeholders in."""
    resources: Mapping[str, Any] = template["Resources"]
    out: dict[str, Any] = {}
    for name in FUNCTION_NAMES:
        handler = f"capacity_broker.handlers.{name}.handler"
        (function,) = [
            r
            for r in resources.values()
            if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == handler
        ]
        role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
        policies = {
            str(_value(p["Properties"]["PolicyName"], resources)): _document(
                p["Properties"]["PolicyDocument"], resources
            )
            for p in resources.values()
            if p["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in p["Properties"]["Roles"]
        }
        trust = _document(resources[role_id]["Properties"]["AssumeRolePolicyDocument"], resources)
        out[name] = {"trust": trust, "policies": dict(sorted(policies.items()))}
    return out


def catalogue(template: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "about": (
            "The functions' IAM roles synthesized from infra/ (infra/emulated_roles.py), with "
            "placeholders the emulator fills in (emulator/iam/catalogue.py). Written by "
            "`make iam-roles`; tests/infra/test_emulated_roles.py fails when it is stale."
        ),
        "roles": roles(template),
    }


def render(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def _document(document: Mapping[str, Any], resources: Mapping[str, Any]) -> dict[str, Any]:
    resolved = _value(document, resources)
    assert isinstance(resolved, dict)
    return _regions(resolved)


def _value(value: Any, resources: Mapping[str, Any]) -> Any:
    """CloudFormation's intrinsics as strings with placeholders; the sentinel cluster id as
    ``${ClusterId}`` (its job-stack prefix as ``${StackNamePrefix}``)."""
    if isinstance(value, str):
        prefix = f"{CLUSTER_ID}-job-"
        return value.replace(prefix, "${StackNamePrefix}").replace(CLUSTER_ID, "${ClusterId}")
    if isinstance(value, list):
        return [_value(v, resources) for v in value]
    if isinstance(value, Mapping):
        if set(value) == {"Ref"}:
            if value["Ref"] not in PSEUDO:
                raise NotExportable(f"a Ref to {value['Ref']!r} in a policy")
            return PSEUDO[value["Ref"]]
        if set(value) == {"Fn::Join"}:
            delimiter, parts = value["Fn::Join"]
            return str(delimiter).join(str(_value(p, resources)) for p in parts)
        if set(value) == {"Fn::GetAtt"}:
            logical_id, attribute = value["Fn::GetAtt"]
            kind = resources[logical_id]["Type"]
            if attribute != "Arn" or kind not in ARNS_BY_TYPE:
                raise NotExportable(f"Fn::GetAtt {logical_id}.{attribute} ({kind}) in a policy")
            return ARNS_BY_TYPE[kind]
        if any(key.startswith("Fn::") for key in value):
            raise NotExportable(f"intrinsic {sorted(value)} in a policy")
        return {key: _value(v, resources) for key, v in value.items()}
    return value


def _regions(value: Any) -> Any:
    """The two regions' entries of a list as one ``${BrokerRegion}`` entry (the CDK writes
    one entry per region, the same but for the region)."""
    first, second = REGIONS
    if isinstance(value, str):
        if second in value:
            raise NotExportable(f"{value!r}: the second region outside a per-region list")
        return value.replace(first, "${BrokerRegion}")
    if isinstance(value, Mapping):
        return {key: _regions(v) for key, v in value.items()}
    if isinstance(value, list):
        per_region = [v for v in value if isinstance(v, str) and second in v]
        rest = [v for v in value if not (isinstance(v, str) and second in v)]
        for entry in per_region:
            if entry.replace(second, first) not in rest:
                raise NotExportable(f"{entry!r} has no twin for region {first}")
        return [_regions(v) for v in rest]
    return value


def main(argv: list[str] | None = None) -> int:
    """``python -m infra.emulated_roles [--check]``: write (or compare) the roles file."""
    args = sys.argv[1:] if argv is None else argv
    fresh = render(catalogue(synthesized_template()))
    if args == ["--check"]:
        if ROLES_FILE.read_text(encoding="utf-8") != fresh:
            print(f"{ROLES_FILE} is stale: run `make iam-roles`", file=sys.stderr)
            return 1
        return 0
    if args:
        print("usage: python -m infra.emulated_roles [--check]", file=sys.stderr)
        return 2
    ROLES_FILE.write_text(fresh, encoding="utf-8")
    print(f"wrote {ROLES_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
