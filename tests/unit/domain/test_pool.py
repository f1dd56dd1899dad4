"""The reserved pool's rules (issue 43): what a pool covers of a job, in which order, and what is
never a pool's to give."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from capacity_broker.domain.pool import (
    PoolReservation,
    excluded,
    kind_of,
    plan,
    unused,
)
from capacity_broker.domain.pool_spec import PoolSpec, PoolSpecError, Rung
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)
ZONES = ["use1-az1", "use1-az2", "use1-az4"]


def r(
    rid: str,
    available: int,
    zone: str = "use1-az1",
    kind: Rung = Rung.ODCR,
    instance_type: str = "c7i.48xlarge",
    platform: str = "Linux/UNIX",
    tenancy: str = "default",
    state: str = "active",
    tags: dict[str, str] | None = None,
    end: datetime | None = None,
) -> PoolReservation:
    return PoolReservation(
        id=rid,
        kind=kind,
        instance_type=instance_type,
        availability_zone=f"zone-of-{zone}",
        availability_zone_id=zone,
        platform=platform,
        tenancy=tenancy,
        total=max(available, 1),
        available=available,
        state=state,
        end_date=end,
        tags=tags or {},
    )


def test_the_pool_is_taken_in_the_operators_priority_then_the_jobs_types() -> None:
    pool = [
        r("cr-interruptible", 4, kind=Rung.INTERRUPTIBLE),
        r("cr-block", 2, kind=Rung.CAPACITY_BLOCK),
        r("cr-odcr-second-type", 2, instance_type="hpc7a.96xlarge"),
        r("cr-odcr", 1),
    ]
    got = plan(pool, ["c7i.48xlarge", "hpc7a.96xlarge"], ZONES, "Linux/UNIX", "default", 5)
    assert [(u.reservation.id, u.count) for u in got.uses] == [
        ("cr-odcr", 1),
        ("cr-odcr-second-type", 2),
        ("cr-block", 2),
    ]
    assert got.shortfall == 0 and got.subnet_index == 0


def test_a_configured_priority_changes_the_order_and_leaves_out_what_it_does_not_name() -> None:
    pool = [r("cr-odcr", 3), r("cr-interruptible", 3, kind=Rung.INTERRUPTIBLE)]
    got = plan(pool, ["c7i.48xlarge"], ZONES, "Linux/UNIX", "default", 4, (Rung.INTERRUPTIBLE,))
    assert [(u.reservation.id, u.count) for u in got.uses] == [("cr-interruptible", 3)]
    assert got.shortfall == 1


def test_only_matching_reservations_count() -> None:
    pool = [
        r("cr-windows", 8, platform="Windows"),
        r("cr-dedicated", 8, tenancy="dedicated"),
        r("cr-other-type", 8, instance_type="m7i.large"),
        r("cr-empty", 0),
        r("cr-ok", 2),
    ]
    got = plan(pool, ["c7i.48xlarge"], ZONES, "Linux/UNIX", "default", 4)
    assert [u.reservation.id for u in got.uses] == ["cr-ok"]
    assert got.shortfall == 2


def test_the_job_stays_in_the_one_az_the_pool_covers_most() -> None:
    pool = [r("cr-a", 1, zone="use1-az1"), r("cr-b", 3, zone="use1-az2"), r("cr-c", 2, "use1-az2")]
    got = plan(pool, ["c7i.48xlarge"], ZONES, "Linux/UNIX", "default", 4)
    assert got.subnet_index == 1
    assert {u.reservation.availability_zone_id for u in got.uses} == {"use1-az2"}
    assert got.covered == 4


def test_ties_go_to_the_requests_order_and_nothing_covered_is_no_subnet() -> None:
    pool = [r("cr-a", 2, zone="use1-az4"), r("cr-b", 2, zone="use1-az2")]
    assert plan(pool, ["c7i.48xlarge"], ZONES, "Linux/UNIX", "default", 2).subnet_index == 1
    none = plan([], ["c7i.48xlarge"], ZONES, "Linux/UNIX", "default", 3)
    assert (none.subnet_index, none.uses, none.shortfall) == (None, (), 3)


def test_a_broker_hold_or_another_clusters_reservation_is_never_a_pools() -> None:
    hold = r("cr-h", 1, tags={"capacity-broker:purpose": "hold"})
    assert excluded(hold, "hpc", NOW) == "a broker hold, not a pool reservation"
    other = r("cr-o", 1, tags={"capacity-broker:cluster-id": "other"})
    assert excluded(other, "hpc", NOW) == "tagged for cluster 'other'"
    assert excluded(r("cr-p", 1, state="pending"), "hpc", NOW) == "state pending"
    assert excluded(r("cr-fine", 1, tags={"team": "cfd"}), "hpc", NOW) is None


def test_a_block_is_used_only_while_a_run_can_finish_before_ec2_stops_it() -> None:
    block = r("cr-b", 2, kind=Rung.CAPACITY_BLOCK, end=NOW + timedelta(minutes=50))
    assert excluded(block, "hpc", NOW) is None  # 20 usable minutes left
    assert excluded(block, "hpc", NOW, timedelta(minutes=30)) is not None
    ending = r("cr-e", 2, kind=Rung.CAPACITY_BLOCK, end=NOW + timedelta(minutes=25))
    assert excluded(ending, "hpc", NOW) is not None


def test_kinds_and_unused() -> None:
    assert kind_of("capacity-block", False) is Rung.CAPACITY_BLOCK
    assert kind_of("default", True) is Rung.INTERRUPTIBLE
    assert kind_of("default", False) is Rung.ODCR
    assert unused([r("a", 2), r("b", 3, state="cancelled"), r("c", 1)]) == 3


def test_pool_settings_are_parsed_or_refused() -> None:
    spec = PoolSpec.parse(["hpc-pool", " "], "hpc-pool = prod", ["interruptible", "odcr"])
    assert spec.groups == ("hpc-pool",)
    assert (spec.tag_key, spec.tag_value) == ("hpc-pool", "prod")
    assert spec.priority == (Rung.INTERRUPTIBLE, Rung.ODCR)
    assert PoolSpec.parse().empty
    assert PoolSpec.parse((), "k" * 127 + "=" + "v" * 255).tag_key == "k" * 127
    for tag, priority in (
        ("no-equals", None),
        ("capacity-broker:purpose=hold", None),
        ("k=v", ["odcr", "odcr"]),
        ("k=v", ["hold"]),
        ("k=v", []),
        # No reservation can carry a tag EC2 refuses: an empty pool, never a silent one.
        ("k" * 128 + "=v", None),
        ("k=" + "v" * 256, None),
    ):
        with pytest.raises(PoolSpecError):
            PoolSpec.parse((), tag, priority)


reservations = st.lists(
    st.builds(
        r,
        rid=st.text("abcdef0123456789", min_size=4, max_size=8).map(lambda t: f"cr-{t}"),
        available=st.integers(0, 6),
        zone=st.sampled_from(ZONES),
        kind=st.sampled_from(list(Rung)[:3]),
        instance_type=st.sampled_from(["c7i.48xlarge", "hpc7a.96xlarge", "m7i.large"]),
        platform=st.sampled_from(["Linux/UNIX", "Windows"]),
    ),
    max_size=8,
    unique_by=lambda x: x.id,
)


@given(reservations, st.integers(1, 30))
def test_a_plan_never_promises_more_than_the_pool_has_or_the_job_asks(
    pool: list[PoolReservation], count: int
) -> None:
    types = ["c7i.48xlarge", "hpc7a.96xlarge"]
    got = plan(pool, types, ZONES, "Linux/UNIX", "default", count)
    assert got.covered + got.shortfall == count
    assert all(0 < u.count <= u.reservation.available for u in got.uses)
    assert len({u.reservation.id for u in got.uses}) == len(got.uses)
    assert all(
        u.reservation.instance_type in types and u.reservation.platform == "Linux/UNIX"
        for u in got.uses
    )
    if got.uses:
        assert got.subnet_index is not None
        assert {u.reservation.availability_zone_id for u in got.uses} == {ZONES[got.subnet_index]}
    # No AZ's matching pool would cover more.
    for zone in ZONES:
        free = sum(
            x.available
            for x in pool
            if x.availability_zone_id == zone
            and x.instance_type in types
            and x.platform == "Linux/UNIX"
        )
        assert got.covered >= min(free, count)
