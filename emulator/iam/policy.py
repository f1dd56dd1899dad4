"""IAM's policy evaluation for identity-based policies, built on moto's ``IAMPolicy`` and
``IAMPolicyStatement`` (``moto/iam/access_control.py``).

moto's statement matches actions and resources with a plain regular expression (case-
sensitive actions, ``?`` not a wildcard, ``.`` a wildcard), knows only ``StringEquals`` in a
``Condition`` and answers *deny* when a condition does not hold, so an Allow whose condition
fails becomes an explicit deny. The classes here keep moto's interface (``is_action_permitted``
answers a ``PermissionResult``) and evaluate as the IAM User Guide describes:

- **Action**: "The prefix and the action name are case insensitive", wildcards ``*`` and ``?``
  ("Policy elements: Action"); ``NotAction`` matches every other action.
- **Resource**: ARNs compared segment by segment ("the parts separated by colons"), each
  segment with ``*`` and ``?`` wildcards, case-sensitive ("Policy elements: Resource"); ``*``
  alone matches everything; ``NotResource`` matches every other resource.
- **Condition**: every operator and every key of a block must hold (AND), one of the values
  of a key is enough (OR), negated operators must match none of them; a key the request does
  not carry makes the condition false, except for negated operators (true), ``...IfExists``
  (true) and ``Null`` (tests presence); condition key names are case-insensitive, values are
  compared as the operator says ("Condition operators", "Creating a condition with multiple
  keys or values"). Set operators: ``ForAllValues`` is true when every request value matches
  (also with no value), ``ForAnyValue`` when one does (false with none).
- **Evaluation**: an applicable Deny wins; otherwise an applicable Allow allows; otherwise
  the request is implicitly denied ("Policy evaluation logic", identity-based policies only:
  the broker's roles have no boundary, session policy or resource-based policy in play).

Operators the broker's policies do not use and that need types of their own (``Numeric*``,
``Date*``, ``IpAddress``, ``Binary*``) and policy variables (``${aws:username}``) are refused
when a policy is loaded (``UnsupportedPolicy``), never guessed at call time.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moto.iam.access_control import IAMPolicy, IAMPolicyStatement, PermissionResult

# Condition context: key → the request's values for it.
Context = Mapping[str, Sequence[str]]


class UnsupportedPolicy(ValueError):
    """A policy uses IAM grammar the emulator does not evaluate: refused at load time."""


@dataclass(frozen=True)
class Request:
    """One authorization IAM makes for a call: the action on one resource, with the request
    context's condition keys (``context(...)`` builds them). A call that uses several resources
    (a fleet's template, subnet, image...) is several requests, each decided on its own."""

    action: str
    resource: str
    keys: Context = field(default_factory=dict)

    @functools.cached_property
    def _by_lower_name(self) -> dict[str, tuple[str, ...]]:
        # IAM reads condition key names case-insensitively: two keys that differ only in case
        # (tags ``Team`` and ``team``) give one key with both values.
        found: dict[str, tuple[str, ...]] = {}
        for key, values in self.keys.items():
            found[key.lower()] = found.get(key.lower(), ()) + tuple(values)
        return found

    def values(self, key: str) -> Sequence[str] | None:
        return self._by_lower_name.get(key.lower())


def context(keys: Mapping[str, str | Sequence[str] | None]) -> dict[str, tuple[str, ...]]:
    """Condition keys and their values, as the request context holds them."""
    return {
        key: (value,) if isinstance(value, str) else tuple(value)
        for key, value in keys.items()
        if value is not None
    }


# -- matching ----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _wildcards(pattern: str, ignore_case: bool = False) -> re.Pattern[str]:
    """``*`` any run of characters, ``?`` any one; everything else literal."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"^{body}$", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def like(pattern: str, value: str, ignore_case: bool = False) -> bool:
    return _wildcards(pattern, ignore_case).match(value) is not None


def arn_like(pattern: str, value: str) -> bool:
    """ARN matching, segment by segment: "Each of the six colon-delimited components of the
    ARN is checked separately and each can include multi-character match wildcards (*) or
    single-character match wildcards (?)" (``ArnLike``; the ``Resource`` element likewise).
    A pattern of fewer segments (``arn:aws:ec2:*``) matches its last one against the rest of
    the ARN (chosen: such patterns are common, the guide does not spell them out)."""
    if pattern == "*":
        return True
    wanted = pattern.split(":", 5)
    parts = value.split(":", 5)
    if len(wanted) < len(parts):
        parts = [*parts[: len(wanted) - 1], ":".join(parts[len(wanted) - 1 :])]
    if len(wanted) != len(parts):
        return False
    return all(like(w, p) for w, p in zip(wanted, parts, strict=True))


def action_matches(pattern: str, action: str) -> bool:
    return like(pattern, action, ignore_case=True)


# -- conditions --------------------------------------------------------------------------------

_MATCHERS = {
    "StringEquals": (lambda want, got: want == got, False),
    "StringNotEquals": (lambda want, got: want == got, True),
    "StringEqualsIgnoreCase": (lambda want, got: want.casefold() == got.casefold(), False),
    "StringNotEqualsIgnoreCase": (lambda want, got: want.casefold() == got.casefold(), True),
    "StringLike": (like, False),
    "StringNotLike": (like, True),
    "ArnEquals": (arn_like, False),
    "ArnLike": (arn_like, False),
    "ArnNotEquals": (arn_like, True),
    "ArnNotLike": (arn_like, True),
    "Bool": (lambda want, got: want.lower() == got.lower(), False),
}
_QUALIFIERS = ("ForAllValues:", "ForAnyValue:")


@dataclass(frozen=True)
class Operator:
    qualifier: str | None  # "ForAllValues", "ForAnyValue" or None
    base: str
    if_exists: bool

    @classmethod
    def parse(cls, name: str) -> Operator:
        qualifier = None
        for prefix in _QUALIFIERS:
            if name.startswith(prefix):
                qualifier, name = prefix[:-1], name[len(prefix) :]
        if_exists = name.endswith("IfExists") and name != "IfExists"
        base = name.removesuffix("IfExists") if if_exists else name
        if base == "Null":
            if if_exists or qualifier:
                raise UnsupportedPolicy(f"condition operator {name!r}: Null takes no qualifier")
        elif base not in _MATCHERS:
            raise UnsupportedPolicy(
                f"condition operator {name!r} is not evaluated by the emulator (it evaluates "
                f"{', '.join(sorted(_MATCHERS))}, Null, ...IfExists, ForAllValues:, "
                "ForAnyValue:)"
            )
        return cls(qualifier, base, if_exists)

    def holds(self, wanted: Sequence[str], got: Sequence[str] | None) -> bool:
        present = bool(got)
        if self.base == "Null":
            # "true (the key doesn't exist — it is null) or false (the key exists ...)"
            return all((w.lower() == "true") != present for w in wanted)
        match, negated = _MATCHERS[self.base]

        def one(value: str) -> bool:
            found = any(match(w, value) for w in wanted)
            return not found if negated else found

        if self.qualifier is not None:
            # A set of values: empty when the key is missing or "the key values resolve to a
            # null data set, such as an empty string".
            values = [v for v in got or () if v != ""]
            if self.qualifier == "ForAllValues":  # true with no values
                return all(one(v) for v in values)
            return any(one(v) for v in values) if values else self.if_exists
        if not present:
            return self.if_exists or negated
        values = list(got or ())
        # A single-valued key with several values in the context happens only when two tags
        # differ in the case of their key; IAM's guide does not say how that reads, so every
        # value must match (the reading that allows less through an Allow).
        return all(one(v) for v in values)


def _strings(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    out = []
    for item in values:
        if isinstance(item, bool):
            out.append("true" if item else "false")
        elif isinstance(item, str | int | float):
            out.append(str(item))
        else:
            raise UnsupportedPolicy(f"condition value {item!r} is not a string")
    return out


# -- statements and policies -------------------------------------------------------------------


class Statement(IAMPolicyStatement):  # type: ignore[misc]
    """One statement, evaluated as IAM does (see the module docstring)."""

    def __init__(self, statement: Mapping[str, Any]) -> None:
        super().__init__(dict(statement))
        if statement.get("Effect") not in ("Allow", "Deny"):
            raise UnsupportedPolicy(f"statement Effect {statement.get('Effect')!r}")
        if "Principal" in statement or "NotPrincipal" in statement:
            raise UnsupportedPolicy("an identity-based policy names no Principal")
        for one, other in (("Action", "NotAction"), ("Resource", "NotResource")):
            if (one in statement) == (other in statement):
                raise UnsupportedPolicy(f"a statement has {one} or {other}, one of them")
        self.conditions = [
            (Operator.parse(operator), key, _strings(values))
            for operator, keys in (statement.get("Condition") or {}).items()
            for key, values in keys.items()
        ]
        for element in ("Action", "NotAction", "Resource", "NotResource"):
            for value in _strings(statement.get(element, [])):
                if "${" in value:
                    raise UnsupportedPolicy(f"policy variable in {element}: {value!r}")
        for _, _, values in self.conditions:
            for value in values:
                if "${" in value:
                    raise UnsupportedPolicy(f"policy variable in a condition: {value!r}")

    @property
    def effect(self) -> str:
        return str(self._statement["Effect"])

    @property
    def sid(self) -> str | None:
        sid = self._statement.get("Sid")
        return str(sid) if sid is not None else None

    @property
    def document(self) -> dict[str, Any]:
        return dict(self._statement)

    def covers_action(self, action: str) -> bool:
        if "NotAction" in self._statement:
            return not any(
                action_matches(p, action) for p in _strings(self._statement["NotAction"])
            )
        return any(action_matches(p, action) for p in _strings(self._statement.get("Action", [])))

    def covers_resource(self, resource: str) -> bool:
        if "NotResource" in self._statement:
            return not any(arn_like(p, resource) for p in _strings(self._statement["NotResource"]))
        return any(arn_like(p, resource) for p in _strings(self._statement.get("Resource", [])))

    def conditions_hold(self, request: Request) -> bool:
        return all(
            operator.holds(values, request.values(key)) for operator, key, values in self.conditions
        )

    def applies(self, request: Request) -> bool:
        return (
            self.covers_action(request.action)
            and self.covers_resource(request.resource)
            and self.conditions_hold(request)
        )

    # moto's interface: PERMITTED for an applicable Allow, DENIED for an applicable Deny,
    # NEUTRAL when the statement does not apply (moto answered DENIED for a failed condition).
    def is_action_permitted(
        self,
        action: str,
        resource: str = "*",
        principal: str | None = None,
        incoming_condition_values: Mapping[str, Any] | None = None,
    ) -> PermissionResult:
        request = Request(action, resource, context(dict(incoming_condition_values or {})))
        if not self.applies(request):
            return PermissionResult.NEUTRAL
        return PermissionResult.PERMITTED if self.effect == "Allow" else PermissionResult.DENIED


class Policy(IAMPolicy):  # type: ignore[misc]
    """One policy document (moto's ``IAMPolicy`` reads it), with IAM's statements."""

    def __init__(self, policy: Any) -> None:
        super().__init__(policy)
        document = self._policy_json
        if document.get("Version") not in ("2012-10-17", "2008-10-17"):
            raise UnsupportedPolicy(f"policy Version {document.get('Version')!r}")
        raw = document.get("Statement", [])
        self.statements = [Statement(s) for s in (raw if isinstance(raw, list) else [raw])]

    def is_action_permitted(
        self,
        action: str,
        resource: str = "*",
        principal: str | None = None,
        incoming_condition_values: Mapping[str, Any] | None = None,
    ) -> PermissionResult:
        results = [
            s.is_action_permitted(action, resource, principal, incoming_condition_values)
            for s in self.statements
        ]
        if PermissionResult.DENIED in results:
            return PermissionResult.DENIED
        if PermissionResult.PERMITTED in results:
            return PermissionResult.PERMITTED
        return PermissionResult.NEUTRAL


@dataclass(frozen=True)
class Decision:
    request: Request
    allowed: bool
    explicit_deny: bool
    # The statements that decided: the Deny statements that applied, else the Allow ones.
    matched: tuple[Statement, ...] = ()

    @property
    def reason(self) -> str:
        if self.explicit_deny:
            return "with an explicit deny in an identity-based policy"
        return f"because no identity-based policy allows the {self.request.action} action"


def decide(policies: Iterable[Policy], request: Request) -> Decision:
    """IAM's verdict for one request under a principal's identity-based policies."""
    statements = [s for p in policies for s in p.statements]
    applying = [s for s in statements if s.applies(request)]
    denies = tuple(s for s in applying if s.effect == "Deny")
    if denies:
        return Decision(request, allowed=False, explicit_deny=True, matched=denies)
    allows = tuple(s for s in applying if s.effect == "Allow")
    return Decision(request, allowed=bool(allows), explicit_deny=False, matched=allows)


def load(document: str | Mapping[str, Any]) -> Policy:
    """A policy from its JSON text or document."""
    return Policy(document if isinstance(document, str) else json.dumps(document))
