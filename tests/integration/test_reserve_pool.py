"""reserve with ``"capacity": "reserved-first"`` against the emulator (issue 43's "Done when"):
the cluster's reserved pool first, a hold of only the shortfall, and a pool reservation that no
path of the broker ever cancels. Through the handlers, as a scheduler calls them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.validate import validate_parameters
from capacity_broker.adapters.ec2.base import Ec2Base
from capacity_broker.handlers.cleaner import handler as cleaner
from capacity_broker.handlers.release import handler as release
from capacity_broker.handlers.reserve import handler as reserve

from emulator import Emulator

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).parent / "scenarios" / "pool.yaml"
SUBNETS = ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2", "subnet-0aaaaaaaaaaaaaaa3"]
TYPES = ["c7i.48xlarge", "hpc7a.96xlarge"]
TEMPLATE = "lt-0ddddddddddddddd1"
POOL_ODCR = "cr-0aaaaaaaaaaaa0001"
WRONG_TYPE = "cr-0aaaaaaaaaaaa0002"
GROUPED = "cr-0aaaaaaaaaaaa0003"
LOOKALIKE = "cr-0aaaaaaaaaaaa0004"
OUTSIDE = "cr-0aaaaaaaaaaaa0005"
POOL_CONFIGURATION = [
    {"Type": "AWS::EC2::CapacityReservationPool"},
    {
        "Type": "AWS::ResourceGroups::Generic",
        "Parameters": [
            {"Name": "allowed-resource-types", "Values": ["AWS::EC2::CapacityReservation"]}
        ],
    },
]


@pytest.fixture
def pool(broker: Any, monkeypatch: pytest.MonkeyPatch, container: Any) -> Any:
    """The account with its pool, the deployment naming it by the operator's tag."""
    broker.load_scenario(SCENARIO)
    monkeypatch.setenv("BROKER_POOL_TAG", "hpc-pool=prod")
    container.fresh()
    return broker


def job(**fields: Any) -> dict[str, Any]:
    return {
        "job_id": "1234",
        "instance_types": TYPES,
        "subnet_ids": SUBNETS,
        "capacity": "reserved-first",
        "provision": True,
        "launch_template": {"id": TEMPLATE},
        **fields,
    }


def ec2() -> Any:
    return boto3.client("ec2", region_name="us-east-1")


def reservation(reservation_id: str) -> dict[str, Any]:
    found = ec2().describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return dict(found["CapacityReservations"][0])


def holds_made(emu: Any) -> list[dict[str, Any]]:
    """Every CreateCapacityReservation the broker sent, with its parameters."""
    return [c.params for c in emu.calls("CreateCapacityReservation")]


def instances(ids: list[str]) -> list[dict[str, Any]]:
    Emulator().settle()
    described = ec2().describe_instances(InstanceIds=ids)["Reservations"]
    return [i for r in described for i in r["Instances"]]


def test_a_job_the_pool_covers_launches_into_the_pool_and_holds_nothing(
    pool: Any, context: Any
) -> None:
    answer = reserve(job(request_id="pool-3", instance_count=3), context)
    assert answer["status"] == "provisioned", answer
    assert len(answer["instances"]) == 3
    assert holds_made(pool) == []
    assert "reservation" not in answer  # no hold
    assert answer["pool"] == [
        {
            "reservation_id": POOL_ODCR,
            "kind": "odcr",
            "instance_type": "hpc7a.96xlarge",
            "availability_zone": "us-east-1c",
            "instance_count": 3,
        }
    ]
    served = answer["served"]
    assert sorted(s["instance_id"] for s in served) == sorted(answer["instances"])
    assert {(s["rung"], s["reservation_id"]) for s in served} == {("odcr", POOL_ODCR)}
    # The price is the Price List's On-Demand rate of the type (what the ODCR bills anyway).
    assert all(s["hourly_price_usd"] and s["hourly_price_usd"] > 0 for s in served)
    # EC2 says where each node runs: in the pool reservation, which is now full.
    assert {i.get("CapacityReservationId") for i in instances(answer["instances"])} == {POOL_ODCR}
    assert reservation(POOL_ODCR)["AvailableInstanceCount"] == 0
    assert reservation(POOL_ODCR)["State"] == "active"


def test_a_job_larger_than_the_pool_uses_the_pool_first_and_holds_only_the_rest(
    pool: Any, context: Any
) -> None:
    answer = reserve(job(request_id="pool-5", instance_count=5), context)
    assert answer["status"] == "provisioned", answer
    made = holds_made(pool)
    # Holds of the shortfall only, tried in the pool's AZ alone (the job's nodes stay in one
    # AZ): c7i first (the job's preference, none there), then hpc7a.
    zone = ec2().describe_subnets(SubnetIds=[SUBNETS[2]])["Subnets"][0]["AvailabilityZoneId"]
    assert [(m["InstanceType"], m["InstanceCount"], m["AvailabilityZoneId"]) for m in made] == [
        ("c7i.48xlarge", 2, zone),
        ("hpc7a.96xlarge", 2, zone),
    ]
    served = answer["served"]
    rungs = sorted((s["rung"], s["reservation_id"]) for s in served)
    hold_id = answer["reservation"]["id"]
    assert rungs == [("hold", hold_id)] * 2 + [("odcr", POOL_ODCR)] * 3
    assert answer["reservation"]["owned"] is True
    # The hold is given back once its nodes run; the pool reservation is untouched.
    assert reservation(hold_id)["State"] == "cancelled"
    assert reservation(POOL_ODCR)["State"] == "active"
    assert {i["Placement"]["AvailabilityZone"] for i in instances(answer["instances"])} == {
        "us-east-1c"
    }


def pool_by_group(monkeypatch: pytest.MonkeyPatch, container: Any, members: list[str]) -> None:
    """The pool becomes the resource group "hpc-pool" of ``members``, no longer the tag."""
    groups = boto3.client("resource-groups", region_name="us-east-1")
    arn = groups.create_group(Name="hpc-pool", Configuration=POOL_CONFIGURATION)["Group"][
        "GroupArn"
    ]
    if members:
        arns = [reservation(m)["CapacityReservationArn"] for m in members]
        groups.group_resources(Group=arn, ResourceArns=arns)
    monkeypatch.delenv("BROKER_POOL_TAG")
    monkeypatch.setenv("BROKER_POOL_GROUPS", "hpc-pool")
    container.fresh()


def test_a_pool_named_by_a_resource_group(
    pool: Any, monkeypatch: pytest.MonkeyPatch, container: Any, context: Any
) -> None:
    pool_by_group(monkeypatch, container, [GROUPED])
    answer = reserve(job(request_id="pool-group", instance_count=2), context)
    assert answer["status"] == "provisioned", answer
    assert {(s["rung"], s["reservation_id"]) for s in answer["served"]} == {("odcr", GROUPED)}
    assert holds_made(pool) == []
    # The tag-named reservation is not this pool's.
    assert reservation(POOL_ODCR)["AvailableInstanceCount"] == 3


def test_a_request_names_its_own_pool(pool: Any, context: Any) -> None:
    answer = reserve(
        job(request_id="pool-own", instance_count=1, pool={"tag": "hpc-pool=prod"}), context
    )
    assert answer["status"] == "provisioned", answer
    assert answer["served"][0]["reservation_id"] == POOL_ODCR


def test_without_a_hold_for_the_shortfall_nothing_is_launched(pool: Any, context: Any) -> None:
    # The AZ the pool covers has room for 9 more hpc7a (16 less 7 reserved): a shortfall of 10
    # cannot be held there, so the pool is not launched into either (all or nothing).
    answer = reserve(job(request_id="pool-13", instance_count=13, strict=True), context)
    assert answer["status"] == "no_capacity", answer
    assert answer["instances"] == []
    assert reservation(POOL_ODCR)["AvailableInstanceCount"] == 3
    assert not [c for c in pool.calls() if c.action in ("CreateFleet", "RunInstances")]


def test_a_pool_reservation_survives_release_and_the_cleaner_even_with_lookalike_tags(
    pool: Any, monkeypatch: pytest.MonkeyPatch, container: Any, context: Any
) -> None:
    # Every hold the cleaner sees is past every grace: an owned hold would be cancelled.
    for name in ("PROBE", "STACK", "IDLE"):
        monkeypatch.setenv(f"BROKER_{name}_GRACE_SECONDS", "0")
    monkeypatch.setenv("BROKER_HOLD_LIMIT_SECONDS", "0")
    container.fresh()
    pool.advance(3600)
    released = release({"request_id": "rel-1", "job_id": "1234"}, context)
    assert released["status"] == "released", released
    # The look-alike outside the pool is what tags alone call a hold of job 1234: cancelled.
    # The same tags on a pool reservation change nothing: the pool is never the broker's.
    assert released["cancelled"] == [OUTSIDE]
    assert reservation(LOOKALIKE)["State"] == "active"
    swept = cleaner({"action": "sweep", "dry_run": False}, context)
    assert swept["status"] == "ok", swept
    assert LOOKALIKE not in {c["id"] for c in swept["cancelled"]}
    assert LOOKALIKE not in {k["id"] for k in swept.get("kept", [])}
    for reservation_id in (POOL_ODCR, WRONG_TYPE, LOOKALIKE):
        assert reservation(reservation_id)["State"] == "active"
    cancels = [c.params for c in pool.calls("CancelCapacityReservation")]
    assert {c["CapacityReservationId"] for c in cancels} == {OUTSIDE}


def test_a_reserved_first_job_never_launches_into_a_lookalike(pool: Any, context: Any) -> None:
    # The look-alike pool reservation carries the broker's hold tags: it is not launched into
    # (a hold is the ladder's own rung, never a pool's), whichever reservation could serve.
    answer = reserve(job(request_id="pool-4", instance_count=4), context)
    assert answer["status"] == "provisioned", answer
    assert LOOKALIKE not in {s["reservation_id"] for s in answer["served"]}
    assert reservation(LOOKALIKE)["AvailableInstanceCount"] == 1


def test_the_fleet_requests_sent_are_valid_for_botocores_model(
    pool: Any, monkeypatch: pytest.MonkeyPatch, context: Any
) -> None:
    sent: list[tuple[str, dict[str, Any], Any]] = []
    original = Ec2Base._call

    def recording(self: Ec2Base, action: str, deadline: Any = None, **params: Any) -> Any:
        if action in ("CreateFleet", "RunInstances", "CreateLaunchTemplateVersion", "CreateTags"):
            shape = self._client.meta.service_model.operation_model(action).input_shape
            sent.append((action, params, shape))
        return original(self, action, deadline, **params)

    monkeypatch.setattr(Ec2Base, "_call", recording)
    answer = reserve(job(request_id="pool-valid", instance_count=5), context)
    assert answer["status"] == "provisioned", answer
    fleets = [s for s in sent if s[0] == "CreateFleet"]
    assert len(fleets) == 2  # one into the pool reservation, one into the hold
    # The ladder's done record too (one tag on every node).
    assert any(a == "CreateTags" for a, _, _ in sent)
    for _, params, shape in sent:
        validate_parameters(params, shape)  # raises ParamValidationError when one is wrong
    targets = {
        p["LaunchTemplateData"]["CapacityReservationSpecification"]["CapacityReservationTarget"][
            "CapacityReservationId"
        ]
        for a, p, _ in sent
        if a == "CreateLaunchTemplateVersion"
    }
    assert POOL_ODCR in targets and answer["reservation"]["id"] in targets


# -- waste you can see ----------------------------------------------------------------------


def test_capacity_pool_lists_each_pool_reservations_unused_instances_and_their_cost(
    pool: Any, context: Any
) -> None:
    import json

    from capacity_broker.cli import app
    from typer.testing import CliRunner

    # Two of the pool ODCR's three instances are used by a job first.
    assert reserve(job(request_id="pool-2", instance_count=2), context)["status"] == "provisioned"
    result = CliRunner().invoke(
        app, ["capacity", "--pool", "--regions", "us-east-1", "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    rows = {r["reservation_id"]: r for r in json.loads(result.stdout)}
    # The deployment's pool (BROKER_POOL_TAG): every reservation tagged hpc-pool=prod.
    assert set(rows) == {POOL_ODCR, WRONG_TYPE, LOOKALIKE}
    assert rows[POOL_ODCR]["unused_instances"] == 1
    assert rows[POOL_ODCR]["hourly_price_usd"] == 7.2
    assert rows[POOL_ODCR]["unused_hourly_cost_usd"] == 7.2
    assert rows[LOOKALIKE]["unused_instances"] == 1
    # A type the Price List has no price for: unknown, never 0.
    assert rows[WRONG_TYPE]["unused_instances"] == 2
    assert rows[WRONG_TYPE].get("unused_hourly_cost_usd") is None

    table = CliRunner().invoke(
        app,
        ["capacity", "--pool", "--pool-tag", "hpc-pool=prod", "--regions", "us-east-1"],
        env={"COLUMNS": "120"},
    )
    assert table.exit_code == 0, table.output
    assert "Unused: 4 instances" in table.stdout
    assert "$14.40/hour" in table.stdout  # 1 + 1 hpc7a at $7.20; the p5s have no price
    assert POOL_ODCR in table.stdout


def test_the_cleaner_publishes_the_pools_unused_instance_hours(
    pool: Any, context: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    swept = cleaner({"action": "sweep", "dry_run": True}, context)
    assert swept["status"] == "ok", swept
    metrics = [
        json.loads(line)
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("{") and '"_aws"' in line
    ]
    (emf,) = [m for m in metrics if "PoolUnusedInstances" in m]
    # 3 + 2 + 1 unused in the tagged pool, over the sweep's 5 minutes.
    assert emf["PoolUnusedInstances"] == [6.0]
    assert emf["PoolUnusedInstanceHours"] == [0.5]


# -- interruptible reservations and their warnings ------------------------------------------


def lent_to_the_pool(count: int) -> str:
    """An interruptible reservation lent from a new standing ODCR, tagged into the pool."""
    client = ec2()
    source = client.create_capacity_reservation(
        InstanceType="hpc7a.96xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1c",
        InstanceCount=count,
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]["CapacityReservationId"]
    Emulator().settle()
    client.create_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source, InstanceCount=count
    )
    lent = str(
        reservation(source)["InterruptibleCapacityAllocation"]["InterruptibleCapacityReservationId"]
    )
    Emulator().settle()
    client.create_tags(Resources=[lent], Tags=[{"Key": "hpc-pool", "Value": "prod"}])
    Emulator().settle()
    return lent


def test_the_ladder_takes_odcrs_before_interruptible_reservations_and_its_warning_names_the_job(
    pool: Any, context: Any
) -> None:
    lent = lent_to_the_pool(2)
    pool.clear_calls()  # the test's own source ODCR is not the broker's
    answer = reserve(job(request_id="pool-icr", instance_count=5), context)
    assert answer["status"] == "provisioned", answer
    assert holds_made(pool) == []
    assert [(p["reservation_id"], p["kind"], p["instance_count"]) for p in answer["pool"]] == [
        (POOL_ODCR, "odcr", 3),
        (lent, "interruptible", 2),
    ]
    by_rung = sorted((s["rung"], s["reservation_id"]) for s in answer["served"])
    assert by_rung == [("interruptible", lent)] * 2 + [("odcr", POOL_ODCR)] * 3
    node = next(s["instance_id"] for s in answer["served"] if s["rung"] == "interruptible")

    warning = {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        # Matched by its prefix: a new wording of the same warning still reaches the cleaner.
        "detail-type": "EC2 Capacity Reservation Instance Interruption Notice",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-11-21T10:03:12Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "instance-id": node,
            "instance-action": "terminate",
            "instance-termination-time": "2026-11-21T10:05:12Z",
        },
    }
    told = cleaner(warning, context)
    assert told["status"] == "ok", told
    assert told["interrupted"] == [
        {
            "instance_id": node,
            "region": "us-east-1",
            "job_id": "1234",
            "rung": lent,
            "capacity_reservation_id": lent,
            "termination_time": "2026-11-21T10:05:12Z",
        }
    ]
    assert told["cancelled"] == []
    # The interruptible reservation is the pool's: release never cancels it.
    release({"request_id": "rel-icr", "job_id": "1234"}, context)
    assert reservation(lent)["State"] == "active"


def test_a_priority_without_interruptible_reservations_holds_instead(
    pool: Any, context: Any
) -> None:
    lent = lent_to_the_pool(2)
    answer = reserve(
        job(
            request_id="pool-no-icr",
            instance_count=5,
            pool={"tag": "hpc-pool=prod", "priority": ["odcr"]},
        ),
        context,
    )
    assert answer["status"] == "provisioned", answer
    assert lent not in {s["reservation_id"] for s in answer["served"]}
    assert sorted(s["rung"] for s in answer["served"]) == ["hold"] * 2 + ["odcr"] * 3


# -- all or nothing, and a retry ------------------------------------------------------------


def live(ids: list[str]) -> list[str]:
    Emulator().settle()
    found = ec2().describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )["Reservations"]
    return [i["InstanceId"] for r in found for i in r["Instances"] if i["InstanceId"] in ids]


def fail_fleets_of(emu: Any, size: int, code: str, times: int) -> None:
    """EC2 Fleet answers ``code`` (in its Errors) to an On-Demand fleet of ``size`` nodes."""
    emu.fail(
        "CreateFleet",
        code,
        mode="errors",
        times=times,
        when={
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": size,
                "DefaultTargetCapacityType": "on-demand",
                "OnDemandTargetCapacity": size,
            }
        },
    )


def ladder_instances(request_id: str) -> list[str]:
    """Every instance the request's ladder launched, ended or not."""
    return [
        i["InstanceId"]
        for r in ec2().describe_instances()["Reservations"]
        for i in r["Instances"]
        if {"Key": "capacity-broker:ladder", "Value": request_id} in i.get("Tags", [])
    ]


def test_when_the_holds_launch_fails_the_pools_nodes_are_terminated_and_the_hold_cancelled(
    pool: Any, context: Any
) -> None:
    # The hold's part (2 nodes) is refused by EC2; the pool's part (3 nodes) had launched.
    fail_fleets_of(pool, 2, "InsufficientInstanceCapacity", times=99)
    answer = reserve(job(request_id="pool-undo", instance_count=5), context)
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "InsufficientInstanceCapacity"
    assert answer["instances"] == []
    assert "cleanup" not in answer
    fleets = pool.calls("CreateFleet")
    assert [f.params["TargetCapacitySpecification"]["TotalTargetCapacity"] for f in fleets][:2] == [
        3,
        2,
    ]
    launched_first = ladder_instances("pool-undo")
    assert launched_first and live(launched_first) == []
    assert reservation(POOL_ODCR)["AvailableInstanceCount"] == 3
    assert {h["InstanceCount"] for h in holds_made(pool)} == {2}
    states = [
        r["State"]
        for r in ec2().describe_capacity_reservations()["CapacityReservations"]
        if {"Key": "capacity-broker:purpose", "Value": "hold"} in r.get("Tags", [])
        and {"Key": "capacity-broker:request-id", "Value": "pool-undo:hold"} in r.get("Tags", [])
    ]
    assert states and set(states) == {"cancelled"}


def test_the_same_request_again_launches_nothing_twice(pool: Any, context: Any) -> None:
    first = reserve(job(request_id="pool-again", instance_count=5), context)
    assert first["status"] == "provisioned", first
    fleets = len(pool.calls("CreateFleet"))
    Emulator().settle()  # the retry comes once EC2 lists the first invocation's nodes
    again = reserve(job(request_id="pool-again", instance_count=5), context)
    assert again["status"] == "provisioned", again
    assert sorted(again["instances"]) == sorted(first["instances"])
    assert len(pool.calls("CreateFleet")) == fleets  # every rung found its own nodes
    assert len(live(first["instances"])) == 5


def test_a_reservation_in_the_pools_group_survives_release_whatever_its_tags(
    pool: Any, monkeypatch: pytest.MonkeyPatch, container: Any, context: Any
) -> None:
    # The pool by its group alone: the tagged look-alike is not the pool's any more.
    pool_by_group(monkeypatch, container, [OUTSIDE])
    released = release({"request_id": "rel-group", "job_id": "1234"}, context)
    assert released["status"] == "released", released
    assert released["cancelled"] == [LOOKALIKE]
    assert reservation(OUTSIDE)["State"] == "active"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"pool": {"tag": "capacity-broker:purpose=hold"}}, "pool.tag"),
        ({"pool": {}}, "pool"),
        ({"pool": {"tag": "k=v", "priority": ["odcr", "odcr"]}}, "pool"),
        ({"provision": False}, None),
        ({"capacity_reservation_id": POOL_ODCR}, None),
    ],
)
def test_a_reserved_first_request_that_cannot_be_served_is_refused_and_changes_nothing(
    pool: Any, context: Any, fields: dict[str, Any], field: str | None
) -> None:
    answer = reserve(job(request_id="pool-bad", instance_count=1, **fields), context)
    assert answer["status"] == "invalid_request", answer
    if field is not None:
        assert field in {e["field"] for e in answer["errors"]}, answer
    assert [c for c in pool.calls() if not c.action.startswith("Describe")] == []
