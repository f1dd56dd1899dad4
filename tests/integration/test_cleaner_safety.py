"""The cleaner's safety property end to end: generated inventories loaded into the emulator,
swept by the real handler, judged by the emulator's call log.

Each Hypothesis example is one account: this cluster's probes and holds in every state and
age, with stacks in every CloudFormation status (or missing, deleted, or refused to the
lookup), next to everything the contract protects: untagged and user ODCRs, another
cluster's reservations, look-alike cluster ids, wrong-case keys, unknown or missing purposes,
Capacity Blocks carrying this cluster's tags, and this cluster's reservations that no longer
hold anything. Then:

1. a dry run makes no mutating call at all and changes no state;
2. the scheduled sweep cancels exactly the owned reservations the contract's table condemns,
   each for its reason, and no CancelCapacityReservation names a protected one;
3. a Stack Status Change event for each stack cancels only this cluster's live holds tagged
   with that stack (none for a status in progress), never a protected one.

The pure, 10,000-case version is tests/unit/domain/test_cleaner_safety.py. Longer campaign:
``BROKER_PROOF_SCALE=10 BROKER_PROOF_RANDOM=1`` (see docs/reliability.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any

import boto3
import pytest
from botocore.loaders import Loader
from capacity_broker.handlers.cleaner import handler
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from moto.cloudformation.models import cloudformation_backends
from moto.core import DEFAULT_ACCOUNT_ID

pytestmark = [
    pytest.mark.integration,
    # moto's serializer warns that CloudFormation's model has no AccessDenied shape.
    pytest.mark.filterwarnings("ignore:Exception\\(AnyServiceError\\):UserWarning"),
]

SCALE = max(1, int(os.environ.get("BROKER_PROOF_SCALE", "1")))
RANDOM = os.environ.get("BROKER_PROOF_RANDOM", "") == "1"
INVENTORIES = 50 * SCALE

CLUSTER = "demo-cluster"
REGION = "us-east-1"
CLUSTER_KEY = "capacity-broker:cluster-id"
PURPOSE_KEY = "capacity-broker:purpose"
STACK_KEY = "capacity-broker:stack-name"
TEMPLATE = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})
STACK_STATUSES: list[str] = Loader().load_service_model("cloudformation", "service-2")["shapes"][
    "StackStatus"
]["enum"]

# The contract's graces (defaults), in seconds.
PROBE_GRACE, STACK_GRACE, IDLE_GRACE, HOLD_LIMIT = 90, 180, 600, 1800
# Ages in whole seconds, at least 5 s away from every grace (the clock is frozen; the margin
# only keeps the table readable). Negative: created "in the future" (clock skew).
AGES = [-30, 0, 20, 60, 85, 95, 150, 175, 185, 300, 595, 605, 1200, 1795, 1805, 7200, 86400]
# EndDate relative to now; None: unlimited (moved by hand).
ENDS = [-3600, -61, -5, 5, 60, 240, 3600, None]
CONSUMED = {"CREATE_COMPLETE", "UPDATE_COMPLETE"}


def orphaning(status: str) -> bool:
    return any(fnmatchcase(status, p) for p in ("*_FAILED", "*ROLLBACK*", "DELETE_*"))


# -- the inventory ------------------------------------------------------------------------------


@dataclass
class Stack:
    name: str
    kind: str  # a StackStatus, or "missing" / "deleted" / "denied"

    @property
    def status(self) -> str | None:
        """What CloudFormation would say; None when it says the stack does not exist."""
        if self.kind == "missing":
            return None
        if self.kind == "deleted":
            return "DELETE_COMPLETE"
        if self.kind == "denied":
            return "CREATE_COMPLETE"
        return self.kind


@dataclass
class Item:
    name: str
    row: dict[str, Any]
    protected: bool
    why: str  # what kind of reservation this is (for failure messages)
    block: bool = False
    purpose: str | None = None
    age: int = 0
    end: int | None = None
    used: int = 0
    state: str = "active"
    stack: str | None = None


@dataclass
class Inventory:
    items: list[Item]
    stacks: dict[str, Stack] = field(default_factory=dict)

    def scenario(self) -> dict[str, Any]:
        return {
            # EC2 may keep a reservation active up to an hour past its EndDate
            "settings": {"expiry_lag_seconds": 3 * 86400},
            "regions": {
                REGION: {
                    "reservations": [i.row for i in self.items if not i.block],
                    "capacity_blocks": [i.row for i in self.items if i.block],
                }
            },
        }

    def expected(self, item: Item) -> str | None:
        """The contract's table for an owned, live reservation: a cancel reason or None."""
        if item.end is not None and item.end <= 0:
            return "past_end_date"
        age = max(item.age, 0)
        if item.purpose == "probe":
            return "leaked_probe" if age > PROBE_GRACE else None
        if item.stack:
            stack = self.stacks[item.stack]
            if stack.kind == "denied":  # the lookup fails: only age can end it
                return "stale" if age > HOLD_LIMIT else None
            status = stack.status
            if status is None or stack.kind == "deleted":  # "a stack that does not exist"
                if age > STACK_GRACE:
                    return "orphaned"
                return "stale" if age > HOLD_LIMIT else None
            if status in CONSUMED:
                return "consumed"
            if orphaning(status):
                return "orphaned"
            return "stale" if age > HOLD_LIMIT else None
        if item.used > 0 and item.state == "active":
            return "consumed"
        return "idle" if age > IDLE_GRACE else None


def rel(seconds: int) -> str:
    return f"+{seconds}s" if seconds > 0 else f"-{-seconds}s"


def row(name: str, tags: dict[str, str], age: int, end: int | None, **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "name": name,
        "instance_type": "c7i.large",
        "availability_zone": f"{REGION}a",
        "count": extra.pop("count", 2),
        "created": rel(-age),
        "match": "targeted",
        "tags": tags,
        **extra,
    }
    if end is not None:
        item["end_date"] = rel(end)
    return item


def ours(purpose: str, stack: str | None) -> dict[str, str]:
    tags = {
        CLUSTER_KEY: CLUSTER,
        PURPOSE_KEY: purpose,
        "capacity-broker:request-id": f"req-{purpose}",
        "capacity-broker:subnet-id": "subnet-0a00000000000000a",
    }
    if stack:
        tags[STACK_KEY] = stack
    return tags


LOOK_ALIKES = [
    "Demo-Cluster",
    "DEMO-CLUSTER",
    "demo-cluster-2",
    "demo-clusterx",
    "xdemo-cluster",
    "demo-cluste",
    " demo-cluster",
    "demo-cluster ",
    "demo-cluster\u200b",
    "d\u0435mo-cluster",  # Cyrillic e
    "demo-*",
    "demo",
    "",
]
WRONG_KEYS = [
    {"Capacity-Broker:cluster-id": CLUSTER, PURPOSE_KEY: "hold"},
    {"CAPACITY-BROKER:CLUSTER-ID": CLUSTER, PURPOSE_KEY: "probe"},
    {CLUSTER_KEY: CLUSTER, "Capacity-Broker:Purpose": "hold"},
    {"capacity-broker:Cluster-Id": CLUSTER, "capacity-broker:Purpose": "probe"},
]
BAD_PURPOSES = ["Probe", "HOLD", " hold", "batch", "", "probe,hold"]
PROTECTED_KINDS = [
    "untagged",
    "user-odcr",
    "other-cluster",
    "look-alike",
    "wrong-case-keys",
    "bad-purpose",
    "no-purpose",
    "block-ours",
    "block-ours-scheduled",
    "block-plain",
    "block-as-reservation",
    "ours-not-holding",
]


@st.composite
def protected_item(draw: st.DrawFn, index: int, stacks: list[str]) -> Item:
    """Something the cleaner must never cancel: old, past its EndDate, and tagged with a stack
    that is complete or failed, so that every rule would condemn it were it ours."""
    kind = draw(st.sampled_from(PROTECTED_KINDS))
    name = f"protected-{index}-{kind}"
    purpose = draw(st.sampled_from(["probe", "hold"]))
    stack = draw(st.sampled_from([None, *stacks]))
    tags = ours(purpose, stack)
    age, end = draw(st.sampled_from([(7200, -3600), (86400, None), (3 * 86400, -60)]))
    extra: dict[str, Any] = {}
    if kind == "untagged":
        tags = {}
    elif kind == "user-odcr":
        tags = {"team": "ml"}
        extra = {"match": "open", "count": 4, "used": 3}
    elif kind == "other-cluster":
        tags[CLUSTER_KEY] = draw(st.sampled_from(["other-cluster", "prod"]))
    elif kind == "look-alike":
        tags[CLUSTER_KEY] = draw(st.sampled_from(LOOK_ALIKES))
    elif kind == "wrong-case-keys":
        del tags[CLUSTER_KEY], tags[PURPOSE_KEY]
        tags |= draw(st.sampled_from(WRONG_KEYS))
    elif kind == "bad-purpose":
        tags[PURPOSE_KEY] = draw(st.sampled_from(BAD_PURPOSES))
    elif kind == "no-purpose":
        del tags[PURPOSE_KEY]
    elif kind == "block-as-reservation":
        extra = {"reservation_type": "capacity-block"}
    elif kind == "ours-not-holding":
        extra = {"state": draw(st.sampled_from(["cancelled", "expired", "failed"]))}
    if kind.startswith("block-") and kind != "block-as-reservation":
        block: dict[str, Any] = {
            "name": name,
            "instance_type": "p5.48xlarge",
            "availability_zone": f"{REGION}b",
            "count": 2,
            "start": "+2d" if kind == "block-ours-scheduled" else "-1d",
            "duration_hours": 72,
        }
        if kind != "block-plain":
            block["tags"] = tags
        return Item(name, block, protected=True, why=kind, block=True)
    return Item(name, row(name, tags, age, end, **extra), protected=True, why=kind)


@st.composite
def owned_item(draw: st.DrawFn, index: int, stacks: list[str]) -> Item:
    """One of this cluster's live probes or holds, of any age, with or without a stack."""
    purpose = draw(st.sampled_from(["probe", "hold", "hold"]))
    state = draw(st.sampled_from(["active", "active", "pending"]))
    age = draw(st.sampled_from(AGES))
    end = draw(st.sampled_from(ENDS))
    stack = draw(st.sampled_from([None, *stacks])) if purpose == "hold" else None
    used = draw(st.sampled_from([0, 0, 1, 2])) if state == "active" else 0
    name = f"owned-{index}-{purpose}"
    item = row(name, ours(purpose, stack), age, end, state=state, used=used)
    return Item(
        name,
        item,
        protected=False,
        why=f"{purpose} {state} age {age}s end {end}s stack {stack} used {used}",
        purpose=purpose,
        age=age,
        end=end,
        used=used,
        state=state,
        stack=stack,
    )


STACK_KINDS = [*STACK_STATUSES, "missing", "deleted", "denied"]


@st.composite
def inventories(draw: st.DrawFn) -> Inventory:
    kinds = draw(st.lists(st.sampled_from(STACK_KINDS), min_size=1, max_size=4))
    stacks = {f"soca-job-{i}": Stack(f"soca-job-{i}", kind) for i, kind in enumerate(kinds)}
    names = sorted(stacks)
    count = draw(st.integers(min_value=4, max_value=24))
    items = [
        draw(owned_item(i, names) if draw(st.booleans()) else protected_item(i, names))
        for i in range(count)
    ]
    return Inventory(items, stacks)


# -- the world ----------------------------------------------------------------------------------


def create_stacks(inv: Inventory) -> dict[str, str]:
    """The inventory's stacks in moto; returns name -> stack id for the ones that exist."""
    client = boto3.client("cloudformation", region_name=REGION)
    ids: dict[str, str] = {}
    for stack in inv.stacks.values():
        if stack.kind == "missing":
            continue
        stack_id = client.create_stack(StackName=stack.name, TemplateBody=TEMPLATE)["StackId"]
        ids[stack.name] = stack_id
        if stack.kind == "deleted":
            client.delete_stack(StackName=stack.name)
        elif stack.kind not in ("denied", "CREATE_COMPLETE"):
            moto_stack = cloudformation_backends[DEFAULT_ACCOUNT_ID][REGION].stacks[stack_id]
            moto_stack.status = stack.kind
    return ids


def states() -> dict[str, str]:
    """Every reservation's state, from the emulator's model (no API call to log)."""
    import emulator

    capacity = emulator.Emulator().capacity(REGION)
    capacity.refresh()
    return {rid: r.state for rid, r in capacity.reservations.items()}


def mutating(broker: Any) -> list[str]:
    """Every EC2 call of the log that is not a read (Describe*/Get*/List*)."""
    return [
        c.action for c in broker.calls() if not c.action.startswith(("Describe", "Get", "List"))
    ]


def cancelled_ids(broker: Any) -> list[str]:
    return [c.params["CapacityReservationId"] for c in broker.calls("CancelCapacityReservation")]


def stack_event(stack_id: str, status: str, when: datetime) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "8c0a1f4e-3b4d-4c8e-9a0b-1c2d3e4f5a61",
        "detail-type": "CloudFormation Stack Status Change",
        "source": "aws.cloudformation",
        "account": DEFAULT_ACCOUNT_ID,
        "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [stack_id],
        "detail": {
            "stack-id": stack_id,
            "status-details": {"status": status, "status-reason": ""},
        },
    }


@pytest.fixture
def sweeper(broker: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The broker, sweeping us-east-1 on the emulator's clock with the contract's graces."""
    monkeypatch.setenv("BROKER_REGIONS", REGION)
    monkeypatch.setenv("BROKER_EC2_RATE_SCALE", "1000")
    # Time compressed on both sides: EC2's buckets refill as fast as the pacer expects.
    broker.throttle(time_scale=1000)
    for variable in (
        "BROKER_PROBE_GRACE_SECONDS",
        "BROKER_STACK_GRACE_SECONDS",
        "BROKER_IDLE_GRACE_SECONDS",
        "BROKER_HOLD_LIMIT_SECONDS",
    ):
        monkeypatch.delenv(variable, raising=False)
    container.build(cleaner_clock=broker.now)
    return broker


# -- the property ---------------------------------------------------------------------------------


@settings(
    max_examples=INVENTORIES,
    deadline=None,
    derandomize=not RANDOM,
    database=settings.default.database if RANDOM else None,
    # "explain" replays a failure a hundred times against the emulator: minutes, little gain
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    # One emulator per test function; every example resets it (below) before loading its own
    # inventory, so nothing leaks from one example to the next.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(inv=inventories())
def test_a_real_sweep_never_cancels_what_the_contract_protects(
    sweeper: Any, container: Any, context: Any, inv: Inventory
) -> None:
    sweeper.reset()  # moto's backends, the call log, faults and the clock
    container.rebuild()  # a fresh root: no clients, adapters or cleaner of the last example
    now = sweeper.freeze()
    ids = dict(sweeper.load_scenario(inv.scenario()).reservations)
    stack_ids = create_stacks(inv)
    for stack in inv.stacks.values():
        if stack.kind == "denied":
            sweeper.fail(
                "DescribeStacks",
                "AccessDenied",
                service="cloudformation",
                times=10_000,
                when={"StackName": stack.name},
            )
    by_id = {ids[i.name]: i for i in inv.items}
    protected = {rid for rid, item in by_id.items() if item.protected}
    condemned = {
        rid: reason
        for rid, item in by_id.items()
        if not item.protected and (reason := inv.expected(item)) is not None
    }
    # EC2 cancels only `assessing` or `active` reservations (CancelCapacityReservation): a
    # condemned one still pending is refused, and the sweep reports that, never "cancelled".
    refused = {rid for rid in condemned if by_id[rid].state == "pending"}
    before = states()
    for item in inv.items:  # what the campaign covered (--hypothesis-show-statistics)
        event(f"protected: {item.why}" if item.protected else f"owned: {item.purpose}")
    for reason in condemned.values():
        event(f"condemned: {reason}")

    # 1. a dry run changes nothing
    sweeper.clear_calls()
    dry = handler({"action": "sweep", "dry_run": True, "regions": [REGION]}, context)
    assert dry["status"] == "ok", dry
    assert mutating(sweeper) == []
    assert states() == before

    # 2. the scheduled sweep: exactly the condemned, each for its reason; nothing protected
    sweeper.clear_calls()
    answer = handler(
        {
            "version": "0",
            "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": DEFAULT_ACCOUNT_ID,
            "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": [],
            "detail": {},
        },
        context,
    )
    assert answer["status"] == ("partial" if refused else "ok"), answer
    assert {e["id"]: e["error_code"] for e in answer["errors"]} == dict.fromkeys(
        refused, "IncorrectState"
    )
    hit = cancelled_ids(sweeper)
    assert not protected & set(hit), [by_id[r].why for r in protected & set(hit)]
    assert set(mutating(sweeper)) <= {"CancelCapacityReservation"}
    assert sorted(hit) == sorted(condemned), {
        by_id[r].why: condemned.get(r) for r in set(hit) ^ set(condemned)
    }
    reasons = {c["id"]: c["reason"] for c in answer["cancelled"]}
    done = {rid: reason for rid, reason in condemned.items() if rid not in refused}
    assert reasons == done, {by_id[r].why: (reasons.get(r), condemned.get(r)) for r in by_id}
    assert {c["id"]: c["reason"] for c in dry["cancelled"]} == condemned
    after = states()
    for rid in protected | refused:
        assert after[rid] == before[rid], by_id[rid].why

    # 3. a stack status change for each stack: only this cluster's live holds of that stack
    for stack in inv.stacks.values():
        if stack.name not in stack_ids or stack.status is None:
            continue
        live = {
            rid
            for rid, item in by_id.items()
            if not item.protected
            and item.purpose == "hold"
            and item.stack == stack.name
            and (rid not in condemned or rid in refused)  # refused: still held
        }
        acts = stack.status in CONSUMED or orphaning(stack.status)
        pending = {rid for rid in live if by_id[rid].state == "pending"} if acts else set()
        sweeper.clear_calls()
        outcome = handler(stack_event(stack_ids[stack.name], stack.status, now), context)
        assert outcome["status"] == ("partial" if pending else "ok"), outcome
        assert {e["id"] for e in outcome["errors"]} == pending
        hit = cancelled_ids(sweeper)
        assert not protected & set(hit), [by_id[r].why for r in protected & set(hit)]
        assert set(mutating(sweeper)) <= {"CancelCapacityReservation"}
        assert sorted(hit) == sorted(live if acts else ()), (stack, [by_id[r].why for r in hit])
        condemned |= dict.fromkeys(hit, "stack event")
        event(f"stack event {'cancelled' if hit else 'kept'}: {stack.kind}")
    final = states()
    for rid in protected:
        assert final[rid] == before[rid], by_id[rid].why
