"""reserve is collaborators, not mixins: the ``Reserver`` holds its parts by name and calls
their public methods, and no class of the flow inherits from another of it (a change to one
part's attribute cannot reach another part through a shared base)."""

from __future__ import annotations

import ast
from pathlib import Path

import capacity_broker.logic.reserve as package
import pytest
from capacity_broker.adapters.aws import AwsError
from capacity_broker.domain.failures import BrokerFailure, Refused
from capacity_broker.domain.reserve import ReserveStatus
from capacity_broker.logic.failures import failed
from capacity_broker.logic.reserve.launch import FleetUnknown, OutOfTime
from capacity_broker.logic.reserve.race import Undecided
from capacity_broker.logic.templates import TemplateRefused

HERE = Path(package.__file__).parent


def modules() -> dict[str, ast.Module]:
    return {p.name: ast.parse(p.read_text(), str(p)) for p in sorted(HERE.glob("*.py"))}


def test_no_class_of_the_flow_inherits_from_another_of_it() -> None:
    trees = modules()
    defined = {
        node.name
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }
    assert {"Reserver", "Race", "BringYourOwn", "Launch", "GiveBack", "Replay", "Pool"} <= defined
    inherited = [
        (name, node.name, ast.unparse(base))
        for name, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for base in node.bases
        if ast.unparse(base).split(".")[-1] in defined
    ]
    assert inherited == []


def test_a_part_uses_another_only_through_its_public_methods() -> None:
    # ``self._x`` is a class's own; ``self.race._x`` or ``launch._x`` would reach into a part.
    reached = [
        (name, node.lineno, ast.unparse(node))
        for name, tree in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
    ]
    assert reached == []


def test_the_reserver_holds_its_collaborators_by_name() -> None:
    from capacity_broker.logic.reserve import Reserver
    from capacity_broker.logic.reserve.bring_your_own import BringYourOwn
    from capacity_broker.logic.reserve.giveback import GiveBack
    from capacity_broker.logic.reserve.launch import Launch
    from capacity_broker.logic.reserve.pool import Pool
    from capacity_broker.logic.reserve.race import Race
    from capacity_broker.logic.reserve.replay import Replay

    tree = ast.parse((HERE / "reserver.py").read_text())
    init = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "__init__"
    )
    built = {
        target.attr: ast.unparse(statement.value.func)
        for statement in init.body
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call)
        for target in statement.targets
        if isinstance(target, ast.Attribute)
    }
    assert built == {
        "give_back": GiveBack.__name__,
        "race": Race.__name__,
        "bring_your_own": BringYourOwn.__name__,
        "launch": Launch.__name__,
        "replay": Replay.__name__,
        "pool": Pool.__name__,
    }
    assert Reserver.__bases__ == (object,)


@pytest.mark.parametrize(
    ("failure", "fields"),
    [
        (
            TemplateRefused("lt-1 belongs to cluster other"),
            {
                "status": ReserveStatus.REJECTED,  # the contract's reserve status
                "error_code": None,
                "reason": "lt-1 belongs to cluster other",
                "message": "lt-1 belongs to cluster other",
            },
        ),
        (
            OutOfTime("before the fleet"),
            {
                "status": "error",
                "error_code": "TimeBudgetExceeded",
                "message": "the invocation's time budget ran out before the fleet",
            },
        ),
        (
            Undecided(None, "EC2 did not say"),
            {"status": "error", "error_code": "RequestTimeout", "message": "EC2 did not say"},
        ),
        (
            Undecided("RequestLimitExceeded", "EC2 did not say"),
            {"status": "error", "error_code": "RequestLimitExceeded", "message": "EC2 did not say"},
        ),
    ],
)
def test_every_refusal_of_reserve_is_a_broker_failure_answered_by_the_one_table(
    failure: BrokerFailure, fields: dict[str, object]
) -> None:
    assert isinstance(failure, BrokerFailure)
    assert failed(failure) == fields


def test_a_lost_fleet_answer_says_the_lost_call_s_code_and_keeps_its_nodes() -> None:
    lost = FleetUnknown(AwsError("CreateFleet", None, "read timed out"), ["i-1"])
    assert isinstance(lost, BrokerFailure)
    assert not isinstance(lost, Refused)
    fields = failed(lost)
    assert (fields["status"], fields["error_code"]) == ("error", "RequestTimeout")
    assert fields["message"].startswith("The fleet's answer was lost (no answer: read timed out)")
    assert "ask again with the same request_id" in fields["message"]
    assert lost.seen == ["i-1"]
