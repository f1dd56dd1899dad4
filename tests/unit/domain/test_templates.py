"""How the broker knows its own launch template versions, which version a request builds on,
and when a version may be deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from capacity_broker.domain import templates as rules
from capacity_broker.domain.templates import GONE, Version
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
GRACE = timedelta(minutes=3)
CLUSTER = "hpc-prod"
TEMPLATE = "lt-0123456789abcdef0"
HOLD = "cr-0123456789abcdef0"


def targeting(reservation_id: str = HOLD) -> dict[str, object]:
    return {
        "CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id},
        }
    }


def made(
    number: int = 8,
    *,
    stack: str | None = None,
    job: str = "1234",
    request: str = "job-1234-a1",
    cluster: str = CLUSTER,
    target: str = HOLD,
    created: datetime = NOW - timedelta(hours=1),
    default: bool = False,
) -> Version:
    return Version(
        template_id=TEMPLATE,
        number=number,
        description=rules.description(cluster, TEMPLATE, target, request, job, stack),
        data=targeting(target),
        is_default=default,
        created=created,
    )


def test_the_description_names_the_job_and_fits_ec2() -> None:
    text = rules.description(CLUSTER, TEMPLATE, HOLD, "r" * 128, "j" * 128, "s" * 128)
    assert len(text) <= 255
    assert "capacity-broker stack=" + "s" * 128 in text
    short = rules.description(CLUSTER, TEMPLATE, HOLD, "job-1234-a1", "1234", None)
    assert short.endswith("capacity-broker job=1234 hold=" + HOLD)


def test_the_marker_survives_long_names_and_reads_back() -> None:
    version = made(stack="s" * 128, job="j" * 128, request="r" * 128)
    own = rules.owned(version, CLUSTER)
    assert own is not None
    assert own.marked.stack_name == "s" * 128
    assert own.marked.job == rules.job_digest("j" * 128)
    assert rules.made_for(own, "r" * 128, HOLD)
    assert not rules.made_for(own, "r" * 127, HOLD)
    assert not rules.made_for(own, "r" * 128, "cr-0fffffffffffffff0")


def test_only_this_clusters_versions_for_their_own_target_are_owned() -> None:
    assert rules.owned(made(), CLUSTER) is not None
    assert rules.owned(made(cluster="other"), CLUSTER) is None
    # A copy with another target, or the marker pasted onto a user's version, is not ours.
    copied = made()
    moved = Version(TEMPLATE, 9, copied.description, targeting("cr-0fffffffffffffff0"))
    assert rules.owned(moved, CLUSTER) is None
    assert rules.owned(Version(TEMPLATE, 9, copied.description, {}), CLUSTER) is None
    for text in (None, "", "job 1234", "cb1:zz:zz:zz:zz capacity-broker", "cb1:1:2 x"):
        assert rules.owned(Version(TEMPLATE, 9, text, targeting()), CLUSTER) is None


@given(st.text(max_size=255))
def test_no_user_description_is_taken_for_a_broker_marker(text: str) -> None:
    version = Version(TEMPLATE, 3, text, targeting())
    assert rules.owned(version, CLUSTER) is None


def test_latest_is_the_newest_version_no_broker_made() -> None:
    user = [Version(TEMPLATE, n, f"user {n}", {"ImageId": "ami-1"}) for n in (1, 2, 4)]
    broker = [made(3), made(5, cluster="another-cluster"), made(6)]
    assert rules.newest_user_version(user + broker) == user[-1]
    assert rules.newest_user_version(broker) is None


def verdict(version: Version, **facts: object) -> rules.Verdict:
    own = rules.owned(version, CLUSTER)
    assert own is not None
    return rules.version_verdict(own, NOW, GRACE, **facts)  # type: ignore[arg-type]


def test_the_default_version_is_never_deleted() -> None:
    for facts in ({"released": True}, {"target": "cancelled"}, {"stack": GONE}):
        assert not verdict(
            made(default=True, stack="s" if "stack" in facts else None), **facts
        ).delete


def test_a_stack_version_goes_only_with_its_stack() -> None:
    version = made(stack="soca-job-1234")
    assert verdict(version, stack=GONE) == rules.Verdict(True, "stack deleted")
    assert verdict(version, stack="DELETE_COMPLETE").delete
    for status in ("CREATE_COMPLETE", "CREATE_IN_PROGRESS", "DELETE_IN_PROGRESS", None):
        assert not verdict(version, stack=status).delete
    # Released without its stack deleted: the stack may still launch from it.
    assert not verdict(version, released=True, target="cancelled").delete
    # A stack not seen yet, for a version made a moment ago: not concluded.
    assert not verdict(
        made(stack="soca-job-1234", created=NOW - timedelta(minutes=1)), stack=GONE
    ).delete


def test_a_version_without_a_stack_goes_when_nothing_can_launch_from_it() -> None:
    version = made()
    assert verdict(version, released=True) == rules.Verdict(True, "job released")
    for state in ("cancelled", "expired", "failed"):
        assert verdict(version, target=state).delete
    assert verdict(version, target=GONE).delete
    for state in ("active", "pending", "scheduled", None):
        assert not verdict(version, target=state).delete
    young = made(created=NOW - timedelta(seconds=30))
    assert not verdict(young, target=GONE).delete  # EC2 may not show a new hold yet
    assert verdict(young, target="cancelled").delete


@pytest.mark.parametrize("name", [None, "soca-job-1"])
def test_stack_digests_tell_stacks_apart(name: str | None) -> None:
    assert rules.stack_digest(name) != rules.stack_digest("soca-job-2")
