"""The cleaner's rules (contract, "cleaner" table), rule by rule and at every boundary."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.loaders import Loader
from capacity_broker.domain.cleaner import (
    ENFORCEMENT_LAG,
    STACK_MISSING,
    STACK_UNKNOWN,
    CancelReason,
    Decision,
    Graces,
    Held,
    StackLookup,
    StackState,
    StackVerdict,
    decide,
    hours_saved,
    in_scope,
    on_stack_event,
    stack_verdict,
)
from capacity_broker.domain.tags import TAG_CLUSTER_ID, TAG_PURPOSE, Purpose
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
G = Graces()
S = timedelta(seconds=1)
TINY = timedelta(microseconds=1)

V = StackVerdict
# Every StackStatus in botocore's CloudFormation model, with what it means for a hold.
STACK_TABLE: dict[str, StackVerdict] = {
    "CREATE_IN_PROGRESS": V.NONE,
    "CREATE_FAILED": V.ORPHANED,
    "CREATE_COMPLETE": V.CONSUMED,
    "ROLLBACK_IN_PROGRESS": V.ORPHANED,
    "ROLLBACK_FAILED": V.ORPHANED,
    "ROLLBACK_COMPLETE": V.ORPHANED,
    "DELETE_IN_PROGRESS": V.ORPHANED,
    "DELETE_FAILED": V.ORPHANED,
    "DELETE_COMPLETE": V.ORPHANED,
    "UPDATE_IN_PROGRESS": V.NONE,
    "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS": V.NONE,
    "UPDATE_COMPLETE": V.CONSUMED,
    "UPDATE_FAILED": V.ORPHANED,
    "UPDATE_ROLLBACK_IN_PROGRESS": V.ORPHANED,
    "UPDATE_ROLLBACK_FAILED": V.ORPHANED,
    "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS": V.ORPHANED,
    "UPDATE_ROLLBACK_COMPLETE": V.ORPHANED,
    "REVIEW_IN_PROGRESS": V.NONE,
    "IMPORT_IN_PROGRESS": V.NONE,
    "IMPORT_COMPLETE": V.NONE,  # not among the contract's consumed statuses
    "IMPORT_ROLLBACK_IN_PROGRESS": V.ORPHANED,
    "IMPORT_ROLLBACK_FAILED": V.ORPHANED,
    "IMPORT_ROLLBACK_COMPLETE": V.ORPHANED,
}


IP = "CREATE_IN_PROGRESS"
KEEP_IP = Decision(False, "stack CREATE_IN_PROGRESS")
BLOCK = "capacity-block"
NOT_YET = "young hold, stack not created yet"
DAYS = timedelta(days=3)


def hold(
    age: timedelta,
    stack_name: str | None = None,
    used: int = 0,
    end_in: timedelta | None = timedelta(minutes=4),
    **changes: Any,
) -> Held:
    created = NOW - age
    fields: dict[str, Any] = {
        "id": "cr-0123456789abcdef0",
        "region": "us-east-1",
        "purpose": Purpose.HOLD,
        "state": "active",
        "created": created,
        "end_date": None if end_in is None else NOW + end_in,
        "stack_name": stack_name,
        "instance_count": 8,
        "used_count": used,
    }
    fields.update(changes)
    return Held(**fields)


def probe(age: timedelta, **changes: Any) -> Held:
    return hold(age, purpose=Purpose.PROBE, **changes)


# -- stack statuses ------------------------------------------------------------------------


def test_table_covers_every_stack_status_botocore_knows() -> None:
    model = Loader().load_service_model("cloudformation", "service-2")
    assert set(STACK_TABLE) == set(model["shapes"]["StackStatus"]["enum"])


@pytest.mark.parametrize(("status", "verdict"), sorted(STACK_TABLE.items()))
def test_stack_verdict(status: str, verdict: StackVerdict) -> None:
    assert stack_verdict(status) is verdict
    assert stack_verdict(f" {status.lower()} ") is verdict


@pytest.mark.parametrize(("status", "verdict"), sorted(STACK_TABLE.items()))
def test_stack_event(status: str, verdict: StackVerdict) -> None:
    expected = {
        V.CONSUMED: CancelReason.CONSUMED,
        V.ORPHANED: CancelReason.ORPHANED,
        V.NONE: None,
    }[verdict]
    assert on_stack_event(status) == expected


def test_unknown_future_status_concludes_nothing() -> None:
    assert stack_verdict("TELEPORT_IN_PROGRESS") is V.NONE
    assert stack_verdict("") is V.NONE


@pytest.mark.parametrize(("status", "verdict"), sorted(STACK_TABLE.items()))
def test_every_status_through_decide(status: str, verdict: StackVerdict) -> None:
    young = hold(timedelta(seconds=30), stack_name="job-1")
    decision = decide(young, status, NOW, G)
    if verdict is V.NONE:
        assert decision == Decision(False, f"stack {status}")
    else:
        assert decision == Decision(True, verdict.value)


# -- graces --------------------------------------------------------------------------------


def test_default_graces_are_the_contracts() -> None:
    assert timedelta(seconds=90) == G.probe
    assert timedelta(minutes=3) == G.stack
    assert timedelta(minutes=10) == G.idle
    assert timedelta(minutes=30) == G.hold_limit


def test_negative_grace_is_refused() -> None:
    with pytest.raises(ValueError, match="probe"):
        Graces(probe=timedelta(seconds=-1))


# -- scope ---------------------------------------------------------------------------------

OWNED = {TAG_CLUSTER_ID: "hpc", TAG_PURPOSE: "hold"}


@pytest.mark.parametrize(
    ("tags", "state", "reservation_type", "expected"),
    [
        (OWNED, "active", "default", True),
        (OWNED, "pending", "default", True),
        (OWNED, "active", None, True),
        (OWNED, "active", "capacity-block", False),
        (OWNED, "scheduled", "default", False),
        (OWNED, "cancelled", "default", False),
        (OWNED, "expired", "default", False),
        (OWNED, "failed", "default", False),
        ({TAG_CLUSTER_ID: "hpc"}, "active", "default", False),
        ({TAG_CLUSTER_ID: "other", TAG_PURPOSE: "hold"}, "active", "default", False),
        ({}, "active", "default", False),
    ],
)
def test_in_scope(
    tags: dict[str, str], state: str, reservation_type: str | None, expected: bool
) -> None:
    assert in_scope(tags, state, reservation_type, "hpc") is expected


# -- the rules, in order -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held", "stack", "expected"),
    [
        # past EndDate, first of all (even a young probe, even a consumed stack)
        (probe(S, end_in=timedelta(0)), None, Decision(True, "past_end_date")),
        (probe(S, end_in=-timedelta(minutes=1)), None, Decision(True, "past_end_date")),
        (hold(S, "job-1", end_in=-S), IP, Decision(True, "past_end_date")),
        (hold(S, "job-1", end_in=-S), "CREATE_COMPLETE", Decision(True, "past_end_date")),
        (hold(S, end_in=-S), STACK_UNKNOWN, Decision(True, "past_end_date")),
        (probe(S, end_in=S), None, Decision(False, "young probe")),
        # probes
        (probe(G.probe), None, Decision(False, "young probe")),
        (probe(G.probe + TINY), None, Decision(True, "leaked_probe")),
        (probe(timedelta(hours=5), end_in=None), None, Decision(True, "leaked_probe")),
        (probe(timedelta(0)), "CREATE_COMPLETE", Decision(False, "young probe")),
        # holds with a stack
        (hold(S, "job-1"), "CREATE_COMPLETE", Decision(True, "consumed")),
        (hold(S, "job-1"), "UPDATE_COMPLETE", Decision(True, "consumed")),
        (hold(S, "job-1"), "CREATE_FAILED", Decision(True, "orphaned")),
        (hold(S, "job-1"), "ROLLBACK_IN_PROGRESS", Decision(True, "orphaned")),
        (hold(S, "job-1"), "DELETE_IN_PROGRESS", Decision(True, "orphaned")),
        (hold(S, "job-1"), IP, KEEP_IP),
        (hold(S, "job-1", used=8), IP, KEEP_IP),
        (hold(G.stack, "job-1"), STACK_MISSING, Decision(False, NOT_YET)),
        (hold(G.stack + TINY, "job-1"), STACK_MISSING, Decision(True, "orphaned")),
        (hold(S, "job-1"), STACK_UNKNOWN, Decision(False, "stack lookup failed")),
        (hold(S, "job-1"), None, Decision(False, "stack lookup failed")),
        # holds without a stack
        (hold(S, used=1), None, Decision(True, "consumed")),
        (hold(S, used=8), None, Decision(True, "consumed")),
        (hold(G.idle), None, Decision(False, "young hold")),
        (hold(G.idle + TINY), None, Decision(True, "idle")),
        (hold(S), "CREATE_COMPLETE", Decision(False, "young hold")),  # no stack: ignored
        # the hold limit: age alone, whatever the stack says or whether it could be read
        (hold(G.hold_limit, "job-1"), IP, KEEP_IP),
        (hold(G.hold_limit + TINY, "job-1"), IP, Decision(True, "stale")),
        (hold(G.hold_limit, "job-1"), STACK_UNKNOWN, Decision(False, "stack lookup failed")),
        (hold(G.hold_limit + TINY, "job-1"), STACK_UNKNOWN, Decision(True, "stale")),
        (hold(G.hold_limit + TINY, "job-1"), None, Decision(True, "stale")),
        (hold(timedelta(hours=2), "job-1"), "REVIEW_IN_PROGRESS", Decision(True, "stale")),
        # other rules keep their more telling reason past the limit
        (hold(timedelta(hours=2), "job-1"), "CREATE_COMPLETE", Decision(True, "consumed")),
        (hold(timedelta(hours=2)), None, Decision(True, "idle")),
        # never: capacity blocks, reservations no longer holding anything
        (hold(DAYS, reservation_type=BLOCK, end_in=-S), None, Decision(False, "capacity block")),
        (hold(timedelta(days=3), state="cancelled"), None, Decision(False, "state cancelled")),
        (probe(timedelta(days=3), state="expired"), None, Decision(False, "state expired")),
        # pending counts like active
        (probe(G.probe + TINY, state="pending"), None, Decision(True, "leaked_probe")),
    ],
)  # fmt: skip
def test_decide(held: Held, stack: StackState, expected: Decision) -> None:
    assert decide(held, stack, NOW, G) == expected


def test_reasons_are_the_contracts() -> None:
    assert [r.value for r in CancelReason] == [
        "past_end_date",
        "leaked_probe",
        "consumed",
        "orphaned",
        "idle",
        "stale",
    ]


def test_custom_graces_move_the_boundaries() -> None:
    quick = Graces(
        probe=timedelta(seconds=5),
        stack=timedelta(seconds=5),
        idle=timedelta(seconds=5),
        hold_limit=timedelta(seconds=20),
    )
    assert decide(probe(timedelta(seconds=6)), None, NOW, quick).reason == "leaked_probe"
    assert decide(hold(timedelta(seconds=6)), None, NOW, quick).reason == "idle"
    assert decide(hold(timedelta(seconds=6), "s"), STACK_MISSING, NOW, quick).reason == "orphaned"
    assert decide(hold(timedelta(seconds=21), "s"), STACK_UNKNOWN, NOW, quick).reason == "stale"
    assert decide(hold(timedelta(seconds=6)), None, NOW, G).reason == "young hold"


def test_purpose_may_be_given_as_text() -> None:
    assert hold(S, purpose="probe").purpose is Purpose.PROBE
    with pytest.raises(ValueError, match="spare"):
        hold(S, purpose="spare")


def test_creation_in_the_future_counts_as_new() -> None:
    assert decide(probe(-timedelta(hours=1)), None, NOW, G) == Decision(False, "young probe")


def test_naive_datetimes_are_refused() -> None:
    naive = NOW.replace(tzinfo=None)
    with pytest.raises(ValueError, match="now"):
        decide(hold(S), None, naive, G)
    with pytest.raises(ValueError, match="created"):
        decide(hold(S, created=naive), None, NOW, G)
    with pytest.raises(ValueError, match="end_date"):
        decide(hold(S, end_date=naive), None, NOW, G)


# -- hours saved ---------------------------------------------------------------------------


def test_hours_saved_counts_until_end_date_plus_the_expected_lag() -> None:
    assert timedelta(minutes=30) == ENFORCEMENT_LAG
    # 8 unused instances, EndDate in 30 min, lag 30 min: 8 x 1 h
    assert hours_saved(hold(S, end_in=timedelta(minutes=30)), NOW) == pytest.approx(8.0)
    # used instances are billed as instances either way
    assert hours_saved(hold(S, used=6, end_in=timedelta(minutes=30)), NOW) == pytest.approx(2.0)
    assert hours_saved(hold(S, used=8, end_in=timedelta(minutes=30)), NOW) == 0.0
    # past EndDate, still within the lag
    assert hours_saved(hold(S, end_in=-timedelta(minutes=15)), NOW) == pytest.approx(2.0)
    # past EndDate + lag: EC2 would have ended it by now
    assert hours_saved(hold(S, end_in=-timedelta(hours=2)), NOW) == 0.0
    # no EndDate: nothing to measure against
    assert hours_saved(hold(S, end_in=None), NOW) == 0.0


# -- properties ----------------------------------------------------------------------------

ages = st.timedeltas(min_value=timedelta(seconds=-60), max_value=timedelta(hours=3))
stacks: st.SearchStrategy[StackState] = st.one_of(
    st.none(),
    st.sampled_from(list(StackLookup)),
    st.sampled_from(sorted(STACK_TABLE)),
    st.text(max_size=30),
)
helds = st.builds(
    hold,
    age=ages,
    stack_name=st.none() | st.sampled_from(["job-1", ""]),
    used=st.integers(min_value=0, max_value=8),
    end_in=st.none() | st.timedeltas(min_value=-timedelta(hours=2), max_value=timedelta(hours=1)),
    purpose=st.sampled_from(list(Purpose)),
    state=st.sampled_from(["active", "pending", "cancelled", "expired", "scheduled"]),
    reservation_type=st.sampled_from(["default", "capacity-block"]),
)


@given(helds, stacks)
def test_decide_is_total_and_speaks_the_contract(held: Held, stack: StackState) -> None:
    decision = decide(held, stack, NOW, G)
    assert decision == decide(held, stack, NOW, G)
    if decision.cancel:
        assert decision.reason in {r.value for r in CancelReason}
        assert held.reservation_type != "capacity-block"
        assert held.state in ("active", "pending")
    else:
        assert decision.reason not in {r.value for r in CancelReason}


in_progress = sorted(s for s, v in STACK_TABLE.items() if v is V.NONE)


@given(
    st.timedeltas(min_value=timedelta(0), max_value=G.hold_limit),
    st.sampled_from(in_progress),
    st.integers(min_value=0, max_value=8),
)
def test_young_hold_with_stack_in_progress_is_never_cancelled(
    age: timedelta, status: str, used: int
) -> None:
    held = hold(age, "job-1", used=used, end_in=timedelta(minutes=1))
    assert not decide(held, status, NOW, G).cancel


@given(
    st.timedeltas(min_value=G.hold_limit + TINY, max_value=timedelta(days=2)),
    stacks,
)
def test_old_holds_never_survive(age: timedelta, stack: StackState) -> None:
    held = hold(age, "job-1", end_in=timedelta(hours=1))
    assert decide(held, stack, NOW, G).cancel
    assert decide(replace(held, stack_name=None), stack, NOW, G).cancel


@given(helds, st.timedeltas(min_value=timedelta(0), max_value=timedelta(hours=3)))
def test_waiting_longer_never_saves_a_reservation(held: Held, later: timedelta) -> None:
    """Once cancelled for age (not stack status), a reservation stays cancellable later."""
    first = decide(held, STACK_UNKNOWN, NOW, G)
    if first.cancel:
        assert decide(held, STACK_UNKNOWN, NOW + later, G).cancel
