"""Filter values as EC2 reads them (EC2 User Guide, "List and filter using the command line"):
``*`` matches zero or more characters, ``?`` zero or one, and a backslash makes the next
character literal ("a value of \\*amazon\\?\\\\ searches for the literal string *amazon?\\").
The same in every describe: the emulator's own (Capacity Reservations) and moto's (instances,
launch templates), which read values with fnmatch before."""

from __future__ import annotations

from typing import Any

import pytest
from emu_helpers import REGION, SUBNET_A
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.emulator

KEY = "job"
# The page's own example, plain names, and what fnmatch would read as a character class.
VALUES = ["*amazon?\\", "amazon", "xamazon?", "1", "12", "1*", "1?", "a\\b", "\\", "[ab]", "a"]


def tagged(api: Any, value: str) -> str:
    made = api.reserve(
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": KEY, "Value": value}]}
        ]
    )
    return str(made["CapacityReservationId"])


@pytest.fixture(autouse=True)
def _room(emu: Any, world: Any) -> None:
    emu.set_pool(REGION, "us-east-1a", "c5.large", 64)


@pytest.fixture
def reservations(api: Any, emu: Any) -> dict[str, str]:
    made = {value: tagged(api, value) for value in VALUES}
    emu.settle()
    return made


def found(api: Any, made: dict[str, str], *values: str) -> set[str]:
    ids = api.ids(Filters=[{"Name": f"tag:{KEY}", "Values": list(values)}])
    return {value for value, rid in made.items() if rid in ids}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("\\*amazon\\?\\\\", {"*amazon?\\"}),  # the User Guide's example
        ("1", {"1"}),
        ("1\\*", {"1*"}),
        ("1\\?", {"1?"}),
        ("a\\\\b", {"a\\b"}),
        ("\\\\", {"\\"}),
        ("[ab]", {"[ab]"}),  # no character classes
        ("1?", {"1", "12", "1*", "1?"}),  # "?" is zero or one character
        ("1*", {"1", "12", "1*", "1?"}),
        ("?", {"1", "\\", "a"}),
        ("*amazon*", {"*amazon?\\", "amazon", "xamazon?"}),
    ],
)
def test_capacity_reservation_filters_read_values_as_ec2(
    api: Any, reservations: dict[str, str], value: str, expected: set[str]
) -> None:
    assert found(api, reservations, value) == expected


def test_an_escape_before_another_character_stands_for_that_character(
    api: Any, reservations: dict[str, str]
) -> None:
    assert found(api, reservations, "\\1") == {"1"}
    assert found(api, reservations, "\\a\\\\\\b") == {"a\\b"}


def test_instances_filter_tags_as_ec2(api: Any, ec2: Any, emu: Any) -> None:
    """moto's instance filters: fnmatch classes and literal text equal to the pattern are gone."""
    ids = {}
    for value in ("1", "12", "1*", "[1]", "1\\*"):
        (iid,) = api.run(SUBNET_A)
        ec2.create_tags(Resources=[iid], Tags=[{"Key": KEY, "Value": value}])
        ids[iid] = value
    emu.settle()

    def listed(*values: str) -> set[str]:
        answer = ec2.describe_instances(Filters=[{"Name": f"tag:{KEY}", "Values": list(values)}])
        return {ids[i["InstanceId"]] for r in answer["Reservations"] for i in r["Instances"]}

    assert listed("1\\*") == {"1*"}
    assert listed("[1]") == {"[1]"}
    assert listed("1\\\\\\*") == {"1\\*"}
    assert listed("1*") == {"1", "12", "1*", "1\\*"}


def test_launch_template_filters_read_values_as_ec2(ec2: Any, world: Any) -> None:
    """moto's generic filters (launch templates and most describes): fnmatch before."""
    names = {}
    for value in ("c1", "c12", "c*", "[c]"):
        made = ec2.create_launch_template(
            LaunchTemplateName=f"lt-{len(names)}",
            LaunchTemplateData={"InstanceType": "c5.large"},
            TagSpecifications=[
                {"ResourceType": "launch-template", "Tags": [{"Key": KEY, "Value": value}]}
            ],
        )["LaunchTemplate"]
        names[made["LaunchTemplateId"]] = value

    def listed(value: str) -> set[str]:
        answer = ec2.describe_launch_templates(Filters=[{"Name": f"tag:{KEY}", "Values": [value]}])
        return {names[t["LaunchTemplateId"]] for t in answer["LaunchTemplates"]}

    assert listed("c\\*") == {"c*"}
    assert listed("[c]") == {"[c]"}
    assert listed("c*") == {"c1", "c12", "c*"}


def test_the_escapes_can_be_turned_off(api: Any, emu: Any, reservations: dict[str, str]) -> None:
    """``filter_escapes=False``: a service that ignored the backslash (a test's stand-in for
    "EC2 answered more than was asked")."""
    emu.configure(filter_escapes=False)
    assert found(api, reservations, "1\\*") == {"1", "12", "1*", "1?"}


def _escaped(text: str) -> str:
    """The page's rule, written out: a backslash before each special character."""
    return "".join("\\" + c if c in "*?\\" else c for c in text)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    wanted=st.text(alphabet="ab*?\\[]", max_size=6),
    other=st.text(alphabet="ab*?\\[]", max_size=6),
)
def test_an_escaped_value_matches_itself_and_nothing_else(
    emu: Any, wanted: str, other: str
) -> None:
    from emulator.models.filters import compile_value

    pattern = compile_value(_escaped(wanted))
    assert pattern.match(wanted)
    assert (pattern.match(other) is not None) == (other == wanted)
