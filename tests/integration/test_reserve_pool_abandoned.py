"""A reserved-first ladder left half-done (issue 43, item 2: "each step recorded so the cleaner
can finish or undo a half-done ladder"), through the handlers on the emulator's clock.

reserve writes the ladder's done record (``capacity-broker:ladder-state=done``) on every node
before it answers ``provisioned``. A Lambda killed at its timeout runs no ``finally``: its
ladder's nodes keep running without the record, and the sweep terminates them once the
ladder's youngest node is older than the reserve function's timeout plus a grace
(``BROKER_LADDER_WINDOW_SECONDS``), never sooner, never a done ladder's node, never a node
without this cluster's id and a ladder tag.

How the death is made (as in test_fault_matrix): a hook on the broker's EC2 client raises
``LambdaKilled``, a BaseException no ``except Exception`` in the broker catches, as soon as the
pool rung's fleet has been answered with success; every later call of that invocation is
refused before it leaves (a killed sandbox sends nothing). The next invocations run in a new
container (a new root, its own clients: the hook is gone with the dead one).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from capacity_broker.domain.cleaner import Graces
from capacity_broker.handlers.cleaner import handler as cleaner
from capacity_broker.handlers.reserve import handler as reserve

from emulator import Emulator
from tests.integration.test_reserve_pool import (
    POOL_ODCR,
    SUBNETS,
    TEMPLATE,
    ec2,
    instances,
    job,
    pool,  # noqa: F401  (fixture)
)

pytestmark = pytest.mark.integration

CLUSTER = "demo-cluster"
LADDER = "capacity-broker:ladder"
STATE = "capacity-broker:ladder-state"
WINDOW = Graces().ladder.total_seconds()  # the default: reserve's timeout plus the grace


class LambdaKilled(BaseException):
    """The invocation was killed (nothing in a killed sandbox runs on)."""


class Killer:
    """Kills the invocation right after a CreateFleet that EC2 answered with success (the
    first: reserve's pool rung, the ladder launches into the pool before the hold's part)."""

    def __init__(self, root: Any, after: int = 1) -> None:
        """``after``: the how-manieth fleet EC2 answered with success kills the invocation."""
        self.killed = False
        self.left = after
        clients = root.clients
        for events in (
            clients.client("ec2", "us-east-1").meta.events,
            getattr(clients.session, "_session", clients.session).get_component("event_emitter"),
        ):
            events.register("before-parameter-build.ec2", self._before)
            events.register("after-call.ec2", self._after)

    def _before(self, model: Any, **_: Any) -> None:
        if self.killed:
            raise LambdaKilled(f"{model.name} after the kill")

    def _after(self, http_response: Any, model: Any, **_: Any) -> None:
        if self.killed:
            raise LambdaKilled(f"the answer to {model.name} after the kill")
        if model.name == "CreateFleet" and http_response.status_code < 300:
            self.left -= 1
            if self.left == 0:
                self.killed = True
                raise LambdaKilled("right after a fleet took effect")


@pytest.fixture
def frozen(pool: Any, container: Any) -> Any:  # noqa: F811
    """The pool's account on the emulator's frozen clock, the flows' and the cleaner's "now"
    the same."""
    pool.freeze()
    container.build(clock=pool.now, cleaner_clock=pool.now)
    return pool


def ladder_nodes(ladder: str) -> dict[str, dict[str, Any]]:
    """Every instance of ``ladder`` EC2 has (any state), by id."""
    Emulator().settle()
    return {
        i["InstanceId"]: i
        for r in ec2().describe_instances()["Reservations"]
        for i in r["Instances"]
        if {"Key": LADDER, "Value": ladder} in i.get("Tags", [])
    }


def running(ids: Any) -> list[str]:
    if not ids:
        return []
    return sorted(
        i["InstanceId"]
        for i in instances(list(ids))
        if i["State"]["Name"] in ("pending", "running")
    )


def tags_of(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def sweep(context: Any, dry_run: bool = False) -> dict[str, Any]:
    answer = cleaner({"action": "sweep", "dry_run": dry_run}, context)
    assert answer["status"] == "ok", answer
    return answer


def killed_after_the_pool_rung(
    frozen: Any, container: Any, context: Any, request_id: str
) -> set[str]:
    """A reserve of 5 (3 from the pool, 2 held) killed right after its pool rung launched;
    then a new container on the same clocks. Answers the ladder's nodes."""
    Killer(container.root)
    with pytest.raises(LambdaKilled):
        reserve(job(request_id=request_id, instance_count=5), context)
    container.build(clock=frozen.now, cleaner_clock=frozen.now)
    nodes = ladder_nodes(request_id)
    assert len(nodes) == 3 and len(running(nodes)) == 3, nodes
    assert {i.get("CapacityReservationId") for i in nodes.values()} == {POOL_ODCR}
    assert all(STATE not in tags_of(i) for i in nodes.values())
    return set(nodes)


def test_a_ladder_killed_after_its_pool_rung_is_ended_by_the_cleaner_only_after_the_window(
    frozen: Any, container: Any, context: Any
) -> None:
    nodes = killed_after_the_pool_rung(frozen, container, context, "ladder-killed")
    # Inside the window a retry of the request may still finish the ladder: kept.
    frozen.advance(WINDOW - 60)
    early = sweep(context)
    assert "ladder_nodes_terminated" not in early, early
    assert running(nodes) == sorted(nodes)
    assert not frozen.calls("TerminateInstances")
    # A dry run past the window says what the sweep would end and ends nothing.
    frozen.advance(120)
    dry = sweep(context, dry_run=True)
    assert {n["instance_id"] for n in dry["ladder_nodes_terminated"]} == nodes, dry
    assert running(nodes) == sorted(nodes)
    # Past the window: the ladder is abandoned, its nodes terminated, each reported.
    late = sweep(context)
    ended = late["ladder_nodes_terminated"]
    assert {n["instance_id"] for n in ended} == nodes, late
    assert {(n["ladder"], n["rung"], n["reason"], n["region"]) for n in ended} == {
        ("ladder-killed", POOL_ODCR, "abandoned_ladder", "us-east-1")
    }
    assert all(n["age_seconds"] > WINDOW for n in ended)
    assert "abandoned" in late["message"]
    assert running(nodes) == []
    terminated = {i for c in frozen.calls("TerminateInstances") for i in c.params["InstanceIds"]}
    assert terminated == nodes
    # The next sweep has nothing more to do for it.
    assert "ladder_nodes_terminated" not in sweep(context)


def test_a_retry_after_the_cleaner_undid_the_ladder_starts_a_new_round(
    frozen: Any, container: Any, context: Any
) -> None:
    first = killed_after_the_pool_rung(frozen, container, context, "ladder-again")
    frozen.advance(WINDOW + 60)
    assert {n["instance_id"] for n in sweep(context)["ladder_nodes_terminated"]} == first
    again = reserve(job(request_id="ladder-again", instance_count=5), context)
    assert again["status"] == "provisioned", (again.get("error_code"), again.get("message"))
    assert len(again["instances"]) == 5
    assert not set(again["instances"]) & first
    assert running(again["instances"]) == sorted(again["instances"])
    assert {s["instance_id"] for s in again["served"]} == set(again["instances"])
    every = ladder_nodes("ladder-again")
    assert sorted(running(every)) == sorted(again["instances"])  # nothing launched twice
    # Done: every node carries the record, and no sweep ends it, however old.
    assert {tags_of(every[i]).get(STATE) for i in again["instances"]} == {"done"}
    frozen.advance(10 * 3600)
    assert "ladder_nodes_terminated" not in sweep(context)
    assert running(again["instances"]) == sorted(again["instances"])


def test_a_done_ladders_nodes_are_never_terminated_even_when_old(
    frozen: Any, container: Any, context: Any
) -> None:
    answer = reserve(job(request_id="ladder-done", instance_count=5), context)
    assert answer["status"] == "provisioned", answer
    nodes = ladder_nodes("ladder-done")
    assert set(nodes) == set(answer["instances"])
    assert {tags_of(i).get(STATE) for i in nodes.values()} == {"done"}
    frozen.advance(24 * 3600)
    swept = sweep(context)
    assert "ladder_nodes_terminated" not in swept, swept
    assert running(answer["instances"]) == sorted(answer["instances"])
    assert not frozen.calls("TerminateInstances")


def test_another_clusters_ladder_and_untagged_instances_are_never_touched(
    frozen: Any, container: Any, context: Any
) -> None:
    """Old instances that lack the done record but are not this cluster's ladder nodes: another
    cluster's ladder, a ladder tag without a cluster id, this cluster's id without a ladder, a
    look-alike cluster id, and an instance with no tags at all."""
    # The emulator paces RunInstances as EC2 does: a client that waits its turn.
    client = boto3.client(
        "ec2",
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 10, "mode": "standard"}),
    )
    tag_sets: list[dict[str, str]] = [
        {"capacity-broker:cluster-id": "other-cluster", LADDER: "ladder-other"},
        {LADDER: "ladder-untagged"},
        {"capacity-broker:cluster-id": CLUSTER},
        {"capacity-broker:cluster-id": CLUSTER.upper(), LADDER: "ladder-case"},
        {"capacity-broker:cluster-id": CLUSTER + " ", LADDER: "ladder-space"},
        {},
    ]
    foreign = []
    for tags in tag_sets:
        launched = client.run_instances(
            LaunchTemplate={"LaunchTemplateId": TEMPLATE},
            InstanceType="hpc7a.96xlarge",
            SubnetId=SUBNETS[2],
            MinCount=1,
            MaxCount=1,
            **(
                {
                    "TagSpecifications": [
                        {
                            "ResourceType": "instance",
                            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                        }
                    ]
                }
                if tags
                else {}
            ),
        )
        foreign.append(launched["Instances"][0]["InstanceId"])
        frozen.advance(1)  # the request bucket refills on the emulator's clock
    # And one ladder of this cluster, abandoned, beside them: the sweep does act.
    own = killed_after_the_pool_rung(frozen, container, context, "ladder-mine")
    frozen.advance(10 * 3600)
    swept = sweep(context)
    assert {n["instance_id"] for n in swept["ladder_nodes_terminated"]} == own, swept
    assert running(foreign) == sorted(foreign)
    terminated = {i for c in frozen.calls("TerminateInstances") for i in c.params["InstanceIds"]}
    assert terminated == own


def test_a_done_record_that_cannot_be_written_is_never_provisioned(
    frozen: Any, container: Any, context: Any
) -> None:
    frozen.fail("CreateTags", "UnauthorizedOperation", times=99)
    answer = reserve(job(request_id="ladder-unmarked", instance_count=5), context)
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "LadderNotRecorded", answer
    assert "done record" in answer["message"]
    # All or nothing: what the ladder launched is ended, and the answer names no node.
    assert answer["instances"] == []
    nodes = ladder_nodes("ladder-unmarked")
    assert len(nodes) == 5 and running(nodes) == [], nodes
    # Once the record can be written, a retry provisions the job anew.
    frozen.clear_faults()
    again = reserve(job(request_id="ladder-unmarked", instance_count=5), context)
    assert again["status"] == "provisioned", (again.get("error_code"), again.get("message"))
    assert running(again["instances"]) == sorted(again["instances"])


def test_a_terminate_that_fails_is_an_error_of_the_sweep_and_the_next_sweep_ends_it(
    frozen: Any, container: Any, context: Any
) -> None:
    nodes = killed_after_the_pool_rung(frozen, container, context, "ladder-refused")
    frozen.advance(WINDOW + 60)
    frozen.fail("TerminateInstances", "UnauthorizedOperation", times=1)
    refused = cleaner({"action": "sweep", "dry_run": False}, context)
    assert refused["status"] == "partial", refused
    (error,) = refused["ladder_errors"]
    assert error in refused["errors"]
    assert (error["id"], error["error_code"]) == ("ladder-refused", "UnauthorizedOperation")
    assert "ladder_nodes_terminated" not in refused
    assert running(nodes) == sorted(nodes)
    again = sweep(context)
    assert {n["instance_id"] for n in again["ladder_nodes_terminated"]} == nodes
    assert running(nodes) == []
