"""Grouped probes survive their leader's and members' death (contract v4): each desktop's probe
is a process of its own against the served emulator (EC2 and the state table), and one of them
is killed with SIGKILL at a chosen line (``bench/group_probe.py``, the crash row of the burst bench
runs it too): no ``finally`` runs.

The world is the issue's: room for 5 in the first subnet, none in the second, plenty in the
third. A group of 5 holds the first subnet whole; killed with its hold, a leader that told
nobody would leave its members to find the first subnet full of the broker's own hold and
answer the third. They must give the group's holds back (found by the exact group-id tag) and
answer the first.

Which probes meet never depends on the machine's speed: a probe alike is marked in flight by
the test before the leader arrives (so it leads), the members are started and ready before the
leader opens, and the window (seconds of quiet after the last join) is long enough for their
joins; the test waits for the table to show them all. The verdicts are the answers and what
EC2 still holds, never durations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.adapters.aws import Clients
from capacity_broker.adapters.dynamodb_group import TableStore
from capacity_broker.adapters.dynamodb_group_items import PREFIX
from capacity_broker.logic.grouping.meeting import kind_id
from capacity_broker.logic.probe import probe_key
from capacity_broker.models import ProbeRequest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
TABLE = "broker-state"
TYPE = "g6.xlarge"
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]
SUBNETS = ["subnet-0a00000000000f401", "subnet-0b00000000000f402", "subnet-0c00000000000f403"]
EVENT = {"instance_type": TYPE, "subnet_ids": SUBNETS}
MEMBERS = 4
TIMEOUT_MS = 14_000  # each probe's Lambda budget: its members give up at about 3/4 of it


def _world() -> dict[str, Any]:
    return {
        "regions": {
            REGION: {
                "vpcs": [
                    {
                        "name": "crash",
                        "cidr": "10.36.0.0/16",
                        "subnets": [
                            {
                                "id": s,
                                "name": f"k{i}",
                                "availability_zone": az,
                                "cidr": f"10.36.{i}.0/24",
                            }
                            for i, (s, az) in enumerate(zip(SUBNETS, AZS, strict=True))
                        ],
                    }
                ],
                "pools": [
                    {"availability_zone": az, "instance_type": TYPE, "capacity": free}
                    for az, free in zip(AZS, (5, 0, 1000), strict=True)
                ],
            }
        }
    }


class Served:
    """``python -m emulator serve``: EC2, SSM and the state table, on real time."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "emulator", "serve"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=_env(),
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        assert line.startswith("AWS_ENDPOINT_URL="), line
        self.endpoint = line.partition("=")[2]
        from emulator.remote import RemoteEmulator

        self.emu = RemoteEmulator(self.endpoint)

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=self.endpoint)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _env(**more: str) -> dict[str, str]:
    path = os.pathsep.join([str(ROOT / "functions"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **more}


@pytest.fixture
def served() -> Iterator[Served]:
    world = Served()
    try:
        world.emu.load_scenario(_world())
        world.client("dynamodb").create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield world
    finally:
        world.stop()


class Probe:
    """One container's probe in a process of its own, ready and waiting for ``go``."""

    def __init__(self, served: Served, request_id: str, crash_at: str = "") -> None:
        env = _env(
            AWS_ENDPOINT_URL=served.endpoint,
            AWS_REGION=REGION,
            BROKER_CLUSTER_ID="demo-cluster",
            BROKER_STATE_TABLE=TABLE,
            # Seconds of quiet after the last join before the leader closes: the members'
            # joins land well inside them however busy the machine.
            BROKER_PROBE_GROUP_WINDOW_SECONDS="3",
            BROKER_PROBE_GROUP_MAX_WINDOW_SECONDS="10",
            BROKER_MAX_CONCURRENCY="1",
            CRASH_AT=crash_at,
            PROBE_EVENT=json.dumps({**EVENT, "request_id": request_id}),
            PROBE_TIMEOUT_MS=str(TIMEOUT_MS),
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.group_probe"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        assert json.loads(ready) == {"ready": True}, ready

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any] | None:
        """Its answer; None when it was killed."""
        out, _ = self.process.communicate(timeout=120)
        if self.process.returncode == -9:
            return None
        assert self.process.returncode == 0, out
        answer: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return answer


def _kind_item(served: Served) -> dict[str, Any]:
    kind = kind_id(probe_key(REGION, ProbeRequest(**EVENT)))
    found = served.client("dynamodb").get_item(
        TableName=TABLE, Key={"id": {"S": PREFIX + kind}}, ConsistentRead=True
    )
    item: dict[str, Any] = found.get("Item") or {}
    return item


def _until(check: Any, what: str) -> None:
    for _ in range(6000):
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"never: {what}")


def _class(served: Served, leader_crash: str = "", member_crash: str = "") -> list[Any]:
    """A probe alike in flight, the leader, then its members; every answer (None: killed),
    the leader's first."""
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = served.endpoint  # (the test's own store)
    try:
        store = TableStore(TABLE, REGION, Clients(boto3.session.Session()))
        assert store.mark(kind_id(probe_key(REGION, ProbeRequest(**EVENT))), "f" * 32) is None
    finally:
        del os.environ["AWS_ENDPOINT_URL_DYNAMODB"]
    leader = Probe(served, "leader", leader_crash)
    members = [Probe(served, f"member-{i}", member_crash if i == 0 else "") for i in range(MEMBERS)]
    leader.go()
    _until(lambda: _kind_item(served).get("st", {}).get("S") == "open", "the group opened")
    for member in members:
        member.go()
    _until(lambda: _kind_item(served).get("n", {}).get("N") == str(1 + MEMBERS), "all joined")
    return [leader.answer(), *[m.answer() for m in members]]


def _held(served: Served) -> list[str]:
    found = served.client("ec2").describe_capacity_reservations()["CapacityReservations"]
    return [r["CapacityReservationId"] for r in found if r["State"] in ("active", "pending")]


def test_a_leader_killed_at_its_create_leaks_nothing_and_its_members_answer_the_first_subnet(
    served: Served,
) -> None:
    answers = _class(served, leader_crash="create")
    assert answers[0] is None  # killed, holding the first subnet whole
    members = answers[1:]
    assert [a["status"] for a in members] == ["available"] * MEMBERS, members
    assert {a["subnet_id"] for a in members} == {SUBNETS[0]}  # not the third
    assert _held(served) == []
    # The group's hold was given back by a member (found by its group-id tag), and the members
    # probed alone.
    made = served.client("ec2").describe_capacity_reservations()["CapacityReservations"]
    group = [r for r in made if r["TotalInstanceCount"] == 1 + MEMBERS]
    assert len(group) == 1 and group[0]["State"] == "cancelled"
    tags = {t["Key"]: t["Value"] for t in group[0]["Tags"]}
    assert tags["capacity-broker:group-id"].startswith("group-")


def test_a_leader_killed_as_it_publishes_leaves_its_members_to_answer_alone(
    served: Served,
) -> None:
    """Its holds are given back before it publishes: its members find the group published with
    no answer for them, and each probes alone, first subnet first."""
    answers = _class(served, leader_crash="publish")
    assert answers[0] is None
    members = answers[1:]
    assert [a["status"] for a in members] == ["available"] * MEMBERS, members
    assert {a["subnet_id"] for a in members} == {SUBNETS[0]}
    assert all("group" not in a for a in members)
    assert _held(served) == []


def test_a_member_killed_while_it_waits_costs_the_others_nothing(served: Served) -> None:
    answers = _class(served, member_crash="look")
    assert answers[1] is None
    living = [answers[0], *answers[2:]]
    assert [a["status"] for a in living] == ["available"] * MEMBERS, living
    assert {a["subnet_id"] for a in living} == {SUBNETS[0]}
    assert all(a["group"]["size"] == 1 + MEMBERS for a in living)  # answered by their group
    assert _held(served) == []
