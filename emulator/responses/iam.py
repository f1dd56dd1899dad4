"""``iam:SimulatePrincipalPolicy`` in moto's IAM (``emulator.install`` sets it on moto's
``IamResponse``): the request read, the model (``iam.simulation``) asked, the answer shaped as
botocore's ``SimulatePolicyResponse``."""

from __future__ import annotations

from typing import Any

from moto.core.responses import ActionResult
from moto.iam.exceptions import IAMException, NotFoundException
from moto.iam.models import iam_backends

from ..iam import simulation
from ..iam.policy import UnsupportedPolicy, load

DEFAULT_MAX_ITEMS = 100  # "the number of items defaults to 100"


class InvalidInput(IAMException):
    code = "InvalidInput"


class NotEmulated(IAMException):
    code = "UnsupportedOperation"


def simulate_principal_policy(self: Any) -> ActionResult:
    params = self.params
    for name in simulation.NOT_EMULATED:
        if params.get(name):
            raise NotEmulated(f"{name}: not evaluated by the emulator's policy simulator")
    source = str(params.get("PolicySourceArn") or "")
    actions = [str(a) for a in params.get("ActionNames") or []]
    if not source or not actions:
        raise InvalidInput("PolicySourceArn and ActionNames are required")
    backend = iam_backends[self.current_account][self.partition]
    try:
        sources = simulation.role_policies(backend, source) if ":role/" in source else []
        sources += [
            simulation.SourcePolicy(f"PolicyInputList.{n}", "none", load(str(document)))
            for n, document in enumerate(params.get("PolicyInputList") or [], start=1)
        ]
        evaluations = simulation.simulate(
            source,
            sources,
            actions,
            [str(r) for r in params.get("ResourceArns") or []],
            simulation.context_of(params.get("ContextEntries") or []),
        )
    except simulation.NoSuchRole as missing:
        raise NotFoundException(str(missing)) from None
    except simulation.NotEmulated as refused:
        raise NotEmulated(str(refused)) from None
    except UnsupportedPolicy as unreadable:
        raise InvalidInput(str(unreadable)) from None
    results = [_result(e) for e in evaluations]
    start = int(params.get("Marker") or 0)
    size = int(params.get("MaxItems") or DEFAULT_MAX_ITEMS)
    page = results[start : start + size]
    answer: dict[str, Any] = {
        "EvaluationResults": page,
        "IsTruncated": start + size < len(results),
    }
    if answer["IsTruncated"]:
        answer["Marker"] = str(start + size)
    return ActionResult(answer)


def _statements(matched: tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
    return [{"SourcePolicyId": p, "SourcePolicyType": kind} for p, kind in matched]


def _result(evaluation: simulation.Evaluation) -> dict[str, Any]:
    result: dict[str, Any] = {
        "EvalActionName": evaluation.action,
        "EvalDecision": evaluation.decision,
        "MatchedStatements": _statements(evaluation.matched),
        "MissingContextValues": [] if evaluation.resources_given else list(evaluation.missing),
    }
    if evaluation.resources_given:
        result["ResourceSpecificResults"] = [
            {
                "EvalResourceName": outcome.resource,
                "EvalResourceDecision": outcome.decision,
                "MatchedStatements": _statements(outcome.matched),
                "MissingContextValues": list(outcome.missing),
            }
            for outcome in evaluation.per_resource
        ]
    return result
