"""The roles the emulator evaluates offline (``emulator/iam/roles.json``) are the ones this CDK
app deploys: the file is a fresh synth's, and filled in for a cluster it gives that cluster's
synthesized policies, statement for statement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from infra_helpers import FUNCTIONS, Synth

from emulator.iam.catalogue import ROLES_FILE, Broker, roles
from infra.emulated_roles import ARNS_BY_TYPE, catalogue, render, synthesized_template

pytestmark = [pytest.mark.infra, pytest.mark.slow]

ACCOUNT = "123456789012"
REGION = "us-east-1"


def test_the_emulators_roles_are_a_fresh_synth() -> None:
    """`make iam-roles` wrote the file from this app; a change to infra/ that was not followed
    by it fails here (the emulator would evaluate yesterday's roles)."""
    assert ROLES_FILE.read_text(encoding="utf-8") == render(catalogue(synthesized_template())), (
        "emulator/iam/roles.json is stale: run `make iam-roles`"
    )


def _deployed(synth: Synth, name: str, broker: Broker) -> list[Any]:
    """Function ``name``'s statements in the template, with CloudFormation's values resolved
    as a deployment of ``broker`` would resolve them."""
    values = broker.values(name)
    pseudo = {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "AWS::Region": REGION}

    def resolve(value: Any) -> Any:
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, Mapping):
            if set(value) == {"Ref"}:
                return pseudo[value["Ref"]]
            if set(value) == {"Fn::Join"}:
                delimiter, parts = value["Fn::Join"]
                return delimiter.join(resolve(p) for p in parts)
            if set(value) == {"Fn::GetAtt"}:
                kind = synth.doc["Resources"][value["Fn::GetAtt"][0]]["Type"]
                return values[ARNS_BY_TYPE[kind]]
            return {k: resolve(v) for k, v in value.items()}
        return value

    return [_normal(resolve(s)) for s in synth.statements_of(name)]


def _normal(value: Any) -> Any:
    """One spelling per meaning: IAM reads a lone string as a list of one, in any order."""
    if isinstance(value, Mapping):
        return {k: _normal(v if k in ("Effect", "Sid") else _listed(v)) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_normal(v) for v in value), key=repr)
    return value


def _listed(value: Any) -> Any:
    return value if isinstance(value, list | Mapping) else [value]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_filled_in_they_are_the_deployed_policies(broker: Synth, name: str) -> None:
    """cdk.json's defaults for cluster demo in one region (the `broker` synth), against the
    file's placeholders filled in for the same broker."""
    demo = Broker(
        cluster_id="demo",
        function_prefix="capacity-broker-demo",
        region=REGION,
        regions=(REGION,),
        account=ACCOUNT,
        state_table="capacity-broker-demo-state",
    )
    (role,) = roles(demo, [name]).values()
    emulated = [_normal(s) for d in role.documents.values() for s in d["Statement"]]
    deployed = _deployed(broker, name, demo)
    assert sorted(emulated, key=repr) == sorted(deployed, key=repr)
