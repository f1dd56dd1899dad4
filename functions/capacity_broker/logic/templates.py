"""The launch template versions of one cluster in one region: which version a request builds
on, making the job's version exactly once per request, and deleting versions nothing can
launch from any more. The rules are ``domain.templates`` and ``domain.reserve``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ..adapters.aws import AwsError
from ..adapters.ec2 import Ec2, Reservation
from ..adapters.ec2.launches import Launches, TemplateVersion
from ..domain import templates as rules
from ..domain.failures import Refused
from ..domain.templates import GONE, OwnVersion, StackFact, TargetFact, Verdict, Version

if TYPE_CHECKING:  # made where versions are deleted (release, the cleaner), never by reserve
    from ..models.item_error import ItemError

# Version windows read newest first, 200 at a time; past this many the search gives up (a
# template holds at most 10,000 versions: EC2 quota).
MAX_WINDOWS = 50
# An earlier invocation's version is among the newest: a template that gained more than this
# many versions since is not searched further (the ClientToken still refuses a second one).
FIND_WINDOWS = 5
# How long after a create the version may not show in a describe yet (EC2 is eventually
# consistent), and how often to look meanwhile.
FIND_TRIES = 4
FIND_PAUSE = 0.5
# Young versions are spared "not found" verdicts (a stack not created yet, a reservation
# EC2 does not show yet).
GRACE = timedelta(minutes=3)
# Reservation ids per DescribeCapacityReservations call.
IDS_PER_CALL = 100
# What EC2 answers for an id it does not know (or that is not an id): the reservation is gone.
_UNKNOWN_ID = frozenset(
    {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"}
)


def utcnow() -> datetime:
    return datetime.now(UTC)


class TemplateRefused(Refused):
    """The job's template is not this cluster's to use (``domain.templates.template_refusal``)."""


@dataclass
class Deletion:
    """What a clean-up did to this cluster's versions."""

    deleted: list[tuple[OwnVersion, str]] = field(default_factory=list)
    kept: list[tuple[OwnVersion, str]] = field(default_factory=list)
    errors: list[ItemError] = field(default_factory=list)

    def extend(self, other: Deletion) -> None:
        self.deleted += other.deleted
        self.kept += other.kept
        self.errors += other.errors


class Templates:
    def __init__(
        self,
        ec2: Ec2,
        launches: Launches,
        cluster_id: str,
        clock: Callable[[], datetime] = utcnow,
        grace: timedelta = GRACE,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ec2 = ec2
        self.launches = launches
        self.cluster_id = cluster_id
        self.clock = clock
        self.grace = grace
        self.sleep = sleep
        self.monotonic = monotonic

    # -- the version a request builds on ------------------------------------------------
    def source(self, template_id: str, version: str, deadline: float) -> Version:
        """The source version: the number given, the default, or for ``$Latest`` the newest
        version no broker made (``domain.templates.newest_user_version``).

        First of all the template must be this cluster's (``TemplateRefused`` otherwise): a
        request builds on it to write a version into it. A ``Templates`` without a cluster id
        (``slurm check`` of a deployed broker, whose cluster id it does not know) skips that."""
        template = self.launches.launch_template(template_id, deadline)
        refusal = (
            rules.template_refusal(template_id, template.tags, self.cluster_id)
            if self.cluster_id
            else None
        )
        if refusal is not None:
            raise TemplateRefused(refusal)
        if version != "$Latest":
            found = self.launches.template_versions(
                template_id, numbers=[version], deadline=deadline
            )
            if not found:  # EC2 answers InvalidLaunchTemplateId.VersionNotFound; some []
                raise AwsError(
                    "DescribeLaunchTemplateVersions",
                    "InvalidLaunchTemplateId.VersionNotFound",
                    f"version {version} of {template_id} does not exist",
                )
            return found[0]
        for window in self._windows(template.latest, MAX_WINDOWS):
            chosen = rules.newest_user_version(
                self.launches.template_versions(
                    template_id, after=window[0], up_to=window[1], deadline=deadline
                )
            )
            if chosen is not None:
                return chosen
        raise AwsError(
            "DescribeLaunchTemplateVersions",
            "InvalidLaunchTemplateId.VersionNotFound",
            f"{template_id} has no version the broker did not make to build on",
        )

    @staticmethod
    def _windows(top: int, count: int) -> Iterable[tuple[int, int]]:
        """(after, up_to] windows of 200 versions, newest first."""
        up_to = top
        for _ in range(count):
            if up_to < 1:
                return
            yield max(0, up_to - 200), up_to
            up_to -= 200

    # -- the job's version ----------------------------------------------------------------
    def make(
        self,
        template_id: str,
        source: Version,
        reservation: Reservation,
        request_id: str,
        job_id: str,
        stack_name: str | None,
        client_token: str,
        deadline: float,
    ) -> TemplateVersion:
        """The job's version, made once per (request, reservation).

        A retry sends EC2 the same parameters under the same ClientToken (the source is
        resolved the same way, the description and data are deterministic) and gets the
        version the first invocation made, also when the first answer was lost. When EC2 says
        the token was used with other parameters (the job's ``$Latest``/``$Default`` moved
        between the invocations), the version the earlier invocation made is looked up by its
        description and answered: the request builds on, and answers, one version.
        """
        # Only a reserve makes a version, and its flow has the reserve's rules loaded already:
        # the cleaner and release, which only delete versions, never load them (cold imports).
        from ..domain.reserve import template_version_data

        wanted = template_version_data(
            reservation.id,
            reservation.reservation_type == "capacity-block",
            reservation.tenancy,
            reservation.placement_group_arn,
            source.data,
        )
        try:
            return self.launches.create_template_version(
                template_id,
                source.number if wanted.inherit else None,
                wanted.data,
                rules.description(
                    self.cluster_id, template_id, reservation.id, request_id, job_id, stack_name
                ),
                client_token,
                deadline,
            )
        except AwsError as error:
            if error.code != "IdempotentParameterMismatch":
                raise
            mismatch = error
        earlier = self._find_made(template_id, request_id, reservation.id, deadline)
        if earlier is None:
            raise AwsError(
                "CreateLaunchTemplateVersion",
                mismatch.code,
                "this request made a version of the template before, with another source "
                "version, and it cannot be seen yet; ask again shortly",
                mismatch.status,
            )
        return TemplateVersion(template_id, earlier.version.number)

    def _find_made(
        self, template_id: str, request_id: str, reservation_id: str, deadline: float
    ) -> OwnVersion | None:
        for attempt in range(FIND_TRIES):
            top = self.launches.launch_template(template_id, deadline).latest
            for after, up_to in self._windows(top, FIND_WINDOWS):
                for version in self.launches.template_versions(
                    template_id, after=after, up_to=up_to, deadline=deadline
                ):
                    own = rules.owned(version, self.cluster_id)
                    if own is not None and rules.made_for(own, request_id, reservation_id):
                        return own
            if attempt + 1 < FIND_TRIES and self.monotonic() + FIND_PAUSE < deadline:
                self.sleep(FIND_PAUSE * (attempt + 1))
            else:
                break
        return None

    # -- deletion -------------------------------------------------------------------------
    def own_versions(self, deadline: float) -> list[OwnVersion]:
        """This cluster's versions in the templates tagged as this cluster's."""
        found: list[OwnVersion] = []
        for template_id in self.launches.cluster_templates(self.cluster_id, deadline):
            for version in self.launches.template_versions(template_id, deadline=deadline):
                own = rules.owned(version, self.cluster_id)
                if own is not None:
                    found.append(own)
        return found

    def released(
        self, selector: str, value: str, deadline: float, hard_deadline: float
    ) -> Deletion:
        """``release`` by job or by reservation: that job's (or reservation's) versions
        without a stack go; versions made for a stack wait for the stack to be deleted."""
        if selector == "job_id":
            key = rules.job_digest(value)
            mine = [v for v in self.own_versions(deadline) if v.marked.job == key]
        elif selector == "reservation_id":
            mine = [v for v in self.own_versions(deadline) if v.target == value]
        else:
            return Deletion()
        now = self.clock()
        return self.apply(
            [(v, rules.version_verdict(v, now, self.grace, released=True)) for v in mine],
            hard_deadline,
        )

    def stack_deleted(
        self, stack_name: str, stack: StackFact, deadline: float, hard_deadline: float
    ) -> Deletion:
        """A stack status change: the stack's versions, judged by what the stack is now."""
        key = rules.stack_digest(stack_name)
        mine = [v for v in self.own_versions(deadline) if v.marked.stack == key]
        now = self.clock()
        return self.apply(
            [(v, rules.version_verdict(v, now, self.grace, stack=stack)) for v in mine],
            hard_deadline,
        )

    def sweep(
        self,
        stacks: Callable[[Sequence[str]], dict[str, StackFact]],
        dry_run: bool,
        deadline: float,
        hard_deadline: float,
    ) -> Deletion:
        """Every version of this cluster, judged by its stack or by its reservation."""
        mine = self.own_versions(deadline)
        stack_facts = stacks(sorted({v.marked.stack_name for v in mine if v.marked.stack_name}))
        targets, unread = self._target_states(
            sorted({v.target for v in mine if v.marked.stack == rules.NO_STACK}), deadline
        )
        now = self.clock()
        judged = [
            (
                v,
                rules.version_verdict(
                    v,
                    now,
                    self.grace,
                    stack=stack_facts.get(v.marked.stack_name) if v.marked.stack_name else None,
                    target=targets.get(v.target),
                ),
            )
            for v in mine
        ]
        if dry_run:
            outcome = Deletion(errors=unread)
            for own, verdict in judged:
                (outcome.deleted if verdict.delete else outcome.kept).append((own, verdict.reason))
            return outcome
        outcome = self.apply(judged, hard_deadline)
        outcome.errors[:0] = unread
        return outcome

    def _target_states(
        self, ids: Sequence[str], deadline: float
    ) -> tuple[dict[str, TargetFact], list[ItemError]]:
        """Each reservation's state, or GONE when EC2 no longer knows it, and what could not
        be asked (its versions are kept: nothing is concluded).

        Asked by id (``CapacityReservationIds``, 100 a call): DescribeCapacityReservations has
        no id filter (its documented filters name none, and EC2 refuses an unknown one). One
        unknown id fails the whole call (``InvalidCapacityReservationId.NotFound``, EC2 API
        Reference), so a chunk that fails so is halved until the unknown id is alone."""
        from ..models.item_error import ItemError  # see ``apply``

        states: dict[str, TargetFact] = {}
        errors: list[ItemError] = []

        def ask(chunk: list[str]) -> None:
            try:
                seen = self.ec2.reservations(ids=chunk, deadline=deadline)
            except AwsError as error:
                if error.code not in _UNKNOWN_ID:
                    errors.extend(
                        ItemError(
                            id=rid,
                            region=self.ec2.region,
                            error_code=error.code or "RequestTimeout",
                            message="could not read the reservation the broker's launch "
                            "template versions target (they are kept until it can be read): "
                            f"{error.message}"[:500],
                        )
                        for rid in chunk
                    )
                    return
                if len(chunk) == 1:
                    states[chunk[0]] = GONE
                    return
                half = len(chunk) // 2
                ask(chunk[:half])
                ask(chunk[half:])
                return
            by_id = {r.id: r.state for r in seen}
            for rid in chunk:
                states[rid] = by_id.get(rid, GONE)

        for start in range(0, len(ids), IDS_PER_CALL):
            ask(list(ids[start : start + IDS_PER_CALL]))
        return states, errors

    def apply(self, judged: Sequence[tuple[OwnVersion, Verdict]], hard_deadline: float) -> Deletion:
        """Delete the condemned versions (per template, 200 per call); a version EC2 no
        longer has counts as deleted."""
        # Imported here: only release and the cleaner delete versions (their answers' models
        # have imported it); reserve, which makes versions through this module, never builds it.
        from ..models.item_error import ItemError

        outcome = Deletion()
        condemned: dict[str, list[tuple[OwnVersion, str]]] = {}
        for own, verdict in judged:
            if verdict.delete and not own.version.is_default:
                condemned.setdefault(own.version.template_id, []).append((own, verdict.reason))
            else:
                outcome.kept.append((own, verdict.reason))
        for template_id, items in condemned.items():
            by_number = {own.version.number: (own, reason) for own, reason in items}
            try:
                deleted, refused = self.launches.delete_template_versions(
                    template_id, list(by_number), hard_deadline
                )
            except AwsError as error:
                outcome.errors += [
                    ItemError(
                        id=own.ref,
                        region=self.ec2.region,
                        error_code=error.code or "RequestTimeout",
                        message=f"could not delete ({reason}): {error.message}"[:500],
                    )
                    for own, reason in items
                ]
                continue
            outcome.deleted += [by_number[n] for n in deleted if n in by_number]
            for item in refused:
                if item.number not in by_number:
                    continue
                own, reason = by_number[item.number]
                if item.code == "launchTemplateVersionDoesNotExist":
                    outcome.deleted.append((own, reason))  # gone already
                else:
                    outcome.errors.append(
                        ItemError(
                            id=own.ref,
                            region=self.ec2.region,
                            error_code=item.code,
                            message=f"could not delete ({reason}): {item.message}"[:500],
                        )
                    )
        return outcome
