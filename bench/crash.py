"""The crash row of the burst bench (issue 39): a group's leader SIGKILLed right after its
create, and the seconds from its death until EC2 shows nothing the group held (no owned
reservation active or pending).

The class is ``tests/integration/test_group_crash.py``'s, each desktop's probe a process of its
own (``bench.group_probe``) against the served emulator (EC2's buckets and 50 ms a call, the
state table metered and throttled as DynamoDB): room for 5 in the first subnet, none in the
second, plenty in the third; a probe alike marked in flight first (so the leader's arrival sees
a burst and leads), the leader, then 4 members started once its group is open. The leader
holds the first subnet whole when it dies and has told nobody but the group's record; its
members must find the hold by its group-id tag and give it back (contract v4: within the
group's patience, 30 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from .burst import CLUSTER, ONE_TYPE, REGION, ROOT, SUBNETS, TABLE, Served, _fresh_world

MEMBERS = 4
ROOM = (5, 0, 1000, 1000)
TIMEOUT_MS = 30_000  # the probe function's Lambda budget
LIMIT_S = 120.0  # how long the row waits for the holds to go before it says "never"


def _event(subnets: list[str], request_id: str) -> dict[str, Any]:
    return {"instance_type": ONE_TYPE, "subnet_ids": subnets, "request_id": request_id}


class _Probe:
    """One container's probe in a process of its own, ready and waiting for ``go``."""

    def __init__(self, env: dict[str, str], event: dict[str, Any], crash_at: str = "") -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.group_probe"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**env, "CRASH_AT": crash_at, "PROBE_EVENT": json.dumps(event)},
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        if '"ready"' not in ready:
            raise RuntimeError(f"a crash-row probe did not start: {ready!r}")

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any] | None:
        try:
            out, _ = self.process.communicate(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            return None
        if self.process.returncode != 0 or not out.strip():
            return None
        found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return found


def _until(check: Any, limit_s: float = LIMIT_S) -> bool:
    ends = time.monotonic() + limit_s
    while time.monotonic() < ends:
        if check():
            return True
        time.sleep(0.02)
    return False


def bench_crash(served: Served) -> dict[str, Any]:
    """One class whose leader is killed at its create: seconds from the kill until nothing is
    held, the members' answers, and whether the class formed as the row needs."""
    import boto3
    from capacity_broker.adapters.aws import Clients
    from capacity_broker.adapters.dynamodb_group import TableStore
    from capacity_broker.adapters.dynamodb_group_items import PREFIX
    from capacity_broker.logic.grouping.meeting import kind_id
    from capacity_broker.logic.probe import probe_key
    from capacity_broker.models import ProbeRequest

    _fresh_world(served, True, ROOM)
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=served.endpoint)
    table = boto3.client("dynamodb", region_name=REGION, endpoint_url=served.table_endpoint)
    kind = kind_id(probe_key(REGION, ProbeRequest(**_event(SUBNETS, "kind"))))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "functions"), str(ROOT), os.environ.get("PYTHONPATH", "")]
        ),
        "AWS_ENDPOINT_URL": served.endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB": served.table_endpoint,
        "AWS_REGION": REGION,
        "BROKER_CLUSTER_ID": CLUSTER,
        "BROKER_STATE_TABLE": TABLE,
        # The test's: seconds of quiet after the last join before the leader closes, so the
        # members' joins land inside them however busy the machine (the row is about what
        # follows the create, not about how a group forms).
        "BROKER_PROBE_GROUP_WINDOW_SECONDS": "3",
        "BROKER_PROBE_GROUP_MAX_WINDOW_SECONDS": "10",
        "BROKER_MAX_CONCURRENCY": "1",
        "PROBE_TIMEOUT_MS": str(TIMEOUT_MS),
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "LOG_LEVEL": "ERROR",
    }
    # A probe alike in flight, so the leader's arrival sees a burst and opens a group.
    saved = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = served.table_endpoint
    try:
        TableStore(TABLE, REGION, Clients(boto3.session.Session())).mark(kind, "f" * 32)
    finally:
        if saved is None:
            del os.environ["AWS_ENDPOINT_URL_DYNAMODB"]
        else:
            os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = saved

    def item() -> dict[str, Any]:
        found = table.get_item(
            TableName=TABLE, Key={"id": {"S": PREFIX + kind}}, ConsistentRead=True
        )
        got: dict[str, Any] = found.get("Item") or {}
        return got

    def held() -> list[str]:
        found = ec2.describe_capacity_reservations(
            Filters=[{"Name": "state", "Values": ["active", "pending"]}]
        )["CapacityReservations"]
        return [r["CapacityReservationId"] for r in found]

    leader = _Probe(env, _event(SUBNETS, "leader"), "create")
    members = [_Probe(env, _event(SUBNETS, f"member-{i}")) for i in range(MEMBERS)]
    leader.go()
    opened = _until(lambda: item().get("st", {}).get("S") == "open")
    for member in members:
        member.go()
    joined = _until(lambda: item().get("n", {}).get("N") == str(1 + MEMBERS))
    _until(lambda: leader.process.poll() is not None)
    killed_at = time.monotonic()
    killed = leader.process.returncode == -9
    held_at_kill = len(held())
    cleared = _until(lambda: not held())
    seconds = time.monotonic() - killed_at if cleared else float("inf")
    answers = [m.answer() for m in members]
    leader.process.communicate()
    return {
        "seconds_until_nothing_held": seconds,
        # The row measures a leader that died holding the group's create: a class that did
        # not form so, or a leader that was not killed, measured something else.
        "formed": opened and joined and killed and held_at_kill > 0,
        "held_at_kill": held_at_kill,
        "members": MEMBERS,
        "answers": [
            {"status": a.get("status"), "subnet_id": a.get("subnet_id")} if a else None
            for a in answers
        ],
        "first_subnet_answers": sum(1 for a in answers if a and a.get("subnet_id") == SUBNETS[0]),
    }
