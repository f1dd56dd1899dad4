"""The ``invalid_request`` answer, built from a ``pydantic.ValidationError``.

The answer goes back to whoever sent the bad request, and to the logs: it must be
JSON-serializable, bounded in size, and must not echo large or odd input back.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ConfigDict, ValidationError

from .common import (
    IMAGE_ID_PATTERN,
    INSTANCE_TYPE_FILTER_PATTERN,
    INSTANCE_TYPE_PATTERN,
    LAUNCH_TEMPLATE_ID_PATTERN,
    LAUNCH_TEMPLATE_VERSION_PATTERN,
    PLACEMENT_GROUP_ARN_PATTERN,
    REGION_PATTERN,
    REQUEST_ID_PATTERN,
    RESERVATION_ID_PATTERN,
    STACK_NAME_PATTERN,
    SUBNET_ID_PATTERN,
    ResponseModel,
    is_request_id,
)

MAX_ERRORS = 20  # a list of 10 000 bad items must not make a 10 000-line answer
MAX_SEGMENT = 64  # characters of one path segment (a tag key can be 128, or garbage)
MAX_MESSAGE = 300

_shown = reprlib.Repr()
_shown.maxstring = 40
_shown.maxother = 40
_shown.maxlist = _shown.maxtuple = _shown.maxdict = _shown.maxset = 3
_shown.maxlevel = 2

# These answers are for bad requests and broken settings only: their validators are built on
# the first such answer (``defer_build``), not when a handler is imported (every handler
# imports this module; a good request never needs them: cold import, issue 44).


class FieldError(ResponseModel):
    model_config = ConfigDict(defer_build=True)

    field: str
    message: str


class InvalidRequestResponse(ResponseModel):
    model_config = ConfigDict(defer_build=True)

    status: Literal["invalid_request"] = "invalid_request"
    request_id: str | None
    errors: list[FieldError]
    message: str


class ErrorResponse(ResponseModel):
    """Any entry point's answer when it could not do its job (configuration, AWS failure)."""

    model_config = ConfigDict(defer_build=True)

    status: Literal["error"] = "error"
    request_id: str | None
    error_code: str | None = None
    message: str


# Friendlier words for pydantic's commonest error types.
_MESSAGES = {
    "missing": "is required",
    "extra_forbidden": "is not a known field",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
    "string_type": "must be a string",
    "int_type": "must be an integer (not a string, float or boolean)",
    "bool_type": "must be true or false",
    "list_type": "must be a list",
    "json_invalid": "is not valid JSON",
}

# What each pattern means, in words (pydantic would quote the regular expression).
_PATTERNS = {
    REQUEST_ID_PATTERN: "must be 1-128 letters, digits or . _ : -",
    SUBNET_ID_PATTERN: "must be a subnet id (subnet- and 8 to 17 hex digits)",
    IMAGE_ID_PATTERN: "must be an AMI id (ami- and 8 to 17 hex digits)",
    RESERVATION_ID_PATTERN: "must be a Capacity Reservation id (cr- and 8 to 17 hex digits)",
    LAUNCH_TEMPLATE_ID_PATTERN: "must be a launch template id (lt- and 8 to 17 hex digits)",
    INSTANCE_TYPE_PATTERN: "must be an EC2 instance type such as c7i.48xlarge",
    STACK_NAME_PATTERN: (
        "must be a CloudFormation stack name (a letter, then letters, digits or hyphens; "
        "at most 128)"
    ),
    REGION_PATTERN: "must be an AWS Region name such as us-east-1",
    LAUNCH_TEMPLATE_VERSION_PATTERN: 'must be "$Latest", "$Default" or a version number',
    INSTANCE_TYPE_FILTER_PATTERN: "must be an instance type or a pattern such as p5.*",
    PLACEMENT_GROUP_ARN_PATTERN: "must be the ARN of an EC2 placement group",
}


def _safe(text: str, limit: int) -> str:
    """Printable, bounded text: control characters and lone surrogates escaped."""
    if len(text) > limit:
        text = text[:limit] + "..."
    if text.isprintable() and text.isascii():
        return text
    # repr() escapes everything non-printable (NUL, newlines, lone surrogates) as \x.. / \u..
    return repr(text)[1:-1]


def _field(loc: tuple[int | str, ...]) -> tuple[str, bool]:
    """Dotted path (``subnet_ids.1``), and whether the error is about a mapping key."""
    parts: list[str] = []
    about_key = False
    for part in loc:
        if part == "[key]":
            about_key = True
            continue
        parts.append(_safe(str(part), MAX_SEGMENT))
    return (".".join(parts) or "request"), about_key


def _message(error: Mapping[str, Any]) -> str:
    kind = str(error.get("type", ""))
    text = _MESSAGES.get(kind)
    if text is None:
        text = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
        if kind == "string_pattern_mismatch":
            pattern = str((error.get("ctx") or {}).get("pattern", ""))
            text = _PATTERNS.get(pattern, text)
            text = f"{text}, got {_shown.repr(error.get('input'))}"
    return _safe(text, MAX_MESSAGE)


def invalid_request(error: ValidationError, request_id: str | None) -> dict[str, Any]:
    """``{"status": "invalid_request", "request_id", "errors": [{"field", "message"}], ...}``.

    ``request_id`` should come from :func:`request_id_from` (or be generated); a value that
    does not match the contract's pattern is not echoed. ``request_id`` is always present
    (``null`` when unknown), unlike optional fields of other answers.
    """
    raw = error.errors(include_url=False)
    fields: list[FieldError] = []
    for item in raw[:MAX_ERRORS]:
        path, about_key = _field(tuple(item.get("loc", ())))
        text = _message(item)
        fields.append(FieldError(field=path, message=f"key {text}" if about_key else text))
    summary = "; ".join(f"{f.field}: {f.message}" for f in fields[:5])
    if len(raw) > MAX_ERRORS:
        fields.append(
            FieldError(field="request", message=f"{len(raw) - MAX_ERRORS} more problems not shown")
        )
    count = f"{len(raw)} problem{'s' if len(raw) != 1 else ''}"
    answer = InvalidRequestResponse(
        request_id=request_id if request_id is not None and is_request_id(request_id) else None,
        errors=fields,
        message=_safe(f"Invalid request ({count}): {summary}", 2 * MAX_MESSAGE),
    )
    return answer.model_dump(mode="json")
