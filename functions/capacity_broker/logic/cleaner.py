"""cleaner (ODCRCleaner): find this cluster's reservations that should not be held any more,
and cancel them.

This module gathers facts and acts; the rules are ``domain.cleaner`` alone. A sweep lists the
owned reservations of every region (concurrently; every page; server-side tag and state
filters, then ``in_scope`` client-side, since a filter is a convenience and not a guarantee),
looks up each distinct job stack once, asks ``decide`` about each reservation with one "now",
and cancels through ``ReservationCore.release`` (the one cancel path, which refuses anything
not owned) in parallel under the adapters' pacing and retries. A failure is recorded and the
sweep carries on: the next sweep, five minutes later, tries again.

The same sweep deletes this cluster's launch template versions that nothing can launch from
any more (``domain.templates``: a stack version once its stack is gone, a version without a
stack once the reservation it targets has ended), after the cancels, so a hold cancelled now
frees its version in this sweep or the next; a stack's DELETE_COMPLETE event deletes that
stack's versions at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from ..adapters.aws import AwsError
from ..adapters.cloudformation import CloudFormation, Stack
from ..adapters.ec2 import Ec2, Reservation
from ..adapters.ec2.filters import Prefix
from ..adapters.ec2.instances import LIVE_STATES
from ..adapters.ec2.launches import Launches
from ..domain import cleaner as rules
from ..domain import pool as pool_rules
from ..domain import templates as version_rules
from ..domain.cleaner import (
    STACK_MISSING,
    STACK_UNKNOWN,
    CancelReason,
    Decision,
    Graces,
    Held,
    StackState,
)
from ..domain.clock import utc
from ..domain.failures import BrokerFailure
from ..domain.pool import SWEEP_HOURS, TAG_LADDER, TAG_RUNG
from ..domain.tags import (
    TAG_CLUSTER_ID,
    TAG_JOB_ID,
    TAG_PURPOSE,
    TAG_STACK_NAME,
    Purpose,
    purpose_of,
)
from ..models import CleanerItem, CleanerResponse, ItemError
from ..models.cleaner import InterruptedNode, TerminatedNode
from .failures import item_error
from .pool import ReservedPool
from .reservations import ReservationCore
from .templates import Deletion, Templates

Action = Literal["cancel", "keep", "failed"]

# Regions listed at once. Each region has its own EC2 request budget (the pacer's buckets are
# per region), so sweeping them side by side costs no region anything.
MAX_REGION_WORKERS = 8


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Record:
    """What happened to one owned reservation (one structured log line, one answer item)."""

    id: str
    region: str
    action: Action
    reason: str
    age_seconds: float
    hours_saved: float = 0.0
    error_code: str | None = None
    message: str | None = None


@dataclass
class CleanerRun:
    """Everything one invocation did: the answer, the metrics and the log lines come from it."""

    trigger: Literal["sweep", "stack_event", "interruption"]
    dry_run: bool
    regions: list[str]
    records: list[Record] = field(default_factory=list)
    # Failures that are not a cancel: a region that could not be listed.
    region_errors: list[ItemError] = field(default_factory=list)
    # Stack lookups that failed (the holds concerned are kept; counted as CleanerErrors).
    lookup_failures: int = 0
    stack_name: str | None = None
    # What was done to this cluster's launch template versions.
    versions: Deletion = field(default_factory=Deletion)
    version_regions: dict[str, str] = field(default_factory=dict)
    # The reserved pool's unused instances per region, as this sweep saw them (issue 43).
    pool_unused: dict[str, int] = field(default_factory=dict)
    # An interruption warning's node, when it is this cluster's (nothing is cancelled for it).
    interrupted: list[InterruptedNode] = field(default_factory=list)
    # The nodes of half-done reserved-first ladders the sweep terminated (in a dry run: would).
    ladder_nodes: list[TerminatedNode] = field(default_factory=list)
    # Those whose terminate EC2 did not confirm (the next sweep tries again).
    ladder_errors: list[ItemError] = field(default_factory=list)

    @property
    def pool_unused_instance_hours(self) -> float:
        """The pool's idle instance-hours this sweep stands for: its unused instances now
        times the sweep's period (every 5 minutes)."""
        return round(sum(self.pool_unused.values()) * SWEEP_HOURS, 4)

    @property
    def examined(self) -> int:
        return len(self.records)

    def of(self, action: Action) -> list[Record]:
        return [r for r in self.records if r.action == action]

    @property
    def hours_saved(self) -> float:
        return sum(r.hours_saved for r in self.of("cancel"))

    @property
    def oldest_held_seconds(self) -> float:
        """Age of the oldest owned reservation still held after this run (0 when none)."""
        alive = [r.age_seconds for r in self.records if r.action != "cancel" or self.dry_run]
        return max(alive, default=0.0)

    @property
    def error_count(self) -> int:
        # A launch template version the sweep could not judge or delete is a failure of the
        # sweep like a cancel that failed: it stays until a sweep succeeds (and versions of a
        # shared template count toward EC2's 10,000-version quota meanwhile).
        return (
            len(self.of("failed"))
            + len(self.region_errors)
            + len(self.versions.errors)
            + len(self.ladder_errors)
        )

    @property
    def status(self) -> Literal["ok", "partial", "error"]:
        if self.regions and len(self.region_errors) >= len(self.regions):
            return "error"
        return "partial" if self.error_count else "ok"

    def response(self, request_id: str) -> CleanerResponse:
        cancelled = [
            CleanerItem(
                id=r.id, region=r.region, reason=r.reason, hours_saved=round(r.hours_saved, 4)
            )
            for r in self.of("cancel")
        ]
        kept = [CleanerItem(id=r.id, region=r.region, reason=r.reason) for r in self.of("keep")]
        errors = (
            [
                ItemError(
                    id=r.id,
                    region=r.region,
                    error_code=r.error_code,
                    message=f"could not cancel ({r.reason}): {r.message}"[:500],
                )
                for r in self.of("failed")
            ]
            + self.region_errors
            + self.versions.errors
            + self.ladder_errors
        )
        deleted = [
            CleanerItem(id=own.ref, region=self.region_of(own), reason=reason)
            for own, reason in self.versions.deleted
        ]
        return CleanerResponse(
            status=self.status,
            request_id=request_id,
            dry_run=self.dry_run,
            regions=self.regions,
            examined=self.examined,
            cancelled=cancelled,
            kept=kept,
            template_versions_deleted=deleted or None,
            errors=errors,
            template_version_errors=self.versions.errors or None,
            hours_saved=round(self.hours_saved, 4),
            interrupted=self.interrupted or None,
            ladder_nodes_terminated=self.ladder_nodes or None,
            ladder_errors=self.ladder_errors or None,
            message=(
                self._interrupted_message()
                if self.trigger == "interruption"
                else self._message(len(cancelled), len(kept), len(errors))
            ),
        )

    def _interrupted_message(self) -> str:
        if not self.interrupted:
            return "Interruption warning for no node of this cluster: nothing to do"
        node = self.interrupted[0]
        return (
            f"EC2 will stop {node.instance_id} (job {node.job_id or 'unknown'}, rung "
            f"{node.rung or 'unknown'}) at {node.termination_time or 'an unsaid time'}; the "
            "broker cancels nothing for it"
        )

    def region_of(self, own: version_rules.OwnVersion) -> str:
        return self.version_regions.get(own.ref, self.regions[0] if self.regions else "")

    def _message(self, cancelled: int, kept: int, errors: int) -> str:
        where = ", ".join(self.regions)
        verb = "would cancel" if self.dry_run else "cancelled"
        scope = (
            f"holds of stack {self.stack_name}" if self.trigger == "stack_event" else "reservations"
        )
        text = (
            f"{'Dry run: ' if self.dry_run else ''}examined {self.examined} owned {scope} in "
            f"{where}; {verb} {cancelled}, kept {kept}"
        )
        if self.versions.deleted:
            verb = "would delete" if self.dry_run else "deleted"
            text += f"; {verb} {len(self.versions.deleted)} launch template version(s)"
        if self.ladder_nodes:
            verb = "would terminate" if self.dry_run else "terminated"
            ladders = len({n.ladder for n in self.ladder_nodes})
            text += (
                f"; {verb} {len(self.ladder_nodes)} node(s) of {ladders} abandoned "
                "reserved-first ladder(s)"
            )
        if errors:
            text += f"; {errors} error{'s' if errors != 1 else ''} (the next sweep retries)"
        return text


class _Region:
    """The adapters and the reservation core for one region (built once per cleaner)."""

    def __init__(
        self,
        ec2: Ec2,
        launches: Launches,
        stacks: CloudFormation,
        cluster_id: str,
        clock: Callable[[], datetime],
        grace: timedelta,
        pool: ReservedPool | None = None,
    ) -> None:
        self.ec2 = ec2
        self.stacks = stacks
        # The cluster's reserved pool in this region: never cancelled, whatever its tags; its
        # idle instances are the sweep's metric.
        self.pool = pool
        self.core = ReservationCore(
            self.ec2, cluster_id, clock=clock, spares=pool.why_spared if pool is not None else None
        )
        self.templates = Templates(self.ec2, launches, cluster_id, clock=clock, grace=grace)


class Cleaner:
    def __init__(
        self,
        cluster_id: str,
        graces: Graces,
        *,
        ec2_for: Callable[[str], Ec2],
        launches_for: Callable[[str], Launches],
        stacks_for: Callable[[str], CloudFormation],
        clock: Callable[[], datetime] = utcnow,
        max_concurrency: int = 16,
        monotonic: Callable[[], float] = time.monotonic,
        pool_for: Callable[[str], ReservedPool] | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self.graces = graces
        # A region's reserved pool (issue 43), when the deployment names one.
        self.pool_for = pool_for
        # A region's EC2 (its launches too) and CloudFormation adapters (the root's: its
        # clients, pacer, retries).
        self.ec2_for = ec2_for
        self.launches_for = launches_for
        self.stacks_for = stacks_for
        self.clock = clock
        self.max_concurrency = max(1, max_concurrency)
        self.monotonic = monotonic
        self._regions: dict[str, _Region] = {}
        self._lock = threading.Lock()

    def region(self, name: str) -> _Region:
        with self._lock:
            found = self._regions.get(name)
            if found is None:
                found = self._regions[name] = _Region(
                    self.ec2_for(name),
                    self.launches_for(name),
                    self.stacks_for(name),
                    self.cluster_id,
                    self.clock,
                    self.graces.stack,
                    self.pool_for(name) if self.pool_for is not None else None,
                )
            return found

    # -- the sweep ------------------------------------------------------------------------

    def sweep(
        self, regions: Sequence[str], dry_run: bool, deadline: float, hard_deadline: float
    ) -> CleanerRun:
        run = CleanerRun("sweep", dry_run, list(regions))
        if not regions:
            return run
        with ThreadPoolExecutor(
            min(len(regions), MAX_REGION_WORKERS), thread_name_prefix="cleaner-region"
        ) as per_region:
            results = list(
                per_region.map(
                    lambda name: self._sweep_region(name, dry_run, deadline, hard_deadline),
                    regions,
                )
            )
        for name, (records, error, lookup_failures, deletion, ladders) in zip(
            regions, results, strict=True
        ):
            run.records.extend(records)
            run.ladder_nodes.extend(ladders.terminated)
            run.ladder_errors.extend(ladders.errors)
            run.lookup_failures += lookup_failures
            if error is not None:
                run.region_errors.append(error)
            run.versions.extend(deletion)
            for own, _ in deletion.deleted + deletion.kept:
                run.version_regions[own.ref] = name
            pool = self.region(name).pool
            if pool is not None and self.monotonic() < deadline:
                try:
                    run.pool_unused[name] = pool_rules.unused(pool.read(deadline))
                except BrokerFailure as failure:
                    run.region_errors.append(
                        ItemError(
                            region=name,
                            error_code=failure.error_code,
                            message=f"could not read the reserved pool: {failure.detail}"[:500],
                        )
                    )
        return run

    def _sweep_region(
        self, name: str, dry_run: bool, deadline: float, hard_deadline: float
    ) -> tuple[list[Record], ItemError | None, int, Deletion, Ladders]:
        region = self.region(name)
        try:
            listed = region.ec2.reservations(filters=self._owned_filter(), deadline=deadline)
        except AwsError as error:
            return [], _region_error(name, error), 0, Deletion(), Ladders()
        # A reservation of the cluster's reserved pool is never the broker's, whatever tags
        # it carries (``ReservationCore.owns``): not even examined.
        owned = [(r, held) for r, held in self._in_scope(listed) if region.core.owns(r)]
        # Each region its own pool (max_concurrency calls in flight per region): EC2's budget,
        # and the pacer's buckets, are per region. One pool shared by every region queued the
        # calls first come, first served, so its workers piled up waiting on one region's
        # tokens while the other regions' budgets went unused (a sweep then ran at about one
        # region's refill rate, not the sum of them).
        with ThreadPoolExecutor(
            self.max_concurrency, thread_name_prefix=f"cleaner-io-{name}"
        ) as io:
            stacks, failures = self._stack_states(region, owned, deadline, io)
            # One "now" for every decision of the region, taken after the facts were gathered:
            # an age is never overstated by the time the listing took.
            now = utc(self.clock())
            decided = [
                (reservation, held, rules.decide(held, _stack_of(held, stacks), now, self.graces))
                for reservation, held in owned
            ]
            records = self._act(region, decided, now, dry_run, deadline, hard_deadline, io)
            deletion = self._versions(region, dry_run, deadline, hard_deadline, io)
        ladders = self._ladders(region, dry_run, deadline, hard_deadline)
        return records, None, failures, deletion, ladders

    def _ladders(
        self, region: _Region, dry_run: bool, deadline: float, hard_deadline: float
    ) -> Ladders:
        """This cluster's reserved-first ladders in the region left half-done (no done
        record, and no invocation that can still finish them: ``abandoned_ladders``), their
        nodes terminated (unless dry run). Listed by EC2 with the cluster's exact id and the
        ladder tag (every page, under the adapters' pacing), and checked again here
        (``is_ladder_node``), since a filter is a convenience and not a guarantee."""
        name = region.ec2.region
        if self.monotonic() >= deadline:
            return Ladders()
        try:
            listed = region.ec2.tagged_instances(
                {TAG_CLUSTER_ID: [self.cluster_id], TAG_LADDER: [Prefix("")]},
                LIVE_STATES,
                deadline,
            )
        except AwsError as error:
            return Ladders(errors=[_ladder_error(name, None, error.code, error.message, "list")])
        # "now" after the listing: an age is never overstated by the time the listing took.
        now = utc(self.clock())
        nodes = [rules.LadderNode(i.instance_id, i.tags, i.launched) for i in listed]
        by_id = {i.instance_id: i for i in listed}
        found = Ladders()
        for ladder in rules.abandoned_ladders(nodes, self.cluster_id, now, self.graces.ladder):
            ended: set[str] = set(ladder.instance_ids)
            if not dry_run:
                try:
                    ended = set(region.ec2.terminate_instances(ladder.instance_ids, hard_deadline))
                except AwsError as error:
                    found.errors.append(
                        _ladder_error(name, ladder.ladder, error.code, error.message, "end")
                    )
                    continue
            for instance_id in ladder.instance_ids:
                if instance_id not in ended:
                    found.errors.append(
                        _ladder_error(
                            name,
                            ladder.ladder,
                            "TerminateUnconfirmed",
                            f"EC2 did not confirm ending {instance_id}",
                            "end",
                        )
                    )
                    continue
                found.terminated.append(
                    TerminatedNode(
                        instance_id=instance_id,
                        region=name,
                        ladder=ladder.ladder,
                        rung=by_id[instance_id].tags.get(TAG_RUNG),
                        reason=rules.ABANDONED_LADDER,
                        age_seconds=round(ladder.youngest_age.total_seconds(), 1),
                    )
                )
        return found

    def _versions(
        self, region: _Region, dry_run: bool, deadline: float, hard_deadline: float, io: Executor
    ) -> Deletion:
        """This cluster's launch template versions in the region, judged and (unless dry
        run) deleted. A failure is one error of the sweep; the next sweep tries again."""

        def stacks(names: Sequence[str]) -> dict[str, version_rules.StackFact]:
            facts = io.map(lambda n: self._stack_fact(region, n, deadline), names)
            return dict(zip(names, facts, strict=True))

        if self.monotonic() >= deadline:
            return Deletion()
        try:
            return region.templates.sweep(stacks, dry_run, deadline, hard_deadline)
        except AwsError as error:
            return Deletion(
                errors=[
                    ItemError(
                        region=region.ec2.region,
                        error_code=error.code or "RequestTimeout",
                        message="could not look over the cluster's launch template versions: "
                        f"{error.message}"[:500],
                    )
                ]
            )

    def _stack_fact(self, region: _Region, name: str, deadline: float) -> version_rules.StackFact:
        return _as_fact(self._current_stack(region, name, deadline))

    def _owned_filter(self) -> dict[str, list[str]]:
        """What EC2 is asked to list: this cluster's, with a purpose this broker writes (owned,
        ``is_owned``), active or pending. EC2 then neither sends nor parses the reservations
        that only carry the cluster id (another tool's, or a hand-made copy): at 600 owned among
        600 foreign ones, 750 listed instead of 900."""
        return {
            f"tag:{TAG_CLUSTER_ID}": [self.cluster_id],
            f"tag:{TAG_PURPOSE}": sorted(p.value for p in Purpose),
            "state": sorted(rules.ACTIVE_STATES),
        }

    def _in_scope(self, listed: Iterable[Reservation]) -> list[tuple[Reservation, Held]]:
        """Owned, active or pending, not a Capacity Block: checked here whatever the filter
        let through."""
        now = self.clock()
        return [
            (r, _held(r, now))
            for r in listed
            if rules.in_scope(r.tags, r.state, r.reservation_type, self.cluster_id)
        ]

    def _stack_states(
        self,
        region: _Region,
        owned: Sequence[tuple[Reservation, Held]],
        deadline: float,
        io: Executor,
    ) -> tuple[dict[str, StackState], int]:
        """Each distinct stack named by a hold, looked up once for the whole sweep."""
        names = sorted(
            {
                held.stack_name
                for _, held in owned
                if held.purpose is Purpose.HOLD and held.stack_name
            }
        )

        def lookup(stack_name: str) -> StackState:
            if self.monotonic() >= deadline:
                return STACK_UNKNOWN
            try:
                found = region.stacks.stack(stack_name, deadline)
            except AwsError:
                return STACK_UNKNOWN
            return found.status if isinstance(found, Stack) else found

        states = dict(zip(names, io.map(lookup, names), strict=True))
        return states, sum(1 for state in states.values() if state is STACK_UNKNOWN)

    # -- acting -----------------------------------------------------------------------------

    def _act(
        self,
        region: _Region,
        decided: Sequence[tuple[Reservation, Held, Decision]],
        now: datetime,
        dry_run: bool,
        deadline: float,
        hard_deadline: float,
        io: Executor,
    ) -> list[Record]:
        """Cancel what the decisions condemn (unless dry run), in parallel; keep the rest."""

        def one(item: tuple[Reservation, Held, Decision]) -> Record:
            reservation, held, decision = item
            age = max(0.0, (now - utc(held.created, "created")).total_seconds())

            def record(action: Action, **details: Any) -> Record:
                return Record(
                    id=held.id,
                    region=held.region,
                    action=action,
                    reason=decision.reason,
                    age_seconds=age,
                    **details,
                )

            if not decision.cancel:
                return record("keep")
            saved = rules.hours_saved(held, now)
            if dry_run:
                return record("cancel", hours_saved=saved)
            if self.monotonic() >= deadline:
                return record(
                    "failed",
                    error_code="DeadlineExceeded",
                    message="not attempted: the invocation ran out of time",
                )
            try:
                # No waiting for EC2 to let a cancel through (a reservation still pending): the
                # cancel is reported as failed, and the next sweep asks again.
                region.core.release(reservation, hard_deadline, patience=0)
            except BrokerFailure as failure:  # AWS's error; NotOwned (never: in_scope said owned)
                stopped = item_error(failure)
                return record("failed", error_code=stopped.error_code, message=stopped.message)
            return record("cancel", hours_saved=saved)

        records = list(io.map(one, decided))
        return sorted(records, key=lambda r: r.id)

    # -- a stack status change --------------------------------------------------------------

    def interruption(
        self, region: str, instance_id: str, termination_time: str | None, deadline: float
    ) -> CleanerRun:
        """An interruption warning (``domain.pool.is_interruption_warning``): when the node is
        this cluster's, which job and rung it served, for the log, the metric and the answer.
        Nothing is cancelled: the reservation under it is not the broker's to end (a pool's),
        and EC2 stops the node itself."""
        run = CleanerRun("interruption", False, [region])
        try:
            found = self.region(region).ec2.known_instances([instance_id], deadline)
        except AwsError as error:
            run.region_errors.append(_region_error(region, error))
            return run
        instance = found.get(instance_id)
        if instance is None or instance.tags.get(TAG_CLUSTER_ID) != self.cluster_id:
            return run
        run.interrupted.append(
            InterruptedNode(
                instance_id=instance_id,
                region=region,
                job_id=instance.tags.get(TAG_JOB_ID),
                rung=instance.tags.get(TAG_RUNG),
                capacity_reservation_id=instance.capacity_reservation_id,
                termination_time=termination_time,
            )
        )
        return run

    def stack_event(
        self,
        region_name: str,
        stack_id: str,
        stack_name: str,
        status: str,
        event_time: datetime | None,
        deadline: float,
        hard_deadline: float,
    ) -> CleanerRun:
        """Act at once on the holds tagged with ``stack_name`` in ``region_name``.

        ``on_stack_event`` decides (consumed, orphaned, or nothing while in progress). One
        guard: EventBridge may deliver an event late (the rule retries for an hour) and a job's
        stack name can be reused once the old stack is gone. When CloudFormation shows, under
        that name, another stack created after the event, the event is about its predecessor:
        the current stack's status speaks for the holds instead.
        """
        run = CleanerRun("stack_event", False, [region_name], stack_name=stack_name)
        region = self.region(region_name)
        try:
            listed = region.core.look_again_while_untagged(
                lambda: region.ec2.reservations(
                    filters={**self._owned_filter(), f"tag:{TAG_STACK_NAME}": [stack_name]},
                    deadline=deadline,
                ),
                deadline,
            )
        except AwsError as error:
            run.region_errors.append(_region_error(region_name, error))
            return run
        holds = [
            (r, held)
            for r, held in self._in_scope(listed)
            if held.purpose is Purpose.HOLD and held.stack_name == stack_name
        ]
        reason = rules.on_stack_event(status)
        why_kept = f"stack {status.strip().upper()}"
        if reason is not None and holds and event_time is not None:
            newer = _newer(self._current_stack(region, stack_name, deadline), stack_id, event_time)
            if newer is not None:
                reason = rules.on_stack_event(newer.status)
                why_kept = f"stack {newer.status} (a newer stack of that name)"
        decision = Decision.cancel_for(reason) if reason is not None else Decision.keep(why_kept)
        now = utc(self.clock())
        decided = [(r, held, rules.never_cancelled(held, now) or decision) for r, held in holds]
        with ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="cleaner-io") as io:
            run.records = self._act(
                region,
                decided,
                now,
                False,
                deadline,
                hard_deadline,
                io,
            )
        if status.strip().upper() == "DELETE_COMPLETE":
            # The stack's versions go with it, unless a stack of that name exists again (a
            # late event about a predecessor): what CloudFormation shows now decides.
            current = _as_fact(self._current_stack(region, stack_name, deadline))
            # Gone by name, and the event says deleted: deleted (no grace for "not seen yet").
            fact = "DELETE_COMPLETE" if current is version_rules.GONE else current
            try:
                run.versions = region.templates.stack_deleted(
                    stack_name, fact, deadline, hard_deadline
                )
            except AwsError as error:
                run.versions = Deletion(
                    errors=[
                        ItemError(
                            region=region_name,
                            error_code=error.code or "RequestTimeout",
                            message="could not look over the stack's launch template versions: "
                            f"{error.message}"[:500],
                        )
                    ]
                )
        return run

    def _current_stack(
        self, region: _Region, stack_name: str, deadline: float
    ) -> Stack | rules.StackLookup:
        """The stack under this name now; a failed lookup defers to the event (UNKNOWN)."""
        try:
            return region.stacks.stack(stack_name, deadline)
        except AwsError:
            return STACK_UNKNOWN


def _as_fact(found: Stack | rules.StackLookup) -> version_rules.StackFact:
    """A stack lookup as the version rules read it: its status, gone, or unknown (None)."""
    if isinstance(found, Stack):
        return found.status
    return version_rules.GONE if found is STACK_MISSING else None


def _held(reservation: Reservation, now: datetime) -> Held:
    purpose = purpose_of(reservation.tags)
    if purpose is None:  # in_scope guarantees a purpose; this keeps the type checker honest
        raise ValueError(f"{reservation.id} has no purpose tag")
    # Nothing can run in a pending reservation; whatever EC2 reports as available meanwhile,
    # a pending hold is never "consumed".
    used = 0 if reservation.state == "pending" else max(0, reservation.used_count)
    return Held(
        id=reservation.id,
        region=reservation.region,
        purpose=purpose,
        state=reservation.state,
        # EC2 always sends CreateDate; without one, "brand new" is the side that spares.
        created=reservation.created or reservation.start_date or now,
        end_date=reservation.end_date,
        stack_name=reservation.tags.get(TAG_STACK_NAME) or None,
        instance_count=reservation.total_count,
        used_count=used,
        reservation_type=reservation.reservation_type or "default",
        commitment_end=reservation.commitment_end,
        commitment_seconds=reservation.commitment_seconds,
    )


def _newer(current: Stack | rules.StackLookup, stack_id: str, event_time: datetime) -> Stack | None:
    """``current`` when it is another stack of the same name, created after the event."""
    if (
        isinstance(current, Stack)
        and current.stack_id != stack_id
        and current.created is not None
        and utc(current.created, "CreationTime") > utc(event_time, "event time")
    ):
        return current
    return None


def _stack_of(held: Held, stacks: dict[str, StackState]) -> StackState:
    if held.purpose is Purpose.HOLD and held.stack_name:
        return stacks.get(held.stack_name, STACK_UNKNOWN)
    return None


@dataclass
class Ladders:
    """What a region's sweep did to half-done ladders."""

    terminated: list[TerminatedNode] = field(default_factory=list)
    errors: list[ItemError] = field(default_factory=list)


def _ladder_error(
    region: str, ladder: str | None, code: str | None, message: str, what: str
) -> ItemError:
    doing = "list the cluster's ladder nodes" if what == "list" else f"end ladder {ladder}"
    return ItemError(
        id=ladder,
        region=region,
        error_code=code or "RequestTimeout",
        message=f"could not {doing}: {message}"[:500],
    )


def _region_error(region: str, error: AwsError) -> ItemError:
    return ItemError(
        region=region,
        error_code=error.code or "RequestTimeout",
        message=f"could not list the reservations of {region}: {error.message}"[:500],
    )


REASON_METRICS: dict[str, str] = {
    CancelReason.PAST_END_DATE: "CancelledPastEndDate",
    CancelReason.LEAKED_PROBE: "CancelledLeakedProbe",
    CancelReason.CONSUMED: "CancelledConsumed",
    CancelReason.ORPHANED: "CancelledOrphaned",
    CancelReason.IDLE: "CancelledIdle",
    CancelReason.STALE: "CancelledStale",
}

__all__ = [
    "REASON_METRICS",
    "Cleaner",
    "CleanerRun",
    "Record",
]
