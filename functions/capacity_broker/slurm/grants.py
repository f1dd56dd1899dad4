"""What the deployed ``reserve`` function may launch with, asked of IAM (``slurm check``).

EC2 asks the launching caller for two dependent permissions beyond the launch itself: a
template whose image is ``resolve:ssm:<parameter>`` needs ``ssm:GetParameters`` on that
parameter ("Anyone who uses the launch template also needs the ssm:GetParameters permission"),
and a template with an instance profile needs ``iam:PassRole`` on the profile's role ("the
user launching ... must have permission to pass the role"). The deploy grants them only on
the parameters of its ``imageParameters`` setting (and AWS's public ``/aws/service/`` ones) and
the roles of its ``instanceRoleArns`` setting (infra/permissions.py); a template outside them
fails every job of its node set, on AWS.

The Slurm host cannot read the stack's settings, so it asks IAM's own evaluator
(``iam:SimulatePrincipalPolicy``) about the role the function runs as (Lambda ``GetFunction``:
``Configuration.Role``), the parameter's ARN and the profile's roles (``iam:GetInstanceProfile``).
What the host may not ask is a warning naming the permission to add, never a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..adapters.aws import AwsError, Clients, RetryPolicy, call
from ..adapters.iam import DENIED_CODES, Iam, Verdict

# "resolve:ssm:<parameter>" (EC2 User Guide, "Use a Systems Manager parameter instead of an AMI
# ID"): a parameter name or ARN, optionally followed by ":<version>" or ":<label>".
SSM_IMAGE = "resolve:ssm:"
GET_PARAMETERS = "ssm:GetParameters"
PASS_ROLE = "iam:PassRole"  # noqa: S105 - an IAM action, not a password
# The condition the deploy's PassRole grant carries (infra/permissions.py), which EC2's launch
# puts in the request.
PASSED_TO_EC2 = {"iam:PassedToService": "ec2.amazonaws.com"}
LAUNCHING_FUNCTION = "reserve"


def parameter_name(image_id: str) -> str | None:
    """The parameter a ``resolve:ssm:`` image names, without its version or label (a name holds
    no ':'; an ARN's resource part begins after its fifth ':'); None for an AMI id."""
    if not image_id.startswith(SSM_IMAGE):
        return None
    reference = image_id[len(SSM_IMAGE) :]
    if reference.startswith("arn:"):
        return ":".join(reference.split(":")[:6])
    return reference.split(":", 1)[0]


def parameter_arn(name: str, region: str, role_arn: str) -> str:
    """The ARN IAM decides ``ssm:GetParameters`` on: an ARN as given; a name in the region of
    the launch and the account the function runs in; AWS's public parameters belong to no
    account (as infra/permissions.py grants them)."""
    if name.startswith("arn:"):
        return name
    partition, account = role_arn.split(":")[1], role_arn.split(":")[4]
    path = name.lstrip("/")
    owner = "" if path.startswith("aws/service/") else account
    return f"arn:{partition}:ssm:{region}:{owner}:parameter/{path}"


class LaunchGrants:
    """The deployed launching function's role, and IAM's verdicts on what templates need of
    it; each question asked once per check."""

    def __init__(
        self,
        function_prefix: str,
        qualifier: str | None,
        region: str,
        session: Any,
        lam: Callable[[], Any],
    ) -> None:
        self.function = f"{function_prefix}-{LAUNCHING_FUNCTION}"
        self.qualifier = qualifier
        self.region = region
        self._lam = lam
        self._iam = Iam(Clients(session), region, RetryPolicy(max_attempts=1))
        self._role: str | AwsError | None = None
        self._verdicts: dict[tuple[str, str], Verdict | AwsError] = {}
        self._profiles: dict[str, list[str] | AwsError] = {}
        # Said once for the whole check (every node set would say the same).
        self.warnings: list[str] = []

    def compare(
        self, template_id: str, data: Mapping[str, Any], problems: list[str], shown: dict[str, Any]
    ) -> None:
        """The template's image parameter and instance profile against what the function may
        use: a refusal AWS would give every job is added to ``problems``; what could not be
        asked, to ``warnings``; the verdicts to ``shown`` (the report's template facts)."""
        image = parameter_name(str(data.get("ImageId") or ""))
        profile = data.get("IamInstanceProfile") or {}
        profile_ref = str(profile.get("Arn") or profile.get("Name") or "")
        if image is None and not profile_ref:
            return
        role = self.role()
        if role is None:
            return
        decided: dict[str, str] = {}
        if image is not None:
            arn = parameter_arn(image, self.region, role)
            verdict = self._decide(role, GET_PARAMETERS, arn, {})
            if verdict is not None:
                decided[f"{GET_PARAMETERS} {arn}"] = verdict.decision
                if not verdict.allowed:
                    self._refused(
                        problems,
                        verdict,
                        f"image parameter {image} ({arn}): {self.function} may not read it "
                        f"({GET_PARAMETERS}: {verdict.decision}), so EC2 refuses every launch "
                        f"from launch template {template_id}. List it in the deploy's "
                        "imageParameters setting (-c imageParameters=…, docs/deploy.md) and "
                        "deploy again",
                    )
        if profile_ref:
            shown["instance_profile"] = profile_ref
            for role_arn in self._profile_roles(profile_ref, template_id, problems):
                verdict = self._decide(role, PASS_ROLE, role_arn, PASSED_TO_EC2)
                if verdict is None:
                    continue
                decided[f"{PASS_ROLE} {role_arn}"] = verdict.decision
                if not verdict.allowed:
                    self._refused(
                        problems,
                        verdict,
                        f"instance profile {profile_ref}: {self.function} may not pass its "
                        f"role {role_arn} to EC2 ({PASS_ROLE}: {verdict.decision}), so EC2 "
                        f"refuses every launch from launch template {template_id}. List the "
                        "role in the deploy's instanceRoleArns setting (-c instanceRoleArns=…, "
                        "docs/deploy.md) and deploy again",
                    )
        if decided:
            shown["iam"] = decided

    def role(self) -> str | None:
        """The launching function's execution role (Lambda ``GetFunction``), None (and a
        warning) when it cannot be read."""
        if self._role is None:
            qualifier = {"Qualifier": self.qualifier} if self.qualifier else {}
            try:
                answer = call(
                    "GetFunction", self._lam().get_function, FunctionName=self.function, **qualifier
                )
                self._role = str(answer["Configuration"]["Role"])
            except AwsError as error:
                self._role = error
                grant = (
                    f"; this host needs lambda:GetFunction on {self.function}"
                    if error.code in DENIED_CODES
                    else ""
                )
                self._warn(
                    f"could not read the role {self.function} runs as ({error}){grant}: the "
                    "launch templates' image parameters and instance profiles were not "
                    "compared with the deploy's imageParameters and instanceRoleArns"
                )
        return self._role if isinstance(self._role, str) else None

    def _decide(
        self, role: str, action: str, resource: str, context: Mapping[str, str]
    ) -> Verdict | None:
        key = (action, resource)
        if key not in self._verdicts:
            try:
                self._verdicts[key] = self._iam.simulate(role, action, resource, context)
            except AwsError as error:
                self._verdicts[key] = error
        found = self._verdicts[key]
        if isinstance(found, Verdict):
            return found
        if found.code in DENIED_CODES:
            self._warn(
                f"could not ask IAM whether {self.function} may use what its launch templates "
                f"name: this host may not call iam:SimulatePrincipalPolicy ({found.message}). "
                f"Grant it iam:SimulatePrincipalPolicy on {role} so that the check compares "
                "the templates' image parameters and instance profiles with the deploy's "
                "imageParameters and instanceRoleArns"
            )
        else:
            self._warn(f"could not ask IAM about {action} on {resource}: {found}")
        return None

    def _profile_roles(self, profile: str, template_id: str, problems: list[str]) -> list[str]:
        if profile not in self._profiles:
            try:
                self._profiles[profile] = self._iam.instance_profile_roles(profile)
            except AwsError as error:
                self._profiles[profile] = error
        found = self._profiles[profile]
        if not isinstance(found, AwsError):
            return found
        if found.code == "NoSuchEntity":
            problems.append(
                f"instance profile {profile} of launch template {template_id} does not exist: "
                "EC2 refuses every launch from it"
            )
        elif found.code in DENIED_CODES:
            self._warn(
                f"could not read instance profile {profile}: this host may not call "
                f"iam:GetInstanceProfile ({found.message}). Grant it so that the check "
                "compares the profile's role with the deploy's instanceRoleArns"
            )
        else:
            self._warn(f"could not read instance profile {profile}: {found}")
        return []

    def _refused(self, problems: list[str], verdict: Verdict, problem: str) -> None:
        if verdict.decision != "explicitDeny" and verdict.missing_context:
            # Undecided for want of a key a real launch would give: not a refusal to report.
            self._warn(
                f"IAM could not decide {verdict.action} on {verdict.resource} for "
                f"{self.function} without {', '.join(verdict.missing_context)}"
            )
            return
        problems.append(problem)

    def _warn(self, warning: str) -> None:
        if warning not in self.warnings:
            self.warnings.append(warning)
