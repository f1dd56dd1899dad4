"""reserved-first with ``allow_on_demand`` (issue 43, item 2: "On-Demand only when the request
allows it"): when no hold of the shortfall can be made, the shortfall is launched On-Demand
(untargeted, all or nothing, in the ladder's AZ) as the rung ``on-demand``. Through the
handlers, against the emulator.

The hold fails here because EC2 answers ``InsufficientInstanceCapacity`` to every
``CreateCapacityReservation`` (an injected fault: EC2's own answer when it has no capacity to
reserve), while On-Demand launches still find room."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.validate import validate_parameters
from capacity_broker.adapters.ec2.base import Ec2Base
from capacity_broker.handlers.reserve import handler as reserve

from tests.integration.test_reserve_pool import (
    POOL_ODCR,
    SUBNETS,
    TYPES,
    holds_made,
    instances,
    job,
    pool,  # noqa: F401  (fixture)
    reservation,
)
from tests.integration.test_reserve_pool_abandoned import (
    LambdaKilled,
    ladder_nodes,
    running,
    tags_of,
)

pytestmark = pytest.mark.integration

RUNG = "capacity-broker:rung"


def no_hold(emu: Any) -> None:
    emu.fail("CreateCapacityReservation", "InsufficientInstanceCapacity", times=999)


def fleets(emu: Any) -> list[dict[str, Any]]:
    return [c.params for c in emu.calls("CreateFleet")]


def test_allow_on_demand_needs_reserved_first(pool: Any, context: Any) -> None:  # noqa: F811
    event = {**job(request_id="od-alone", instance_count=2), "allow_on_demand": True}
    event.pop("capacity")
    answer = reserve(event, context)
    assert answer["status"] == "invalid_request", answer
    assert any("allow_on_demand" in e["message"] for e in answer["errors"]), answer
    assert [c for c in pool.calls() if not c.action.startswith("Describe")] == []
    # Not a boolean: the field's own error.
    answer = reserve(job(request_id="od-bad", instance_count=2, allow_on_demand="maybe"), context)
    assert answer["status"] == "invalid_request", answer
    assert "allow_on_demand" in {e["field"] for e in answer["errors"]}, answer


def test_without_a_hold_the_shortfall_is_launched_on_demand_when_allowed(
    pool: Any,  # noqa: F811
    context: Any,
) -> None:
    no_hold(pool)
    answer = reserve(
        job(request_id="od-5", instance_count=5, allow_on_demand=True, strict=True), context
    )
    assert answer["status"] == "provisioned", answer
    assert len(answer["instances"]) == 5
    assert holds_made(pool) and "reservation" not in answer  # a hold was tried, none made
    served = sorted((s["rung"], s.get("reservation_id") or "") for s in answer["served"])
    assert served == [("odcr", POOL_ODCR)] * 3 + [("on-demand", "")] * 2, answer["served"]
    assert all(s["hourly_price_usd"] == 7.2 for s in answer["served"])  # hpc7a's Price List rate
    assert "On-Demand" in answer["message"]
    described = {i["InstanceId"]: i for i in instances(answer["instances"])}
    on_demand = [i for i, d in described.items() if tags_of(d).get(RUNG) == "on-demand"]
    assert len(on_demand) == 2
    for instance_id in on_demand:
        node = described[instance_id]
        assert node.get("CapacityReservationId") is None  # untargeted: in no reservation
        assert node["InstanceType"] == "hpc7a.96xlarge"  # the pool's type first
        assert tags_of(node)["capacity-broker:ladder"] == "od-5"
        assert tags_of(node)["capacity-broker:request-id"] == "od-5:on-demand"
    # One AZ for the job, the pool's; the done record on every node.
    assert {d["Placement"]["AvailabilityZone"] for d in described.values()} == {"us-east-1c"}
    assert {tags_of(d).get("capacity-broker:ladder-state") for d in described.values()} == {"done"}
    # All or nothing: the On-Demand fleet asked for every node of the shortfall at once.
    (od_fleet,) = [
        f for f in fleets(pool) if f["TargetCapacitySpecification"]["TotalTargetCapacity"] == 2
    ]
    assert od_fleet["OnDemandOptions"]["MinTargetCapacity"] == 2
    assert od_fleet["Type"] == "instant"
    assert od_fleet["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"][
        "LaunchTemplateId"
    ] == ("lt-0ddddddddddddddd1")


def test_without_the_opt_in_nothing_is_launched(pool: Any, context: Any) -> None:  # noqa: F811
    no_hold(pool)
    answer = reserve(job(request_id="od-not", instance_count=5, strict=True), context)
    assert answer["status"] == "no_capacity", answer
    assert answer["instances"] == []
    assert fleets(pool) == []
    assert reservation(POOL_ODCR)["AvailableInstanceCount"] == 3


def test_a_failed_on_demand_launch_ends_the_pool_part(pool: Any, context: Any) -> None:  # noqa: F811
    no_hold(pool)
    pool.fail(
        "CreateFleet",
        "InsufficientInstanceCapacity",
        mode="errors",
        times=999,
        when={
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": 2,
                "DefaultTargetCapacityType": "on-demand",
                "OnDemandTargetCapacity": 2,
            }
        },
    )
    answer = reserve(
        job(request_id="od-fail", instance_count=5, allow_on_demand=True, strict=True), context
    )
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "InsufficientInstanceCapacity", answer
    assert answer["instances"] == []
    nodes = ladder_nodes("od-fail")
    assert len(nodes) == 3 and running(nodes) == [], nodes  # the pool's part, ended
    # Every (type, subnet) of the ladder's AZ was tried, each under its own ClientToken.
    tried = [
        f for f in fleets(pool) if f["TargetCapacitySpecification"]["TotalTargetCapacity"] == 2
    ]
    pairs = {
        (
            f["LaunchTemplateConfigs"][0]["Overrides"][0]["InstanceType"],
            f["LaunchTemplateConfigs"][0]["Overrides"][0]["SubnetId"],
        )
        for f in tried
    }
    assert pairs == {(t, SUBNETS[2]) for t in TYPES}
    assert len({f["ClientToken"] for f in tried}) == len(tried)
    assert reservation(POOL_ODCR)["AvailableInstanceCount"] == 3


def test_a_retry_after_a_death_past_the_on_demand_launch_launches_nothing_twice(
    pool: Any,  # noqa: F811
    container: Any,
    context: Any,
) -> None:
    """Killed right after the On-Demand fleet took effect (its nodes run, no record): the retry
    finds each rung where it was, launches nothing again, and writes the record."""
    from tests.integration.test_reserve_pool_abandoned import Killer

    no_hold(pool)
    event = job(request_id="od-killed", instance_count=5, allow_on_demand=True, strict=True)
    killer = Killer(container.root, after=2)  # the pool's fleet, then the On-Demand one
    with pytest.raises(LambdaKilled):
        reserve(event, context)
    assert killer.killed
    first = ladder_nodes("od-killed")
    assert len(running(first)) == 5
    container.fresh()
    pool.clear_calls()
    again = reserve(event, context)
    assert again["status"] == "provisioned", (again.get("error_code"), again.get("message"))
    assert sorted(again["instances"]) == sorted(first)
    assert fleets(pool) == []  # nothing launched again
    assert {
        tags_of(i).get("capacity-broker:ladder-state") for i in ladder_nodes("od-killed").values()
    } == {"done"}
    assert sorted((s["rung"]) for s in again["served"]) == ["odcr"] * 3 + ["on-demand"] * 2


def test_the_on_demand_fleet_sent_is_valid_for_botocores_model(
    pool: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    context: Any,
) -> None:
    sent: list[tuple[str, dict[str, Any], Any]] = []
    original = Ec2Base._call

    def recording(self: Ec2Base, action: str, deadline: Any = None, **params: Any) -> Any:
        if action in ("CreateFleet", "CreateTags"):
            shape = self._client.meta.service_model.operation_model(action).input_shape
            sent.append((action, params, shape))
        return original(self, action, deadline, **params)

    monkeypatch.setattr(Ec2Base, "_call", recording)
    no_hold(pool)
    answer = reserve(
        job(request_id="od-valid", instance_count=5, allow_on_demand=True, strict=True), context
    )
    assert answer["status"] == "provisioned", answer
    # The pool's fleet, the On-Demand one, then the done record (asked again for a node EC2
    # does not know yet: eventual consistency).
    actions = [a for a, _, _ in sent]
    assert actions[:2] == ["CreateFleet", "CreateFleet"] and set(actions[2:]) == {"CreateTags"}
    for _, params, shape in sent:
        validate_parameters(params, shape)  # raises ParamValidationError when one is wrong
    on_demand = sent[1][1]
    assert "CapacityReservationOptions" not in on_demand.get("OnDemandOptions", {})
    assert on_demand["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
