"""The launch template versions the broker makes: how it knows its own, which version a
request builds on, and when a version may be deleted.

EC2 cannot tag a launch template version ("You can tag a launch template, but you can't tag
a launch template version"), so a version says whose it is in its description, which EC2
keeps as given (up to 255 characters). The description starts with a marker:

    cb1:<owner>:<request>:<job>:<stack> capacity-broker[ stack=<name>] job=<job> hold=<cr-…>

- ``owner`` digests (cluster id, template id, the reservation the version targets): only this
  cluster computes it, and only for a version whose data targets that reservation. A version
  is the broker's own when its description carries the owner digest recomputed from its own
  data, so a user's version is never taken for one by accident, nor a copy of a broker version
  made with SourceVersion (EC2 does not copy descriptions).
- ``request``, ``job`` and ``stack`` digest the request id, job id and stack name (``-``
  without a stack): a retry finds the version an earlier invocation of its request made,
  ``release`` finds a job's versions, a stack event finds the stack's, however long the names
  (the readable part is cut at 255 characters, the digests never are).
- the stack name is written in full as well, since the sweep must ask CloudFormation about it;
  it is trusted only when it matches its digest.

Deletion (contract: "deleted once nothing can launch from them any more (the job released
with no stack, or its stack deleted)"): never the default version, never a version that is
not the broker's own. A version made for a stack is deleted once the stack is gone (the stack
may still reference it until then). A version without a stack is deleted when its job is
released, or when the reservation it targets has ended: it is ``capacity-reservations-only``
into that one reservation, so nothing can launch from it any more.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from .clock import utc
from .tags import TAG_CLUSTER_ID, other_cluster

MARKER = "cb1"
DESCRIPTION_MAX = 255
_DIGEST = 12  # hex characters: 48 bits, no collision among a template's versions in practice
NO_STACK = "-"

# A targeted reservation in one of these states takes no launch (EC2: "You can only launch an
# instance into a Capacity Reservation that ... is in the active state"); none comes back.
ENDED_STATES = frozenset({"cancelled", "expired", "failed", "unsupported"})


def template_refusal(template_id: str, tags: Mapping[str, str], cluster_id: str) -> str | None:
    """Why the broker may not write versions into (and launch from) this template, or
    ``None``: only templates tagged ``capacity-broker:cluster-id`` = this cluster are its to
    use, the rule the deployed IAM grants hold to (docs/deploy.md, "tag your launch
    templates"), checked here too so direct mode (the CLI, the Slurm programs) never writes
    into another cluster's template and the Lambdas refuse before anything is held."""
    other = other_cluster(tags, cluster_id)
    if other is not None:
        return (
            f"launch template {template_id} belongs to broker cluster {other!r} (its "
            f"{TAG_CLUSTER_ID} tag), not to this one ({cluster_id!r})"
        )
    if tags.get(TAG_CLUSTER_ID) != cluster_id:
        return (
            f"launch template {template_id} is not tagged {TAG_CLUSTER_ID}={cluster_id}: tag "
            "it to let this broker cluster write its versions and launch from it"
        )
    return None


def _digest(*parts: str) -> str:
    canonical = json.dumps(list(parts), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:_DIGEST]


def owner_digest(cluster_id: str, template_id: str, reservation_id: str) -> str:
    return _digest("owner", cluster_id, template_id, reservation_id)


def request_digest(request_id: str) -> str:
    return _digest("request", request_id)


def job_digest(job_id: str) -> str:
    return _digest("job", job_id)


def stack_digest(stack_name: str | None) -> str:
    return _digest("stack", stack_name) if stack_name else NO_STACK


def description(
    cluster_id: str,
    template_id: str,
    reservation_id: str,
    request_id: str,
    job_id: str,
    stack_name: str | None,
) -> str:
    """The description of a version the broker makes (deterministic: a retry of the same
    request sends the same one, which EC2 compares under the ClientToken)."""
    marker = ":".join(
        (
            MARKER,
            owner_digest(cluster_id, template_id, reservation_id),
            request_digest(request_id),
            job_digest(job_id),
            stack_digest(stack_name),
        )
    )
    stack = f" stack={stack_name}" if stack_name else ""
    return f"{marker} capacity-broker{stack} job={job_id} hold={reservation_id}"[:DESCRIPTION_MAX]


@dataclass(frozen=True)
class Marked:
    """What a broker-made version's description says (before ownership is checked)."""

    owner: str
    request: str
    job: str
    stack: str  # digest, or NO_STACK
    stack_name: str | None  # in clear, when its digest confirms it


def parse(text: str | None) -> Marked | None:
    """The marker of a description, or None when it has none (any broker cluster's)."""
    head, _, rest = (text or "").partition(" ")
    fields = head.split(":")
    if len(fields) != 5 or fields[0] != MARKER:
        return None
    owner, request, job, stack = fields[1:]
    if not all(_is_digest(d) for d in (owner, request, job)):
        return None
    if stack != NO_STACK and not _is_digest(stack):
        return None
    stack_name = None
    words = rest.split(" ")
    if stack != NO_STACK and len(words) > 1 and words[1].startswith("stack="):
        candidate = words[1].removeprefix("stack=")
        stack_name = candidate if stack_digest(candidate) == stack else None
    return Marked(owner, request, job, stack, stack_name)


def _is_digest(text: str) -> bool:
    return len(text) == _DIGEST and all(c in "0123456789abcdef" for c in text)


def is_broker_made(text: str | None) -> bool:
    """Made by a broker (this cluster's or another's): never a version to build on."""
    return parse(text) is not None


def target_of(data: Mapping[str, object] | None) -> str | None:
    """The one reservation a version's data targets, if any."""
    spec = (data or {}).get("CapacityReservationSpecification")
    target = spec.get("CapacityReservationTarget") if isinstance(spec, Mapping) else None
    found = target.get("CapacityReservationId") if isinstance(target, Mapping) else None
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class Version:
    """A launch template version as DescribeLaunchTemplateVersions shows it."""

    template_id: str
    number: int
    description: str | None
    data: Mapping[str, object]
    is_default: bool = False
    created: datetime | None = None


@dataclass(frozen=True)
class OwnVersion:
    """A version this cluster's broker made (``owned`` said so)."""

    version: Version
    marked: Marked
    target: str

    @property
    def ref(self) -> str:
        return f"{self.version.template_id}:{self.version.number}"


def owned(version: Version, cluster_id: str) -> OwnVersion | None:
    """The version as this cluster's own, or None: its marker's owner digest must be the one
    this cluster computes for the reservation the version's own data targets."""
    marked = parse(version.description)
    target = target_of(version.data)
    if marked is None or target is None or not cluster_id:
        return None
    if marked.owner != owner_digest(cluster_id, version.template_id, target):
        return None
    return OwnVersion(version, marked, target)


def made_for(own: OwnVersion, request_id: str, reservation_id: str) -> bool:
    """Whether an invocation of ``request_id`` made this version for this reservation."""
    return own.target == reservation_id and own.marked.request == request_digest(request_id)


def newest_user_version(versions: list[Version]) -> Version | None:
    """``$Latest`` as the broker reads it: the newest version no broker made.

    A broker-made version targets another job's reservation (and may name its placement
    group): building on it would carry that job's settings into this one. It also keeps the
    choice stable: the version an earlier invocation of the same request made never becomes
    the source of the retry, so the retry sends EC2 the same parameters under the same
    ClientToken and gets the same version back.
    """
    mine = [v for v in versions if not is_broker_made(v.description)]
    return max(mine, key=lambda v: v.number, default=None)


# -- deletion ----------------------------------------------------------------------------------


class Gone:
    """Stack or reservation lookups that found nothing (never created, or deleted)."""


GONE = Gone()
# A stack's status, GONE, or None when the lookup failed (nothing is concluded then).
StackFact = str | Gone | None
# A reservation's state, GONE, or None when the lookup failed.
TargetFact = str | Gone | None


@dataclass(frozen=True)
class Verdict:
    delete: bool
    reason: str


def version_verdict(
    own: OwnVersion,
    now: datetime,
    grace: timedelta,
    *,
    stack: StackFact = None,
    target: TargetFact = None,
    released: bool = False,
) -> Verdict:
    """Delete one of this cluster's versions, or keep it, and why.

    ``grace`` shields young versions from "not found" answers: EC2 and CloudFormation are
    eventually consistent, and a job's stack may not exist yet when its version is made.
    """
    version = own.version
    if version.is_default:
        return Verdict(False, "the template's default version")
    created = version.created
    young = created is not None and utc(now) - utc(created, "created") <= grace
    if own.marked.stack != NO_STACK:
        if isinstance(stack, Gone):
            if young:
                return Verdict(False, "young version, stack not seen yet")
            return Verdict(True, "stack deleted")
        if isinstance(stack, str) and stack.strip().upper() == "DELETE_COMPLETE":
            return Verdict(True, "stack deleted")
        return Verdict(False, f"stack {stack.strip().upper()}" if stack else "stack unknown")
    if released:
        return Verdict(True, "job released")
    if isinstance(target, str) and target in ENDED_STATES:
        return Verdict(True, f"reservation {target}")
    if isinstance(target, Gone) and not young:
        return Verdict(True, "reservation gone")
    return Verdict(False, f"reservation {target}" if isinstance(target, str) else "in use")
