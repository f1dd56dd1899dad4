"""The broker functions' IAM roles, as ``infra/`` synthesizes them (``roles.json``), made
concrete for one broker: its cluster id, regions, account and state table.

``roles.json`` is written by ``make iam-roles`` (``infra/emulated_roles.py``) and checked
against a fresh synth by ``tests/infra/test_emulated_roles.py``; its placeholders are filled in
here the way CloudFormation and the CDK would for a deployment with those values.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .policy import Policy, UnsupportedPolicy, load

ROLES_FILE = Path(__file__).with_name("roles.json")
BROKER_REGION = "${BrokerRegion}"
_PLACEHOLDER = re.compile(r"\$\{[A-Za-z]+\}")
# What the local functions' ids may be: the deploy's own rule for a cluster id
# (infra/config.py), which keeps wildcards out of every ARN and condition value filled in.
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")


@functools.cache
def synthesized() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ROLES_FILE.read_text(encoding="utf-8"))
    return data


@dataclass(frozen=True)
class Broker:
    """What differs between two deployments of the same stack, as the emulator sees one."""

    cluster_id: str
    function_prefix: str
    region: str  # the functions' own (the stack's) region
    regions: tuple[str, ...]  # the broker's regions (``-c regions``)
    account: str
    state_table: str
    stack_name_prefix: str | None = None  # default: ``<cluster id>-job-``
    partition: str = "aws"

    def __post_init__(self) -> None:
        if not _CLUSTER_ID.fullmatch(self.cluster_id):
            raise ValueError(f"cluster id {self.cluster_id!r}: 1-39 letters, digits or hyphens")
        for name in (self.function_prefix, self.state_table, self.stack_prefix):
            if not _NAME.fullmatch(name):
                raise ValueError(f"{name!r}: letters, digits, '-', '_' and '.' only")
        if not self.regions:
            raise ValueError("a broker has at least one region")

    @property
    def stack_prefix(self) -> str:
        return self.stack_name_prefix or f"{self.cluster_id}-job-"

    def function_name(self, entry: str) -> str:
        return f"{self.function_prefix}-{entry}"

    def values(self, entry: str) -> dict[str, str]:
        """Each placeholder's value for function ``entry``'s role."""
        home = f"{self.partition}:%s:{self.region}:{self.account}"
        return {
            "${Partition}": self.partition,
            "${Account}": self.account,
            "${Region}": self.region,
            "${ClusterId}": self.cluster_id,
            "${StackNamePrefix}": self.stack_prefix,
            "${StateTableArn}": f"arn:{home % 'dynamodb'}:table/{self.state_table}",
            "${LogGroupArn}": (
                f"arn:{home % 'logs'}:log-group:/aws/lambda/{self.function_name(entry)}:*"
            ),
            "${DeadLetterQueueArn}": f"arn:{home % 'sqs'}:{self.function_prefix}-dead-letters",
        }


@dataclass(frozen=True)
class Role:
    entry: str  # probe, reserve, ...
    name: str
    trust: dict[str, Any]
    documents: dict[str, dict[str, Any]]  # policy name → document

    @functools.cached_property
    def policies(self) -> list[Policy]:
        return [load(document) for document in self.documents.values()]


def roles(broker: Broker, entries: Sequence[str] | None = None) -> dict[str, Role]:
    """The functions' roles for ``broker`` (every function, or ``entries``). Raises
    ``UnsupportedPolicy`` for a policy the emulator cannot evaluate: refused up front."""
    found = synthesized()["roles"]
    out = {}
    for entry in entries or list(found):
        spec = found[entry]
        values = broker.values(entry)
        documents = {
            fill(name, values, broker.regions): fill(document, values, broker.regions)
            for name, document in spec["policies"].items()
        }
        role = Role(
            entry=entry,
            name=broker.function_name(entry),
            trust=fill(spec["trust"], values, broker.regions),
            documents=documents,
        )
        role.policies  # noqa: B018 - parse now: a policy the emulator cannot read fails here
        out[entry] = role
    return out


def fill(value: Any, values: Mapping[str, str], regions: Sequence[str]) -> Any:
    """The placeholders filled in; a ``${BrokerRegion}`` entry becomes one entry per region
    (a lone string with it, a list when there are several regions)."""
    if isinstance(value, str):
        filled = _expand(value, values, regions)
        return filled[0] if len(filled) == 1 else filled
    if isinstance(value, list):
        return [item for v in value for item in _as_list(fill(v, values, regions))]
    if isinstance(value, Mapping):
        return {fill(k, values, regions): fill(v, values, regions) for k, v in value.items()}
    return value


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _expand(text: str, values: Mapping[str, str], regions: Sequence[str]) -> list[str]:
    texts = [text.replace(BROKER_REGION, r) for r in regions] if BROKER_REGION in text else [text]
    out = []
    for item in texts:
        for placeholder, value in values.items():
            item = item.replace(placeholder, value)
        left = _PLACEHOLDER.findall(item)
        if left:
            raise UnsupportedPolicy(f"{text!r}: no value for {', '.join(left)}")
        out.append(item)
    return out
