"""EC2's tag rules, applied to what callers ask for (CreateTags, DeleteTags, TagSpecifications).

EC2 User Guide, "Tag your Amazon EC2 resources", tag restrictions: at most 50 tags per
resource, keys of at most 127 and values of at most 255 Unicode characters, and the ``aws:``
prefix "is reserved for AWS use. If a tag has a tag key with this prefix, then you can't edit
or delete the tag's key or value. Tags with the aws: prefix do not count against your tags per
resource limit." Tags EC2 sets itself (a Capacity Block's size) bypass these checks: they are
written by the emulator's models, never through a caller's request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..exceptions import client_error

MAX_KEY_LENGTH = 127
MAX_VALUE_LENGTH = 255
MAX_TAGS_PER_RESOURCE = 50
RESERVED_PREFIX = "aws:"


def is_reserved(key: str) -> bool:
    # Any case: AWS's tagging guide reserves "aws:, AWS:, or any upper or lowercase
    # combination of such as a prefix".
    return key.casefold().startswith(RESERVED_PREFIX)


def check_new(tags: Mapping[str, str | None]) -> None:
    """Tags a caller wants to set: refused as a whole when one breaks a rule."""
    for key, value in tags.items():
        if not key:
            raise client_error("InvalidParameterValue", "Tag key cannot be empty.")
        if is_reserved(key):
            raise client_error(
                "InvalidParameterValue",
                f"Tag keys starting with '{RESERVED_PREFIX}' are reserved for internal use",
            )
        if len(key) > MAX_KEY_LENGTH:
            raise client_error(
                "InvalidParameterValue",
                f"Tag key exceeds the maximum length of {MAX_KEY_LENGTH} characters",
            )
        if value is not None and len(value) > MAX_VALUE_LENGTH:
            raise client_error(
                "InvalidParameterValue",
                f"Tag value exceeds the maximum length of {MAX_VALUE_LENGTH} characters",
            )


def check_count(existing: Mapping[str, str], new: Iterable[str]) -> None:
    """At most 50 tags per resource once ``new`` keys are added; ``aws:`` tags do not count."""
    keys = {k for k in existing if not is_reserved(k)} | {k for k in new if not is_reserved(k)}
    if len(keys) > MAX_TAGS_PER_RESOURCE:
        raise client_error(
            "TagLimitExceeded", "The maximum number of Tags for a resource has been reached."
        )


def check_removable(keys: Iterable[str]) -> None:
    for key in keys:
        if is_reserved(key):
            raise client_error(
                "InvalidParameterValue",
                f"Tag keys starting with '{RESERVED_PREFIX}' are reserved for internal use",
            )
