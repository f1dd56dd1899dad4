"""Extend moto in place: the capacity APIs on EC2, and the fault hub in front of every action.

moto has no plugin hook. Its EC2 dispatcher looks an action up by snake_case name on
``EC2Response`` itself, so the emulator's response methods are set on that class; the hub
wraps ``BaseResponse.call_action``, the one place every service's action passes through.
Everything here is idempotent and reversible (``uninstall``) so tests can rely on it.
"""

from __future__ import annotations

import copy
import json
import math
import re
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from moto import backend_index
from moto.backends import get_backend
from moto.core.base_backend import BackendDict
from moto.core.exceptions import ServiceException
from moto.core.responses import ActionResult, BaseResponse
from moto.core.utils import camelcase_to_underscores
from moto.dynamodb import comparisons
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.responses import DynamoHandler
from moto.ec2.models import EC2Backend
from moto.ec2.responses import EC2Response
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, EC2_RESOURCE_TO_PREFIX, get_prefix
from moto.utilities.utils import PARTITION_NAMES, get_partition
from werkzeug.exceptions import HTTPException

from . import documented
from .dynamodb_bill import READS, WRITES, Bill
from .exceptions import AnyServiceError, EC2ServerError, reservation_not_found
from .faults import InjectedError
from .iam import enforcement
from .models import capacity_backend, filters
from .models.consistency import serving
from .responses import RESPONSE_CLASSES
from .responses._base import CapacityResponse
from .state import world

_lock = threading.Lock()
_saved: dict[tuple[type | ModuleType, str], Any] = {}
_installed = False

# Set when a call must be answered by dropping the connection (server mode timeouts).
drop_connection = threading.local()


def install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        EC2_RESOURCE_TO_PREFIX["capacity-reservation"] = "cr"
        EC2_PREFIX_TO_RESOURCE["cr"] = "capacity-reservation"
        for klass in (CapacityResponse, *RESPONSE_CLASSES):
            for name, member in vars(klass).items():
                if not name.startswith("__"):
                    _replace(EC2Response, name, member)
        _replace(BaseResponse, "call_action", _wrap_call_action(BaseResponse.call_action))
        _replace(
            BaseResponse,
            "_authenticate_and_authorize_normal_action",
            _authorize(BaseResponse._authenticate_and_authorize_normal_action),
        )
        _install_sts()
        _replace(
            EC2Backend, "do_resources_exist", _wrap_resources_exist(EC2Backend.do_resources_exist)
        )
        for name in _DYNAMODB_WRITES:
            _replace(DynamoDBBackend, name, _atomic(getattr(DynamoDBBackend, name)))
            # moto serializes a write's answer from the stored item after the backend's
            # write returns (UpdateItem's Attributes): under the same lock, or another write
            # to the item changes it mid-serialization ("dictionary changed size during
            # iteration" in a writer thread of stop 32's CI).
            _replace(DynamoHandler, name, _atomic(getattr(DynamoHandler, name)))
        for name in _DYNAMODB_READS:
            _replace(DynamoDBBackend, name, _isolated(getattr(DynamoDBBackend, name)))
        for action in (*WRITES, *READS):
            name = camelcase_to_underscores(action)
            _replace(DynamoHandler, name, _billed(action, getattr(DynamoHandler, name)))
        for name in _DYNAMODB_ORDERINGS:
            klass = getattr(comparisons, name)
            _replace(klass, "expr", _same_type_only(klass.expr))
        _install_filters()
        _install_resource_groups()
        _register_price_list()
        _warm_models()
        _installed = True


# The services a broker's request reaches: their models parsed here, once, by one thread.
WARM_MODELS = ("ec2", "ssm", "dynamodb", "sts")


def _warm_models() -> None:
    """Parse moto's service models now. moto parses a model on a service's first request and
    caches it (``functools.cache``: not one parse for callers that arrive together), so a
    burst of threads meeting a cold emulator each made a fresh botocore loader, listed every
    service botocore ships and parsed the model: 50 reserves at once spent their 30 s budget
    there. The emulator's own EC2 model (``documented.service_model``, what it checks every
    EC2 request against) is parsed here too, for the same reason."""
    from moto.core.utils import get_service_model

    for service in WARM_MODELS:
        get_service_model(service)
    documented.service_model("ec2")


def uninstall() -> None:
    global _installed
    with _lock:
        for (klass, name), original in _saved.items():
            if original is None:
                delattr(klass, name)
            else:
                setattr(klass, name, original)
        _saved.clear()
        EC2_RESOURCE_TO_PREFIX.pop("capacity-reservation", None)
        EC2_PREFIX_TO_RESOURCE.pop("cr", None)
        _uninstall_resource_group_paths()
        sys.modules.pop("moto.pricing", None)
        backend_index.backend_url_patterns[:] = [
            item for item in backend_index.backend_url_patterns if item[0] != "pricing"
        ]
        _installed = False


def _register_price_list() -> None:
    """The Price List (``pricing``) as one of moto's services: moto finds a service's backends
    in the module ``moto.<service>`` and its URLs in ``backend_index`` (in process and in
    server mode alike), so the emulator's module is registered under that name."""
    from .models import pricing
    from .responses import pricing as routes

    sys.modules["moto.pricing"] = pricing
    if not any(name == "pricing" for name, _ in backend_index.backend_url_patterns):
        backend_index.backend_url_patterns.append(("pricing", re.compile(routes.url_bases[0])))


def _install_sts() -> None:
    """``sts:DecodeAuthorizationMessage`` (moto has none) for the emulator's own messages."""
    from moto.sts.responses import TokenResponse

    def decode_authorization_message(self: TokenResponse) -> ActionResult:
        try:
            decoded = enforcement.decode(self._get_param("EncodedMessage") or "")
        except ValueError as error:
            raise AnyServiceError("InvalidAuthorizationMessageException", str(error)) from None
        return ActionResult({"DecodedMessage": decoded})

    _replace(TokenResponse, "decode_authorization_message", decode_authorization_message)


def _authorize(original: Callable[..., None]) -> Callable[..., None]:
    """moto's authorization hook (every action passes it first): a call signed with a broker
    function's role session is decided under that role's policies (``iam.enforcement``),
    unless ``Settings.iam_evaluation`` is off; every other call as moto decides it."""

    def authorize(self: BaseResponse, resource: str = "*") -> None:
        roles = world.iam
        if roles is not None and world.settings.iam_evaluation:
            session = roles.session_of(self.get_access_key())
            if session is not None:
                roles.authorize(self, session, lambda: _params_of(self))
                return
        original(self, resource)

    return authorize


def _install_resource_groups() -> None:
    """Capacity Reservation groups (``responses.resource_groups``): the operations moto's
    resource-groups service lacks, set on its response class, and their paths added to the
    service's URLs (moto reads them per request in process, and when its server builds the
    service's application)."""
    from moto.resourcegroups import urls
    from moto.resourcegroups.responses import ResourceGroupsResponse

    from .responses import resource_groups

    for name, member in vars(resource_groups.ResourceGroups).items():
        if not name.startswith("__"):
            _replace(ResourceGroupsResponse, name, member)
    for path, handler in resource_groups.URL_PATHS.items():
        urls.url_paths.setdefault(path, handler)


def _uninstall_resource_group_paths() -> None:
    from moto.resourcegroups import urls

    from .responses import resource_groups

    for path in resource_groups.URL_PATHS:
        urls.url_paths.pop(path, None)


def _install_filters() -> None:
    """Every EC2 filter value read as EC2 documents it (``models.filters``): moto's matchers
    are module functions, looked up by name where they are called or imported."""
    import moto.ec2.models.security_groups
    import moto.ec2.models.tags
    import moto.ec2.utils

    utils = moto.ec2.utils
    _replace(utils, "is_filter_matching", filters.filter_matching(utils.is_filter_matching))
    for module in (utils, moto.ec2.models.security_groups):
        _replace(module, "tag_filter_matches", filters.tag_filter_matches)
    for module in (utils, moto.ec2.models.tags):
        _replace(module, "simple_aws_filter_to_re", filters.to_regex)


def _replace(klass: type | ModuleType, name: str, value: Any) -> None:
    if (klass, name) not in _saved:
        _saved[(klass, name)] = klass.__dict__.get(name)
    setattr(klass, name, value)


# DynamoDB applies each item write atomically, conditions included ("Condition expressions",
# "Atomic counters" in the DynamoDB Developer Guide); moto 5.2.5 reads and writes an item
# without a lock, so concurrent ADDs to one item lose updates and two conditional puts can both
# succeed. One lock around moto's writes gives DynamoDB's guarantee (and no more: reads stay
# unlocked). Re-entrant: a batch or transaction calls the single-item writes.
_DYNAMODB_WRITES = (
    "put_item",
    "update_item",
    "delete_item",
    "batch_write_item",
    "transact_write_items",
)
_dynamodb_lock = threading.RLock()
# A read sees each item as one write left it, never in the middle of one (DynamoDB's reads are
# read-committed at least: "Isolation levels for DynamoDB transactions" in the Developer
# Guide). moto 5.2.5 copies an item's attributes while a concurrent write changes them
# ("dictionary changed size during iteration" out of a Scan), and hands GetItem's stored item
# to the response, which serializes it after the call: the reads run under the writes' lock
# and answer a copy.
_DYNAMODB_READS = ("get_item", "query", "scan", "batch_get_item", "transact_get_items")


def _billed(action: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """DynamoDB's bill around one handler method (``emulator.dynamodb_bill``): metered on the
    emulator's clock, throttled per partition key unless ``dynamodb_key_throttling`` is off."""

    def serve(self: DynamoHandler) -> Any:
        bill = Bill(world.dynamodb_meter, _emulator_second, _key_throttling, _dynamodb_lock)
        return bill.serve(action, self, original)

    return serve


def _emulator_second() -> int:
    return math.floor(world.clock.now().timestamp())


def _key_throttling() -> bool:
    return world.settings.dynamodb_key_throttling


def _atomic(original: Callable[..., Any]) -> Callable[..., Any]:
    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _dynamodb_lock:
            return original(self, *args, **kwargs)

    return write


def _isolated(original: Callable[..., Any]) -> Callable[..., Any]:
    def read(self: DynamoDBBackend, *args: Any, **kwargs: Any) -> Any:
        with _dynamodb_lock:
            return copy.deepcopy(original(self, *args, **kwargs))

    return read


# DynamoDB compares values of one type only: "If an item contains an AttributeValue element of
# a different type than the one provided in the request, the value does not match. For example,
# {"S":"6"} does not equal {"N":"6"}" (API Reference, ExpectedAttributeValue, for LT, LE, GT, GE
# and BETWEEN alike). moto 5.2.5 compares the Python values and raises TypeError (a string
# against a Decimal) out of a Scan's or a condition's evaluation.
_DYNAMODB_ORDERINGS = (
    "OpLessThan",
    "OpLessThanOrEqual",
    "OpGreaterThan",
    "OpGreaterThanOrEqual",
    "FuncBetween",
)


def _same_type_only(original: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def expr(self: Any, item: Any) -> bool:
        between = isinstance(self, comparisons.FuncBetween)
        operands = (self.attr, self.start, self.end) if between else (self.lhs, self.rhs)
        try:
            types = {operand.get_type(item) for operand in operands}
        except (AttributeError, NotImplementedError):  # size() and the like have no type
            return original(self, item)
        if None not in types and len(types) > 1:
            return False
        return original(self, item)

    return expr


def _wrap_resources_exist(original: Callable[..., bool]) -> Callable[..., bool]:
    def do_resources_exist(self: EC2Backend, resource_ids: list[str]) -> bool:
        for resource_id in resource_ids:
            if get_prefix(resource_id) == "cr":
                capacity = capacity_backend(self)
                if resource_id not in capacity.reservations:
                    raise reservation_not_found(resource_id)
                capacity.named(resource_id)  # one made a moment ago may be unknown yet
        instances = [i for i in resource_ids if get_prefix(i) == "i"]
        if instances:
            capacity_backend(self).named_instances(instances)  # likewise an instance
        return original(self, resource_ids)

    return do_resources_exist


def _params_of(response: BaseResponse) -> Mapping[str, Any]:
    params = getattr(response, "params", None)
    if isinstance(params, Mapping) and (params or response.automated_parameter_parsing):
        return params
    # JSON protocols (SSM, DynamoDB): moto leaves the parameters in the body.
    body = getattr(response, "body", None)
    if isinstance(body, bytes | str) and body[:1] in ("{", b"{"):
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return data
    query = getattr(response, "querystring", {}) or {}
    return {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in query.items()}


def _error_response(
    response: BaseResponse, code: str, message: str, status: int
) -> tuple[int, dict[str, str], str]:
    """Serialize an error the way the service's protocol does, with EC2's real status."""
    _, headers, body = response.serialized(ActionResult(AnyServiceError(code, message)))
    headers = dict(headers)
    headers["status"] = str(status)
    return status, headers, body


def _wrap_call_action(original: Callable[[BaseResponse], Any]) -> Callable[[BaseResponse], Any]:
    def call_action(self: BaseResponse) -> Any:
        service = self.service_name or ""
        action = self._get_action() or ""
        region = getattr(self, "region", "us-east-1")
        account = getattr(self, "current_account", "")
        if not _known_region(service, account, region):
            # AWS has no endpoint there: the caller cannot connect (moto would raise KeyError).
            endpoint = f"https://{service}.{region}.amazonaws.com/"
            if world.mode == "server":
                drop_connection.flag = True
                return 404, {}, ""
            raise EndpointConnectionError(endpoint_url=endpoint)
        try:
            call, timeout = world.hub.before(
                service, action, region, account, lambda: _params_of(self)
            )
        except InjectedError as error:
            return _error_response(self, error.code, error.message, error.status)
        call.at = world.clock.now()
        refused = _undocumented(self, service, action)
        if refused is not None:
            world.hub.after(call, 400, refused.code)
            return _error_response(self, refused.code, refused.message, 400)
        unapplied = _unapplied_filter(self, service, action)
        if unapplied is not None:
            world.hub.after(call, 400, UNSUPPORTED)
            return _error_response(self, UNSUPPORTED, unapplied, 400)
        try:
            with serving(call):  # what EC2 shows this call may still be settling
                status, headers, body = original(self)
        except enforcement.Unauthorized as error:
            world.hub.after(call, error.status, error.code)
            return _error_response(self, error.code, error.message, error.status)
        except EC2ServerError as error:
            world.hub.after(call, error.status, error.code)
            # A timeout loses an error answer too (e.g. InsufficientInstanceCapacity, a 500).
            status, headers, body = _error_response(self, error.code, error.message, error.status)
        except Exception as error:  # only what moto cannot serve, below (else re-raised)
            unsupported = _unsupported(service, action, error)
            if unsupported is None:
                raise
            world.hub.after(call, 400, UNSUPPORTED)
            return _error_response(self, UNSUPPORTED, unsupported, 400)
        else:
            world.hub.after(call, int(status), _code_of(body) if int(status) >= 400 else None)
        if timeout is not None:
            call.outcome = "timeout"
            if world.mode == "server":
                drop_connection.flag = True
            else:
                raise ReadTimeoutError(endpoint_url=f"https://{service}.{region}.amazonaws.com/")
        return status, headers, body

    return call_action


# What EC2 answers a request it does not support ("Error codes for the Amazon EC2 API", common
# client errors: "The specified request includes an unsupported operation"). EC2 documents
# every operation of botocore's model; the emulator serves some of them only (moto's and its
# own). Unanswered, moto raises NotImplementedError and its server sends an HTML page with a
# 500, which clients cannot parse and retry as a server fault (issue 42).
UNSUPPORTED = "UnsupportedOperation"
_EMULATOR = str(Path(__file__).resolve().parent)


def _unsupported(service: str, action: str, error: Exception) -> str | None:
    """The message of the ``UnsupportedOperation`` that answers an EC2 request moto cannot
    serve: an action it does not implement, or a request its implementation fails on (a KeyError
    for an id it never made, say). None for anything else, which stays loud: other services,
    moto's own error answers (raised as HTTP exceptions), and a failure in the emulator's code."""
    if service != "ec2" or isinstance(error, HTTPException | ServiceException):
        return None
    if isinstance(error, NotImplementedError):
        return f"The emulator does not implement the EC2 operation {_operation(action)}"
    frames = traceback.extract_tb(error.__traceback__)
    if not frames or frames[-1].filename.startswith(_EMULATOR):
        return None
    return (
        f"The emulator cannot serve this {_operation(action)} request (its EC2 implementation, "
        f"moto's, failed with {type(error).__name__}: {error})"
    )


# Filters botocore's model documents that moto answers as if they were not there (the sweep of
# tests/integration/test_local_every_operation.py finds them: a value nothing has still lists
# everything). Refused, as an operation the emulator does not serve is: a caller must never get
# every item back for a filter it sent. ``tag:<key>`` stands for every tag filter.
UNAPPLIED_FILTERS: Mapping[str, frozenset[str]] = {
    "DescribeCustomerGateways": frozenset({"state", "tag-key", "tag:<key>"}),
    "DescribeInstanceStatus": frozenset(
        {
            "application-status.status",
            "attached-ebs-status.status",
            "availability-zone",
            "availability-zone-id",
            "event.code",
            "event.description",
            "event.instance-event-id",
            "event.not-after",
            "event.not-before",
            "event.not-before-deadline",
            "instance-status.reachability",
            "instance-status.status",
            "operator.managed",
            "operator.principal",
            "system-status.reachability",
            "system-status.status",
        }
    ),
    "DescribeTrafficMirrorSessions": frozenset({"packet-length", "virtual-network-id"}),
    "DescribeTransitGateways": frozenset(
        {
            "options.amazon-side-asn",
            "options.association-default-route-table-id",
            "options.auto-accept-shared-attachments",
            "options.default-route-table-association",
            "options.default-route-table-propagation",
            "options.dns-support",
            "options.propagation-default-route-table-id",
            "options.vpn-ecmp-support",
            "tag-key",
        }
    ),
}


def _unapplied_filter(response: BaseResponse, service: str, action: str) -> str | None:
    """The ``UnsupportedOperation`` message for a filter moto would ignore, or None."""
    unapplied = UNAPPLIED_FILTERS.get(action) if service == "ec2" else None
    if not unapplied:
        return None
    params = getattr(response, "params", None)
    for item in (params.get("Filters") if isinstance(params, Mapping) else None) or []:
        name = item.get("Name") if isinstance(item, Mapping) else None
        if not isinstance(name, str):
            continue
        key = documented.TAG_KEY_FILTER if name.startswith("tag:") else name
        if key in unapplied:
            return (
                f"The emulator does not apply the filter '{name}' to {action} (moto's answer "
                "would ignore it and list everything)"
            )
    return None


def _operation(action: str) -> str:
    """The model's operation name of moto's snake_case action name (``describe_fleets``)."""
    if action and action[0].isupper():
        return action
    return "".join(part.capitalize() for part in action.split("_"))


def _undocumented(response: BaseResponse, service: str, action: str) -> documented.Finding | None:
    """What EC2 answers a request that uses what botocore's model does not document for the
    operation (``emulator.documented``); None when everything is documented, or when the
    emulator is told to serve such requests anyway (recorded either way)."""
    if service != "ec2":
        return None
    params = getattr(response, "params", None)
    found = documented.findings(
        action,
        params if isinstance(params, Mapping) else {},
        (getattr(response, "querystring", None) or {}).keys(),
    )
    if not found:
        return None
    documented.heard.add(found)
    return found[0] if world.settings.refuse_undocumented else None


def _known_region(service: str, account: str, region: str) -> bool:
    try:
        backends = get_backend(service)  # type: ignore[call-overload]
    except (KeyError, ValueError, ModuleNotFoundError):
        return True  # not a regional moto service: let moto answer
    if not isinstance(backends, BackendDict) or not account:
        return True
    per_account = backends[account]
    if region in per_account:
        return True
    # A global service (IAM, STS) keeps one backend per partition and answers in every
    # region of it (STS's regional endpoints).
    regional = [r for r in per_account.regions if r not in PARTITION_NAMES]
    return not regional and get_partition(region) in per_account.regions


def _code_of(body: Any) -> str | None:
    text = body.decode() if isinstance(body, bytes) else str(body)
    for start, end in (("<Code>", "</Code>"), ('"__type":"', '"'), ('"__type": "', '"')):
        if start in text:
            return text.split(start, 1)[1].split(end, 1)[0].split("#")[-1]
    return None
