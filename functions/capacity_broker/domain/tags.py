"""Ownership tags: what the broker puts on every reservation it creates, and how it knows its own.

The broker only ever cancels what it owns, and ownership is read from tags alone (no state
table is required), so these keys are part of the public contract.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from enum import StrEnum

from .lookalikes import LOOKALIKES

TAG_PREFIX = "capacity-broker:"
TAG_CLUSTER_ID = "capacity-broker:cluster-id"
TAG_PURPOSE = "capacity-broker:purpose"
TAG_REQUEST_ID = "capacity-broker:request-id"
TAG_JOB_ID = "capacity-broker:job-id"
TAG_STACK_NAME = "capacity-broker:stack-name"
TAG_SUBNET_ID = "capacity-broker:subnet-id"
# A hold's request identity (``tokens.identity_digest``): without a state table, how a later
# ask under the same request id knows whether it is the same request.
TAG_REQUEST_DIGEST = "capacity-broker:request-digest"
# A grouped probe's holds: the group's id, so every member can find them by this exact tag
# (a member that stops waiting gives back whatever its group still holds).
TAG_GROUP_ID = "capacity-broker:group-id"
TAG_NAME = "Name"

OWNERSHIP_KEYS = frozenset(
    {
        TAG_CLUSTER_ID,
        TAG_PURPOSE,
        TAG_REQUEST_ID,
        TAG_JOB_ID,
        TAG_STACK_NAME,
        TAG_SUBNET_ID,
        TAG_REQUEST_DIGEST,
        TAG_GROUP_ID,
        TAG_NAME,
    }
)

# EC2's tag limits (EC2 User Guide, "Tag your Amazon EC2 resources", tag restrictions): 50
# tags per resource (aws: ones not counted), keys up to 127 and values up to 255 Unicode
# characters. (AWS's general tagging pages, and the EC2 page between 2018 and 2022, say 128
# and 256; the stricter limits are the ones that hold for EC2 either way.)
MAX_KEY_LENGTH = 127
MAX_VALUE_LENGTH = 255
MAX_TAGS_PER_RESOURCE = 50


class Purpose(StrEnum):
    PROBE = "probe"
    HOLD = "hold"


RESERVED_PREFIXES = ("aws:", TAG_PREFIX)
# Invisible characters (format controls such as U+200B, U+00AD) and combining marks: they
# change no letter a reader sees.
_UNSEEN = frozenset({"Cf", "Mn", "Me"})
_ANY_LOOKALIKE = frozenset("".join(LOOKALIKES.values()))


def is_reserved_key(key: str) -> bool:
    """True for keys a request may not set: ``aws:`` (EC2 refuses them) and the broker's own,
    and every key that reads as one of them.

    Compared case-insensitively (EC2 refuses ``AWS:`` too, and a ``Capacity-Broker:purpose``
    key would look like ownership to a human reading the console), after NFKC (fullwidth and
    other compatibility forms), without invisible characters and marks, and with each
    character of the prefix matched by any character confusable with it (Unicode's
    confusables, ``lookalikes``): ``capacity‐broker:`` (U+2010) and ``cаpacity-broker:``
    (Cyrillic а) are reserved as well.
    """
    seen = list(_as_read(key))
    return any(_reads_as(seen, prefix) for prefix in RESERVED_PREFIXES)


def _as_read(key: str) -> Iterable[str]:
    """The key's characters as a reader sees them: a known lookalike as it is, any other
    character in its NFKC form, case folded; invisible ones and marks left out."""
    for char in key:
        if unicodedata.category(char) in _UNSEEN:
            continue
        if char in _ANY_LOOKALIKE:
            yield char
            continue
        for part in unicodedata.normalize("NFKC", char).casefold():
            if unicodedata.category(part) not in _UNSEEN:
                yield part


def _reads_as(seen: list[str], prefix: str) -> bool:
    if len(seen) < len(prefix):
        return False
    return all(c == p or c in LOOKALIKES.get(p, "") for c, p in zip(seen, prefix, strict=False))


def name_tag(purpose: Purpose | str, request_id: str) -> str:
    """The ``Name`` tag: ``capacity-broker-<purpose>-<request id>``, cut to EC2's value limit
    (a request id of at most 128 characters never reaches it)."""
    return f"capacity-broker-{Purpose(purpose).value}-{request_id}"[:MAX_VALUE_LENGTH]


def ownership_tags(
    cluster_id: str,
    purpose: Purpose | str,
    request_id: str,
    subnet_id: str,
    job_id: str | None = None,
    stack_name: str | None = None,
    extra: Mapping[str, str] | None = None,
    request_digest: str | None = None,
    group_id: str | None = None,
) -> dict[str, str]:
    """Every tag a new reservation gets: the request's own ``extra`` tags plus ownership.

    Ownership always wins: an ``extra`` key that is reserved (or is ``Name``) is dropped, so a
    request can never make a reservation look like another cluster's or another job's.
    """
    purpose = Purpose(purpose)
    for label, value in (
        ("cluster_id", cluster_id),
        ("request_id", request_id),
        ("subnet_id", subnet_id),
    ):
        if not value:
            raise ValueError(f"{label} is required for ownership tags")
    tags: dict[str, str] = {}
    for key, value in (extra or {}).items():
        if key == TAG_NAME or is_reserved_key(key):
            continue
        tags[key] = value
    tags[TAG_CLUSTER_ID] = cluster_id
    tags[TAG_PURPOSE] = purpose.value
    tags[TAG_REQUEST_ID] = request_id
    tags[TAG_SUBNET_ID] = subnet_id
    if job_id:
        tags[TAG_JOB_ID] = job_id
    if stack_name:
        tags[TAG_STACK_NAME] = stack_name
    if request_digest:
        tags[TAG_REQUEST_DIGEST] = request_digest
    if group_id:
        tags[TAG_GROUP_ID] = group_id
    tags[TAG_NAME] = name_tag(purpose, request_id)
    for key, value in tags.items():
        if not 1 <= len(key) <= MAX_KEY_LENGTH:
            raise ValueError(f"tag key {key[:40]!r}... is not 1-{MAX_KEY_LENGTH} characters")
        if len(value) > MAX_VALUE_LENGTH:
            raise ValueError(f"tag {key!r} is longer than {MAX_VALUE_LENGTH} characters")
    if len(tags) > MAX_TAGS_PER_RESOURCE:
        raise ValueError(f"{len(tags)} tags; EC2 allows {MAX_TAGS_PER_RESOURCE} per resource")
    return tags


def tag_dict(tag_list: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    """EC2's ``[{"Key": k, "Value": v}, ...]`` as a plain mapping."""
    return {tag["Key"]: tag.get("Value", "") for tag in tag_list or () if "Key" in tag}


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """A plain mapping as EC2's ``[{"Key": k, "Value": v}, ...]`` (for TagSpecifications)."""
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def purpose_of(tags: Mapping[str, str]) -> Purpose | None:
    """The purpose tag, when it names a purpose this broker knows."""
    raw = tags.get(TAG_PURPOSE)
    try:
        return Purpose(raw) if raw is not None else None
    except ValueError:
        return None


def other_cluster(tags: Mapping[str, str], cluster_id: str) -> str | None:
    """The broker cluster other than ``cluster_id`` that a resource is tagged for, or ``None``
    when it is tagged for this cluster or for none (contract v3, "Other clusters").

    Any spelling of the key counts (IAM reads the tag key of an ``aws:ResourceTag/<key>``
    condition without case, and a ``Capacity-Broker:Cluster-Id`` tag says the same to a
    person), and an empty value is another cluster's too: only this cluster's id is ours.
    The deployed IAM holds to the same rule (``infra/permissions.py``, launches into
    reservations: ``StringEqualsIfExists`` on the tag).
    """
    for key, value in tags.items():
        if key.casefold() == TAG_CLUSTER_ID and value != cluster_id:
            return value
    return None


def is_owned(tags: Mapping[str, str], cluster_id: str) -> bool:
    """Owned = ``capacity-broker:cluster-id`` equal to this cluster AND a purpose tag.

    The purpose must be one this broker writes (probe, hold): an unknown value is something
    the broker did not create, and erring on "not ours" can only spare a reservation, never
    cancel someone else's.
    """
    if not cluster_id:
        return False
    return tags.get(TAG_CLUSTER_ID) == cluster_id and purpose_of(tags) is not None
