"""cleaner (ODCRCleaner) against the emulator: the issue's "Done when", one test each.

The emulator's clock is frozen in most tests and handed to the cleaner (the root the handlers
run on is built with it: ``cleaner_clock=``), so reservation ages are exact and a dry run and
the real sweep after it see the same world. CloudFormation is moto's: stacks reach
CREATE_COMPLETE at once, other statuses are set on moto's stack object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.handlers.cleaner import handler
from moto.cloudformation.models import cloudformation_backends
from moto.core import DEFAULT_ACCOUNT_ID

pytestmark = [
    pytest.mark.integration,
    # moto's serializer warns that CloudFormation's model has no AccessDenied shape.
    pytest.mark.filterwarnings("ignore:Exception\\(AnyServiceError\\):UserWarning"),
]

CLUSTER = "demo-cluster"
EAST, WEST = "us-east-1", "us-west-2"
EVENTS = Path(__file__).resolve().parents[2] / "events"
TEMPLATE = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})
PREFIX = "soca-demo-job-"
GRACE_VARIABLES = (
    "BROKER_PROBE_GRACE_SECONDS",
    "BROKER_STACK_GRACE_SECONDS",
    "BROKER_IDLE_GRACE_SECONDS",
    "BROKER_HOLD_LIMIT_SECONDS",
)


# -- the world ----------------------------------------------------------------------------


def ours(purpose: str, stack: str | None = None, cluster: str = CLUSTER) -> dict[str, str]:
    tags = {
        "capacity-broker:cluster-id": cluster,
        "capacity-broker:purpose": purpose,
        "capacity-broker:request-id": f"req-{purpose}",
        "capacity-broker:subnet-id": "subnet-0a00000000000000a",
    }
    if stack:
        tags["capacity-broker:stack-name"] = PREFIX + stack
    return tags


def reservation(
    name: str,
    tags: dict[str, str] | None,
    created: str,
    end: str | None,
    az: str = "a",
    region: str = EAST,
    **extra: Any,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "name": name,
        "instance_type": "c7i.large",
        "availability_zone": f"{region}{az}",
        "count": 1,
        "created": created,
        "match": "targeted",
        "tags": tags or {},
        **extra,
    }
    if end is not None:
        item["end_date"] = end
    return item


@dataclass
class Inventory:
    """A scenario plus what the contract's table says about each named reservation."""

    regions: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    cancel: dict[str, str] = field(default_factory=dict)  # name -> reason
    keep: dict[str, str] = field(default_factory=dict)  # name -> reason
    foreign: set[str] = field(default_factory=set)  # never examined, never touched
    stacks: dict[str, dict[str, str | None]] = field(default_factory=dict)  # region -> status

    def add(self, region: str, item: dict[str, Any], *, block: bool = False) -> str:
        spec = self.regions.setdefault(region, {"reservations": [], "capacity_blocks": []})
        spec["capacity_blocks" if block else "reservations"].append(item)
        return str(item["name"])

    def cancelled(self, region: str, reason: str, item: dict[str, Any]) -> None:
        self.cancel[self.add(region, item)] = reason

    def kept(self, region: str, reason: str, item: dict[str, Any]) -> None:
        self.keep[self.add(region, item)] = reason

    def alien(self, region: str, item: dict[str, Any], *, block: bool = False) -> None:
        self.foreign.add(self.add(region, item, block=block))

    def scenario(self) -> dict[str, Any]:
        return {"settings": {"expiry_lag_seconds": 3600}, "regions": self.regions}


def make_stack(region: str, name: str, status: str | None) -> str:
    """A stack in moto with the given status; ``None``: created, then deleted."""
    client = boto3.client("cloudformation", region_name=region)
    stack_id = client.create_stack(StackName=PREFIX + name, TemplateBody=TEMPLATE)["StackId"]
    if status is None:
        client.delete_stack(StackName=PREFIX + name)
    elif status != "CREATE_COMPLETE":
        set_stack_status(region, stack_id, status)
    return str(stack_id)


def set_stack_status(region: str, stack_id: str, status: str) -> None:
    cloudformation_backends[DEFAULT_ACCOUNT_ID][region].stacks[stack_id].status = status


def big_inventory(filler: int) -> Inventory:
    """Every row of the contract's table in two regions, foreign reservations of every kind,
    and ``filler`` young holds so the owned listing of us-east-1 spans pages."""
    inv = Inventory()
    inv.stacks = {
        EAST: {
            "complete": "CREATE_COMPLETE",
            "updated": "UPDATE_COMPLETE",
            "failed": "CREATE_FAILED",
            "rolledback": "ROLLBACK_COMPLETE",
            "update-rolledback": "UPDATE_ROLLBACK_COMPLETE",
            "deleting": "DELETE_IN_PROGRESS",
            "deleted": None,
            "creating": "CREATE_IN_PROGRESS",
            "denied": "CREATE_COMPLETE",  # exists, but the lookup is refused
        },
        WEST: {
            "complete": "CREATE_COMPLETE",
            "delete-failed": "DELETE_FAILED",
            "creating": "CREATE_IN_PROGRESS",
        },
    }
    r = reservation
    first: list[tuple[str, str, str, dict[str, Any]]] = [
        # (region, verdict, reason, item); probes end 2 min after creation, holds 5 min.
        (EAST, "cancel", "leaked_probe", r("probe-leaked", ours("probe"), "-100s", "+20s")),
        (EAST, "keep", "young probe", r("probe-young", ours("probe"), "-30s", "+90s")),
        (EAST, "cancel", "past_end_date", r("probe-past-end", ours("probe"), "-10m", "-8m")),
        (EAST, "cancel", "consumed", r("hold-complete", ours("hold", "complete"), "-60s", "+4m")),
        (EAST, "cancel", "consumed", r("hold-complete-2", ours("hold", "complete"), "-90s", "+3m")),
        (EAST, "cancel", "consumed", r("hold-updated", ours("hold", "updated"), "-60s", "+4m")),
        (EAST, "cancel", "orphaned", r("hold-failed", ours("hold", "failed"), "-60s", "+4m")),
        (
            EAST,
            "cancel",
            "orphaned",
            r("hold-rolledback", ours("hold", "rolledback"), "-60s", "+4m"),
        ),
        (
            EAST,
            "cancel",
            "orphaned",
            r("hold-update-rolledback", ours("hold", "update-rolledback"), "-60s", "+4m"),
        ),
        (EAST, "cancel", "orphaned", r("hold-deleting", ours("hold", "deleting"), "-60s", "+4m")),
        (
            EAST,
            "cancel",
            "orphaned",
            r("hold-deleted-old", ours("hold", "deleted"), "-200s", "+100s"),
        ),
        (
            EAST,
            "keep",
            "young hold, stack not created yet",
            r("hold-deleted-young", ours("hold", "deleted"), "-60s", "+4m"),
        ),
        (EAST, "cancel", "orphaned", r("hold-never-old", ours("hold", "never"), "-200s", "+100s")),
    ]
    second: list[tuple[str, str, str, dict[str, Any]]] = [
        (
            EAST,
            "keep",
            "young hold, stack not created yet",
            r("hold-never-young", ours("hold", "never"), "-60s", "+4m"),
        ),
        (
            EAST,
            "keep",
            "stack CREATE_IN_PROGRESS",
            r("hold-creating-young", ours("hold", "creating"), "-30s", "+270s"),
        ),
        # EndDates moved out (e.g. by hand): only the age rules can end these.
        (
            EAST,
            "cancel",
            "stale",
            r("hold-creating-stale", ours("hold", "creating"), "-40m", "+10m"),
        ),
        (
            EAST,
            "keep",
            "stack lookup failed",
            r("hold-denied", ours("hold", "denied"), "-200s", "+100s"),
        ),
        (EAST, "cancel", "stale", r("hold-denied-stale", ours("hold", "denied"), "-35m", "+10m")),
        (EAST, "cancel", "idle", r("hold-idle", ours("hold"), "-11m", "+10m")),
        # (An idle hold still `pending`: EC2 does not let it be cancelled yet; see
        # test_a_pending_reservation_is_examined.)
        (
            EAST,
            "keep",
            "young hold",
            r("hold-pending-young", ours("hold"), "-60s", "+4m", state="pending"),
        ),
        (EAST, "keep", "young hold", r("hold-young", ours("hold"), "-60s", "+4m")),
        (EAST, "cancel", "consumed", r("hold-used", ours("hold"), "-60s", "+4m", count=2, used=2)),
        (
            EAST,
            "cancel",
            "consumed",
            r("hold-used-partly", ours("hold"), "-60s", "+4m", count=4, used=1),
        ),
        (EAST, "cancel", "past_end_date", r("hold-past-end", ours("hold"), "-10m", "-5m")),
        (
            EAST,
            "cancel",
            "past_end_date",
            r("hold-past-end-creating", ours("hold", "creating"), "-10m", "-5m"),
        ),
        # us-west-2: its own stacks (a stack is regional: "complete" of us-east-1 is not here).
        (
            WEST,
            "cancel",
            "leaked_probe",
            r("w-probe-leaked", ours("probe"), "-95s", "+25s", region=WEST),
        ),
        (
            WEST,
            "cancel",
            "consumed",
            r("w-hold-complete", ours("hold", "complete"), "-60s", "+4m", region=WEST),
        ),
        (
            WEST,
            "cancel",
            "orphaned",
            r("w-hold-delete-failed", ours("hold", "delete-failed"), "-60s", "+4m", region=WEST),
        ),
        (
            WEST,
            "cancel",
            "orphaned",
            r("w-hold-east-stack", ours("hold", "updated"), "-200s", "+100s", region=WEST),
        ),
        (
            WEST,
            "keep",
            "stack CREATE_IN_PROGRESS",
            r("w-hold-creating", ours("hold", "creating"), "-60s", "+4m", region=WEST),
        ),
        (
            WEST,
            "cancel",
            "stale",
            r("w-hold-creating-stale", ours("hold", "creating"), "-31m", "+10m", region=WEST),
        ),
        (WEST, "cancel", "idle", r("w-hold-idle", ours("hold"), "-20m", "+10m", region=WEST)),
        (
            WEST,
            "keep",
            "young hold",
            r("w-hold-pending", ours("hold"), "-10s", "+290s", region=WEST, state="pending"),
        ),
        (
            WEST,
            "cancel",
            "past_end_date",
            r("w-hold-past-end", ours("hold"), "-20m", "-15m", region=WEST),
        ),
    ]
    for region, verdict, reason, item in first:
        (inv.cancelled if verdict == "cancel" else inv.kept)(region, reason, item)
    for i in range(filler):
        inv.kept(EAST, "young hold", r(f"filler-{i:04d}", ours("hold"), "-45s", "+255s"))
    for region, verdict, reason, item in second:
        (inv.cancelled if verdict == "cancel" else inv.kept)(region, reason, item)

    # Foreign: old enough that the table would cancel them if they were ours.
    for region in (EAST, WEST):
        p = "" if region == EAST else "w-"
        inv.alien(region, r(f"{p}foreign-untagged", None, "-2h", None, region=region))
        inv.alien(
            region,
            r(
                f"{p}foreign-other-cluster",
                ours("hold", cluster="other-cluster"),
                "-2h",
                "+1h",
                region=region,
            ),
        )
        inv.alien(
            region,
            r(
                f"{p}foreign-cluster-prefix",
                ours("probe", cluster=CLUSTER + "-2"),
                "-2h",
                "+1h",
                region=region,
            ),
        )
        inv.alien(
            region,
            r(
                f"{p}foreign-user-odcr",
                {"team": "ml"},
                "-3d",
                None,
                region=region,
                match="open",
                used=1,
                count=2,
            ),
        )
        no_purpose = ours("hold")
        del no_purpose["capacity-broker:purpose"]
        inv.alien(region, r(f"{p}foreign-no-purpose", no_purpose, "-2h", "+1h", region=region))
        odd_purpose = ours("hold") | {"capacity-broker:purpose": "batch"}
        inv.alien(region, r(f"{p}foreign-odd-purpose", odd_purpose, "-2h", "+1h", region=region))
        # Capacity Blocks carrying this cluster's ownership tags, both ways a block appears.
        inv.alien(
            region,
            {
                "name": f"{p}block-ours",
                "instance_type": "p5.48xlarge",
                "availability_zone": f"{region}b",
                "count": 2,
                "start": "-1d",
                "duration_hours": 48,
                "tags": ours("hold", "complete"),
            },
            block=True,
        )
        inv.alien(
            region,
            {
                "name": f"{p}block-plain",
                "instance_type": "p5.48xlarge",
                "availability_zone": f"{region}b",
                "count": 1,
                "start": "-2h",
                "duration_hours": 24,
            },
            block=True,
        )
        inv.alien(
            region,
            r(
                f"{p}block-as-reservation",
                ours("hold"),
                "-2h",
                "+1h",
                region=region,
                reservation_type="capacity-block",
            ),
        )
        # Ours, but no longer holding anything: outside the sweep's states.
        inv.alien(
            region,
            r(f"{p}ours-cancelled", ours("probe"), "-2h", "+1h", region=region, state="cancelled"),
        )
        inv.alien(
            region,
            r(f"{p}ours-expired", ours("hold"), "-2h", "-1h", region=region, state="expired"),
        )
    return inv


def load(broker: Any, inv: Inventory) -> dict[str, str]:
    ids = broker.load_scenario(inv.scenario()).reservations
    for region, stacks in inv.stacks.items():
        for name, status in stacks.items():
            make_stack(region, name, status)
    return dict(ids)


def states(region: str) -> dict[str, str]:
    """Every reservation's state, read from the emulator's model (no API call to log)."""
    import emulator

    capacity = emulator.Emulator().capacity(region)
    capacity.refresh()
    return {rid: r.state for rid, r in capacity.reservations.items()}


def all_states() -> dict[str, str]:
    return states(EAST) | states(WEST)


def by_id(items: list[dict[str, Any]]) -> dict[str, str]:
    return {item["id"]: item["reason"] for item in items}


def event(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    detail = changes.pop("detail", None)
    data.update(changes)
    if detail:
        data["detail"].update(detail)
    return data


def stack_event(stack_id: str, status: str, when: Any, region: str = EAST) -> dict[str, Any]:
    return event(
        "cleaner_stack_create_complete.json",
        region=region,
        time=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        resources=[stack_id],
        detail={"stack-id": stack_id, "status-details": {"status": status, "status-reason": ""}},
    )


def cancels(broker: Any) -> list[str]:
    return [c.params["CapacityReservationId"] for c in broker.calls("CancelCapacityReservation")]


@pytest.fixture
def sweeper(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The broker fixture, sweeping both regions on the emulator's clock, with EC2 pacing
    scaled up (the emulator's own throttling is what the throttling test exercises)."""
    monkeypatch.setenv("BROKER_REGIONS", f"{EAST},{WEST}")
    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", "1000")
    # Time compressed on both sides: EC2's buckets refill as fast as the pacer expects.
    broker.throttle(time_scale=1000)
    for variable in GRACE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    container.build(cleaner_clock=broker.now)
    broker.freeze()
    return broker


# -- the sweep ------------------------------------------------------------------------------


def test_a_sweep_cancels_exactly_what_the_table_says(sweeper: Any, context: Any) -> None:
    inv = big_inventory(filler=1005)
    ids = load(sweeper, inv)
    sweeper.fail(
        "DescribeStacks",
        "AccessDenied",
        service="cloudformation",
        times=1000,
        when={"StackName": PREFIX + "denied"},
    )
    before = all_states()
    sweeper.clear_calls()

    # A dry run first: it must change nothing and report what the real sweep then does.
    dry = handler({"action": "sweep", "dry_run": True}, context)
    assert dry["status"] == "ok", dry["errors"]
    assert dry["dry_run"] is True
    assert cancels(sweeper) == []
    assert all_states() == before

    sweeper.clear_calls()
    answer = handler(event("cleaner_schedule.json"), context)
    listed = sweeper.calls("DescribeCapacityReservations")
    lookups = [(c.region, c.params["StackName"]) for c in sweeper.calls(service="cloudformation")]
    assert answer["status"] == "ok", answer["errors"]
    assert answer["dry_run"] is False
    assert answer["regions"] == [EAST, WEST]
    assert answer["errors"] == []
    assert by_id(answer["cancelled"]) == by_id(dry["cancelled"])
    assert by_id(answer["kept"]) == by_id(dry["kept"])

    # Every owned reservation the table condemns, with its reason; every other one kept.
    name_of = {rid: name for name, rid in ids.items()}
    cancelled = {name_of[i]: reason for i, reason in by_id(answer["cancelled"]).items()}
    kept = {name_of[i]: reason for i, reason in by_id(answer["kept"]).items()}
    assert cancelled == inv.cancel
    assert kept == inv.keep
    assert answer["examined"] == len(inv.cancel) + len(inv.keep)
    regions = {item["id"]: item["region"] for item in answer["cancelled"] + answer["kept"]}
    assert {name_of[i] for i, region in regions.items() if region == WEST} == {
        n for n in (*inv.cancel, *inv.keep) if n.startswith("w-")
    }
    assert answer["hours_saved"] > 0

    after = all_states()
    for name in inv.cancel:
        assert after[ids[name]] == "cancelled", name
    for name in inv.keep:
        assert after[ids[name]] == before[ids[name]] in ("active", "pending"), name
    for name in inv.foreign:
        assert after[ids[name]] == before[ids[name]], name
    # The call log: one cancel per condemned reservation, none for anything foreign or kept.
    assert sorted(cancels(sweeper)) == sorted(ids[name] for name in inv.cancel)

    # Every page: us-east-1's owned listing is more than one page of 1000.
    east = [c for c in listed if c.region == EAST]
    assert len(east) >= 2
    assert "NextToken" in east[1].params
    for call in listed:
        filters = json.dumps(call.params)
        assert f'"tag:capacity-broker:cluster-id", "Values": ["{CLUSTER}"]' in filters
        # Only what this broker writes is asked for: a reservation with the cluster id and no
        # purpose (not owned) is neither sent nor parsed.
        assert '"tag:capacity-broker:purpose", "Values": ["hold", "probe"]' in filters
    # One DescribeStacks per distinct stack and region, however many holds share it.
    assert len(lookups) == len(set(lookups))
    assert (EAST, PREFIX + "complete") in lookups


def test_the_next_sweep_finds_nothing_more_to_cancel(sweeper: Any, context: Any) -> None:
    inv = big_inventory(filler=0)
    load(sweeper, inv)
    first = handler({"action": "sweep", "dry_run": False}, context)
    assert first["status"] == "ok"
    # Without the refused lookup, "denied" is a complete stack: its holds are consumed.
    reasons = set(by_id(first["cancelled"]).values())
    assert len(first["cancelled"]) == len(inv.cancel) + 1
    assert {"stale", "consumed"} <= reasons
    sweeper.clear_calls()
    again = handler({"action": "sweep", "dry_run": False}, context)
    assert again["cancelled"] == []
    assert cancels(sweeper) == []
    assert again["examined"] == len(inv.keep) - 1


def test_throttling_and_failed_cancels_give_partial_then_the_next_sweep_finishes(
    sweeper: Any, context: Any, container: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    inv = Inventory()
    for i in range(60):
        inv.cancelled(
            EAST, "leaked_probe", reservation(f"probe-{i}", ours("probe"), "-100s", "+20s")
        )
        inv.cancelled(
            WEST, "idle", reservation(f"w-idle-{i}", ours("hold"), "-11m", "+10m", region=WEST)
        )
    ids = load(sweeper, inv)
    # Small buckets whose time moves with the calls, not the machine's clock (the test used to
    # depend on the machine's speed: a busy one never outran a real-time refill). Each call
    # refills 7/8 of a token (3.5 a second, a quarter second a call): from 4 tokens a bucket
    # is empty after 24 calls in a row, and
    # then throttles one call in eight, whatever the speed. One cancel at a time per region
    # (BROKER_MAX_CONCURRENCY=1): a throttled cancel's retry always finds the token the call
    # before it left, so every cancel but the broken ones gets through in the first sweep.
    monkeypatch.setenv("BROKER_MAX_CONCURRENCY", "1")
    container.rebuild()
    sweeper.throttle(
        buckets={"mutating": (4, 3.5), "non_mutating": (4, 3.5)}, seconds_per_call=0.25
    )
    broken = [ids["probe-3"], ids["probe-7"], ids["w-idle-11"]]
    for rid in broken:
        sweeper.fail(
            "CancelCapacityReservation",
            "UnauthorizedOperation",
            times=1,
            when={"CapacityReservationId": rid},
        )

    first = handler(event("cleaner_schedule.json"), context)
    assert first["status"] == "partial"
    assert sorted(e["id"] for e in first["errors"]) == sorted(broken)
    assert {e["error_code"] for e in first["errors"]} == {"UnauthorizedOperation"}
    assert len(first["cancelled"]) == 120 - len(broken)
    throttled = [
        c for c in sweeper.calls("CancelCapacityReservation") if c.outcome == "RequestLimitExceeded"
    ]
    # 60 cancels a region, 24 before the bucket runs dry, then one in eight: at least 4.
    assert len(throttled) >= 8, "the throttle never bit: the test proves nothing"
    left = all_states()
    assert sorted(rid for rid in ids.values() if left[rid] != "cancelled") == sorted(broken)

    second = handler(event("cleaner_schedule.json"), context)
    assert second["status"] == "ok", second["errors"]
    assert sorted(item["id"] for item in second["cancelled"]) == sorted(broken)
    assert set(all_states().values()) == {"cancelled"}


def test_a_pending_reservation_is_examined(sweeper: Any, context: Any) -> None:
    """A pending reservation is examined and decided like an active one, but EC2 cancels only
    `assessing` or `active` reservations (CancelCapacityReservation): until EC2 has finished
    provisioning it, the cancel is refused, and the sweep says so instead of "cancelled"; the
    next sweep cancels it. (The emulator used to cancel pending reservations.)"""
    inv = Inventory()
    inv.cancelled(EAST, "idle", reservation("old", ours("hold"), "-15m", "+10m", state="pending"))
    inv.kept(EAST, "young hold", reservation("new", ours("hold"), "-1m", "+4m", state="pending"))
    inv.cancelled(
        EAST, "leaked_probe", reservation("probe", ours("probe"), "-2m", "+1s", state="pending")
    )
    ids = load(sweeper, inv)
    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert answer["examined"] == 3
    assert answer["status"] == "partial"
    assert answer["cancelled"] == []
    assert {e["id"]: e["error_code"] for e in answer["errors"]} == {
        ids["old"]: "IncorrectState",
        ids["probe"]: "IncorrectState",
    }
    assert all("could not cancel (" in e["message"] for e in answer["errors"])
    assert by_id(answer["kept"]) == {ids["new"]: "young hold"}
    assert set(states(EAST).values()) == {"pending"}

    # EC2 finishes provisioning them: the next sweep cancels what the table condemns.
    import emulator

    for reservation_id in (ids["old"], ids["probe"]):
        emulator.Emulator().capacity(EAST).reservations[reservation_id].state = "active"
    again = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert again["status"] == "ok", again["errors"]
    assert by_id(again["cancelled"]) == {ids["old"]: "idle", ids["probe"]: "leaked_probe"}
    assert by_id(again["kept"]) == {ids["new"]: "young hold"}
    assert states(EAST)[ids["new"]] == "pending"


def test_a_failed_stack_lookup_keeps_a_hold_and_a_missing_stack_orphans_it(
    sweeper: Any, context: Any
) -> None:
    inv = Inventory()
    # Its EndDate was moved out (by hand): only the age rules can end it.
    inv.kept(EAST, "", reservation("looked-up", ours("hold", "flaky"), "-200s", "+1h"))
    inv.kept(EAST, "", reservation("missing", ours("hold", "never"), "-100s", "+200s"))
    ids = load(sweeper, inv)
    make_stack(EAST, "flaky", "CREATE_COMPLETE")
    sweeper.fail(
        "DescribeStacks",
        "AccessDenied",
        service="cloudformation",
        times=100,
        when={"StackName": PREFIX + "flaky"},
    )

    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert by_id(answer["kept"]) == {
        ids["looked-up"]: "stack lookup failed",
        ids["missing"]: "young hold, stack not created yet",
    }
    assert answer["cancelled"] == []
    assert answer["status"] == "ok"

    # 100 s later the missing stack is past the stack grace (180 s); the failed lookup still
    # keeps its hold, whose stack (had we seen it) is complete.
    sweeper.advance(100)
    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert by_id(answer["cancelled"]) == {ids["missing"]: "orphaned"}
    assert by_id(answer["kept"]) == {ids["looked-up"]: "stack lookup failed"}

    # Age alone condemns it in the end: past the hold limit (30 min), stale.
    sweeper.advance(30 * 60)
    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert by_id(answer["cancelled"]) == {ids["looked-up"]: "stale"}


def test_the_emulator_clock_ages_reservations(sweeper: Any, context: Any) -> None:
    inv = Inventory()
    inv.kept(EAST, "young probe", reservation("probe", ours("probe"), "-30s", "+90s"))
    ids = load(sweeper, inv)
    sweep = {"action": "sweep", "dry_run": False, "regions": [EAST]}
    assert by_id(handler(sweep, context)["kept"]) == {ids["probe"]: "young probe"}
    sweeper.advance(61)
    assert by_id(handler(sweep, context)["cancelled"]) == {ids["probe"]: "leaked_probe"}


def test_graces_come_from_the_environment(
    sweeper: Any, container: Any, context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROKER_IDLE_GRACE_SECONDS", "30")
    container.rebuild()
    inv = Inventory()
    inv.cancelled(EAST, "idle", reservation("idle", ours("hold"), "-45s", "+255s"))
    ids = load(sweeper, inv)
    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert by_id(answer["cancelled"]) == {ids["idle"]: "idle"}

    monkeypatch.setenv("BROKER_IDLE_GRACE_SECONDS", "ten minutes")
    container.fresh()  # a new container, its root built from this environment: refused
    sweeper.clear_calls()
    broken = handler({"action": "sweep", "dry_run": False}, context)
    assert broken["status"] == "error"
    assert broken["error_code"] == "InvalidConfiguration"
    assert "BROKER_IDLE_GRACE_SECONDS" in broken["message"]
    assert sweeper.calls() == []


def test_a_region_that_cannot_be_listed_is_reported_and_the_others_are_swept(
    sweeper: Any, context: Any
) -> None:
    inv = Inventory()
    inv.cancelled(EAST, "idle", reservation("east", ours("hold"), "-11m", "+10m"))
    inv.cancelled(WEST, "idle", reservation("west", ours("hold"), "-11m", "+10m", region=WEST))
    ids = load(sweeper, inv)
    sweeper.fail("DescribeCapacityReservations", "UnauthorizedOperation", region=WEST, times=5)
    answer = handler(event("cleaner_schedule.json"), context)
    assert answer["status"] == "partial", answer
    assert by_id(answer["cancelled"]) == {ids["east"]: "idle"}
    (error,) = answer["errors"]
    assert error["region"] == WEST
    assert error["error_code"] == "UnauthorizedOperation"
    assert states(WEST)[ids["west"]] == "active"
    assert not any(c.region == WEST for c in sweeper.calls("CancelCapacityReservation"))


def test_a_reservation_already_gone_counts_as_cancelled(sweeper: Any, context: Any) -> None:
    inv = Inventory()
    inv.cancelled(EAST, "leaked_probe", reservation("probe", ours("probe"), "-100s", "+20s"))
    ids = load(sweeper, inv)
    # Someone else cancelled it between our listing and our cancel.
    sweeper.fail("CancelCapacityReservation", "IncorrectState", times=1)
    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert answer["status"] == "ok"
    assert by_id(answer["cancelled"]) == {ids["probe"]: "leaked_probe"}


def test_a_sweep_only_lists_the_regions_it_is_given(sweeper: Any, context: Any) -> None:
    load(sweeper, big_inventory(filler=0))
    sweeper.clear_calls()
    answer = handler(event("cleaner_sweep.json"), context)
    assert answer["regions"] == [EAST]
    assert answer["dry_run"] is True
    assert {c.region for c in sweeper.calls("DescribeCapacityReservations")} == {EAST}
    assert cancels(sweeper) == []


def test_regions_and_cancels_run_concurrently(sweeper: Any, context: Any) -> None:
    inv = Inventory()
    for i in range(8):
        inv.cancelled(EAST, "idle", reservation(f"e{i}", ours("hold"), "-11m", "+10m"))
        inv.cancelled(WEST, "idle", reservation(f"w{i}", ours("hold"), "-11m", "+10m", region=WEST))
    load(sweeper, inv)
    handler({"action": "sweep", "dry_run": True}, context)  # warm the clients
    # All 16 cancels (8 a region) meet in EC2 before any is answered: only a sweep that sends
    # them side by side, in both regions at once, gets past. No clock is read (it used to
    # time the sweep against 4.5 s of latency one after the other).
    together = sweeper.gather("CancelCapacityReservation", parties=16)
    answer = handler({"action": "sweep", "dry_run": False}, context)
    assert len(answer["cancelled"]) == 16
    assert together.met, "the cancels were not all in flight at once"


def test_cancels_not_started_before_the_deadline_are_reported(sweeper: Any) -> None:
    from capacity_broker.config import Settings
    from capacity_broker.root import Root

    inv = Inventory()
    inv.cancelled(EAST, "idle", reservation("idle", ours("hold"), "-11m", "+10m"))
    ids = load(sweeper, inv)
    # The contract's graces (the settings' defaults), a monotonic clock past every deadline.
    flow = Root(Settings(cluster_id=CLUSTER), clock=sweeper.now, monotonic=lambda: 1e12).cleaner
    run = flow.sweep([EAST], dry_run=False, deadline=0.0, hard_deadline=0.0)
    answer = run.response("late").to_json_dict()
    assert answer["status"] == "partial"
    (error,) = answer["errors"]
    assert (error["id"], error["error_code"]) == (ids["idle"], "DeadlineExceeded")
    assert cancels(sweeper) == []


# -- stack status change events ----------------------------------------------------------------


def stack_world(broker: Any, status: str) -> tuple[dict[str, str], str]:
    """Two young holds of soca-demo-job-1234 (which the sweep keeps), one of another stack,
    and a young probe."""
    inv = Inventory()
    inv.kept(EAST, "", reservation("a", ours("hold", "1234"), "-30s", "+270s"))
    inv.kept(EAST, "", reservation("b", ours("hold", "1234"), "-20s", "+280s", az="b"))
    inv.kept(EAST, "", reservation("other", ours("hold", "5678"), "-30s", "+270s"))
    inv.kept(EAST, "", reservation("probe", ours("probe"), "-10s", "+110s"))
    inv.alien(
        EAST,
        reservation("block", ours("hold", "1234"), "-1h", "+1d", reservation_type="capacity-block"),
    )
    inv.alien(EAST, reservation("foreign", ours("hold", "1234", cluster="other"), "-1h", "+1h"))
    ids = load(broker, inv)
    stack_id = make_stack(EAST, "1234", status)
    make_stack(EAST, "5678", "CREATE_IN_PROGRESS")
    return ids, stack_id


@pytest.mark.parametrize(
    ("sample", "status", "reason"),
    [
        ("cleaner_stack_create_complete.json", "CREATE_COMPLETE", "consumed"),
        ("cleaner_stack_rollback_complete.json", "ROLLBACK_COMPLETE", "orphaned"),
        ("cleaner_stack_delete_complete.json", None, "orphaned"),
    ],
)
def test_a_stack_status_change_cancels_that_stacks_holds_at_once(
    sweeper: Any, context: Any, sample: str, status: str | None, reason: str
) -> None:
    ids, stack_id = stack_world(sweeper, "CREATE_IN_PROGRESS")
    swept = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert swept["cancelled"] == []  # young, stack in progress: the sweep keeps them

    # The stack finishes (or fails, or is deleted); its event arrives.
    if status is None:
        boto3.client("cloudformation", region_name=EAST).delete_stack(StackName=PREFIX + "1234")
    else:
        set_stack_status(EAST, stack_id, status)
    sweeper.clear_calls()
    answer = handler(event(sample), context)
    assert answer["status"] == "ok", answer
    assert by_id(answer["cancelled"]) == {ids["a"]: reason, ids["b"]: reason}
    assert answer["kept"] == []
    assert answer["examined"] == 2
    assert answer["regions"] == [EAST]
    assert sorted(cancels(sweeper)) == sorted([ids["a"], ids["b"]])
    # Found by its stack-name tag, in one listing: not a sweep of everything.
    (listing,) = sweeper.calls("DescribeCapacityReservations")
    assert "capacity-broker:stack-name" in json.dumps(listing.params)
    left = states(EAST)
    assert left[ids["other"]] == left[ids["probe"]] == left[ids["block"]] == "active"
    assert left[ids["foreign"]] == "active"


@pytest.mark.parametrize("status", ["CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS"])
def test_an_in_progress_stack_event_changes_nothing(
    sweeper: Any, context: Any, status: str
) -> None:
    ids, stack_id = stack_world(sweeper, status)
    sweeper.clear_calls()
    answer = handler(stack_event(stack_id, status, sweeper.now()), context)
    assert answer["status"] == "ok"
    assert answer["cancelled"] == []
    assert by_id(answer["kept"]) == {ids["a"]: f"stack {status}", ids["b"]: f"stack {status}"}
    assert cancels(sweeper) == []


def test_a_late_event_about_a_previous_stack_of_the_same_name_spares_the_new_one(
    sweeper: Any, context: Any
) -> None:
    old = make_stack(EAST, "1234", "CREATE_COMPLETE")
    deleted_at = sweeper.now() - timedelta(hours=1)
    boto3.client("cloudformation", region_name=EAST).delete_stack(StackName=PREFIX + "1234")
    # The job is retried under the same stack name; its new stack is being created.
    ids, _ = stack_world(sweeper, "CREATE_IN_PROGRESS")
    answer = handler(stack_event(old, "DELETE_COMPLETE", deleted_at), context)
    assert answer["cancelled"] == []
    reasons = set(by_id(answer["kept"]).values())
    assert reasons == {"stack CREATE_IN_PROGRESS (a newer stack of that name)"}
    assert states(EAST)[ids["a"]] == "active"


def test_a_stack_event_acts_in_the_events_region(sweeper: Any, context: Any) -> None:
    inv = Inventory()
    inv.kept(EAST, "", reservation("east", ours("hold", "1234"), "-30s", "+270s"))
    inv.kept(WEST, "", reservation("west", ours("hold", "1234"), "-30s", "+270s", region=WEST))
    ids = load(sweeper, inv)
    west = make_stack(WEST, "1234", "CREATE_FAILED")
    answer = handler(stack_event(west, "CREATE_FAILED", sweeper.now(), region=WEST), context)
    assert by_id(answer["cancelled"]) == {ids["west"]: "orphaned"}
    assert states(EAST)[ids["east"]] == "active"


# -- what is not a trigger --------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(EVENTS.glob("cleaner_*.json")), ids=lambda p: p.name)
def test_every_sample_event_is_a_valid_trigger(sweeper: Any, context: Any, path: Path) -> None:
    answer = handler(json.loads(path.read_text(encoding="utf-8")), context)
    assert answer["status"] == "ok", answer
    assert answer["message"]


SCHEDULE = json.loads((EVENTS / "cleaner_schedule.json").read_text(encoding="utf-8"))
STACK = json.loads((EVENTS / "cleaner_stack_create_complete.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "bad",
    [
        {},
        [],
        "sweep",
        {"action": "purge"},
        {"action": "sweep", "dry_run": "false"},
        {"action": "sweep", "dry_run": False, "regions": ["Mars-1"]},
        {"action": "sweep", "dry_run": False, "regions": []},
        {"action": "sweep", "dry_run": False, "force": True},
        SCHEDULE | {"detail-type": "EC2 Instance State-change Notification"},
        SCHEDULE | {"source": "aws.ec2"},
        SCHEDULE | {"detail-type": None},
        STACK | {"source": "aws.events"},
        STACK
        | {"detail": {"stack-id": "teststack", "status-details": {"status": "CREATE_COMPLETE"}}},
        STACK | {"detail": {"stack-id": STACK["detail"]["stack-id"]}},
        STACK | {"region": "nowhere"},
        {k: v for k, v in STACK.items() if k != "time"},
    ],
)
def test_anything_else_is_an_invalid_request_and_changes_nothing(
    sweeper: Any, context: Any, bad: Any
) -> None:
    sweeper.clear_calls()
    answer = handler(bad, context)
    assert answer["status"] == "invalid_request", answer
    assert answer["errors"]
    assert sweeper.calls() == []
    assert sweeper.calls(service="cloudformation") == []


# -- observability ----------------------------------------------------------------------------


def test_metrics_and_a_log_line_per_decision(
    sweeper: Any, context: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    inv = Inventory()
    inv.cancelled(EAST, "leaked_probe", reservation("probe", ours("probe"), "-100s", "+20s"))
    inv.cancelled(EAST, "idle", reservation("idle", ours("hold"), "-12m", "+10m", count=3))
    inv.kept(EAST, "young hold", reservation("young", ours("hold"), "-20s", "+280s"))
    ids = load(sweeper, inv)
    sweeper.fail(
        "CancelCapacityReservation",
        "UnauthorizedOperation",
        when={"CapacityReservationId": ids["probe"]},
    )
    capsys.readouterr()
    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert answer["status"] == "partial"
    lines = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]

    (blob,) = [line for line in lines if "_aws" in line]
    emf = {k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in blob.items()}
    (directive,) = emf["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "CapacityBroker"
    assert emf["service"] == "cleaner"
    assert emf["ReservationsExamined"] == 3
    assert emf["ReservationsCancelled"] == 1
    assert emf["CancelledIdle"] == 1
    assert emf["CancelledLeakedProbe"] == 0
    assert emf["CleanerErrors"] == 1
    # The failed probe is the oldest reservation still held: 100 s.
    assert emf["OldestOwnedReservationAgeSeconds"] == pytest.approx(100, abs=1)
    # 3 unused instances x (EndDate in 10 min + 30 min expected enforcement lag).
    assert emf["ReservationHoursSaved"] == pytest.approx(3 * 40 / 60, rel=0.01)

    # Powertools' logger writes its JSON to the stdout it found at import; its records also
    # reach the standard logging tree, where caplog sees the structured fields.
    decisions = {r.id: r for r in caplog.records if r.getMessage() == "decision"}
    assert set(decisions) == set(ids.values())
    idle = decisions[ids["idle"]]
    assert (idle.action, idle.reason, idle.region, idle.dry_run) == ("cancel", "idle", EAST, False)
    assert decisions[ids["probe"]].action == "failed"
    assert decisions[ids["probe"]].error_code == "UnauthorizedOperation"
    assert decisions[ids["young"]].action == "keep"


# -- launch template versions -----------------------------------------------------------------

HPC = Path(__file__).parent / "scenarios" / "hpc.yaml"
LT = "lt-0ddddddddddddddd1"


def hpc_job(job_id: str, context: Any, **fields: Any) -> dict[str, Any]:
    from capacity_broker.handlers.reserve import handler as reserve

    answer = reserve(
        {
            "job_id": job_id,
            "request_id": f"req-{job_id}",
            "instance_types": ["c7i.48xlarge"],
            "subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1"],
            "instance_count": 2,
            "launch_template": {"id": LT, "version": "$Latest"},
            **fields,
        },
        context,
    )
    assert answer["status"] in ("reserved", "provisioned"), answer
    return answer


def lt_versions() -> set[int]:
    found = boto3.client("ec2", region_name=EAST).describe_launch_template_versions(
        LaunchTemplateId=LT
    )
    return {v["VersionNumber"] for v in found["LaunchTemplateVersions"]}


def ref(answer: dict[str, Any]) -> str:
    return f"{LT}:{answer['launch_template']['version']}"


@pytest.fixture
def hpc_sweeper(sweeper: Any) -> Any:
    sweeper.load_scenario(HPC)
    sweeper.set_pool(EAST, "us-east-1a", "c7i.48xlarge", 16)
    return sweeper


def test_a_sweep_deletes_the_versions_nothing_can_launch_from(
    hpc_sweeper: Any, context: Any, ec2_preset: str
) -> None:
    done = hpc_job("done", context, provision=True)  # launched; its hold is cancelled
    held = hpc_job("held", context)  # its hold waits for the job's nodes
    staged = hpc_job("staged", context, stack_name=PREFIX + "staged")  # no stack yet
    sweep = {"action": "sweep", "dry_run": True, "regions": [EAST]}
    dry = handler(sweep, context)
    assert by_id(dry["template_versions_deleted"]) == {ref(done): "reservation cancelled"}
    assert lt_versions() == {1, 2, 3, 4}
    answer = handler({**sweep, "dry_run": False}, context)
    assert answer["status"] == "ok", answer
    assert by_id(answer["template_versions_deleted"]) == {ref(done): "reservation cancelled"}
    assert lt_versions() == {1, held["launch_template"]["version"], 3 + 1}
    # The staged job's stack never comes: past the stack grace its hold is orphaned and its
    # version goes; the other job's hold is still young and keeps its version.
    hpc_sweeper.advance(4 * 60)
    later = handler({**sweep, "dry_run": False}, context)
    if ec2_preset == "slow":
        # EC2 at its slowest may show the hold pending for five minutes, when it takes no
        # cancel: the sweep says so (the cancel failed, IncorrectState), and the next sweep,
        # once EC2 caught up, cancels it.
        assert [(e["id"], e["error_code"]) for e in later["errors"]] == [
            (staged["reservation"]["id"], "IncorrectState")
        ], later
        first = later.get("template_versions_deleted", [])
        hpc_sweeper.settle()
        later = handler({**sweep, "dry_run": False}, context)
        later["template_versions_deleted"] = first + later.get("template_versions_deleted", [])
    assert by_id(later["cancelled"]) == {staged["reservation"]["id"]: "orphaned"}
    assert by_id(later["template_versions_deleted"]) == {ref(staged): "stack deleted"}
    assert lt_versions() == {1, held["launch_template"]["version"]}


def test_a_stack_deleted_event_deletes_that_stacks_versions(
    hpc_sweeper: Any, context: Any, ec2_preset: str
) -> None:
    job = hpc_job("1234", context, stack_name=PREFIX + "1234")
    other = hpc_job("5678", context, stack_name=PREFIX + "5678")
    # A stack takes a minute or more to complete; by then EC2's listings usually show the hold
    # (one made a moment ago can be missing from a listing by tag: eventual consistency).
    hpc_sweeper.advance(60)
    stack_id = make_stack(EAST, "1234", "CREATE_COMPLETE")
    created = handler(stack_event(stack_id, "CREATE_COMPLETE", hpc_sweeper.now()), context)
    if ec2_preset == "slow":
        # EC2 at its slowest lists the hold without its tags for minutes: the event found it
        # all the same (it used to cancel nothing and say nothing), but EC2 does not take its
        # cancel yet (unknown by id, then pending); the cleaner does not wait for that, says
        # so, and the event delivered again once EC2 caught up cancels it.
        assert [e["id"] for e in created["errors"]] == [job["reservation"]["id"]], created
        hpc_sweeper.advance(5 * 60)
        created = handler(stack_event(stack_id, "CREATE_COMPLETE", hpc_sweeper.now()), context)
    assert by_id(created["cancelled"]) == {job["reservation"]["id"]: "consumed"}
    assert "template_versions_deleted" not in created  # the stack may still launch from it
    boto3.client("cloudformation", region_name=EAST).delete_stack(StackName=PREFIX + "1234")
    deleted = handler(stack_event(stack_id, "DELETE_COMPLETE", hpc_sweeper.now()), context)
    assert deleted["status"] == "ok", deleted
    assert by_id(deleted["template_versions_deleted"]) == {ref(job): "stack deleted"}
    assert lt_versions() == {1, other["launch_template"]["version"]}


def test_a_late_delete_event_spares_the_versions_of_a_new_stack_of_that_name(
    hpc_sweeper: Any, context: Any
) -> None:
    old = make_stack(EAST, "1234", "CREATE_COMPLETE")
    boto3.client("cloudformation", region_name=EAST).delete_stack(StackName=PREFIX + "1234")
    job = hpc_job("1234", context, stack_name=PREFIX + "1234")  # the job runs again
    make_stack(EAST, "1234", "CREATE_IN_PROGRESS")
    answer = handler(stack_event(old, "DELETE_COMPLETE", hpc_sweeper.now()), context)
    assert "template_versions_deleted" not in answer
    assert job["launch_template"]["version"] in lt_versions()


# -- the sweep asks EC2 only what its API documents (issue 21) ---------------------------------


def test_the_sweep_reads_the_versions_reservations_by_id(hpc_sweeper: Any, context: Any) -> None:
    """DescribeCapacityReservations has no ``capacity-reservation-id`` filter (the API
    reference lists none, and EC2 refuses a filter it does not know): the sweep that asked with
    one failed on AWS, swallowed the failure and never deleted a version."""
    done = hpc_job("done", context, provision=True)  # launched; its hold is cancelled
    hpc_sweeper.clear_calls()
    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert answer["status"] == "ok", answer
    assert by_id(answer["template_versions_deleted"]) == {ref(done): "reservation cancelled"}
    asked = hpc_sweeper.calls("DescribeCapacityReservations")
    filters = {f["Name"] for call in asked for f in call.params.get("Filters") or []}
    assert "capacity-reservation-id" not in filters
    by_ids = [
        call.params["CapacityReservationIds"]
        for call in asked
        if call.params.get("CapacityReservationIds")
    ]
    assert by_ids == [[done["reservation"]["id"]]]


def test_a_version_whose_reservation_ec2_no_longer_knows_goes_and_the_others_are_judged(
    hpc_sweeper: Any, context: Any
) -> None:
    """One id EC2 does not know fails a whole DescribeCapacityReservations by id
    (InvalidCapacityReservationId.NotFound): the others of the call are still judged."""
    gone = hpc_job("gone", context, provision=True)
    held = hpc_job("held", context)  # its hold is active: its version stays
    done = hpc_job("done", context, provision=True)
    import emulator

    # EC2 keeps a cancelled reservation visible for a while, then no longer knows it.
    emulator.Emulator().capacity(EAST).reservations.pop(gone["reservation"]["id"])
    hpc_sweeper.advance(4 * 60)  # past the grace that spares young versions "not found"
    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert by_id(answer["template_versions_deleted"]) == {
        ref(gone): "reservation gone",
        ref(done): "reservation cancelled",
    }
    assert held["launch_template"]["version"] in lt_versions()


def test_a_reservation_the_sweep_could_not_read_is_an_error_of_the_sweep(
    hpc_sweeper: Any, context: Any
) -> None:
    """A failed look-up keeps the versions (nothing is concluded) and is reported: the sweep
    is ``partial`` and says which reservation it could not read, in ``errors``."""
    done = hpc_job("done", context, provision=True)
    rid = done["reservation"]["id"]
    hpc_sweeper.fail(
        "DescribeCapacityReservations",
        "UnauthorizedOperation",
        times=10,
        when={"CapacityReservationIds": [rid]},
    )
    answer = handler({"action": "sweep", "dry_run": False, "regions": [EAST]}, context)
    assert answer["status"] == "partial", answer
    (error,) = answer["errors"]
    assert (error["id"], error["error_code"]) == (rid, "UnauthorizedOperation")
    assert answer["template_version_errors"] == [error]
    assert "template_versions_deleted" not in answer
    assert done["launch_template"]["version"] in lt_versions()
