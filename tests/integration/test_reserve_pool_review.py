"""Adversarial review of reserved-first (issue 43): attacks on the ladder through the handlers."""

from __future__ import annotations

from typing import Any

import pytest
from capacity_broker.handlers.reserve import handler as reserve

from emulator import Emulator
from tests.integration.test_reserve_pool import (
    POOL_ODCR,
    ec2,
    fail_fleets_of,
    instances,
    job,
    ladder_instances,
    live,
    pool,  # noqa: F401  (fixture)
    reservation,
)

pytestmark = pytest.mark.integration

USER_ODCR = "cr-0eeeeeeeeeeeeeee1"  # team=cfd, 8 hpc7a in us-east-1b: not any pool's


@pytest.mark.parametrize("tag", ["team=*", "team=cf?", "team=c*", "hpc-pool=*"])
def test_a_pool_tag_value_is_never_a_pattern(pool: Any, context: Any, tag: str) -> None:  # noqa: F811
    answer = reserve(job(request_id="pool-wild", instance_count=2, pool={"tag": tag}), context)
    used = {p["reservation_id"] for p in answer.get("pool") or []}
    assert USER_ODCR not in used, answer
    assert POOL_ODCR not in used, answer
    assert reservation(USER_ODCR)["AvailableInstanceCount"] == 8
    assert reservation(POOL_ODCR)["AvailableInstanceCount"] == 3


def test_a_retry_after_a_failed_ladder_claims_only_nodes_that_run(pool: Any, context: Any) -> None:  # noqa: F811
    fail_fleets_of(pool, 2, "InsufficientInstanceCapacity", times=99)
    first = reserve(job(request_id="pool-retry", instance_count=5), context)
    assert first["status"] == "error", first
    pool.clear_faults()
    Emulator().settle()
    again = reserve(job(request_id="pool-retry", instance_count=5), context)
    # The first round was undone (its pool nodes ended); the retry launches the job anew and
    # names only nodes that run: the pool part's fleet token of the undone round would answer
    # its ended nodes again.
    assert again["status"] == "provisioned", again
    assert len(again["instances"]) == 5, again
    assert sorted(live(again["instances"])) == sorted(again["instances"]), again
    assert {s["instance_id"] for s in again["served"]} == set(again["instances"])
    every = ladder_instances("pool-retry")
    assert len(live(every)) == 5  # nothing launched twice
    assert {i.get("CapacityReservationId") for i in instances(again["instances"])} >= {POOL_ODCR}


@pytest.mark.parametrize(
    "tag",
    [
        "k" * 128 + "=v",  # a tag key is at most 127 characters (botocore: Tag.Key)
        "key=" + "v" * 256,  # a value at most 255
    ],
)
def test_a_pool_tag_ec2_cannot_carry_is_the_fields_invalid_request(
    pool: Any,  # noqa: F811
    context: Any,
    tag: str,
) -> None:
    answer = reserve(job(request_id="pool-long", instance_count=1, pool={"tag": tag}), context)
    assert answer["status"] == "invalid_request", answer
    assert "pool.tag" in {e["field"] for e in answer["errors"]}, answer
    assert [c for c in pool.calls() if not c.action.startswith("Describe")] == []


def test_a_failed_second_pool_launch_ends_the_first_and_leaves_nothing(
    pool: Any,  # noqa: F811
    context: Any,
) -> None:
    from tests.integration.test_reserve_pool import holds_made, lent_to_the_pool

    lent = lent_to_the_pool(2)
    pool.clear_calls()
    fail_fleets_of(pool, 2, "InsufficientInstanceCapacity", times=99)
    answer = reserve(job(request_id="pool-second", instance_count=5), context)
    assert answer["status"] == "error", answer
    assert answer["instances"] == []
    assert holds_made(pool) == []
    every = ladder_instances("pool-second")
    assert every and live(every) == []
    assert reservation(POOL_ODCR)["AvailableInstanceCount"] == 3
    assert reservation(lent)["State"] == "active"


def test_transient_fleet_errors_on_a_pool_launch_are_asked_again(
    pool: Any,  # noqa: F811
    context: Any,
) -> None:
    fail_fleets_of(pool, 3, "RequestLimitExceeded", times=1)
    answer = reserve(job(request_id="pool-transient", instance_count=3), context)
    assert answer["status"] == "provisioned", answer
    assert len(live(answer["instances"])) == 3


def test_release_while_the_pools_group_cannot_be_read_says_so(
    pool: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    container: Any,
    context: Any,
) -> None:
    from capacity_broker.handlers.release import handler as release

    from tests.integration.test_reserve_pool import LOOKALIKE, OUTSIDE, pool_by_group

    pool_by_group(monkeypatch, container, [])
    pool.fail(
        "ListGroupResources", "TooManyRequestsException", times=999, service="resource-groups"
    )
    released = release({"request_id": "rel-throttled", "job_id": "1234"}, context)
    # Nothing is cancelled (the group might name either), and the answer does not say the
    # job has nothing left to release, nor that the broker's own hold is "not owned".
    assert reservation(OUTSIDE)["State"] == "active"
    assert reservation(LOOKALIKE)["State"] == "active"
    assert released["status"] == "partial", released
    assert {e["id"] for e in released["errors"]} == {OUTSIDE, LOOKALIKE}
    assert {e["error_code"] for e in released["errors"]} == {"TooManyRequestsException"}
    assert "not owned" not in str(released)


def test_a_pool_reservation_of_another_platform_or_tenancy_never_covers_the_job(
    pool: Any,  # noqa: F811
    context: Any,
) -> None:
    client = ec2()
    others = []
    for platform, tenancy in (("Windows", "default"), ("Linux/UNIX", "dedicated")):
        others.append(
            client.create_capacity_reservation(
                InstanceType="hpc7a.96xlarge",
                InstancePlatform=platform,
                Tenancy=tenancy,
                AvailabilityZone="us-east-1c",
                InstanceCount=4,  # more free than the match: preferred if matching were loose
                InstanceMatchCriteria="targeted",
                TagSpecifications=[
                    {
                        "ResourceType": "capacity-reservation",
                        "Tags": [{"Key": "hpc-pool", "Value": "prod"}],
                    }
                ],
            )["CapacityReservation"]["CapacityReservationId"]
        )
    Emulator().settle()
    answer = reserve(job(request_id="pool-match", instance_count=2), context)
    assert answer["status"] == "provisioned", answer
    assert {s["reservation_id"] for s in answer["served"]} == {POOL_ODCR}
    for other in others:
        assert reservation(other)["AvailableInstanceCount"] == 4


BLOCK_NOW = "cr-0fffffffffffffff1"  # p5.48xlarge in us-east-1b, started 2 h ago, 24 h long


@pytest.mark.parametrize(("runtime", "used"), [(21 * 3600 + 1800 + 60, False), (3600, True)])
def test_a_pool_block_is_used_only_when_the_run_can_finish_in_it(
    pool: Any,  # noqa: F811
    context: Any,
    runtime: int,
    used: bool,
) -> None:
    ec2().create_tags(Resources=[BLOCK_NOW], Tags=[{"Key": "hpc-pool", "Value": "prod"}])
    Emulator().settle()
    answer = reserve(
        job(
            request_id=f"pool-block-{runtime}",
            instance_count=3,  # the pool's p5 ODCR gives 2 (first in priority), the block 1
            instance_types=["p5.48xlarge"],
            runtime_seconds=runtime,
        ),
        context,
    )
    if used:
        assert answer["status"] == "provisioned", answer
        assert sorted((s["rung"], s["reservation_id"]) for s in answer["served"]) == [
            ("capacity-block", BLOCK_NOW),
            ("odcr", "cr-0aaaaaaaaaaaa0002"),
            ("odcr", "cr-0aaaaaaaaaaaa0002"),
        ]
        # A block is prepaid: no hourly price (and the Price List has none for p5 here).
        assert all(s.get("hourly_price_usd") is None for s in answer["served"])
    else:
        assert answer["status"] != "provisioned", answer
        assert answer["instances"] == []
        assert not [c for c in pool.calls() if c.action in ("CreateFleet", "RunInstances")]


def test_a_retry_answers_the_rung_each_node_ran_in_and_holds_nothing_again(
    pool: Any,  # noqa: F811
    context: Any,
) -> None:
    first = reserve(job(request_id="pool-rungs", instance_count=5), context)
    assert first["status"] == "provisioned", first
    Emulator().settle()
    made = len(pool.calls("CreateCapacityReservation"))
    again = reserve(job(request_id="pool-rungs", instance_count=5), context)
    assert again["status"] == "provisioned", again
    # Every node runs where the first invocation put it: nothing is held again.
    assert len(pool.calls("CreateCapacityReservation")) == made, again
    assert sorted(again["instances"]) == sorted(first["instances"])
    rungs = sorted((s["instance_id"], s["rung"]) for s in first["served"])
    assert sorted((s["instance_id"], s["rung"]) for s in again["served"]) == rungs, again
