"""Realism by construction: the emulator refuses what botocore's EC2 model does not document.

Every name checked here comes from botocore's model at run time (``emulator.documented``);
the expectations below are read from the same model's documentation text, so they fail if
the parsing stops matching what the model says.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from emu_helpers import NO_RETRIES, REGION, error_of

from emulator import documented

# botocore validates types and required members client-side; these tests send what a careless
# or non-botocore client could, so that check is off (EC2 itself is what is being emulated).
UNCHECKED = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, parameter_validation=False
)


@pytest.fixture
def raw(emu: Any) -> Any:
    return boto3.client("ec2", region_name=REGION, config=UNCHECKED)


def reserve(raw: Any, **extra: Any) -> Any:
    """One c5.large reservation in us-east-1a, with ``extra`` parameters as sent."""
    return raw.create_capacity_reservation(
        **{
            "InstanceType": "c5.large",
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": "us-east-1a",
            "InstanceCount": 1,
            **extra,
        }
    )


@pytest.fixture(autouse=True)
def _forget() -> Any:
    documented.heard.take()
    yield
    documented.heard.take()


# -- the filter names, read from the model's prose -------------------------------------------


def test_describe_capacity_reservations_filters_are_the_documented_ones() -> None:
    # The API reference's Filter.N list for DescribeCapacityReservations, and the tag filters
    # EC2 honours there (ALSO_DOCUMENTED, cited).
    assert documented.filter_names("DescribeCapacityReservations") == {
        "instance-type",
        "owner-id",
        "instance-platform",
        "availability-zone",
        "tenancy",
        "outpost-arn",
        "state",
        "start-date",
        "end-date",
        "end-date-type",
        "instance-match-criteria",
        "placement-group-arn",
        "tag:<key>",
        "tag-key",
    }


def test_nested_lists_are_values_not_filters() -> None:
    names = documented.filter_names("DescribeCapacityReservations") or set()
    # "state" documents its values in a nested list (active, expired, cancelled, ...).
    assert not {"active", "expired", "cancelled", "default", "dedicated", "open"} & names


@pytest.mark.parametrize(
    "operation", ["DescribeInstances", "DescribeSubnets", "DescribeLaunchTemplates", "DescribeTags"]
)
def test_tag_filters_are_read_in_every_spelling_of_the_prose(operation: str) -> None:
    # "<code>tag:&lt;key&gt;</code>", "<code>tag</code>:&lt;key&gt;" and "<code>tag</code> -
    # The key/value combination" all document tag:<key>.
    assert "tag:<key>" in (documented.filter_names(operation) or set())
    assert documented.documents_filter(operation, "tag:capacity-broker:cluster-id")


def test_a_filter_list_the_prose_does_not_give_is_not_checked() -> None:
    assert documented.filter_names("DescribeIpams") is None  # "One or more filters." only
    assert documented.documents_filter("DescribeIpams", "anything")
    assert documented.filter_names("DescribeCapacityBlockOfferings") is None  # no Filters


def test_describe_instances_documents_tag_key_but_not_tag_value() -> None:
    assert documented.documents_filter("DescribeInstances", "tag-key")
    assert not documented.documents_filter("DescribeInstances", "tag-value")


# -- what EC2 answers ----------------------------------------------------------------------


def test_an_undocumented_filter_is_invalid_parameter_value(emu: Any, raw: Any) -> None:
    # What EC2 answered for "public-ip" on DescribeInstances (boto/boto3#1299).
    with pytest.raises(ClientError) as exc:
        raw.describe_instances(Filters=[{"Name": "public-ip", "Values": ["203.0.113.1"]}])
    assert error_of(exc) == ("InvalidParameterValue", 400)
    assert exc.value.response["Error"]["Message"] == "The filter 'public-ip' is invalid"


def test_a_tag_filter_where_the_operation_documents_none_is_refused(emu: Any, raw: Any) -> None:
    # aws/aws-cli#7225: "The filter 'tag:Name' is invalid" from DescribeInstanceStatus.
    assert not documented.documents_filter("DescribeInstanceStatus", "tag:Name")
    with pytest.raises(ClientError) as exc:
        raw.describe_instance_status(Filters=[{"Name": "tag:Name", "Values": ["x"]}])
    assert error_of(exc) == ("InvalidParameterValue", 400)
    assert "'tag:Name'" in exc.value.response["Error"]["Message"]


def test_documented_filters_pass(emu: Any, raw: Any) -> None:
    raw.describe_capacity_reservations(
        Filters=[
            {"Name": "state", "Values": ["active"]},
            {"Name": "tag:capacity-broker:cluster-id", "Values": ["c"]},
            {"Name": "tag-key", "Values": ["capacity-broker:purpose"]},
        ]
    )
    raw.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
    assert documented.heard.take() == []


@pytest.mark.parametrize(
    ("member", "value"),
    [("Tenancy", "shared"), ("EndDateType", "forever"), ("InstanceMatchCriteria", "sometimes")],
)
def test_an_enum_value_the_model_does_not_list_is_refused(
    emu: Any, raw: Any, member: str, value: str
) -> None:
    with pytest.raises(ClientError) as exc:
        reserve(raw, **{member: value})
    assert error_of(exc) == ("InvalidParameterValue", 400)
    assert f"({value})" in exc.value.response["Error"]["Message"]
    assert emu.capacity().reservations == {}


def test_an_enum_inside_a_list_of_structures_is_checked(emu: Any, raw: Any) -> None:
    with pytest.raises(ClientError) as exc:
        reserve(raw, TagSpecifications=[{"ResourceType": "capacity-reservations", "Tags": []}])
    assert error_of(exc) == ("InvalidParameterValue", 400)
    assert "TagSpecifications.ResourceType" in exc.value.response["Error"]["Message"]


def test_an_unknown_parameter_is_unknown_parameter(emu: Any) -> None:
    ec2 = boto3.client("ec2", region_name=REGION, config=NO_RETRIES)

    def smuggle(params: dict[str, Any], **_: Any) -> None:
        params["body"]["Colour"] = "red"

    ec2.meta.events.register("before-call.ec2.DescribeRegions", smuggle)
    with pytest.raises(ClientError) as exc:
        ec2.describe_regions()
    assert error_of(exc) == ("UnknownParameter", 400)
    assert exc.value.response["Error"]["Message"] == "The parameter Colour is not recognized"


def test_a_missing_required_parameter_is_missing_parameter(emu: Any, raw: Any) -> None:
    with pytest.raises(ClientError) as exc:
        raw.create_capacity_reservation(InstanceType="c5.large", AvailabilityZone="us-east-1a")
    assert error_of(exc) == ("MissingParameter", 400)
    assert "InstancePlatform" in exc.value.response["Error"]["Message"]


def test_a_number_outside_the_model_range_is_refused(emu: Any, raw: Any) -> None:
    # DescribeSubnets MaxResults: 5 to 1000 (shape DescribeSubnetsMaxResults); moto alone
    # would serve a page of 3.
    with pytest.raises(ClientError) as exc:
        raw.describe_subnets(MaxResults=3)
    assert error_of(exc) == ("InvalidParameterValue", 400)
    assert "between 5 and 1000" in exc.value.response["Error"]["Message"]


def test_a_refused_request_changes_nothing_and_is_recorded(emu: Any, raw: Any) -> None:
    with pytest.raises(ClientError):
        raw.describe_capacity_reservations(
            Filters=[{"Name": "capacity-reservation-id", "Values": ["cr-0123456789abcdef0"]}]
        )
    [finding] = documented.heard.take()
    assert (finding.operation, finding.kind, finding.name) == (
        "DescribeCapacityReservations",
        "filter",
        "capacity-reservation-id",
    )
    [call] = emu.calls("DescribeCapacityReservations")
    assert call.outcome == "InvalidParameterValue"


def test_the_knob_serves_undocumented_requests_and_still_records_them(emu: Any, raw: Any) -> None:
    emu.configure(refuse_undocumented=False)
    raw.describe_capacity_reservations(
        Filters=[{"Name": "availability-zone-id", "Values": ["use1-az1"]}]
    )
    [finding] = documented.heard.take()
    assert finding.name == "availability-zone-id"


def test_strictness_is_the_default(emu: Any) -> None:
    from emulator.state import Settings

    assert Settings().refuse_undocumented is True


def test_other_services_are_not_checked_against_the_ec2_model(emu: Any) -> None:
    ssm = boto3.client("ssm", region_name=REGION, config=NO_RETRIES)
    ssm.put_parameter(Name="/x", Value="1", Type="String")
    assert documented.heard.take() == []


def test_instance_types_are_left_to_ec2s_own_check(emu: Any, raw: Any) -> None:
    # EC2 answers DescribeInstanceTypes for a type it does not have with InvalidInstanceType
    # (SELF_CHECKED_ENUMS), not the generic enum refusal.
    with pytest.raises(ClientError) as exc:
        raw.describe_instance_types(InstanceTypes=["p9.huge"])
    assert error_of(exc)[0] == "InvalidInstanceType"
    assert documented.heard.take() == []
