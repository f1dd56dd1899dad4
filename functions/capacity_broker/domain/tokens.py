"""ClientTokens and EndDates for the reservations the broker creates."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from .clock import utc, whole_seconds
from .tags import Purpose

# Contract: probes live 2 minutes, holds 5 (a backstop only: EC2 enforces EndDate "within an
# hour", so the broker cancels explicitly).
PROBE_LIFETIME = timedelta(minutes=2)
HOLD_LIFETIME = timedelta(minutes=5)

# EC2: "Constraint: Maximum 64 ASCII characters."
CLIENT_TOKEN_MAX_LENGTH = 64
_DIGEST_CHARS = 48  # 192 bits: no collision in practice, and the token stays readable


# What a scheduler may change between two asks of one request (its retry counter); every other
# field of the body is part of the request's identity.
RETRY_FIELDS = frozenset({"attempt"})
# Fields added after requests were first recorded, at their defaults: left out of the identity,
# so a request that does not use them keeps the identity (and hold digest) it had before.
LATER_DEFAULTS: Mapping[str, Any] = {"capacity": "hold", "pool": None, "allow_on_demand": False}
IDENTITY_DIGEST_CHARS = 48
CHANGED_REQUEST = "was used before with a different request; use a new request id"
# The error code of an attempt that met such an earlier hold (the broker's own, as EC2 only
# says IdempotentParameterMismatch).
CHANGED_REQUEST_CODE = "ChangedRequest"


def request_identity(body: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two asks under one request id the same request (contract v3, "Request
    identity"): the whole body as the model reads it (defaults filled in), but the retry
    counter. The state table compares it (Powertools' payload validation) and, without a
    table, the hold carries its digest (``identity_digest``, a tag on create): one rule."""
    return {
        key: value
        for key, value in body.items()
        if key not in RETRY_FIELDS and not (key in LATER_DEFAULTS and value == LATER_DEFAULTS[key])
    }


def identity_digest(body: Mapping[str, Any]) -> str:
    """``request_identity`` as a short digest, for a tag (EC2's values stop at 255)."""
    canonical = json.dumps(
        request_identity(body), sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:IDENTITY_DIGEST_CHARS]


def lifetime(purpose: Purpose | str) -> timedelta:
    return PROBE_LIFETIME if Purpose(purpose) is Purpose.PROBE else HOLD_LIFETIME


def client_token(
    purpose: Purpose | str,
    request_id: str,
    instance_type: str,
    subnet_id: str,
    nonce: str | None = None,
) -> str:
    """A deterministic ClientToken for one attempt (request, instance type, subnet).

    An SDK retry of the same attempt reuses it, so EC2 never creates a second reservation.
    The inputs are hashed (not joined) because a request id alone can be 128 characters; they
    are JSON-encoded first so ("a-b", "c") and ("a", "b-c") cannot meet. ``nonce`` lets a caller
    that wants a fresh reservation for the same request (a new probe) ask for a new token.
    """
    purpose = Purpose(purpose)
    canonical = json.dumps(
        [purpose.value, request_id, instance_type, subnet_id, nonce], ensure_ascii=True
    )
    digest = hashlib.sha256(canonical.encode("ascii")).hexdigest()[:_DIGEST_CHARS]
    return f"cb-{purpose.value}-{digest}"


def token_nonce(purpose: Purpose | str, generation: int, end: datetime) -> str | None:
    """The ``client_token`` nonce of an attempt's ``generation`` (0: none, the plain token).

    A later generation is used only after EC2 refused or spent the earlier ones (another
    invocation of the same request used them with another EndDate). A hold's generations
    are fixed, so duplicates of one request meet on the same tokens and EC2 makes one
    reservation. A probe's depend on the EndDate's second as well: the contract wants a probe
    answer to be fresh, so a client that reuses a request id for probe after probe gets new
    tokens every second instead of running out of them.
    """
    if generation == 0:
        return None
    if Purpose(purpose) is Purpose.PROBE:
        return f"{whole_seconds(utc(end)).strftime('%Y%m%dT%H%M%SZ')}/{generation}"
    return str(generation)


def next_generation(purpose: Purpose | str, generation: int, seen: int = 0) -> int:
    """The generation to try after ``generation`` was found spent, EC2 showing ``seen`` of
    the attempt's reservations.

    A hold's generations are used in order (each only after the one before it was spent, by
    any invocation, and each makes one reservation), so EC2 showing ``seen`` of them proves
    generations 0…``seen - 1`` spent: skip them rather than spend a create (and a listing)
    on each. A listing can miss new reservations but never shows more than were made, so the
    skip never passes a free generation, and duplicates of the request still meet on the
    same token. A probe's generations restart every second (``token_nonce``): its listing
    counts other seconds' too, and proves nothing about this second's; one step only.
    """
    if Purpose(purpose) is Purpose.HOLD:
        return max(generation + 1, seen)
    return generation + 1


def end_date(now: datetime, purpose: Purpose | str) -> datetime:
    """EndDate for a new reservation: now + its lifetime, aware UTC, whole seconds."""
    return whole_seconds(utc(now) + lifetime(purpose))
