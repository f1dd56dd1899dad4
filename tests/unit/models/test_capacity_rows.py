"""Capacity rows carry every field the contract lists, ``null`` when unknown, wherever they are
dumped (the Lambda's answer, the CLI's json/yaml, a plan or a purchase); other answers keep
leaving out what is unknown."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import yaml
from capacity_broker.cli.render import plain as _plain
from capacity_broker.models.capacity import (
    CAPACITY_ROW_FIELDS,
    CapacityResponse,
    CapacityRow,
    CapacitySummary,
    DurationRange,
)
from capacity_broker.models.discovery import PlanAnswer, PurchaseAnswer, SpotPriceRow


def odcr(**fields: object) -> CapacityRow:
    """An unlimited ODCR as EC2 may describe it: no block id, no end date, no AZ id."""
    values: dict[str, object] = {
        "reservation_id": "cr-0123456789abcdef0",
        "reservation_type": "odcr",
        "instance_type": "g6.xlarge",
        "region": "us-east-1",
        "availability_zone": "us-east-1a",
        "total_capacity": 4,
        "available_capacity": 1,
        "used_capacity": 3,
        "state": "active",
        "start_date": datetime(2026, 11, 1, tzinfo=UTC),
        "end_date_type": "unlimited",
        **fields,
    }
    return CapacityRow.model_validate(values)


def test_the_contract_lists_every_row_field_in_order() -> None:
    assert list(CapacityRow.model_fields)[: len(CAPACITY_ROW_FIELDS)] == list(CAPACITY_ROW_FIELDS)


def test_a_row_keeps_its_null_contract_fields() -> None:
    dumped = odcr().to_json_dict()
    assert list(dumped) == list(CAPACITY_ROW_FIELDS)
    assert dumped["capacity_block_id"] is None
    assert dumped["end_date"] is None
    assert dumped["availability_zone_id"] is None
    assert dumped["duration_hours"] is None
    assert dumped["start_date"] == "2026-11-01T00:00:00Z"
    # beyond the contract: only when known
    assert "ultra_cluster_placement" not in dumped
    assert "network_nodes" not in dumped
    placed = odcr(ultra_cluster_placement=False, network_nodes=[]).to_json_dict()
    assert placed["ultra_cluster_placement"] is False


def test_the_capacity_answer_keeps_them_too() -> None:
    answer = CapacityResponse(
        status="ok", request_id="r", reservations=[odcr()], message="1 ODCR"
    ).to_json_dict()
    (row,) = answer["reservations"]
    assert set(row) == set(CAPACITY_ROW_FIELDS)
    assert row["end_date"] is None
    # no blocks: the duration range of blocks is null, not missing
    summary = answer["summary"]
    assert isinstance(summary, dict)
    assert summary["block_duration_hours"] is None
    assert "ultra_cluster_placement" not in summary
    with_blocks = CapacitySummary(
        block_duration_hours=DurationRange(min_hours=24, max_hours=168)
    ).to_json_dict()
    assert with_blocks["block_duration_hours"] == {"min_hours": 24, "max_hours": 168}


def test_the_json_dump_and_a_round_trip() -> None:
    text = odcr().model_dump_json(exclude_none=True)
    assert json.loads(text)["capacity_block_id"] is None
    assert CapacityRow.model_validate_json(text) == odcr()


def test_rows_inside_a_plan_and_a_purchase() -> None:
    plan = PlanAnswer(
        status="ready",
        workload="inference",
        instance_type="g6.xlarge",
        instance_count=1,
        recommendation="odcr",
        odcrs=[odcr()],
        message="m",
    ).to_json_dict()
    assert plan["odcrs"][0]["capacity_block_id"] is None
    purchase = PurchaseAnswer(
        status="purchased", offering_id="cb-1", purchase_key="pk-1", reservation=odcr(), message="m"
    ).to_json_dict()
    assert purchase["reservation"]["end_date"] is None
    assert "error_code" not in purchase


def test_the_clis_json_and_yaml_rows() -> None:
    rows = _plain([odcr()])
    # every field of the row, null when unknown (so every row has the same keys), and the
    # seed documents' instance_count
    assert set(rows[0]) == set(CAPACITY_ROW_FIELDS) | {
        "ultra_cluster_placement",
        "network_nodes",
        "instance_count",
    }
    assert rows[0]["instance_count"] == rows[0]["total_capacity"]
    assert rows[0]["ultra_cluster_placement"] is None
    assert json.loads(json.dumps(rows))[0]["end_date"] is None
    assert yaml.safe_load(yaml.safe_dump(rows))[0]["capacity_block_id"] is None


def test_an_explicit_exclude_still_excludes() -> None:
    dumped = odcr().model_dump(mode="json", exclude_none=True, exclude={"capacity_block_id"})
    assert "capacity_block_id" not in dumped
    assert dumped["end_date"] is None


def test_other_answers_still_leave_out_what_is_unknown() -> None:
    spot = SpotPriceRow(
        instance_type="g6.xlarge",
        region="us-east-1",
        availability_zone="us-east-1a",
        product_description="Linux/UNIX",
        spot_price=0.3,
        timestamp=datetime(2026, 11, 1, tzinfo=UTC),
    ).to_json_dict()
    assert "on_demand_price" not in spot
    assert "savings_note" not in spot
