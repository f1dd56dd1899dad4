"""IAM's policy simulator for a role: ``iam:SimulatePrincipalPolicy`` (moto has none), decided
by the same evaluation and the same policies the emulator enforces on every call
(``policy.decide`` over the role's inline and attached policies in moto's IAM, the ones
``enforcement.RoleRequest`` collects for a session of that role).

What the IAM API Reference says, and what is read from it here:

- "Simulate how a set of IAM policies attached to an IAM entity works with a list of API
  operations and Amazon Web Services resources ... The simulation does not perform the API
  operations; it only checks the authorization": nothing is done, each pair is decided.
- ``ActionNames``: "Each operation is evaluated for each resource"; ``ResourceArns``: "If this
  parameter is not provided, then the value defaults to * (all resources) ... You can simulate
  resources that don't exist in your account."
- ``PolicyInputList``: "additional policy documents to include in the simulation".
- ``ContextEntries``: "Whenever a context key is evaluated in one of the simulated IAM
  permissions policies, the corresponding value is supplied." The simulator fills in nothing
  else: a key no entry gives is missing, and a condition on it reads as IAM reads a key the
  request lacks (``policy.Operator.holds``); it is listed in ``MissingContextValues`` ("context
  keys that are required by the included input policies but that were not provided"), per
  resource when ``ResourceArns`` is given, else in the result itself.
- ``EvaluationResult``: one per action, its ``EvalDecision`` ``allowed``, ``explicitDeny`` or
  ``implicitDeny``; ``ResourceSpecificResults``: "The individual results of the simulation of
  the API operation ... on each resource"; ``MatchedStatements``: the statements that decided
  ("the deny statement is the only entry included in the result").

Chosen where the reference is silent or needs what the emulator does not keep:

- the result's own ``EvalDecision`` over several resources is the most restrictive of theirs
  (explicit deny, then implicit deny, then allowed; the reference says so only of
  ``EvalDecisionDetails``: "the most restrictive decision per policy type across all requested
  resources");
- the result's ``EvalResourceName`` ("The ARN template for the simulated resource type") is
  left out: the emulator keeps no catalogue of ARN templates; each resource's name is in its
  ``ResourceSpecificResults`` entry;
- ``MatchedStatements`` name their policy and its type, without positions;
- a user or group as ``PolicySourceArn``, and the parameters for resource-based policies,
  permissions boundaries, exclusions and EC2 scenarios, are refused as not emulated
  (``NotEmulated``), never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .policy import Context, Decision, Policy, Request, decide, load

ALLOWED, EXPLICIT_DENY, IMPLICIT_DENY = "allowed", "explicitDeny", "implicitDeny"
# The parameters of the request the emulator does not evaluate (refused, not ignored).
NOT_EMULATED = (
    "PermissionsBoundaryPolicyInputList",
    "PolicyExclusionList",
    "ResourcePolicy",
    "ResourceOwner",
    "CallerArn",
    "ResourceHandlingOption",
)


class NotEmulated(ValueError):
    """A simulation the emulator does not make (a user or group, a resource policy...)."""


class NoSuchRole(LookupError):
    """``PolicySourceArn`` names no role of the account."""


@dataclass(frozen=True)
class SourcePolicy:
    """One policy of the simulated principal: its id (``SourcePolicyId``), its type
    (``SourcePolicyType``: ``role`` for an inline role policy, ``user-managed`` or
    ``aws-managed`` for an attached one, ``none`` for a ``PolicyInputList`` document)."""

    policy_id: str
    policy_type: str
    policy: Policy


@dataclass(frozen=True)
class Outcome:
    """One action on one resource: the decision, the statements that made it, the keys the
    policies asked about and nobody gave."""

    resource: str
    decision: str
    matched: tuple[tuple[str, str], ...] = ()  # (policy id, policy type)
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evaluation:
    """One action's result: its decision over every resource, and each resource's."""

    action: str
    decision: str
    per_resource: tuple[Outcome, ...]
    resources_given: bool
    matched: tuple[tuple[str, str], ...] = ()
    missing: tuple[str, ...] = field(default=())


def role_policies(backend: Any, role_arn: str) -> list[SourcePolicy]:
    """The role's inline and attached policies in moto's IAM ``backend``, as
    ``enforcement.RoleRequest`` collects them for a session of the role."""
    role = next((r for r in backend.roles.values() if r.arn == role_arn), None)
    if role is None:
        name = role_arn.rsplit("/", 1)[-1]
        raise NoSuchRole(f"The role with name {name} cannot be found.")
    found = []
    for name in backend.list_role_policies(role.name):
        _, document = backend.get_role_policy(role.name, name)
        found.append(SourcePolicy(name, "role", load(document)))
    attached, _ = backend.list_attached_role_policies(role.name)
    for managed in attached:
        kind = "aws-managed" if ":iam::aws:policy/" in managed.arn else "user-managed"
        found.append(SourcePolicy(managed.arn, kind, Policy(managed)))
    return found


def simulate(
    source_arn: str,
    sources: Sequence[SourcePolicy],
    actions: Sequence[str],
    resources: Sequence[str],
    context: Context,
) -> list[Evaluation]:
    """Each action on each resource (``*`` when none is given), decided under ``sources``."""
    if ":role/" not in source_arn:
        raise NotEmulated(
            f"PolicySourceArn {source_arn}: the emulator simulates the policies of a role only"
        )
    policies = [s.policy for s in sources]
    owner = {id(statement): s for s in sources for statement in s.policy.statements}
    out = []
    for action in actions:
        outcomes = []
        for resource in resources or ["*"]:
            decision = decide(policies, Request(action, resource, context))
            matched = tuple(
                dict.fromkeys(
                    (owner[id(s)].policy_id, owner[id(s)].policy_type) for s in decision.matched
                )
            )
            outcomes.append(
                Outcome(
                    resource,
                    _word(decision),
                    matched,
                    _missing(policies, action, resource, context),
                )
            )
        overall = min((o.decision for o in outcomes), key=_RESTRICTIVE.index)
        out.append(
            Evaluation(
                action=action,
                decision=overall,
                per_resource=tuple(outcomes),
                resources_given=bool(resources),
                # "Only statements that contributed to the reported decision are included."
                matched=tuple(
                    dict.fromkeys(m for o in outcomes if o.decision == overall for m in o.matched)
                ),
                missing=tuple(dict.fromkeys(k for o in outcomes for k in o.missing)),
            )
        )
    return out


def context_of(entries: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """``ContextEntries`` as the request context: each key's values, as strings."""
    found: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        name = str(entry.get("ContextKeyName") or "")
        values = entry.get("ContextKeyValues") or []
        if name:
            found[name] = found.get(name, ()) + tuple(str(v) for v in values)
    return found


_RESTRICTIVE = (EXPLICIT_DENY, IMPLICIT_DENY, ALLOWED)


def _word(decision: Decision) -> str:
    if decision.explicit_deny:
        return EXPLICIT_DENY
    return ALLOWED if decision.allowed else IMPLICIT_DENY


def _missing(
    policies: Sequence[Policy], action: str, resource: str, context: Context
) -> tuple[str, ...]:
    """The condition keys of the statements on this action and resource that no context entry
    gives."""
    given = {key.lower() for key in context}
    keys = [
        key
        for policy in policies
        for statement in policy.statements
        if statement.covers_action(action) and statement.covers_resource(resource)
        for _, key, _ in statement.conditions
        if key.lower() not in given
    ]
    return tuple(dict.fromkeys(keys))
