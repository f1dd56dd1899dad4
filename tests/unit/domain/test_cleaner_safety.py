"""The cleaner's safety property, pure and fast: whatever the inventory holds, the functions the
sweep decides with (``in_scope`` then ``decide``, and ``on_stack_event`` for a stack status
change) never cancel what the contract protects, and every cancel has a reason whose
precondition is true.

The oracle below is written from the contract's words ("Ownership", "cleaner" table), not
from the domain module: it classifies stack statuses by the contract's patterns
(``*_FAILED``, ``*ROLLBACK*``, ``DELETE_*``), reads ownership from the two tags, and derives
the protected states from EC2's own enum in botocore's model.

``tests/unit/domain/test_cleaner.py`` has the rule-by-rule table and smaller properties; this
file generates whole reservations as EC2 describes them, including everything that must be
spared (foreign, look-alike, wrong-case, Capacity Blocks carrying this cluster's tags,
reservations no longer holding anything), at least 10,000 of them per run.

Longer campaign: ``BROKER_PROOF_SCALE=20`` multiplies the example counts, and
``BROKER_PROOF_RANDOM=1`` draws fresh examples (and keeps failures in Hypothesis' database)
instead of the fixed, derandomized set CI runs. See docs/reliability.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from fnmatch import fnmatchcase

import pytest
from botocore.loaders import Loader
from capacity_broker.domain.cleaner import (
    STACK_MISSING,
    STACK_UNKNOWN,
    CancelReason,
    Graces,
    Held,
    StackState,
    decide,
    in_scope,
    on_stack_event,
)
from capacity_broker.domain.tags import purpose_of
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

# -- campaign size ----------------------------------------------------------------------------

SCALE = max(1, int(os.environ.get("BROKER_PROOF_SCALE", "1")))
RANDOM = os.environ.get("BROKER_PROOF_RANDOM", "") == "1"
CASES = 10_000 * SCALE  # the floor for the sweep decision


def proof(examples: int) -> settings:
    """Deterministic in CI (same examples every run, no database); fresh with RANDOM."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=not RANDOM,
        database=settings.default.database if RANDOM else None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# -- the contract, restated ---------------------------------------------------------------------

CLUSTER_KEY = "capacity-broker:cluster-id"
PURPOSE_KEY = "capacity-broker:purpose"
STACK_KEY = "capacity-broker:stack-name"
PURPOSES = ("probe", "hold")
HOLDING = frozenset(
    {"active", "pending"}
)  # "for each owned reservation in state active or pending"
BLOCK = "capacity-block"
REASONS = frozenset(
    {"past_end_date", "leaked_probe", "consumed", "orphaned", "idle", "stale"}
)  # the contract's table, exact strings

_EC2 = Loader().load_service_model("ec2", "service-2")["shapes"]
EC2_STATES: list[str] = _EC2["CapacityReservationState"]["enum"]
EC2_TYPES: list[str] = _EC2["CapacityReservationType"]["enum"]
STACK_STATUSES: list[str] = Loader().load_service_model("cloudformation", "service-2")["shapes"][
    "StackStatus"
]["enum"]

# "hold with a stack: stack is CREATE_COMPLETE/UPDATE_COMPLETE"; everything else is kept.
CONSUMED = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE"})
ORPHAN_PATTERNS = ("*_FAILED", "*ROLLBACK*", "DELETE_*")


def status_of(stack: StackState) -> str | None:
    """A stack status as CloudFormation would spell it, or None for lookup knowledge."""
    return stack.strip().upper() if isinstance(stack, str) else None


def orphaning(status: str | None) -> bool:
    return status is not None and any(fnmatchcase(status, p) for p in ORPHAN_PATTERNS)


def in_progress(status: str | None) -> bool:
    """What the contract keeps a young hold for: in progress, and not failing or deleting."""
    return status is not None and status.endswith("_IN_PROGRESS") and not orphaning(status)


IN_PROGRESS = sorted(s for s in STACK_STATUSES if in_progress(s))
assert IN_PROGRESS, "botocore's StackStatus enum changed shape"


@dataclass(frozen=True)
class Case:
    """One reservation as DescribeCapacityReservations shows it, plus the world around it."""

    cluster: str
    tags: dict[str, str]
    state: str
    reservation_type: str | None
    created: datetime
    end_date: datetime | None
    total: int
    used: int
    stack: StackState  # what the stack lookup found, for the stack the hold names
    now: datetime
    graces: Graces

    @property
    def owned(self) -> bool:
        """Contract, "Ownership": this cluster's id AND a purpose (one the broker writes)."""
        return self.tags.get(CLUSTER_KEY) == self.cluster and self.tags.get(PURPOSE_KEY) in PURPOSES

    @property
    def protected(self) -> bool:
        """What no path may ever cancel: not owned, not holding anything, or a Capacity Block."""
        return not self.owned or self.state not in HOLDING or self.reservation_type == BLOCK

    @property
    def purpose(self) -> str | None:
        return self.tags.get(PURPOSE_KEY)

    @property
    def stack_name(self) -> str | None:
        return self.tags.get(STACK_KEY) or None

    @property
    def age(self) -> timedelta:
        return max(timedelta(0), self.now - self.created)

    @property
    def past_end(self) -> bool:
        return self.end_date is not None and self.now >= self.end_date

    def held(self) -> Held:
        """What the sweep builds for an in-scope reservation (logic/cleaner.py ``_held``)."""
        purpose = purpose_of(self.tags)
        assert purpose is not None
        return Held(
            id="cr-0123456789abcdef0",
            region="us-east-1",
            purpose=purpose,
            state=self.state,
            created=self.created,
            end_date=self.end_date,
            stack_name=self.stack_name,
            instance_count=self.total,
            # nothing runs in a pending reservation (the sweep reports 0 used for it)
            used_count=0 if self.state == "pending" else self.used,
            reservation_type=self.reservation_type or "default",
        )

    def preconditions(self) -> set[str]:
        """Every contract reason whose precondition is true (the table, row by row)."""
        g = self.graces
        found: set[str] = set()
        if self.past_end:
            found.add("past_end_date")
        if self.purpose == "probe" and self.age > g.probe:
            found.add("leaked_probe")
        if self.purpose == "hold":
            if self.stack_name:
                status = status_of(self.stack)
                if status in CONSUMED:
                    found.add("consumed")
                if orphaning(status):
                    found.add("orphaned")
                if self.stack is STACK_MISSING and self.age > g.stack:
                    found.add("orphaned")
            else:
                if self.state == "active" and self.used > 0:
                    found.add("consumed")
                if self.age > g.idle:
                    found.add("idle")
            if self.age > g.hold_limit:
                found.add("stale")
        return found


# -- the inventory generator ------------------------------------------------------------------
#
# Generation is the cost of a property like this one (decide() takes microseconds), so every
# field is one cheap draw: an index into a precomputed list, or an integer. 10,000 cases
# then take a few seconds.

CLUSTERS = ["demo-cluster", "hpc", "prod-eu-1", "a"]
OTHER_CLUSTERS = ["other-cluster", "prod", "demo", "hpc-2", "cluster-id"]
STACK_NAMES = ["soca-job-1", "soca-job-2", "Job-3"]


def look_alikes(cluster: str) -> list[str]:
    """Cluster ids a careless comparison would take for ``cluster`` (never ``cluster``)."""
    candidates = [
        cluster.upper(),
        cluster.capitalize(),
        cluster + "-2",
        cluster + "x",
        "x" + cluster,
        cluster[:-1],
        f" {cluster}",
        f"{cluster} ",
        f"{cluster}\u200b",  # zero-width space
        f"{cluster}\x00",
        cluster.replace("e", "\u0435").replace("a", "\u0430"),  # Cyrillic homoglyphs
        f"{cluster}*",
        f"{cluster},{cluster}",
        f"{cluster}/",
    ]
    return sorted({c for c in candidates if c != cluster})


def wrong_case(key: str) -> list[str]:
    return sorted(
        {
            key.upper(),
            key.title(),
            key.capitalize(),
            key.replace("capacity-broker", "Capacity-Broker"),
        }
    )


WRONG_PURPOSES = ["Probe", "HOLD", " hold", "hold ", "probe\n", "batch", "spare", "", "probe,hold"]
USER_TAGS: list[dict[str, str]] = [
    {},
    {"team": "ml"},
    {"Name": "capacity-broker-hold-job-1"},
    {"aws:cloudformation:stack-name": "soca-job-1", "owner": "\u202eevil"},
    {"project": "cfd", "owner": "alice"},
]


def tag_choices(cluster: str) -> list[dict[str, str]]:
    """Every way a reservation's tags can look: this cluster's own tags (the most common
    entry, first so that shrinking ends there), and everything that must not count as ours."""
    owners: list[dict[str, str]] = []
    for purpose in PURPOSES:
        owners.append({CLUSTER_KEY: cluster, PURPOSE_KEY: purpose})
        owners.extend({CLUSTER_KEY: other, PURPOSE_KEY: purpose} for other in OTHER_CLUSTERS)
        owners.extend({CLUSTER_KEY: alike, PURPOSE_KEY: purpose} for alike in look_alikes(cluster))
        owners.extend({key: cluster, PURPOSE_KEY: purpose} for key in wrong_case(CLUSTER_KEY))
        owners.extend({CLUSTER_KEY: cluster, key: purpose} for key in wrong_case(PURPOSE_KEY))
        owners.append({PURPOSE_KEY: purpose})
    owners.extend({CLUSTER_KEY: cluster, PURPOSE_KEY: bad} for bad in WRONG_PURPOSES)
    owners.extend([{CLUSTER_KEY: cluster}, {}])
    # ours, weighted up: about half of all reservations are this cluster's probes and holds
    ours = [{CLUSTER_KEY: cluster, PURPOSE_KEY: p} for p in PURPOSES]
    owners = ours * (len(owners) // 2) + owners
    stacks: list[dict[str, str]] = [{}, {}, {STACK_KEY: ""}] + [
        {STACK_KEY: name} for name in STACK_NAMES
    ]
    return [
        user | owner | stack
        for owner in owners
        for stack in stacks
        for user in USER_TAGS[: 1 + (len(owner) % len(USER_TAGS))]
    ]


TAGS = {cluster: tag_choices(cluster) for cluster in CLUSTERS}

S = timedelta(seconds=1)
TINY = timedelta(microseconds=1)
MINUTE = timedelta(minutes=1)
GRACES = [
    Graces(),
    Graces(),
    Graces(),
    Graces(probe=timedelta(0), stack=timedelta(0), idle=timedelta(0), hold_limit=timedelta(0)),
    Graces(probe=5 * S, stack=5 * S, idle=5 * S, hold_limit=20 * S),
    # a hold limit shorter than the other graces: "stale" must still never fire early
    Graces(probe=10 * MINUTE, stack=20 * MINUTE, idle=40 * MINUTE, hold_limit=2 * MINUTE),
    Graces(probe=timedelta(days=7), stack=timedelta(days=7), idle=timedelta(days=7),
           hold_limit=timedelta(days=7)),
]  # fmt: skip
# The instant of the sweep, in several fixed offsets (the domain must compare instants).
ZONES = [UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12)),
         timezone(timedelta(hours=5, minutes=30))]  # fmt: skip
EPOCH = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
STACKS: list[StackState] = [
    None,  # not looked up
    STACK_MISSING,
    STACK_UNKNOWN,
    *STACK_STATUSES,
    *(f" {s.lower()} " for s in STACK_STATUSES[::3]),
    # statuses CloudFormation may add one day
    "TELEPORT_IN_PROGRESS",
    "ARCHIVE_COMPLETE",
    "IMPORT_PENDING",
    "RESTORE_FAILED",
    "ROLLBACK",
    "",
]
STATES = ["active", "pending"] * 6 + EC2_STATES + ["Active", "ACTIVE", "active ", ""]
TYPES = ["default", "default", None, "capacity-block"]
assert set(EC2_TYPES) <= set(TYPES), "EC2 has a new reservation type: classify it"


# Strategies built once, and fields that vary together drawn together: a sampled_from over
# thousands of tag sets labels itself by hashing every element (not per draw, then), and
# each draw costs Hypothesis bookkeeping, so a case is about ten draws.
WORLDS = [(c, g, z) for c in CLUSTERS for g in GRACES for z in ZONES]
SHAPES = [(state, kind) for state in STATES for kind in TYPES]
COUNTS = [(total, used) for total in (1, 2, 8, 64) for used in sorted({0, 1, total // 2, total})]
PICK_WORLD = st.sampled_from(WORLDS)
PICK_TAGS = {cluster: st.sampled_from(choices) for cluster, choices in TAGS.items()}
PICK_SHAPE = st.sampled_from(SHAPES)
PICK_COUNTS = st.sampled_from(COUNTS)
PICK_STACK = st.sampled_from(STACKS)
PICK_STATUS = st.sampled_from([s for s in STACKS if isinstance(s, str)])
PICK_STACK_NAME = st.sampled_from(STACK_NAMES)
SECONDS_AROUND = st.integers(min_value=-(10**8), max_value=10**8)  # about three years
WHICH_AGE = st.integers(min_value=0, max_value=5)
WHICH_END = st.integers(min_value=0, max_value=2)
MICROS_NEAR = st.integers(min_value=-2_000_000, max_value=2_000_000)
AGE_SECONDS = st.integers(min_value=-3_600, max_value=3 * 86_400)
END_SECONDS = st.integers(min_value=-2 * 86_400, max_value=2 * 86_400)


def around(draw: st.DrawFn, graces: Graces) -> timedelta:
    """An age: at a grace boundary give or take up to 2 s (0 and 1 µs included), or anywhere
    from an hour in the future (clock skew) to three days old."""
    which = draw(WHICH_AGE)
    if which < 4:
        boundary = (graces.probe, graces.stack, graces.idle, graces.hold_limit)[which]
        return boundary + draw(MICROS_NEAR) * TINY
    return draw(AGE_SECONDS) * S


def ends(draw: st.DrawFn) -> timedelta | None:
    """EndDate relative to now: none (unlimited), at now give or take 2 s, or within 2 days."""
    which = draw(WHICH_END)
    if which == 0:
        return None
    return draw(MICROS_NEAR) * TINY if which == 1 else draw(END_SECONDS) * S


@st.composite
def cases(draw: st.DrawFn) -> Case:
    cluster, g, zone = draw(PICK_WORLD)
    now = (EPOCH + draw(SECONDS_AROUND) * S).astimezone(zone)
    age = around(draw, g)
    end_in = ends(draw)
    state, kind = draw(PICK_SHAPE)
    total, used = draw(PICK_COUNTS)
    return Case(
        cluster=cluster,
        tags=draw(PICK_TAGS[cluster]),
        state=state,
        reservation_type=kind,
        created=now - age,
        end_date=None if end_in is None else now + end_in,
        total=total,
        used=used,
        stack=draw(PICK_STACK),
        now=now,
        graces=g,
    )


def sweep_decides(case: Case) -> tuple[bool, str]:
    """What the sweep does with this reservation: (cancel, reason). Out of scope: kept."""
    if not in_scope(case.tags, case.state, case.reservation_type, case.cluster):
        return False, "out of scope"
    held = case.held()
    # the sweep hands decide() the stack's state only for a hold that names a stack
    stack = case.stack if held.purpose.value == "hold" and held.stack_name else None
    decision = decide(held, stack, case.now, case.graces)
    return decision.cancel, decision.reason


# -- the property -------------------------------------------------------------------------------


def check_safety(case: Case) -> None:
    cancel, reason = sweep_decides(case)
    g = case.graces
    if case.protected:
        assert not cancel, f"cancelled a protected reservation ({reason})"
        return
    if not cancel:
        assert reason not in REASONS, f"kept with a cancel reason: {reason}"
        # liveness: whatever the table condemns is cancelled
        assert not case.preconditions(), f"kept ({reason}) but {case.preconditions()} apply"
        return
    # every cancel: exactly one contract reason, and its precondition holds
    assert reason in REASONS, reason
    assert reason in case.preconditions(), f"{reason} without its precondition"
    # the rows that must never cancel, stated on their own (a passed EndDate overrides them)
    if case.past_end:
        return
    if case.purpose == "probe":
        assert case.age > g.probe, "cancelled a young probe"
    elif case.stack_name and case.age <= g.hold_limit:
        status = status_of(case.stack)
        assert not in_progress(status), f"cancelled a young hold whose stack is {status}"
        assert case.stack not in (None, STACK_UNKNOWN), "a failed stack lookup cancelled a hold"
        if case.stack is STACK_MISSING:
            assert case.age > g.stack, "cancelled a hold whose stack may still be coming"


@proof(CASES)
@given(cases())
def test_the_sweep_never_cancels_what_the_contract_protects(case: Case) -> None:
    check_safety(case)


# Focused generators: the scariest corners get their own budget on top of the general one.


@st.composite
def protected_cases(draw: st.DrawFn) -> Case:
    """Only reservations that must be spared, every one old enough and past its EndDate, so
    that any rule would condemn it were it ours."""
    case = draw(cases())
    old = case.now - timedelta(days=2)
    kind = draw(st.sampled_from(["foreign", "block", "not-holding"]))
    tags = case.tags
    state = case.state if case.state not in HOLDING else "expired"
    rtype = case.reservation_type
    if kind == "foreign":
        if case.owned:
            tags = {**tags, CLUSTER_KEY: draw(st.sampled_from(look_alikes(case.cluster)))}
        state = draw(st.sampled_from(sorted(HOLDING)))
    elif kind == "block":
        # a Capacity Block carrying this cluster's ownership tags
        tags = {**tags, CLUSTER_KEY: case.cluster, PURPOSE_KEY: draw(st.sampled_from(PURPOSES))}
        rtype, state = BLOCK, draw(st.sampled_from(["active", "pending", "scheduled"]))
    return Case(
        cluster=case.cluster,
        tags=tags,
        state=state,
        reservation_type=rtype,
        created=old,
        end_date=case.now - timedelta(hours=1),
        total=case.total,
        used=case.used,
        stack=draw(st.sampled_from(["CREATE_COMPLETE", "DELETE_COMPLETE", STACK_MISSING])),
        now=case.now,
        graces=Graces(),
    )


@proof(1_000 * SCALE)
@given(protected_cases())
def test_protected_reservations_are_spared_even_when_every_rule_would_fire(case: Case) -> None:
    assert case.protected
    assert sweep_decides(case)[0] is False
    # and decide() alone, for whatever it could be asked about, spares blocks and dead states
    purpose = purpose_of(case.tags)
    if purpose is not None and (case.reservation_type == BLOCK or case.state not in HOLDING):
        assert not decide(case.held(), case.stack, case.now, case.graces).cancel


@st.composite
def young_in_progress(draw: st.DrawFn) -> Case:
    """Owned holds, younger than the hold limit, whose stack is still being created/updated."""
    case = draw(cases())
    g = case.graces
    limit = int(g.hold_limit / TINY)
    age = draw(st.integers(min_value=-300_000_000, max_value=limit)) * TINY
    return Case(
        cluster=case.cluster,
        tags={
            CLUSTER_KEY: case.cluster,
            PURPOSE_KEY: "hold",
            STACK_KEY: draw(PICK_STACK_NAME),
        },
        state=draw(st.sampled_from(sorted(HOLDING))),
        reservation_type=draw(st.sampled_from(["default", None])),
        created=case.now - age,
        end_date=draw(st.sampled_from([None, case.now + TINY, case.now + timedelta(hours=1)])),
        total=case.total,
        used=case.used,
        stack=draw(st.sampled_from([*IN_PROGRESS, STACK_UNKNOWN, None])),
        now=case.now,
        graces=g,
    )


@proof(500 * SCALE)
@given(young_in_progress())
def test_a_young_hold_whose_stack_is_in_progress_or_unknown_is_kept(case: Case) -> None:
    assert sweep_decides(case)[0] is False


# -- the stack status change path ---------------------------------------------------------------


@st.composite
def stack_events(draw: st.DrawFn) -> tuple[Case, str, str]:
    case = draw(cases())
    name = draw(PICK_STACK_NAME)
    status = draw(PICK_STATUS)
    return case, name, status


def event_decides(case: Case, stack_name: str, status: str) -> tuple[bool, str | None]:
    """What a Stack Status Change event does to this reservation (logic/cleaner.py
    ``stack_event``: in scope, a hold, tagged with that stack; then ``on_stack_event``)."""
    if not in_scope(case.tags, case.state, case.reservation_type, case.cluster):
        return False, None
    held = case.held()
    if held.purpose.value != "hold" or held.stack_name != stack_name:
        return False, None
    reason = on_stack_event(status)
    return reason is not None, None if reason is None else reason.value


@proof(2_000 * SCALE)
@given(stack_events())
def test_a_stack_event_never_cancels_what_the_contract_protects(
    event: tuple[Case, str, str],
) -> None:
    case, name, status = event
    cancel, reason = event_decides(case, name, status)
    if case.protected or case.purpose != "hold" or case.stack_name != name:
        assert not cancel
        return
    # "consumed for CREATE_COMPLETE/UPDATE_COMPLETE, orphaned for failed, rolled back or
    # deleted; nothing for *_IN_PROGRESS" (regardless of age)
    status = status.strip().upper()
    if status in CONSUMED:
        assert reason == CancelReason.CONSUMED.value
    elif orphaning(status):
        assert reason == CancelReason.ORPHANED.value
    else:
        assert not cancel, f"{status} cancelled a hold"


def corners(case: Case) -> set[str]:
    """What kind of case this is, for the reachability check below."""
    cancel, reason = sweep_decides(case)
    found = {"protected" if case.protected else (reason if cancel else "kept")}
    if case.protected and not case.owned and case.tags.get(CLUSTER_KEY) == case.cluster:
        found.add("ours-but-bad-purpose")
    if case.reservation_type == BLOCK and case.owned:
        found.add("block-with-our-tags")
    if case.owned and case.state in HOLDING and case.stack is STACK_UNKNOWN:
        found.add("lookup-failed")
    return found


@pytest.mark.parametrize(
    "corner",
    sorted(
        {"protected", "kept", "ours-but-bad-purpose", "block-with-our-tags", "lookup-failed"}
        | REASONS
    ),
)
def test_the_generator_reaches(corner: str) -> None:
    """The property is only as good as what it sees: every kind of protected reservation and
    every cancel reason must be reachable by the general generator."""
    found = find(
        cases(),
        lambda case: corner in corners(case),
        settings=settings(
            max_examples=5_000,
            database=None,
            derandomize=True,
            deadline=None,
            phases=[Phase.generate],  # found is enough: no need to shrink it
        ),
    )
    assert corner in corners(found)
