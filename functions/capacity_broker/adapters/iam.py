"""IAM, for ``slurm check``: what a role's policies allow, asked of IAM's own evaluator
(``SimulatePrincipalPolicy``), and the roles an instance profile passes to its instances."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .aws import Clients, RetryPolicy, call

# A caller its policies do not allow: AccessDeniedException (the errors common to every
# service's API); AccessDenied read the same way (chosen: either spelling is a refusal).
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException"})
ALLOWED = "allowed"


@dataclass(frozen=True)
class Verdict:
    """IAM's decision on one action on one resource for a principal: ``allowed``,
    ``explicitDeny`` or ``implicitDeny``, and the condition keys its policies asked about that
    the simulation was not given."""

    action: str
    resource: str
    decision: str
    missing_context: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.decision == ALLOWED


class Iam:
    # IAM is global; its endpoint is the same from every region.
    def __init__(self, clients: Clients, region: str, retry: RetryPolicy | None = None) -> None:
        self.clients = clients
        self.region = region
        self.retry = retry or RetryPolicy()

    @property
    def _client(self) -> Any:
        return self.clients.client("iam", self.region)

    def simulate(
        self,
        principal_arn: str,
        action: str,
        resource_arn: str,
        context: Mapping[str, str] | None = None,
    ) -> Verdict:
        """IAM's decision on ``action`` on ``resource_arn`` under ``principal_arn``'s policies,
        with ``context`` as the request's condition keys (string values). One action on one
        resource per call: the decision is then the one result's, whichever of the documented
        places (the result's own, ``ResourceSpecificResults``) holds it."""
        entries = [
            {"ContextKeyName": key, "ContextKeyValues": [value], "ContextKeyType": "string"}
            for key, value in (context or {}).items()
        ]
        answer = self.retry.run(
            "SimulatePrincipalPolicy",
            lambda: call(
                "SimulatePrincipalPolicy",
                self._client.simulate_principal_policy,
                PolicySourceArn=principal_arn,
                ActionNames=[action],
                ResourceArns=[resource_arn],
                ContextEntries=entries,
            ),
        )
        [result] = [r for r in answer.get("EvaluationResults", []) if r["EvalActionName"] == action]
        specific = [
            r
            for r in result.get("ResourceSpecificResults") or []
            if r.get("EvalResourceName") == resource_arn
        ]
        if specific:
            decision = specific[0]["EvalResourceDecision"]
            missing = specific[0].get("MissingContextValues") or []
        else:
            decision = result["EvalDecision"]
            missing = result.get("MissingContextValues") or []
        return Verdict(action, resource_arn, str(decision), tuple(str(k) for k in missing))

    def instance_profile_roles(self, profile: str) -> list[str]:
        """The ARNs of the roles of instance profile ``profile`` (its name, or its ARN
        ``arn:…:iam::<account>:instance-profile/<path/>name``, whose last part is the name)."""
        name = profile.rsplit("/", 1)[-1] if profile.startswith("arn:") else profile
        answer = self.retry.run(
            "GetInstanceProfile",
            lambda: call(
                "GetInstanceProfile", self._client.get_instance_profile, InstanceProfileName=name
            ),
        )
        return [str(role["Arn"]) for role in answer["InstanceProfile"].get("Roles") or []]
