"""A request's own tags against EC2's tag restrictions (EC2 User Guide, "Tag your Amazon EC2
resources": keys up to 127, values up to 255 characters, 50 per resource), end to end: what
the broker accepts, EC2 (the emulator, which enforces those rules) accepts too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from capacity_broker.handlers.probe import handler as probe
from capacity_broker.handlers.reserve import handler as reserve

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).parent / "scenarios" / "hpc.yaml"
SUBNETS = ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2", "subnet-0aaaaaaaaaaaaaaa3"]


@pytest.fixture
def hpc(broker: Any) -> Any:
    broker.load_scenario(SCENARIO)
    broker.clear_calls()
    return broker


def hold(tags: dict[str, str], context: Any) -> dict[str, Any]:
    answer: dict[str, Any] = reserve(
        {
            "job_id": "42",
            "instance_types": ["hpc7a.96xlarge"],
            "subnet_ids": SUBNETS,
            "instance_count": 2,
            "tags": tags,
        },
        context,
    )
    return answer


def test_tags_at_ec2s_limits_reach_the_hold(hpc: Any, context: Any) -> None:
    tags = {"k" * 127: "v" * 255, **{f"team-{i}": "x" for i in range(19)}}
    answer = hold(tags, context)
    assert answer["status"] == "reserved", answer
    (create,) = [c for c in hpc.calls("CreateCapacityReservation") if c.outcome == "ok"]
    (spec,) = create.params["TagSpecifications"]
    sent = {t["Key"]: t["Value"] for t in spec["Tags"]}
    assert sent.items() >= tags.items()
    assert len(sent) <= 50


@pytest.mark.parametrize("tags", [{"k" * 128: "v"}, {"team": "v" * 256}])
def test_tags_past_ec2s_limits_are_an_invalid_request_before_any_call(
    hpc: Any, context: Any, tags: dict[str, str]
) -> None:
    """They used to pass validation and fail at EC2, attempt by attempt."""
    for answer in (
        hold(tags, context),
        probe({"instance_type": "g6.xlarge", "subnet_ids": SUBNETS[:1], "tags": tags}, context),
    ):
        assert answer["status"] == "invalid_request", answer
        assert answer["errors"][0]["field"].startswith("tags")
    assert hpc.calls() == []
