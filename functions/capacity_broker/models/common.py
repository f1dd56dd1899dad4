"""What the entry points' models share: field types (contract, "Common request rules"), the
request and answer base classes, and the request id helpers.

Every string type has an explicit length bound and an ASCII pattern or a character check, so
odd Unicode, NUL bytes and megabyte strings are refused by validation, not by the code (or
the AWS call) behind it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic import StringConstraints as S

from ..domain.platform import DEFAULT_PLATFORM, PLATFORMS
from ..domain.tags import MAX_KEY_LENGTH, MAX_VALUE_LENGTH, is_reserved_key

REQUEST_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
SUBNET_ID_PATTERN = r"^subnet-[0-9a-f]{8,17}$"
IMAGE_ID_PATTERN = r"^ami-[0-9a-f]{8,17}$"
RESERVATION_ID_PATTERN = r"^cr-[0-9a-f]{8,17}$"
LAUNCH_TEMPLATE_ID_PATTERN = r"^lt-[0-9a-f]{8,17}$"
# family[-variant].size[-variant]: g6.xlarge, p6-b200.48xlarge, u-6tb1.112xlarge,
# m7i-flex.large, r7iz.metal-16xl (every InstanceType in botocore's EC2 model matches).
INSTANCE_TYPE_PATTERN = r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*\.[a-z0-9]+(?:-[a-z0-9]+)*$"
# CloudFormation: letters, digits and hyphens, starting with a letter, at most 128.
STACK_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9-]{0,127}$"
# "$Latest", "$Default" or a version number (EC2 numbers versions from 1).
LAUNCH_TEMPLATE_VERSION_PATTERN = r"^(?:\$Latest|\$Default|[1-9][0-9]{0,17})$"
# Capacity listings may filter with EC2's "*" wildcard (e.g. "p5.*").
INSTANCE_TYPE_FILTER_PATTERN = r"^[a-z0-9*][a-z0-9.*-]{0,63}$"
REGION_PATTERN = r"^[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}$"
PLACEMENT_GROUP_ARN_PATTERN = (
    r"^arn:aws(?:-[a-z]+)*:ec2:[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}:[0-9]{12}"
    r":placement-group/[!-~]{1,255}$"
)

MAX_SUBNETS = 20
MAX_INSTANCE_TYPES = 10
MAX_TAGS = 20
MAX_INSTANCE_COUNT = 1000
MAX_REGIONS = 40

RequestId = Annotated[str, S(max_length=128, pattern=REQUEST_ID_PATTERN)]
SubnetId = Annotated[str, S(max_length=24, pattern=SUBNET_ID_PATTERN)]
ImageId = Annotated[str, S(max_length=21, pattern=IMAGE_ID_PATTERN)]
ReservationId = Annotated[str, S(max_length=20, pattern=RESERVATION_ID_PATTERN)]
LaunchTemplateId = Annotated[str, S(max_length=20, pattern=LAUNCH_TEMPLATE_ID_PATTERN)]
InstanceType = Annotated[str, S(max_length=64, pattern=INSTANCE_TYPE_PATTERN)]
StackName = Annotated[str, S(max_length=128, pattern=STACK_NAME_PATTERN)]
Region = Annotated[str, S(max_length=32, pattern=REGION_PATTERN)]
PlacementGroupArn = Annotated[str, S(max_length=400, pattern=PLACEMENT_GROUP_ARN_PATTERN)]
InstanceCount = Annotated[int, Field(ge=1, le=MAX_INSTANCE_COUNT)]
Tenancy = Literal["default", "dedicated"]

T = TypeVar("T")

# Control characters and lone surrogates: they break tags, logs and UTF-8 encoding.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cs"})


def empty_list() -> list[Any]:
    """A new empty list: the default factory of the models' list fields. Not ``list`` itself:
    pydantic reads a default factory's signature, and ``inspect.signature(list)`` parses the
    builtin's text signature with ``tokenize``, whose patterns are then compiled: about 2 ms of
    every handler's cold import, for nothing."""
    return []


def unique(values: list[T]) -> list[T]:
    """Refuse repeats (a subnet twice would be probed, and billed, twice)."""
    seen: set[T] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"must not repeat {str(value)[:64]!r}")
        seen.add(value)
    return values


def _platform(value: str) -> str:
    if value not in PLATFORMS:
        raise ValueError(
            "must be one of EC2's CapacityReservationInstancePlatform values "
            f"(e.g. {DEFAULT_PLATFORM!r}, 'Windows', 'Red Hat Enterprise Linux')"
        )
    return value


def _no_control_characters(value: str) -> str:
    for char in value:
        if unicodedata.category(char) in _FORBIDDEN_CATEGORIES:
            raise ValueError(f"must not contain control characters (found U+{ord(char):04X})")
    return value


def _printable(value: str) -> str:
    if not value.isprintable():
        raise ValueError("must contain printable characters only (no tabs, newlines or NULs)")
    return value


def _tag_key(value: str) -> str:
    if is_reserved_key(value):
        raise ValueError(
            "may not start with 'aws:' or 'capacity-broker:', in any case or with characters "
            "that look like theirs"
        )
    return value


SubnetIds = Annotated[
    list[SubnetId], Field(min_length=1, max_length=MAX_SUBNETS), AfterValidator(unique)
]
InstanceTypes = Annotated[
    list[InstanceType],
    Field(min_length=1, max_length=MAX_INSTANCE_TYPES),
    AfterValidator(unique),
]
Regions = Annotated[
    list[Region], Field(min_length=1, max_length=MAX_REGIONS), AfterValidator(unique)
]
Platform = Annotated[str, S(max_length=64), AfterValidator(_platform)]
JobId = Annotated[str, S(min_length=1, max_length=128), AfterValidator(_printable)]
TagKey = Annotated[
    str,
    S(min_length=1, max_length=MAX_KEY_LENGTH),
    AfterValidator(_no_control_characters),
    AfterValidator(_tag_key),
]
TagValue = Annotated[str, S(max_length=MAX_VALUE_LENGTH), AfterValidator(_no_control_characters)]
Tags = Annotated[dict[TagKey, TagValue], Field(max_length=MAX_TAGS)]


class RequestModel(BaseModel):
    """Requests: unknown fields refused, no type coercion ("5" is not 5, 1 is not true)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        hide_input_in_errors=True,
        # Rust regex: "$" is the end of the text; Python's re would let "id\n" through.
        regex_engine="rust-regex",
    )


class ResponseModel(BaseModel):
    """Answers: ``model_dump(mode="json", exclude_none=True)`` is the contract's JSON."""

    model_config = ConfigDict(extra="forbid")

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", exclude_none=True)


_REQUEST_ID = re.compile(REQUEST_ID_PATTERN)


def is_request_id(value: object) -> bool:
    """True for a string the contract accepts as ``request_id``."""
    return isinstance(value, str) and len(value) <= 128 and _REQUEST_ID.fullmatch(value) is not None


def request_id_from(event: object) -> str | None:
    """The event's ``request_id`` when it is a valid one, even if the rest of the event is not
    (so an invalid request's answer can still be matched to it); otherwise ``None``."""
    if isinstance(event, Mapping):
        value = event.get("request_id")
        if is_request_id(value):
            return str(value)
    return None


request_id_of = request_id_from
