"""Realism by construction, read from the broker's sources: every EC2 filter name and enum
value the broker writes down, and every error code it classifies or compares against, is one
AWS documents.

- Filter names: botocore's EC2 model, per operation (``emulator.documented``, the same reading
  of the model the emulator refuses requests by). Where the operation cannot be told from the
  source, the name must be documented by some operation the broker calls.
- Enum values: literal arguments of a call naming its EC2 operation (``_call("CreateFleet",
  ..., Type="instant")``), walked against that operation's input shapes.
- Error codes: ``domain.errors.CODES`` plus every literal compared with an error code in the
  sources, against "Error codes for the Amazon EC2 API" (a copy of the codes list:
  ``docs/ec2-error-codes.txt``), the error shapes of botocore's models for the other services
  the broker calls, and the codes botocore's standard retry mode recognises.

What the broker actually sends is checked too: the emulator records every undocumented use it
hears, and ``tests/integration/conftest.py`` fails the integration test that sent one.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.retries import standard

from emulator import documented

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "functions" / "capacity_broker"
ERROR_PAGE = ROOT / "docs" / "ec2-error-codes.txt"
# Codes that are the broker's own (never an AWS answer), with why they appear among codes.
BROKER_CODES = {
    "RateBudgetExhausted": "contract v3: the broker's shared rate budget ran out first",
    "TimeBudgetExceeded": "the invocation's time ran out before the attempt started",
    "DeadlineExceeded": "the cleaner ran out of time before the cancel",
    "NotOwned": "the cleaner's guard: never cancel what the broker does not own",
}
# Services whose botocore models give the codes they answer (the EC2 model has no error shapes).
OTHER_SERVICES = ("ssm", "cloudformation", "dynamodb", "lambda", "sts", "pricing", "iam")
# AWS-wide codes that neither EC2's page nor those models list, with where AWS answers them.
CITED_CODES = {
    "AccessDenied": "CloudFormation's (query protocol) answer to an IAM denial: "
    "scopely-devops/skew#81, 'An error occurred (AccessDenied) when calling the DescribeStacks "
    "operation'; an error shape in botocore's s3 and cloudfront models",
    "ExpiredToken": "expired session credentials on query-protocol services: "
    "miquella/vaulted#107 (STS GetCallerIdentity), cfn-sphere/cfn-sphere#55 (IAM)",
    "UnrecognizedClientException": "JSON-protocol services' answer to an unknown access key: "
    "an error shape in botocore's logs model; DynamoDB Developer Guide, 'Error handling'",
    "ServiceUnavailableException": "an error shape in many botocore models (apigateway, eks, "
    "logs, ...): a JSON-protocol service's transient failure",
}


# -- reading the sources ----------------------------------------------------------------------


@dataclass(frozen=True)
class Use:
    operation: str | None  # None: the source does not say which
    name: str
    where: str


@functools.cache
def modules() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(SOURCES.rglob("*.py"))}


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _operations_in(node: ast.AST) -> set[str]:
    ops = documented.operations()
    return {
        n.value
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in ops
    }


def _enclosing(node: ast.AST, parents: dict[ast.AST, ast.AST], kind: type) -> Any:
    while node in parents:
        node = parents[node]
        if isinstance(node, kind):
            return node
    return None


def _one_operation(node: ast.AST | None) -> str | None:
    found = _operations_in(node) if node is not None else set()
    return next(iter(found)) if len(found) == 1 else None


def _filter_name(expr: ast.AST) -> str | None:
    """A filter name written in the source: a string, or an f-string ``tag:{key}``."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr) and expr.values:
        head = expr.values[0]
        if isinstance(head, ast.Constant) and str(head.value).startswith("tag:"):
            return "tag:<key>"
    return None


def _local_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _dict_keys(expr: ast.AST | None, tree: ast.Module, scope: ast.AST | None) -> Iterator[str]:
    """The keys of a filters mapping as written: a dict literal (``**`` of a local function's
    returned literal included), a call of such a function, a name assigned one in ``scope``,
    or either branch of a conditional."""
    if isinstance(expr, ast.Dict):
        for key, value in zip(expr.keys, expr.values, strict=True):
            if key is None:
                yield from _dict_keys(value, tree, scope)
            elif (name := _filter_name(key)) is not None:
                yield name
    elif isinstance(expr, ast.DictComp):
        if (name := _filter_name(expr.key)) is not None:
            yield name
    elif isinstance(expr, ast.IfExp):
        yield from _dict_keys(expr.body, tree, scope)
        yield from _dict_keys(expr.orelse, tree, scope)
    elif isinstance(expr, ast.Call):
        callee = expr.func.attr if isinstance(expr.func, ast.Attribute) else None
        callee = callee or (expr.func.id if isinstance(expr.func, ast.Name) else None)
        function = _local_functions(tree).get(callee or "")
        for node in ast.walk(function) if function is not None else ():
            if isinstance(node, ast.Return):
                yield from _dict_keys(node.value, tree, scope)
    elif isinstance(expr, ast.Name) and scope is not None:
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == expr.id for t in node.targets
            ):
                yield from _dict_keys(node.value, tree, None)


@functools.cache
def filter_methods() -> dict[str, str]:
    """Adapter methods that take ``filters`` and pass them to one EC2 operation: name → op."""
    found: dict[str, str] = {}
    for path, tree in modules().items():
        if "adapters" not in path.parts:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                a.arg == "filters" for a in node.args.args + node.args.kwonlyargs
            ):
                op = _one_operation(node)
                if op is not None:
                    found[node.name] = op
    return found


@functools.cache
def filter_uses() -> tuple[Use, ...]:
    uses: list[Use] = []
    for path, tree in modules().items():
        parents = _parents(tree)
        for node in ast.walk(tree):
            function = _enclosing(node, parents, ast.FunctionDef)
            # {"Name": "...", "Values": [...]}
            if isinstance(node, ast.Dict):
                keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
                if "Name" in keys and "Values" in keys:
                    name = _filter_name(node.values[keys.index("Name")])
                    if name is not None:
                        uses.append(Use(_one_operation(function), name, _where(path, node)))
            # adapter.reservations(filters={...}) and the like; Filters({...}) (adapters/ec2/
            # filters.py: the one place filter values are escaped)
            elif isinstance(node, ast.Call):
                method = node.func.attr if isinstance(node.func, ast.Attribute) else None
                callee = method or (node.func.id if isinstance(node.func, ast.Name) else None)
                if callee == "Filters" and node.args:
                    op = _one_operation(function)
                    for name in _dict_keys(node.args[0], tree, function):
                        uses.append(Use(op, name, _where(path, node)))
                for keyword in node.keywords:
                    if keyword.arg == "filters":
                        op = filter_methods().get(method or "")
                        for name in _dict_keys(keyword.value, tree, function):
                            uses.append(Use(op, name, _where(path, node)))
            # all_filters["instance-type"] = ...
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if (
                        isinstance(target, ast.Subscript)
                        and isinstance(target.value, ast.Name)
                        and "filter" in target.value.id
                        and (name := _filter_name(target.slice)) is not None
                    ):
                        uses.append(Use(_one_operation(function), name, _where(path, node)))
    return tuple(uses)


@functools.cache
def broker_operations() -> frozenset[str]:
    return frozenset(op for tree in modules().values() for op in _operations_in(tree))


# -- filter names -----------------------------------------------------------------------------


def test_the_scan_finds_the_filters_the_broker_writes() -> None:
    """The scan itself: these are written in the sources today (if one goes away, update)."""
    seen = {(u.operation, u.name) for u in filter_uses()}
    assert ("DescribeCapacityReservations", "tag:<key>") in seen  # cleaner, release
    assert ("DescribeCapacityReservations", "state") in seen
    assert ("DescribeInstances", "instance-state-name") in seen
    assert ("DescribeSubnets", "subnet-id") in seen
    assert ("DescribeInstanceTypes", "instance-type") in seen
    assert ("DescribeInstanceTypeOfferings", "location") in seen


def test_every_filter_the_broker_writes_is_documented_for_its_operation() -> None:
    undocumented = sorted(
        f"{u.where}: {u.name!r} on {u.operation}"
        for u in filter_uses()
        if u.operation is not None and not documented.documents_filter(u.operation, u.name)
    )
    assert undocumented == [], (
        "filters botocore's EC2 model does not document for the operation: "
        + "; ".join(undocumented)
    )


def test_a_filter_whose_operation_the_source_does_not_say_is_documented_somewhere() -> None:
    anywhere = [
        u
        for u in filter_uses()
        if u.operation is None
        and not any(documented.documents_filter(op, u.name) for op in broker_operations())
    ]
    assert anywhere == []


# -- enum values ------------------------------------------------------------------------------


def _literal(expr: ast.AST) -> Any:
    """A literal as written (dicts and lists of constants); ``...`` where it is not one."""
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Dict):
        return {
            k.value: _literal(v)
            for k, v in zip(expr.keys, expr.values, strict=True)
            if isinstance(k, ast.Constant)
        }
    if isinstance(expr, ast.List | ast.Tuple):
        return [_literal(e) for e in expr.elts]
    return ...


@functools.cache
def literal_arguments() -> tuple[tuple[str, dict[str, Any], str], ...]:
    """(operation, literal keyword arguments, where) of every call naming an EC2 operation."""
    found = []
    ops = documented.operations()
    for path, tree in modules().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and first.value in ops:
                arguments = {k.arg: _literal(k.value) for k in node.keywords if k.arg is not None}
                found.append((str(first.value), arguments, _where(path, node)))
    return tuple(found)


def test_the_scan_finds_the_calls_that_name_their_operation() -> None:
    operations = {op for op, _, _ in literal_arguments()}
    assert {"CreateCapacityReservation", "CancelCapacityReservation", "CreateFleet"} <= operations


def test_every_enum_value_the_broker_writes_is_in_the_model() -> None:
    wrong = []
    for operation, arguments, where in literal_arguments():
        params = {k: v for k, v in arguments.items() if v is not ...}
        for finding in documented.findings(operation, params):
            if finding.kind == "enum":
                wrong.append(f"{where}: {operation} {finding.name} = {finding.value!r}")
    assert wrong == []


# -- error codes ------------------------------------------------------------------------------


def ec2_error_codes() -> set[str]:
    lines = ERROR_PAGE.read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and line[0] not in "#["}


def other_service_codes() -> set[str]:
    codes: set[str] = set()
    for service in OTHER_SERVICES:
        for shape in documented.service_model(service).error_shapes:
            codes.add(shape.error_code or shape.name)
            codes.add(shape.name)
    return codes


def ec2_model_error_codes() -> set[str]:
    """Codes EC2's model itself enumerates, e.g. ``LaunchTemplateErrorCode`` (the per-version
    ``ResponseError`` of DeleteLaunchTemplateVersions)."""
    model = documented.service_model("ec2")
    return {
        value
        for name in model.shape_names
        if name.endswith("ErrorCode")
        for value in getattr(model.shape_for(name), "enum", None) or ()
    }


def retry_mode_codes() -> set[str]:
    """What botocore's standard retry mode takes for throttling or a transient failure."""
    return set(standard.ThrottledRetryableChecker._THROTTLED_ERROR_CODES) | set(
        standard.TransientRetryableChecker._TRANSIENT_ERROR_CODES
    )


def _constants(expr: ast.AST, tree: ast.Module) -> Iterator[str]:
    """String constants of an expression, following a module-level name it refers to."""
    if isinstance(expr, ast.Name):
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                named = any(isinstance(t, ast.Name) and t.id == expr.id for t in targets)
                if named and node.value is not None:
                    yield from _constants(node.value, tree)
        return
    for node in ast.walk(expr):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


_CODE = re.compile(r"(^|[._])(error_)?code$")


def _is_code(expr: ast.AST) -> bool:
    """``error.code``, ``item.code``, ``code``, ``error_code``: an error code's value."""
    return bool(_CODE.search(ast.unparse(expr)))


@functools.cache
def compared_codes() -> tuple[tuple[str, str], ...]:
    """(code, where) of every string compared with an error code in the sources: ``==``,
    ``!=`` and ``in`` with the code on the left (``"Version" in error.code`` looks inside a
    code, it names none)."""
    found = []
    for path, tree in modules().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare) or len(node.comparators) != 1:
                continue
            left, right = node.left, node.comparators[0]
            membership = isinstance(node.ops[0], ast.In | ast.NotIn)
            if _is_code(left):
                other = right
            elif _is_code(right) and not membership:
                other = left
            else:
                continue
            for value in _constants(other, tree):
                found.append((value, _where(path, node)))
    return tuple(found)


def test_the_scan_finds_the_codes_the_broker_compares_against() -> None:
    assert "InvalidInstanceID.NotFound" in {code for code, _ in compared_codes()}


def test_the_copy_of_the_error_page_is_whole() -> None:
    codes = ec2_error_codes()
    assert len(codes) > 400
    assert {"InsufficientInstanceCapacity", "InstanceLimitExceeded", "VcpuLimitExceeded"} <= codes


@pytest.mark.parametrize("source", ["classified", "compared"])
def test_every_error_code_the_broker_knows_is_documented(source: str) -> None:
    from capacity_broker.domain.errors import CODES

    if source == "classified":
        codes = [(code, "functions/capacity_broker/domain/errors.py") for code in CODES]
    else:
        codes = list(compared_codes())
    known = (
        ec2_error_codes()
        | ec2_model_error_codes()
        | other_service_codes()
        | retry_mode_codes()
        | set(CITED_CODES)
        | set(BROKER_CODES)
    )
    undocumented = sorted({f"{code} ({where})" for code, where in codes if code not in known})
    assert undocumented == [], (
        "error codes neither EC2's error page, botocore's models nor its retry mode document: "
        + ", ".join(undocumented)
    )
