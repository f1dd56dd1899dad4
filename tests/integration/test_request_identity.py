"""Request identity (contract v3): the same ``request_id`` with a different body (count, types,
subnets, platform, tenancy, template) is ``invalid_request``, with or without the state table;
a replayed answer says ``"replayed": true`` and reports the hold's state now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.handlers.release import handler as release
from capacity_broker.handlers.reserve import handler as reserve

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).parent / "scenarios" / "hpc.yaml"
SUBNETS = ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"]
TEMPLATE = "lt-0ddddddddddddddd1"
DIGEST_TAG = "capacity-broker:request-digest"


@pytest.fixture(params=["without a table", "with the state table"])
def hpc(
    broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Any:
    broker.load_scenario(SCENARIO)
    broker.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 64)
    if request.param == "with the state table":
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName="broker-state",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
    else:
        monkeypatch.delenv("BROKER_STATE_TABLE", raising=False)
    container.fresh()  # its root built from this environment on first use
    return broker


def job(**fields: Any) -> dict[str, Any]:
    return {
        "job_id": "77",
        "request_id": "job-77-a1",
        "instance_types": ["c7i.48xlarge"],
        "subnet_ids": SUBNETS[:1],
        "instance_count": 2,
        "launch_template": {"id": TEMPLATE, "version": "1"},
        **fields,
    }


def reservations(broker: Any, request_id: str) -> list[dict[str, Any]]:
    """This request's reservations as EC2 shows them once settled (a listing made a moment
    after a create shows it without its tags)."""
    broker.settle()
    found = boto3.client("ec2", region_name="us-east-1").describe_capacity_reservations()
    return [
        r
        for r in found["CapacityReservations"]
        if {"Key": "capacity-broker:request-id", "Value": request_id} in r.get("Tags", [])
    ]


CHANGES = {
    "count": {"instance_count": 8},
    "types": {"instance_types": ["c7i.48xlarge", "hpc7a.96xlarge"]},
    "subnets": {"subnet_ids": SUBNETS},
    "platform": {"instance_platform": "Windows"},
    "tenancy": {"tenancy": "dedicated"},
    "template": {"launch_template": {"id": TEMPLATE, "version": "$Latest"}},
}


@pytest.mark.parametrize("settled", [True, False], ids=["settled", "a moment after"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_request_under_an_old_id_is_invalid(
    hpc: Any, context: Any, change: str, settled: bool
) -> None:
    """The issue's case: count 2 held, then count 8 under the same id answered "reserved"
    naming the 2-instance hold. Also a moment after the first ask, when EC2's listings do not
    show its hold yet."""
    first = reserve(job(), context)
    assert first["status"] == "reserved", first
    if settled:
        hpc.settle()
    changed = reserve(job(**CHANGES[change]), context)
    assert changed["status"] == "invalid_request", changed
    assert [e["field"] for e in changed["errors"]] == ["request_id"]
    assert "different request" in changed["message"]
    (held,) = reservations(hpc, "job-77-a1")  # nothing new, the first hold as it was
    assert held["CapacityReservationId"] == first["reservation"]["id"]
    assert (held["State"], held["TotalInstanceCount"]) == ("active", 2)
    again = reserve(job(attempt=3), context)  # the same request, the retry counter aside
    assert again["status"] == "reserved", again
    assert again["reservation"]["id"] == first["reservation"]["id"]


def test_the_hold_carries_the_requests_identity(hpc: Any, context: Any) -> None:
    """Without a table the hold is the record: its digest tag, within EC2's 50 tags with the
    caller's 20."""
    tags = {f"team-{i}": "x" for i in range(20)}
    first = reserve(job(tags=tags), context)
    assert first["status"] == "reserved", first
    (held,) = reservations(hpc, "job-77-a1")
    keys = {t["Key"]: t["Value"] for t in held["Tags"]}
    assert len(keys[DIGEST_TAG]) == 48 and len(keys) <= 50


# Without a table nothing is replayed: the hold itself is looked up (the tests above).
@pytest.mark.parametrize("hpc", ["with the state table"], indirect=True)
def test_a_replayed_answer_says_so_and_reports_the_hold_now(hpc: Any, context: Any) -> None:
    first = reserve(job(), context)
    assert first["status"] == "reserved"
    again = reserve(job(), context)
    assert again["replayed"] is True
    # made a moment ago: EC2 may show it pending for a while, holding all the same
    assert again["reservation"]["state"] in ("pending", "active")
    assert again["reservation"]["id"] == first["reservation"]["id"]
    hpc.settle()
    released = release({"job_id": "77"}, context)
    assert released["cancelled"] == [first["reservation"]["id"]]
    hpc.clear_calls()
    later = reserve(job(attempt=1), context)
    assert later["replayed"] is True
    assert later["status"] == "reserved"  # the request's one outcome, given again
    assert later["reservation"]["state"] == "cancelled"
    assert "no longer holds" in later["message"]
    assert hpc.calls("CreateCapacityReservation") == []
    assert hpc.calls("CreateLaunchTemplateVersion") == []
