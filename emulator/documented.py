"""What botocore's EC2 model documents for each operation, and the requests EC2 refuses for it.

AWS's documentation is the spec, not this emulator: a request that uses a filter name, an enum
value or a parameter the model does not document for its operation is refused here as EC2
refuses it, so the next undocumented call fails in the tests instead of on AWS. The model is
botocore's own (``service-2.json`` of the installed botocore, read at run time through
botocore's loader), never a hand list:

- **filter names**: "The filters supported by a describe operation are documented with the
  describe operation" (EC2 API Reference, ``Filter``). The model carries them only in prose:
  the top-level items of the operation's ``Filters`` documentation, one ``<code>name</code>``
  each (``tag:<key>`` stands for every tag key). An unknown one is ``InvalidParameterValue``,
  "The filter 'x' is invalid" (what EC2 answered in boto/boto3#1299 for ``public-ip`` on
  DescribeInstances, and in aws/aws-cli#7225 for ``tag:Name`` on DescribeInstanceStatus, whose
  documentation lists no tag filter). Where the prose is known to be incomplete, a small list
  (``ALSO_DOCUMENTED``) names the filter and the evidence. An operation whose documentation
  lists no names at all is not checked (nothing to check against).
- **enum values**: a string member whose shape has an ``enum`` takes one of its values
  (``InvalidParameterValue``; botocore documents enums and does not check them, EC2 does),
  except the few EC2 checks itself with codes of its own (``SELF_CHECKED_ENUMS``: instance
  types).
- **parameters**: a request parameter the operation's input shape does not have is
  ``UnknownParameter`` ("An unknown or unrecognized parameter was supplied", "Error codes for
  the Amazon EC2 API"); a required member left out is ``MissingParameter``; a number outside the
  shape's ``min``/``max`` is ``InvalidParameterValue``.

On by default (``Settings.refuse_undocumented``); off, the request is served as before. Either
way every undocumented use is written to ``heard`` (operation, what, the name), which the
integration suite checks after each test: a broker that swallows the refusal still fails there.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from botocore.loaders import Loader
from botocore.model import ServiceModel, Shape

# Filters the model's prose leaves out but EC2 documents (or is known to honour) elsewhere:
# operation -> {filter name: the evidence}. Keep it small and cited.
_KARPENTER = (
    "Karpenter selects Capacity Reservations by tag with DescribeCapacityReservations filters "
    "tag:<key> and tag-key (aws/karpenter-provider-aws, pkg/providers/capacityreservation/"
    "types.go, DescribeCapacityReservationsInput), measured against EC2"
)
ALSO_DOCUMENTED: Mapping[str, Mapping[str, str]] = {
    "DescribeCapacityReservations": {"tag:<key>": _KARPENTER, "tag-key": _KARPENTER},
}
TAG_KEY_FILTER = "tag:<key>"
# Enum shapes EC2 checks itself, with its own codes, and whose botocore list is only a
# snapshot: shape name -> why it is not checked against the model.
SELF_CHECKED_ENUMS: Mapping[str, str] = {
    "InstanceType": "EC2 answers an instance type it does not offer with its own codes "
    "(DescribeInstanceTypes: InvalidInstanceType, 'The following supplied instance types do "
    "not exist'), and EC2 launches new types before a botocore release lists them",
}

# Query parameters of every request (signing, the action and the API version), not the
# operation's: "Common query parameters" in the EC2 API Reference.
_COMMON_PARAMETERS = frozenset(
    {
        "Action",
        "Version",
        "AWSAccessKeyId",
        "Signature",
        "SignatureMethod",
        "SignatureVersion",
        "Timestamp",
        "Expires",
        "SecurityToken",
    }
)


@dataclass(frozen=True)
class Finding:
    """One thing a request uses that the model does not document, and EC2's answer to it."""

    operation: str
    kind: str  # "filter", "enum", "parameter", "missing", "range"
    name: str  # the filter name, the parameter path
    value: str | None
    code: str
    message: str


# -- the model ------------------------------------------------------------------------------


@functools.cache
def service_model(service: str = "ec2") -> ServiceModel:
    """botocore's model of ``service``, as the installed botocore ships it."""
    loader = Loader()
    return ServiceModel(loader.load_service_model(service, "service-2"), service_name=service)


def operations(service: str = "ec2") -> frozenset[str]:
    return frozenset(service_model(service).operation_names)


class _FilterList(HTMLParser):
    """The filter names of a ``Filters`` documentation string: the first ``<code>`` of each
    top-level list item (nested lists document a filter's values)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self._depth = 0
        self._in_item = False
        self._code: str | None = None
        self._after: str | None = None  # text right after the item's <code>name</code>

    def handle_starttag(self, tag: str, _attrs: Any) -> None:
        if tag == "ul":
            self._depth += 1
        elif tag == "li" and self._depth == 1:
            self._in_item = True
            self._after = None
        elif tag == "code" and self._in_item and self._after is None:
            self._code = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "ul":
            self._depth -= 1
        elif tag == "code" and self._code is not None:
            self.names.append(self._code.strip())
            self._code = None
            self._after = ""
        elif tag in ("p", "li") and self._after is not None:
            self._close()

    def handle_data(self, data: str) -> None:
        if self._code is not None:
            self._code += data
        elif self._after is not None:
            self._after += data
        elif self._in_item and data.strip():
            self._in_item = False  # prose before any <code>: not a filter item

    def _close(self) -> None:
        # "<code>tag</code>:<key> - ..." and "<code>tag</code> - The key/value combination of
        # a tag" both document tag:<key> filters.
        after = (self._after or "").lstrip()
        if (
            self.names
            and self.names[-1] == "tag"
            and (after.startswith(":") or "key/value" in after)
        ):
            self.names[-1] = TAG_KEY_FILTER
        self._after = None
        self._in_item = False


@functools.cache
def filter_names(operation: str, service: str = "ec2") -> frozenset[str] | None:
    """The filter names ``operation``'s documentation lists (``tag:<key>`` for tag filters),
    with ``ALSO_DOCUMENTED``; None when the operation has no ``Filters`` or its documentation
    lists no names."""
    shape = service_model(service).operation_model(operation).input_shape
    member = shape.members.get("Filters") if shape is not None else None
    if member is None:
        return None
    parser = _FilterList()
    parser.feed(member.documentation or "")
    names = {TAG_KEY_FILTER if n.startswith("tag:") else n for n in parser.names}
    if not names:
        return None
    return frozenset(names | set(ALSO_DOCUMENTED.get(operation, {})))


def documents_filter(operation: str, name: str, service: str = "ec2") -> bool:
    names = filter_names(operation, service)
    if names is None:
        return True
    if name.startswith("tag:"):
        return TAG_KEY_FILTER in names
    return name in names


# -- the shapes, compiled once per operation ------------------------------------------------


@dataclass
class _Node:
    kind: str  # botocore's type name
    enum: frozenset[str] = frozenset()  # empty: not an enum, or one EC2 checks itself
    minimum: float | None = None
    maximum: float | None = None
    required: tuple[str, ...] = ()
    members: dict[str, _Node] = field(default_factory=dict)
    # EC2 query name of a member -> its member name (``Filter`` -> ``Filters``)
    wire: dict[str, str] = field(default_factory=dict)
    item: _Node | None = None


def _compile(shape: Shape, seen: dict[str, _Node]) -> _Node:
    known = seen.get(shape.name)
    if known is not None and shape.type_name in ("structure", "list"):
        return known  # recursive shapes: one node per shape name
    node = _Node(shape.type_name)
    if shape.type_name in ("structure", "list"):
        seen[shape.name] = node
    metadata = shape.metadata
    if shape.name not in SELF_CHECKED_ENUMS:
        node.enum = frozenset(getattr(shape, "enum", None) or ())
    node.minimum = metadata.get("min")
    node.maximum = metadata.get("max")
    if shape.type_name == "structure":
        node.required = tuple(metadata.get("required", ()))
        for name, member in shape.members.items():  # type: ignore[attr-defined]
            node.members[name] = _compile(member, seen)
            node.wire[_ec2_query_name(member, name)] = name
    elif shape.type_name == "list":
        node.item = _compile(shape.member, seen)  # type: ignore[attr-defined]
    return node


def _ec2_query_name(shape: Shape, default: str) -> str:
    """The EC2 protocol's name for a member (botocore's ``EC2Serializer``): ``queryName``, else
    the capitalised ``locationName``, else the member name."""
    serialization = shape.serialization
    if "queryName" in serialization:
        return str(serialization["queryName"])
    if "name" in serialization:
        name = str(serialization["name"])
        return name[0].upper() + name[1:]
    return default


@functools.cache
def _input(operation: str, service: str = "ec2") -> _Node | None:
    shape = service_model(service).operation_model(operation).input_shape
    return _compile(shape, {}) if shape is not None else None


# -- a request against the model ------------------------------------------------------------


def findings(
    operation: str,
    params: Mapping[str, Any],
    query_keys: Iterable[str] = (),
    service: str = "ec2",
) -> list[Finding]:
    """Everything ``params`` (parsed by member name) and the raw ``query_keys`` use that the
    model does not document for ``operation``; empty for an operation the model lacks."""
    if operation not in operations(service):
        return []
    node = _input(operation, service)
    if node is None:
        return []
    found = [*_unknown(operation, node, query_keys), *_walk(operation, node, params, "")]
    for item in params.get("Filters") or []:
        name = item.get("Name") if isinstance(item, Mapping) else None
        if isinstance(name, str) and not documents_filter(operation, name, service):
            found.append(
                Finding(
                    operation,
                    "filter",
                    name,
                    None,
                    "InvalidParameterValue",
                    f"The filter '{name}' is invalid",
                )
            )
    return found


def _unknown(operation: str, node: _Node, keys: Iterable[str]) -> Iterator[Finding]:
    for key in keys:
        if key in _COMMON_PARAMETERS or key.startswith("X-Amz-"):
            continue
        if not _known_key(node, key.split(".")):
            yield Finding(
                operation,
                "parameter",
                key,
                None,
                "UnknownParameter",
                f"The parameter {key} is not recognized",
            )


def _known_key(node: _Node, parts: list[str]) -> bool:
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    if node.kind == "structure":
        name = node.wire.get(head)
        return name is not None and _known_key(node.members[name], rest)
    if node.kind == "list" and node.item is not None:
        return head.isdigit() and _known_key(node.item, rest)
    return node.kind == "map"  # EC2 inputs have none; never refuse what cannot be read


def _walk(operation: str, node: _Node, value: Any, path: str) -> Iterator[Finding]:
    if node.kind == "structure" and isinstance(value, Mapping):
        for name in node.required:
            if value.get(name) is None:
                where = f"{path}.{name}" if path else name
                yield Finding(
                    operation,
                    "missing",
                    where,
                    None,
                    "MissingParameter",
                    f"The request must contain the parameter {where}",
                )
        for name, item in value.items():
            member = node.members.get(name)
            if member is not None:
                yield from _walk(operation, member, item, f"{path}.{name}" if path else name)
    elif node.kind == "list" and node.item is not None and isinstance(value, list):
        for item in value:
            yield from _walk(operation, node.item, item, path)
    elif node.enum and isinstance(value, str) and value not in node.enum:
        yield Finding(
            operation,
            "enum",
            path,
            value,
            "InvalidParameterValue",
            f"Value ({value}) for parameter {path} is invalid. It is not one of the values "
            f"the API documents.",
        )
    elif (
        node.kind in ("integer", "long") and isinstance(value, int) and not isinstance(value, bool)
    ):
        low, high = node.minimum, node.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            yield Finding(
                operation,
                "range",
                path,
                str(value),
                "InvalidParameterValue",
                f"Value ({value}) for parameter {path} is invalid. Expecting a value between "
                f"{_bound(low)} and {_bound(high)}.",
            )


def _bound(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


# -- what the emulator heard ------------------------------------------------------------------


class Heard:
    """Every undocumented use a request made, refused or not (``Settings.refuse_undocumented``
    off): the integration suite reads it after each test. Process-wide and never reset by the
    emulator itself (a test's emulator is gone by the time its checks run)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Finding] = []

    def add(self, items: Iterable[Finding]) -> None:
        with self._lock:
            self._items.extend(items)

    def take(self) -> list[Finding]:
        with self._lock:
            items, self._items = self._items, []
            return items


heard = Heard()
