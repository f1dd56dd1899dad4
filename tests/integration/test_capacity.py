"""The capacity entry point against the discovery scenario (emulator/scenarios/discovery.yaml):
ODCRs (active, cancelled, expired, open, targeted, one owned) and Capacity Blocks (active,
scheduled, expired), GPU, Neuron and plain types, in three regions."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from capacity_broker.handlers.capacity import handler
from capacity_broker.models.capacity import CAPACITY_ROW_FIELDS

pytestmark = pytest.mark.integration

REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
OWNER = "discovery-cluster"


@pytest.fixture
def world(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("BROKER_REGIONS", ",".join(REGIONS))
    container.rebuild()
    broker.load_scenario("discovery")
    return broker


def listing(context: Any, **fields: Any) -> dict[str, Any]:
    return handler(fields, context)  # type: ignore[no-any-return]


def rows_of(answer: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return sorted(
        (r["region"], r["reservation_type"], r["instance_type"], r["state"])
        for r in answer["reservations"]
    )


def test_default_lists_active_odcrs_of_every_configured_region(world: Any, context: Any) -> None:
    answer = listing(context)
    assert answer["status"] == "ok"
    assert answer["regions"] == REGIONS
    rows = answer["reservations"]
    assert {r["reservation_type"] for r in rows} == {"odcr"}
    assert {r["state"] for r in rows} == {"active"}
    assert Counter(r["region"] for r in rows) == {"us-east-1": 6, "us-west-2": 2, "eu-west-1": 2}
    summary = answer["summary"]
    assert summary["reservations"] == 10
    assert summary["by_type"] == {"odcr": 10}
    assert summary["total_capacity"] == 242 == sum(r["total_capacity"] for r in rows)
    assert summary["available_capacity"] == 103 == sum(r["available_capacity"] for r in rows)
    assert summary["used_capacity"] == 139
    assert summary["free_percent"] == round(100 * 103 / 242, 1)
    # no blocks listed: the contract's "duration range of blocks" is there, as null
    assert summary["block_duration_hours"] is None
    for row in rows:
        assert row["used_capacity"] == row["total_capacity"] - row["available_capacity"]
        assert row["availability_zone_id"]
        # every contract field is in every row (null when unknown); the placement details
        # beyond the contract only when EC2 gave them
        assert row["capacity_block_id"] is None
        assert "ultra_cluster_placement" not in row


def test_capacity_blocks_are_kept_apart_with_durations_and_placement(
    world: Any, context: Any
) -> None:
    answer = listing(context, reservation_type="capacity-block")
    rows = answer["reservations"]
    assert rows_of(answer) == [
        ("us-east-1", "capacity-block", "p5.48xlarge", "active"),
        ("us-east-1", "capacity-block", "p5.48xlarge", "scheduled"),
        ("us-east-1", "capacity-block", "trn1.32xlarge", "scheduled"),
        ("us-west-2", "capacity-block", "p5.48xlarge", "scheduled"),
        ("us-west-2", "capacity-block", "trn1.32xlarge", "active"),
    ]
    for row in rows:
        assert row["capacity_block_id"].startswith("cb-")
        assert row["start_date"].endswith("Z")
        assert row["end_date"] > row["start_date"]
        assert row["duration_hours"] in (168, 336)
        assert row["instance_match_criteria"] == "targeted"
    # Placement: EC2 gives network nodes for active (or pending) reservations only (botocore:
    # NetworkNodes "null or empty if ... a state other than active or pending"); a scheduled
    # block's placement is unknown, not "no" (the old listing said True or False for them).
    placed = [r for r in rows if r["state"] == "active"]
    by_id = {(r["region"], r["instance_type"]): r for r in placed}
    assert by_id[("us-east-1", "p5.48xlarge")]["ultra_cluster_placement"] is True
    assert len(by_id[("us-east-1", "p5.48xlarge")]["network_nodes"]) == 3
    assert by_id[("us-west-2", "trn1.32xlarge")]["ultra_cluster_placement"] is False
    scheduled = [r for r in rows if r["state"] == "scheduled"]
    assert len(scheduled) == 3
    for row in scheduled:
        assert "ultra_cluster_placement" not in row and "network_nodes" not in row
        # EC2 shows nothing available before the start; the size is the block's tag
        assert (row["available_capacity"], row["used_capacity"]) == (0, 0)
        assert row["total_capacity"] == int(
            row["tags"]["aws:ec2capacityreservation:incrementalRequestedQuantity"]
        )
    summary = answer["summary"]
    assert summary["by_type"] == {"capacity-block": 5}
    assert summary["block_duration_hours"] == {"min_hours": 168, "max_hours": 336}
    assert summary["ultra_cluster_placement"] is True
    assert summary["instance_types"] == ["p5.48xlarge", "trn1.32xlarge"]
    assert summary["total_capacity"] == 32 + 32 + 64 + 16 + 16
    # only the two active blocks (32 + 16) can be launched into now; nothing is in use
    assert (summary["available_capacity"], summary["used_capacity"]) == (32 + 16, 0)


@pytest.mark.parametrize("reservation_type", ["odcr", "capacity-block", "all"])
def test_every_row_carries_every_contract_field(
    world: Any, context: Any, reservation_type: str
) -> None:
    answer = listing(context, reservation_type=reservation_type, include_inactive=True)
    rows = answer["reservations"]
    assert rows
    for row in rows:
        assert list(row)[: len(CAPACITY_ROW_FIELDS)] == list(CAPACITY_ROW_FIELDS), row
        assert set(row) - set(CAPACITY_ROW_FIELDS) <= {"ultra_cluster_placement", "network_nodes"}
    for row in rows:
        if row["reservation_type"] == "odcr":
            assert row["capacity_block_id"] is None
    assert "block_duration_hours" in answer["summary"]


def test_an_unlimited_odcr_says_end_date_null(world: Any, context: Any) -> None:
    answer = listing(context, instance_types=["m7i.large"], regions=["us-east-1"])
    (row,) = answer["reservations"]
    assert row["end_date"] is None
    assert row["end_date_type"] == "unlimited"
    assert row["capacity_block_id"] is None


def test_all_lists_both_and_include_inactive_adds_the_rest(world: Any, context: Any) -> None:
    both = listing(context, reservation_type="all")
    assert both["summary"]["by_type"] == {"capacity-block": 5, "odcr": 10}
    everything = listing(context, reservation_type="all", include_inactive=True)
    extra = Counter(rows_of(everything)) - Counter(rows_of(both))
    assert sorted(extra.elements()) == [
        ("us-east-1", "capacity-block", "p5.48xlarge", "expired"),
        ("us-east-1", "odcr", "g6.xlarge", "cancelled"),
        ("us-east-1", "odcr", "p4d.24xlarge", "expired"),
    ]
    cancelled = next(r for r in everything["reservations"] if r["state"] == "cancelled")
    assert (cancelled["available_capacity"], cancelled["used_capacity"]) == (0, 0)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"instance_types": ["g6.xlarge"]},
            {("us-east-1", "g6.xlarge"), ("us-west-2", "g6.xlarge")},
        ),
        (
            {"instance_types": ["g6*"]},
            {("us-east-1", "g6.xlarge"), ("us-west-2", "g6.xlarge"), ("eu-west-1", "g6.2xlarge")},
        ),
        (
            {"instance_types": ["inf2.xlarge", "r7i.large"]},
            {
                ("us-east-1", "inf2.xlarge"),
                ("us-west-2", "inf2.xlarge"),
                ("eu-west-1", "r7i.large"),
            },
        ),
        (
            {"gpu_only": True},
            {
                ("us-east-1", "inf2.xlarge"),
                ("us-east-1", "g6.xlarge"),
                ("us-east-1", "p4d.24xlarge"),
                ("us-west-2", "g6.xlarge"),
                ("us-west-2", "inf2.xlarge"),
                ("eu-west-1", "g6.2xlarge"),
            },
        ),
        (
            {"min_capacity": 10},
            {
                ("us-east-1", "inf2.xlarge"),
                ("us-east-1", "g6.xlarge"),
                ("us-east-1", "m7i.large"),
                ("us-west-2", "g6.xlarge"),
                ("eu-west-1", "r7i.large"),
            },
        ),
        (
            {"gpu_only": True, "available_only": True, "min_capacity": 10},
            {("us-east-1", "inf2.xlarge"), ("us-east-1", "g6.xlarge"), ("us-west-2", "g6.xlarge")},
        ),
        (
            {"regions": ["eu-west-1"], "gpu_only": True},
            {("eu-west-1", "g6.2xlarge")},
        ),
        (
            {
                "reservation_type": "capacity-block",
                "instance_types": ["p5"],
                "regions": ["us-east-1"],
            },
            {("us-east-1", "p5.48xlarge")},
        ),
        # us-east-1's trn1 block (64) is scheduled: nothing available before its start
        (
            {"reservation_type": "all", "instance_types": ["trn1.*"], "min_capacity": 10},
            {("us-west-2", "trn1.32xlarge")},
        ),
        ({"instance_types": ["x2idn.metal"]}, set()),
    ],
)
def test_filters_and_combinations(
    world: Any, context: Any, fields: dict[str, Any], expected: set[tuple[str, str]]
) -> None:
    answer = listing(context, **fields)
    assert answer["status"] == "ok"
    assert {(r["region"], r["instance_type"]) for r in answer["reservations"]} == expected
    summary = answer["summary"]
    assert summary["reservations"] == len(answer["reservations"])
    assert summary["total_capacity"] == sum(r["total_capacity"] for r in answer["reservations"])


def test_available_only_drops_full_reservations(world: Any, context: Any) -> None:
    answer = listing(context, available_only=True)
    assert len(answer["reservations"]) == 9
    assert all(r["available_capacity"] > 0 for r in answer["reservations"])
    full = listing(context, instance_types=["c7i.48xlarge"], regions=["us-east-1"])
    assert sorted(r["available_capacity"] for r in full["reservations"]) == [0, 4]


def test_owned_by_broker_follows_the_ownership_tags(
    world: Any, container: Any, context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = listing(context, regions=["us-east-1"])  # the fixture's cluster: demo-cluster
    assert not any(r["owned_by_broker"] for r in other["reservations"])
    monkeypatch.setenv("BROKER_CLUSTER_ID", OWNER)
    container.rebuild()
    mine = listing(context, regions=["us-east-1"], reservation_type="all")
    owned = [r for r in mine["reservations"] if r["owned_by_broker"]]
    assert [(r["instance_type"], r["total_capacity"]) for r in owned] == [("c7i.48xlarge", 4)]
    assert owned[0]["tags"]["capacity-broker:purpose"] == "hold"
    assert owned[0]["end_date_type"] == "limited"


def test_a_failed_region_is_reported_and_the_rest_still_shown(world: Any, context: Any) -> None:
    world.fail(
        "DescribeCapacityReservations", "UnauthorizedOperation", region="eu-west-1", times=99
    )
    answer = listing(context)
    assert answer["status"] == "partial"
    assert [(e["region"], e["error_code"]) for e in answer["errors"]] == [
        ("eu-west-1", "UnauthorizedOperation")
    ]
    assert {r["region"] for r in answer["reservations"]} == {"us-east-1", "us-west-2"}
    assert answer["summary"]["reservations"] == 8
    assert "eu-west-1" in answer["message"]


def test_a_region_the_emulator_does_not_know_fails_alone(world: Any, context: Any) -> None:
    answer = listing(context, regions=["us-east-1", "aa-bb-0"])
    assert answer["status"] == "partial"
    assert [e["region"] for e in answer["errors"]] == ["aa-bb-0"]
    assert {r["region"] for r in answer["reservations"]} == {"us-east-1"}


def test_every_region_failing_is_an_error(world: Any, context: Any) -> None:
    world.fail("DescribeCapacityReservations", "UnauthorizedOperation", times=99)
    answer = listing(context)
    assert answer["status"] == "error"
    assert answer["reservations"] == []
    assert {e["region"] for e in answer["errors"]} == set(REGIONS)


def test_throttling_is_retried_not_reported(world: Any, context: Any) -> None:
    world.fail("DescribeCapacityReservations", "RequestLimitExceeded", region="us-west-2", times=2)
    answer = listing(context)
    assert answer["status"] == "ok"
    assert Counter(r["region"] for r in answer["reservations"])["us-west-2"] == 2


def test_topology_failure_leaves_placement_unknown(
    world: Any, context: Any, caplog: pytest.LogCaptureFixture
) -> None:
    world.fail("DescribeCapacityReservationTopology", "UnauthorizedOperation", times=99)
    answer = listing(context, reservation_type="capacity-block")
    assert answer["status"] == "ok"
    assert len(answer["reservations"]) == 5
    assert all("ultra_cluster_placement" not in r for r in answer["reservations"])
    assert "ultra_cluster_placement" not in answer["summary"]
    assert "UnauthorizedOperation" in caplog.text  # said, not swallowed


def test_only_started_blocks_are_asked_for_their_topology(world: Any, context: Any) -> None:
    world.clear_calls()
    listing(context, reservation_type="all", regions=["us-east-1"])
    (call,) = world.calls("DescribeCapacityReservationTopology")
    assert len(call.params["CapacityReservationIds"]) == 1  # llm-now; the others are scheduled


def test_topology_is_asked_the_way_ec2_accepts_and_shown(world: Any, context: Any) -> None:
    """EC2 refuses CapacityReservationIds together with MaxResults (botocore's model); the
    broker used to send both, lose the error and never show an UltraCluster placement."""
    world.clear_calls()
    answer = listing(context, reservation_type="capacity-block", regions=["us-east-1"])
    (call,) = world.calls("DescribeCapacityReservationTopology")
    assert "MaxResults" not in call.params
    assert call.outcome == "ok"
    (now,) = [r for r in answer["reservations"] if r["state"] == "active"]
    assert now["ultra_cluster_placement"] is True
    assert now["network_nodes"] == ["nn-1a2b3c4d", "nn-5e6f7a8b", "nn-9c0d1e2f"]
    assert answer["summary"]["ultra_cluster_placement"] is True


@pytest.mark.parametrize(
    "answer",
    [
        {"CapacityReservations": [{"CapacityReservationId": "cr-1", "NetworkNodes": 5}]},
        {"CapacityReservations": ["cr-1"]},
        {"CapacityReservations": [{"NetworkNodes": ["nn-1"]}]},
        {"CapacityReservations": 7},
    ],
)
def test_an_unreadable_topology_answer_loses_only_the_topology(
    world: Any,
    context: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    answer: dict[str, Any],
) -> None:
    """A topology answer of another shape took the whole region's listing down (status
    "error", no rows); now the rows stand, their placement null, and the log says why."""
    from capacity_broker.adapters.ec2 import Ec2

    real = Ec2._call

    def garbled(self: Any, action: str, deadline: float | None = None, **params: Any) -> Any:
        if action == "DescribeCapacityReservationTopology":
            return answer
        return real(self, action, deadline, **params)

    monkeypatch.setattr(Ec2, "_call", garbled)
    result = listing(context, reservation_type="capacity-block", regions=["us-east-1"])
    assert result["status"] == "ok", result
    assert len(result["reservations"]) == 3
    assert all("ultra_cluster_placement" not in r for r in result["reservations"])
    assert all("network_nodes" not in r for r in result["reservations"])
    assert "TopologyUnreadable" in caplog.text


def test_invalid_requests_change_nothing(world: Any, context: Any) -> None:
    world.clear_calls()
    for event in (
        {"reservation_type": "blocks"},
        {"min_capacity": -1},
        {"min_capacity": "1"},
        {"regions": ["mars-north-1"]},
        {"instance_types": ["P5.*"]},
        {"colour": "red"},
    ):
        answer = listing(context, **event, request_id="bad-1")
        assert answer["status"] == "invalid_request", event
        assert answer["request_id"] == "bad-1"
        assert answer["errors"]
    assert world.calls() == []


def test_every_page_is_read(broker: Any, context: Any) -> None:
    many = [
        {"instance_type": "m7i.large", "availability_zone": "us-east-1a", "count": 1}
        for _ in range(1003)
    ]
    broker.load_scenario({"regions": {"us-east-1": {"reservations": many}}})
    answer = listing(context, regions=["us-east-1"])
    assert answer["summary"]["reservations"] == 1003
    assert len(broker.calls("DescribeCapacityReservations")) == 2


def test_regions_are_listed_at_the_same_time(broker: Any, context: Any) -> None:
    regions = [
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "eu-west-1",
        "eu-central-1",
        "ap-southeast-1",
        "ap-northeast-1",
    ]
    world = {
        "regions": {
            region: {
                "reservations": [
                    {"instance_type": "g6.xlarge", "availability_zone": f"{region}a", "count": 2}
                ],
                "capacity_blocks": [
                    {  # active: its topology is asked too (two calls a region)
                        "instance_type": "p5.48xlarge",
                        "availability_zone": f"{region}a",
                        "count": 2,
                        "start": "-1h",
                        "duration_hours": 24,
                    }
                ],
            }
            for region in regions
        }
    }
    broker.load_scenario(world)
    listing(context, regions=regions, reservation_type="all")  # clients made, caches warm
    # The eight regions' listings meet in EC2 before any is answered: only a broker that
    # lists them at the same time gets past (one after the other, the first would wait alone
    # until the barrier breaks). No clock is read: the verdict does not depend on the
    # machine's speed (it used to compare timings, 8 regions against 1).
    together = broker.gather("DescribeCapacityReservations", parties=len(regions))
    answer = listing(context, regions=regions, reservation_type="all")
    assert answer["status"] == "ok"
    assert answer["summary"]["reservations"] == 2 * len(regions)
    assert together.met, "the regions were listed one after the other"


def test_the_handler_imports_stay_light() -> None:
    code = (
        "import sys, capacity_broker.handlers.capacity, capacity_broker; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('typer', 'rich', 'click', 'yaml', 'moto') or m == 'capacity_broker.client'); "
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
