"""The broker functions' roles in the emulator, and IAM's verdict on every call made with one.

``Roles`` makes each function's role in moto's IAM (its synthesized policies as inline
policies: moto validates them as IAM would) and assumes it through moto's STS, as Lambda runs a
function with its execution role's temporary credentials. A call signed with one of those
sessions is authenticated by moto (``IAMRequest``: the signature, the session's role) and
authorized here: every request the call makes of IAM (``context.requests``) is decided under
the role's policies (``policy.decide``). Any other caller (the operator's or a test's own
credentials) is left to moto's own authorization, off unless ``INITIAL_NO_AUTH_ACTION_COUNT``
turns it on.

A refusal answers as the service does: EC2 ``UnauthorizedOperation`` (HTTP 403) "You are not
authorized to perform this operation. User: … is not authorized to perform: … on resource: …
because no identity-based policy allows the … action. Encoded authorization failure message:
…"; DynamoDB, SSM and CloudFormation ``AccessDeniedException`` (400) "User: … is not
authorized to perform: …" (IAM User Guide, "Troubleshoot access denied error messages").
The encoded message decodes with ``sts:DecodeAuthorizationMessage`` to what the STS API
Reference lists: whether an explicit deny decided, the principal, the action, the resource
and the condition keys of the request (``decode``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from moto.iam.access_control import IAMRequest
from moto.iam.models import iam_backends
from moto.sts.models import sts_backends

from ..state import world
from .catalogue import Broker, Role, roles
from .context import Caller, requests
from .policy import Decision, Policy, Request, decide

SESSION_SECONDS = 12 * 3600
DECISIONS_KEPT = 10_000
# The services' own words for a refusal: (code, HTTP status). EC2: "Client.
# UnauthorizedOperation response (an HTTP 403 response)" (STS, DecodeAuthorizationMessage);
# the others: the "errors common to the API actions of all AWS services" of their API
# references (DynamoDB, SSM, CloudFormation): "AccessDeniedException ... HTTP Status Code: 400".
_REFUSALS = {"ec2": ("UnauthorizedOperation", 403)}
_DEFAULT_REFUSAL = ("AccessDeniedException", 400)
# "sts:GetCallerIdentity … always allowed, even if there's an explicit Deny" (moto's rule, as
# the IAM User Guide says for GetCallerIdentity: "No permissions are required").
_ALWAYS_ALLOWED = frozenset({"sts:GetCallerIdentity"})


@dataclass(frozen=True)
class Session:
    """One function's role session: what Lambda hands the function as credentials."""

    entry: str
    role_arn: str
    session_arn: str
    user_id: str
    access_key: str
    secret_key: str
    token: str


class Unauthorized(Exception):
    """IAM refused a call: the service's error code, status and message."""

    def __init__(self, service: str, decision: Decision, session: Session) -> None:
        self.code, self.status = _REFUSALS.get(service, _DEFAULT_REFUSAL)
        self.decision = decision
        request = decision.request
        on = "" if request.resource == "*" else f" on resource: {request.resource}"
        said = (
            f"User: {session.session_arn} is not authorized to perform: {request.action}{on} "
            f"{decision.reason}"
        )
        if service == "ec2":
            said = (
                f"You are not authorized to perform this operation. {said}. Encoded "
                f"authorization failure message: {encode(decision, session)}"
            )
        self.message = said
        super().__init__(f"{self.code}: {said}")


class RoleRequest(IAMRequest):  # type: ignore[misc]
    """moto's authentication of a signed request (``IAMRequest``: the access key's assumed
    role, the signature), deciding with IAM's evaluation of the role's policies."""

    def policies(self) -> list[Policy]:
        return [_parsed(p) for p in self._access_key.collect_policies()]

    def check(self, wanted: list[Request], service: str, session: Session) -> list[Decision]:
        """Every request decided; ``Unauthorized`` at the first one refused."""
        self.check_signature()
        policies = self.policies()
        decisions = []
        for request in wanted:
            if request.action in _ALWAYS_ALLOWED:
                continue
            decision = decide(policies, request)
            if not decision.allowed:
                raise Unauthorized(service, decision, session)
            decisions.append(decision)
        return decisions


def _parsed(policy: Any) -> Policy:
    text = policy if isinstance(policy, str) else None
    return _parse_text(text) if text is not None else Policy(policy)


@functools.lru_cache(maxsize=256)
def _parse_text(text: str) -> Policy:
    return Policy(text)


class Roles:
    """The broker's function roles, made in moto's IAM, each with a session (``install``)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.roles: dict[str, Role] = roles(broker)
        self.sessions: dict[str, Session] = {}
        # The latest verdicts, for a look at what was decided: (function, decision).
        self.decisions: deque[tuple[str, Decision]] = deque(maxlen=DECISIONS_KEPT)

    def install(self) -> Roles:
        """Make the roles and their sessions in the current (e.g. freshly reset) moto world."""
        account = self.broker.account
        iam = iam_backends[account][self.broker.partition]
        sts = sts_backends[account][self.broker.partition]
        sessions = {}
        for entry, role in self.roles.items():
            made = iam.create_role(
                role_name=role.name,
                assume_role_policy_document=json.dumps(role.trust),
                path="/",
                permissions_boundary=None,
                description=f"capacity-broker {entry} (emulated from infra/)",
                tags=[],
                max_session_duration=str(SESSION_SECONDS),
            )
            for name, document in role.documents.items():
                iam.put_role_policy(role.name, name, json.dumps(document))
            assumed = sts.assume_role(
                region_name=self.broker.region,
                role_session_name=self.broker.function_name(entry),
                role_arn=made.arn,
                policy=None,
                duration=SESSION_SECONDS,
                external_id=None,
            )
            sessions[entry] = Session(
                entry=entry,
                role_arn=made.arn,
                session_arn=assumed.arn,
                user_id=assumed.user_id,
                access_key=assumed.access_key_id,
                secret_key=assumed.secret_access_key,
                token=assumed.session_token,
            )
        self.sessions = sessions
        return self

    def uninstall(self) -> None:
        """Take the roles and their sessions out of moto's IAM and STS (before others are
        enforced in their place)."""
        account = self.broker.account
        iam = iam_backends[account][self.broker.partition]
        sts = sts_backends[account][self.broker.partition]
        keys = {s.access_key for s in self.sessions.values()}
        sts.assumed_roles = [r for r in sts.assumed_roles if r.access_key_id not in keys]
        for role in self.roles.values():
            if role.name in {r.name for r in iam.roles.values()}:
                for name in role.documents:
                    iam.delete_role_policy(role.name, name)
                iam.delete_role(role.name)
        self.sessions = {}

    def credentials(self, entry: str) -> tuple[str, str, str] | None:
        """(access key, secret key, session token) of function ``entry``'s role session."""
        session = self.sessions.get(entry)
        if session is None:
            return None
        return session.access_key, session.secret_key, session.token

    def session_of(self, access_key: str) -> Session | None:
        for session in self.sessions.values():
            if session.access_key == access_key:
                return session
        return None

    def authorize(
        self, response: Any, session: Session, params: Callable[[], Mapping[str, Any]]
    ) -> list[Decision]:
        """IAM's verdict on the call ``response`` (a moto response object) serves."""
        service = response.service_name or ""
        action = response._get_action() or ""
        path = response.raw_path
        if response.parsed_url.query:
            path += "?" + response.parsed_url.query
        request = RoleRequest(
            account_id=response.current_account,
            method=response.method,
            path=path,
            data=response.data,
            body=response.raw_body,
            headers=response.headers,
            action=action,
        )
        caller = Caller(
            principal_arn=session.role_arn,
            session_arn=session.session_arn,
            user_id=session.user_id,
            account=response.current_account,
            region=response.region,
            now=world.clock.now(),
            partition=self.broker.partition,
        )
        wanted = requests(service, action, params(), caller)
        try:
            decisions = request.check(wanted, service, session)
        except Unauthorized as refused:
            self.decisions.append((session.entry, refused.decision))
            raise
        self.decisions.extend((session.entry, d) for d in decisions)
        return decisions


# -- the encoded authorization failure message ----------------------------------------------


def encode(decision: Decision, session: Session) -> str:
    request = decision.request
    document = {
        "allowed": False,
        "explicitDeny": decision.explicit_deny,
        "matchedStatements": {
            "items": [
                {
                    "statementId": s.sid or "",
                    "effect": s.effect.upper(),
                    "actions": {"items": [{"value": a} for a in _list(s.document.get("Action"))]},
                    "resources": {
                        "items": [{"value": r} for r in _list(s.document.get("Resource"))]
                    },
                }
                for s in decision.matched
            ]
        },
        "failures": {"items": []},
        "context": {
            "principal": {"id": session.user_id, "arn": session.session_arn},
            "action": request.action,
            "resource": request.resource,
            "conditions": {
                "items": [
                    {"key": key, "values": {"items": [{"value": v} for v in values]}}
                    for key, values in sorted(request.keys.items())
                ]
            },
        },
    }
    text = json.dumps(document, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode(message: str) -> str:
    """``sts:DecodeAuthorizationMessage``: the decoded document, as JSON text; ``ValueError``
    for a message the emulator did not encode."""
    try:
        raw = base64.urlsafe_b64decode(message + "=" * (-len(message) % 4))
        document = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise ValueError("the message is not an encoded authorization failure message") from None
    if not isinstance(document, dict) or "allowed" not in document or "context" not in document:
        raise ValueError("the message is not an encoded authorization failure message")
    return json.dumps(document, separators=(",", ":"))


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in (value if isinstance(value, list) else [value])]
