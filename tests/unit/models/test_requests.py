"""Request models: what each entry point accepts, and what it refuses (contract)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser import parse
from botocore.loaders import Loader
from capacity_broker.domain.platform import PLATFORMS
from capacity_broker.models import (
    CapacityRequest,
    ProbeRequest,
    ReleaseRequest,
    ReserveRequest,
    SweepRequest,
)
from pydantic import BaseModel, ValidationError

SUBNET_A = "subnet-0a00000000000001"
SUBNET_B = "subnet-0b00000000000002"
PROBE: dict[str, Any] = {"instance_type": "g6.xlarge", "subnet_ids": [SUBNET_A, SUBNET_B]}
RESERVE: dict[str, Any] = {
    "job_id": "1234",
    "instance_types": ["c7i.48xlarge", "c6i.32xlarge"],
    "subnet_ids": [SUBNET_A, SUBNET_B],
    "instance_count": 8,
}
LT = "lt-0123456789abcdef0"
LTV = "launch_template.version"
PGA = "placement_group_arn"


def fields_of(error: ValidationError) -> list[str]:
    return [".".join(str(p) for p in e["loc"]) for e in error.errors()]


def refused(model: type[BaseModel], event: Any) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(event)
    return fields_of(caught.value)


# -- probe ---------------------------------------------------------------------------------


def test_probe_minimal_and_defaults() -> None:
    request = ProbeRequest.model_validate(PROBE)
    assert request.instance_count == 1
    assert request.tenancy == "default"
    assert request.instance_platform == "Linux/UNIX"
    assert request.platform == "Linux/UNIX"
    assert request.request_id is None
    assert request.tags is None


def test_probe_full() -> None:
    request = ProbeRequest.model_validate(
        {
            **PROBE,
            "request_id": "vdi-42",
            "instance_count": 1000,
            "instance_platform": "Windows",
            "tenancy": "dedicated",
            "tags": {"team": "vdi", "Name": "desk"},
        }
    )
    assert request.platform == "Windows"
    assert request.tags == {"team": "vdi", "Name": "desk"}


def test_image_id_replaces_the_platform() -> None:
    request = ProbeRequest.model_validate({**PROBE, "image_id": "ami-0123456789abcdef0"})
    assert request.platform is None  # derive it from the image


def test_probe_parses_through_powertools_from_dict_and_json() -> None:
    assert parse(event=PROBE, model=ProbeRequest).instance_type == "g6.xlarge"
    assert parse(event=json.dumps(PROBE), model=ProbeRequest).subnet_ids == [SUBNET_A, SUBNET_B]  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        parse(event={**PROBE, "instance_count": "2"}, model=ProbeRequest)
    with pytest.raises(ValidationError):
        parse(event=json.dumps({**PROBE, "instance_count": "2"}), model=ProbeRequest)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"instance_type": None}, "instance_type"),
        ({"instance_type": "G6.XLARGE"}, "instance_type"),
        ({"instance_type": "g6"}, "instance_type"),
        ({"instance_type": "g6.xlarge "}, "instance_type"),
        ({"instance_type": "g6..xlarge"}, "instance_type"),
        ({"instance_type": "\uff476.xlarge"}, "instance_type"),
        ({"instance_type": "g6.xlarge\n"}, "instance_type"),
        ({"instance_type": "g6.x" + "l" * 100}, "instance_type"),
        ({"subnet_ids": []}, "subnet_ids"),
        ({"subnet_ids": SUBNET_A}, "subnet_ids"),
        ({"subnet_ids": [SUBNET_A, SUBNET_A]}, "subnet_ids"),
        ({"subnet_ids": [f"subnet-{i:017x}" for i in range(21)]}, "subnet_ids"),
        ({"subnet_ids": ["subnet-0A00000000000001"]}, "subnet_ids.0"),
        ({"subnet_ids": [SUBNET_A, "subnet-123"]}, "subnet_ids.1"),
        ({"subnet_ids": [SUBNET_A, "subnet-0123456789abcdef01"]}, "subnet_ids.1"),
        ({"subnet_ids": [SUBNET_A, 5]}, "subnet_ids.1"),
        ({"subnet_ids": (SUBNET_A,)}, "subnet_ids"),
        ({"instance_count": 0}, "instance_count"),
        ({"instance_count": 1001}, "instance_count"),
        ({"instance_count": "5"}, "instance_count"),
        ({"instance_count": 5.0}, "instance_count"),
        ({"instance_count": True}, "instance_count"),
        ({"instance_count": None}, "instance_count"),
        ({"request_id": ""}, "request_id"),
        ({"request_id": "a" * 129}, "request_id"),
        ({"request_id": "has space"}, "request_id"),
        ({"request_id": "slash/no"}, "request_id"),
        ({"request_id": "nul\x00"}, "request_id"),
        ({"request_id": "é"}, "request_id"),
        ({"request_id": 42}, "request_id"),
        ({"instance_platform": "Linux"}, "instance_platform"),
        ({"instance_platform": "linux/unix"}, "instance_platform"),
        ({"instance_platform": "Windows BYOL"}, "instance_platform"),
        ({"image_id": "ami-123"}, "image_id"),
        ({"image_id": "ami-0rhel0000000001"}, "image_id"),
        ({"tenancy": "host"}, "tenancy"),
        ({"tenancy": "Default"}, "tenancy"),
        ({"tags": {"aws:x": "1"}}, "tags.aws:x.[key]"),
        ({"tags": {"AWS:x": "1"}}, "tags.AWS:x.[key]"),
        ({"tags": {"capacity-broker:purpose": "probe"}}, "tags.capacity-broker:purpose.[key]"),
        ({"tags": {"": "1"}}, "tags..[key]"),
        ({"tags": {"k" * 129: "1"}}, "tags." + "k" * 129 + ".[key]"),
        ({"tags": {"k": "v" * 257}}, "tags.k"),
        ({"tags": {"k": 1}}, "tags.k"),
        ({"tags": {"k": "line\nbreak"}}, "tags.k"),
        ({"tags": {"k\x00": "v"}}, "tags.k\x00.[key]"),
        ({"tags": {f"k{i}": "v" for i in range(21)}}, "tags"),
        ({"tags": [["k", "v"]]}, "tags"),
        ({"unknown": 1}, "unknown"),
        ({"subnet_id": SUBNET_A}, "subnet_id"),
    ],
)
def test_probe_refuses(change: dict[str, Any], field: str) -> None:
    event = {**PROBE, **change}
    event = {k: v for k, v in event.items() if v is not None or k not in PROBE}
    assert field in refused(ProbeRequest, event)


def test_probe_required_fields() -> None:
    assert set(refused(ProbeRequest, {})) == {"instance_type", "subnet_ids"}


def test_platform_and_image_are_exclusive() -> None:
    both = {**PROBE, "instance_platform": "Linux/UNIX", "image_id": "ami-0123456789abcdef0"}
    assert refused(ProbeRequest, both) == [""]


def test_tags_at_the_limits_are_fine() -> None:
    # EC2's limits: keys of 127 and values of 255 characters (EC2 User Guide, tag restrictions)
    tags = {f"k{i}": "v" * 255 for i in range(19)} | {"k" * 127: ""}
    assert ProbeRequest.model_validate({**PROBE, "tags": tags}).tags == tags
    unicode = {"équipe": "données 🚀"}
    assert ProbeRequest.model_validate({**PROBE, "tags": unicode}).tags == unicode


@pytest.mark.parametrize("tags", [{"k" * 128: "v"}, {"team": "v" * 256}])
def test_tags_past_ec2s_limits_are_refused(tags: dict[str, str]) -> None:
    """EC2 refuses a 128-character key and a 256-character value; the request models used to
    accept them, and the hold's create failed at EC2 instead of the request being refused."""
    assert refused(ProbeRequest, {**PROBE, "tags": tags})
    assert refused(ReserveRequest, {**RESERVE, "tags": tags})


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_ec2_platform_is_accepted(platform: str) -> None:
    assert (
        ProbeRequest.model_validate({**PROBE, "instance_platform": platform}).platform == platform
    )


def test_every_real_instance_type_is_accepted() -> None:
    model = Loader().load_service_model("ec2", "service-2")
    names = model["shapes"]["InstanceType"]["enum"]
    assert len(names) > 500
    for name in names:
        ProbeRequest.model_validate({**PROBE, "instance_type": name})
    for name in ("p6-b200.48xlarge", "u-6tb1.112xlarge", "g6.xlarge", "m7i-flex.large"):
        ProbeRequest.model_validate({**PROBE, "instance_type": name})


def test_request_is_immutable() -> None:
    request = ProbeRequest.model_validate(PROBE)
    with pytest.raises(ValidationError):
        request.instance_count = 5


# -- reserve -------------------------------------------------------------------------------


def test_reserve_minimal_and_defaults() -> None:
    request = ReserveRequest.model_validate(RESERVE)
    assert request.provision is False
    assert request.strict is None
    assert request.attempt is None
    assert request.launch_template is None
    assert request.capacity_reservation_id is None


def test_reserve_full() -> None:
    request = ReserveRequest.model_validate(
        {
            **RESERVE,
            "request_id": "job-1234-a1",
            "stack_name": "soca-job-1234",
            "launch_template": {"id": "lt-0123456789abcdef0", "version": "7"},
            "capacity_reservation_id": "cr-0123456789abcdef0",
            "placement_group_arn": "arn:aws:ec2:us-east-1:111122223333:placement-group/hpc-pg",
            "provision": True,
            "strict": True,
            "attempt": 3,
            "image_id": "ami-0123456789abcdef0",
            "tags": {"project": "cfd"},
        }
    )
    assert request.launch_template is not None
    assert request.launch_template.version == "7"
    assert request.platform is None


@pytest.mark.parametrize("version", ["$Latest", "$Default", "1", "123456"])
def test_launch_template_versions(version: str) -> None:
    event = {**RESERVE, "launch_template": {"id": "lt-0123456789abcdef0", "version": version}}
    assert ReserveRequest.model_validate(event).launch_template is not None


def test_launch_template_version_defaults_to_default() -> None:
    event = {**RESERVE, "launch_template": {"id": "lt-0123456789abcdef0"}}
    request = ReserveRequest.model_validate(event)
    assert request.launch_template is not None
    assert request.launch_template.version == "$Default"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"job_id": ""}, "job_id"),
        ({"job_id": "j" * 129}, "job_id"),
        ({"job_id": "tab\there"}, "job_id"),
        ({"job_id": "nul\x00"}, "job_id"),
        ({"job_id": "new\nline"}, "job_id"),
        ({"job_id": "\u200b"}, "job_id"),
        ({"job_id": 1234}, "job_id"),
        ({"instance_types": []}, "instance_types"),
        ({"instance_types": ["c7i.large"] * 2}, "instance_types"),
        ({"instance_types": [f"c{i}.large" for i in range(11)]}, "instance_types"),
        ({"instance_types": ["c7i.large", "nope"]}, "instance_types.1"),
        ({"instance_count": 0}, "instance_count"),
        ({"instance_count": 1001}, "instance_count"),
        ({"stack_name": "1stack"}, "stack_name"),
        ({"stack_name": "stack_name"}, "stack_name"),
        ({"stack_name": "s" * 129}, "stack_name"),
        ({"stack_name": ""}, "stack_name"),
        ({"launch_template": {"id": "lt-123"}}, "launch_template.id"),
        ({"launch_template": {"id": LT, "version": 7}}, LTV),
        ({"launch_template": {"id": LT, "version": "0"}}, LTV),
        ({"launch_template": {"id": LT, "version": "latest"}}, LTV),
        ({"launch_template": {"name": "hpc"}}, "launch_template.name"),
        ({"launch_template": "lt-0123456789abcdef0"}, "launch_template"),
        ({"capacity_reservation_id": "cr-xyz"}, "capacity_reservation_id"),
        ({"capacity_reservation_id": "cr-0123456789ABCDEF0"}, "capacity_reservation_id"),
        ({"placement_group_arn": "hpc-pg"}, "placement_group_arn"),
        ({"placement_group_arn": "arn:aws:ec2:us-east-1:1234:placement-group/x"}, PGA),
        ({"provision": "true"}, "provision"),
        ({"provision": 1}, "provision"),
        ({"strict": "false"}, "strict"),
        ({"strict": 0}, "strict"),
        ({"attempt": -1}, "attempt"),
        ({"attempt": 10**9}, "attempt"),
        ({"attempt": "3"}, "attempt"),
        ({"attempt": 1.5}, "attempt"),
    ],
)  # fmt: skip
def test_reserve_refuses(change: dict[str, Any], field: str) -> None:
    assert field in refused(ReserveRequest, {**RESERVE, **change})


def test_reserve_required_fields() -> None:
    assert set(refused(ReserveRequest, {})) == {
        "job_id",
        "instance_types",
        "subnet_ids",
        "instance_count",
    }


def test_provision_needs_a_launch_template() -> None:
    assert refused(ReserveRequest, {**RESERVE, "provision": True}) == [""]
    assert ReserveRequest.model_validate({**RESERVE, "provision": False})


def test_placement_group_arn_in_other_partitions() -> None:
    arn = "arn:aws-us-gov:ec2:us-gov-west-1:111122223333:placement-group/hpc"
    assert ReserveRequest.model_validate({**RESERVE, "placement_group_arn": arn})


# -- release -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "selector"),
    [
        ({"job_id": "1234"}, ("job_id", "1234")),
        ({"stack_name": "soca-job-1234", "request_id": "r1"}, ("stack_name", "soca-job-1234")),
        ({"reservation_id": "cr-0123456789abcdef0"}, ("reservation_id", "cr-0123456789abcdef0")),
    ],
)
def test_release_accepts_one_selector(event: dict[str, Any], selector: tuple[str, str]) -> None:
    assert ReleaseRequest.model_validate(event).selector == selector


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"request_id": "r1"},
        {"job_id": "1", "stack_name": "s"},
        {"job_id": "1", "reservation_id": "cr-0123456789abcdef0"},
        {"job_id": "1", "stack_name": "s", "reservation_id": "cr-0123456789abcdef0"},
    ],
)
def test_release_refuses_zero_or_several_selectors(event: dict[str, Any]) -> None:
    assert refused(ReleaseRequest, event) == [""]


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"job_id": "1", "tags": {}}, "tags"),
        ({"reservation_id": "cr-1"}, "reservation_id"),
        ({"stack_name": "9lives"}, "stack_name"),
        ({"job_id": 5}, "job_id"),
    ],
)
def test_release_refuses_bad_fields(event: dict[str, Any], field: str) -> None:
    assert field in refused(ReleaseRequest, event)


# -- cleaner and capacity ------------------------------------------------------------------


def test_sweep() -> None:
    request = SweepRequest.model_validate(
        {"action": "sweep", "dry_run": False, "regions": ["us-east-1", "eu-west-1"]}
    )
    assert request.dry_run is False
    assert request.regions == ["us-east-1", "eu-west-1"]
    defaulted = SweepRequest.model_validate({"action": "sweep"})
    assert defaulted.dry_run is True
    assert defaulted.regions is None
    gov = SweepRequest.model_validate({"action": "sweep", "regions": ["us-gov-west-1"]})
    assert gov.regions == ["us-gov-west-1"]


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"action": "clean"}, "action"),
        ({}, "action"),
        ({"action": "sweep", "dry_run": "false"}, "dry_run"),
        ({"action": "sweep", "dry_run": 0}, "dry_run"),
        ({"action": "sweep", "regions": []}, "regions"),
        ({"action": "sweep", "regions": ["us-east-1", "us-east-1"]}, "regions"),
        ({"action": "sweep", "regions": ["US-EAST-1"]}, "regions.0"),
        ({"action": "sweep", "regions": ["mars"]}, "regions.0"),
        ({"action": "sweep", "regions": "us-east-1"}, "regions"),
        ({"action": "sweep", "force": True}, "force"),
    ],
)
def test_sweep_refuses(event: dict[str, Any], field: str) -> None:
    assert field in refused(SweepRequest, event)


def test_capacity_defaults_and_filters() -> None:
    request = CapacityRequest.model_validate({})
    assert request.reservation_type == "odcr"
    assert request.include_inactive is False
    assert request.min_capacity == 0
    full = CapacityRequest.model_validate(
        {
            "reservation_type": "all",
            "instance_types": ["p5.48xlarge", "p5.*", "g6*"],
            "regions": ["us-east-1"],
            "gpu_only": True,
            "available_only": True,
            "min_capacity": 4,
            "include_inactive": True,
            "request_id": "cap-1",
        }
    )
    assert full.instance_types == ["p5.48xlarge", "p5.*", "g6*"]


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"reservation_type": "blocks"}, "reservation_type"),
        ({"instance_types": []}, "instance_types"),
        ({"instance_types": ["P5.*"]}, "instance_types.0"),
        ({"instance_types": ["p5 48xlarge"]}, "instance_types.0"),
        ({"min_capacity": -1}, "min_capacity"),
        ({"min_capacity": "1"}, "min_capacity"),
        ({"gpu_only": "yes"}, "gpu_only"),
        ({"active_only": True}, "active_only"),
    ],
)
def test_capacity_refuses(event: dict[str, Any], field: str) -> None:
    assert field in refused(CapacityRequest, event)
