"""The Slurm programs' flows against the in-process emulator, with Slurm played by a fake
scontrol: the failure paths a real slurmctld cannot be made to take on demand (tests/slurm
drives the real one)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from capacity_broker.client import BrokerError
from capacity_broker.slurm import giveback, launch, plan
from capacity_broker.slurm.config import SlurmConfig
from capacity_broker.slurm.runtime import Runtime
from capacity_broker.slurm.scontrol import Job, Node, ScontrolError

from emulator import Emulator

pytestmark = pytest.mark.integration

SUBNET_A = "subnet-0a0000000000006a1"
SUBNET_B = "subnet-0b0000000000006b2"
TEMPLATE = "lt-0c0000000000006c3"
AMI = "ami-0d0000000000006d4"


def scenario(c5: tuple[int, int], m5: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    return {
        "settings": {"expiry_lag_seconds": 0, "pending_seconds": 0},
        "regions": {
            "us-east-1": {
                "vpcs": [
                    {
                        "id": "vpc-0e0000000000006e5",
                        "name": "hpc",
                        "cidr": "10.6.0.0/16",
                        "subnets": [
                            {
                                "id": SUBNET_A,
                                "name": "a",
                                "availability_zone": "us-east-1a",
                                "cidr": "10.6.1.0/24",
                            },
                            {
                                "id": SUBNET_B,
                                "name": "b",
                                "availability_zone": "us-east-1b",
                                "cidr": "10.6.2.0/24",
                            },
                        ],
                    }
                ],
                "pools": [
                    {
                        "availability_zone": "us-east-1a",
                        "instance_type": "c5.large",
                        "capacity": c5[0],
                    },
                    {
                        "availability_zone": "us-east-1b",
                        "instance_type": "c5.large",
                        "capacity": c5[1],
                    },
                    {
                        "availability_zone": "us-east-1a",
                        "instance_type": "m5.large",
                        "capacity": m5[0],
                    },
                    {
                        "availability_zone": "us-east-1b",
                        "instance_type": "m5.large",
                        "capacity": m5[1],
                    },
                ],
                "images": [{"id": AMI, "name": "compute", "platform_details": "Linux/UNIX"}],
                "launch_templates": [
                    {
                        "id": TEMPLATE,
                        "name": "compute",
                        "data": {"ImageId": AMI, "InstanceType": "c5.large"},
                        # tagged for the broker's cluster, as docs/deploy.md asks
                        "tags": {"capacity-broker:cluster-id": "flows"},
                    }
                ],
            }
        },
    }


def nodeset(nodes: str, instance_type: str) -> dict[str, Any]:
    return {
        "nodes": nodes,
        "instance_types": [instance_type],
        "subnet_ids": [SUBNET_A, SUBNET_B],
        "launch_template": {"id": TEMPLATE, "version": "$Latest"},
        "strict": True,
    }


CONFIG = SlurmConfig.model_validate(
    {
        "region": "us-east-1",
        "cluster_id": "flows",
        "slurm_cluster": "flows",
        "nodesets": [nodeset("hpc-c5-[1-4]", "c5.large"), nodeset("hpc-m5-[1-2]", "m5.large")],
    }
)


class FakeScontrol:
    """Slurm as the programs see it, recording what they tell it."""

    def __init__(self, restarts: int = 0, time_limit: int | None = None) -> None:
        self.restarts = restarts
        self.time_limit = time_limit
        self.addresses: dict[str, tuple[str, str]] = {}
        self.comments: dict[str, str] = {}
        self.node_states: dict[str, str] = {}
        self.powered_down: list[tuple[list[str], str]] = []
        self.delayed: list[tuple[int, int]] = []
        self.fail_addresses = False
        self.state = "CONFIGURING"
        self.notes: list[tuple[int, str, str]] = []
        self.held: list[int] = []
        self.drained: list[tuple[list[str], str]] = []
        self.state_dir = tempfile.mkdtemp(prefix="slurm-state-")

    def job(self, job_id: int) -> Job:
        return Job(
            job_id,
            self.state,
            self.restarts,
            [],
            datetime.now() + timedelta(seconds=121),
            time_limit_seconds=self.time_limit,
        )

    def jobs(self) -> list[Job]:
        return []

    def nodes(self, names: list[str]) -> dict[str, Node]:
        return {
            name: Node(
                name,
                self.node_states.get(name, "MIXED+CLOUD+NOT_RESPONDING+POWERING_UP"),
                self.comments.get(name),
            )
            for name in names
        }

    def node_comments(self, names: list[str]) -> dict[str, str]:
        return {n: self.comments[n] for n in names if n in self.comments}

    def bind(
        self, node: str, addr: str, host: str, comment: str, instance_id: str | None = None
    ) -> None:
        if self.fail_addresses:
            raise ScontrolError("scontrol update exited 1: Invalid node name specified")
        self.addresses[node] = (addr, host)
        self.comments[node] = comment

    def power_down(self, nodes: list[str], reason: str) -> None:
        self.powered_down.append((list(nodes), reason))
        self.state = "PENDING"  # Slurm requeues the job

    def delay_job(self, job_id: int, seconds: int) -> None:
        self.delayed.append((job_id, seconds))

    def note_job(self, job_id: int, text: str, field: str = "Comment") -> None:
        self.notes.append((job_id, field, text))

    def hold(self, job_id: int) -> None:
        self.held.append(job_id)

    def drain(self, nodes: list[str], reason: str) -> None:
        self.drained.append((list(nodes), reason))

    def setting(self, key: str) -> str:
        assert key == "StateSaveLocation"
        return self.state_dir

    def cluster_name(self) -> str:
        return "flows"


class LosesAnswers:
    """The broker whose reserve answer never arrives after the work is done (a deployed
    function's invoke timing out on the client's side)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def reserve(self, *args: Any, **kwargs: Any) -> Any:
        self.broker.reserve(*args, **kwargs)
        raise BrokerError("Read timeout on endpoint URL: lambda invoke")

    def release(self, **kwargs: Any) -> Any:
        return self.broker.release(**kwargs)


def recorded(built: Runtime) -> list[dict[str, Any]]:
    """The options of every reserve the programs send through ``built``."""
    asked: list[dict[str, Any]] = []
    broker = built.broker

    class Recorded:
        def reserve(self, *args: Any, **kwargs: Any) -> Any:
            asked.append(kwargs)
            return broker.reserve(*args, **kwargs)

        def release(self, **kwargs: Any) -> Any:
            return broker.release(**kwargs)

    built.broker = Recorded()  # type: ignore[assignment]
    return asked


def runtime(scontrol: FakeScontrol) -> Runtime:
    built = Runtime.build(CONFIG)
    built.scontrol = scontrol  # type: ignore[assignment]
    return built


def live() -> list[dict[str, Any]]:
    answer = boto3.client("ec2", region_name="us-east-1").describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    return [i for r in answer["Reservations"] for i in r["Instances"]]


def fleets(emu: Any) -> int:
    return len(emu.calls("CreateFleet"))


def test_no_capacity_holds_the_job_back_as_long_as_the_broker_says(emu: Any) -> None:
    emu.load_scenario(scenario((0, 1)))
    slurm = FakeScontrol(restarts=2)  # third try: the broker's backoff is 240 s
    assert launch.resume(runtime(slurm), ["hpc-c5-1", "hpc-c5-2"], [(12, ["hpc-c5-1", "hpc-c5-2"])])
    [(nodes, reason)] = slurm.powered_down
    assert nodes == ["hpc-c5-1", "hpc-c5-2"]
    assert reason.startswith("capacity-broker: no_capacity: ")
    # Slurm's own requeue delay (121 s) is shorter: the job is kept back 240 s.
    assert slurm.delayed == [(12, 240)]
    assert live() == []
    assert slurm.addresses == {}


def test_a_failed_address_update_leaves_nothing_running(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    slurm.fail_addresses = True
    assert launch.resume(runtime(slurm), ["hpc-c5-1", "hpc-c5-2"], [(13, ["hpc-c5-1", "hpc-c5-2"])])
    assert fleets(emu) == 1  # launched, then given back
    assert live() == []
    [(_, reason)] = slurm.powered_down
    assert reason.startswith("capacity-broker: error: ScontrolError")
    assert slurm.delayed == []  # no backoff for an error: Slurm's own delay applies


def test_nodes_no_node_set_has(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    assert launch.resume(runtime(slurm), ["hpc-c5-1", "gpu-1"], [(14, ["hpc-c5-1", "gpu-1"])])
    assert fleets(emu) == 0
    [(nodes, reason)] = slurm.powered_down
    assert nodes == ["hpc-c5-1", "gpu-1"]
    assert reason == "capacity-broker: unconfigured: no node set in the configuration has gpu-1"


def test_a_node_without_a_job_launches_once(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    assert launch.resume(runtime(slurm), ["hpc-c5-3"], [])
    first = dict(slurm.addresses)
    assert list(first) == ["hpc-c5-3"]
    # `scontrol update State=POWER_UP` resumed it; the same program run again finds it.
    assert launch.resume(runtime(slurm), ["hpc-c5-3"], [])
    assert fleets(emu) == 1
    assert slurm.addresses == first
    assert len(live()) == 1


def test_give_back_ends_only_this_clusters_instances_of_those_nodes(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    run = runtime(slurm)
    assert launch.resume(run, ["hpc-c5-1", "hpc-c5-2"], [(15, ["hpc-c5-1", "hpc-c5-2"])])
    ec2 = boto3.client("ec2", region_name="us-east-1")
    # Another Slurm cluster in the account has a node of the same name.
    other = ec2.run_instances(
        ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="c5.large", SubnetId=SUBNET_A
    )["Instances"][0]["InstanceId"]
    Emulator().settle()  # the other cluster tags its node once EC2 knows the new instance
    ec2.create_tags(
        Resources=[other],
        Tags=[
            {"Key": "capacity-broker:slurm-node", "Value": "hpc-c5-1"},
            {"Key": "capacity-broker:slurm-cluster", "Value": "elsewhere"},
        ],
    )
    assert giveback.give_back(run, ["hpc-c5-1"], "suspend")
    still = {i["InstanceId"]: i for i in live()}
    assert other in still
    nodes = {
        next(t["Value"] for t in i["Tags"] if t["Key"] == "capacity-broker:slurm-node")
        for i in still.values()
    }
    assert nodes == {"hpc-c5-1", "hpc-c5-2"}  # the other cluster's hpc-c5-1, and our hpc-c5-2


@pytest.mark.parametrize("program", ["suspend", "resume-fail"])
def test_nodes_given_back_right_after_their_launch_end_their_instances(
    emu: Any, program: str
) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    run = runtime(slurm)
    assert launch.resume(run, ["hpc-c5-1", "hpc-c5-2"], [(16, ["hpc-c5-1", "hpc-c5-2"])])
    assert len(live()) == 2
    # A job cancelled seconds after its nodes launched: Slurm powers them down at once, and
    # EC2's listings do not show the new instances yet.
    assert giveback.give_back(run, ["hpc-c5-1", "hpc-c5-2"], program)
    assert live() == []


def test_an_old_binding_costs_no_patience_and_a_fresh_one_is_waited_for(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    run = runtime(slurm)
    assert launch.resume(run, ["hpc-c5-2"], [(17, ["hpc-c5-2"])])
    [mine] = [i["InstanceId"] for i in live()]
    # hpc-c5-1 was bound two hours ago to an instance EC2 has long forgotten.
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    slurm.comments["hpc-c5-1"] = plan.Binding("i-0123456789abcdef0", long_ago).text()
    # EC2 does not know hpc-c5-2's new instance yet, for a few calls of each kind.
    emu.fail("DescribeInstances", "InvalidInstanceID.NotFound", times=3)
    emu.fail("TerminateInstances", "InvalidInstanceID.NotFound", times=2)
    emu.clear_calls()
    assert giveback.give_back(run, ["hpc-c5-1", "hpc-c5-2"], "suspend")
    assert live() == []
    # The forgotten one was asked once, alone, and never again.
    asked = [c.params.get("InstanceIds") for c in emu.calls("DescribeInstances")]
    assert asked.count(["i-0123456789abcdef0"]) == 1, asked
    terminated = [c.params.get("InstanceIds") for c in emu.calls("TerminateInstances")]
    assert all(ids == [mine] for ids in terminated), terminated


def test_nodes_that_never_had_an_instance_cost_one_listing(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    run = runtime(FakeScontrol())
    assert giveback.give_back(run, ["hpc-c5-3", "hpc-c5-4"], "suspend")
    assert len(emu.calls("DescribeInstances")) == 1
    assert emu.calls("TerminateInstances") == []


def test_a_binding_to_an_instance_this_cluster_did_not_launch_is_left_alone(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    other = boto3.client("ec2", region_name="us-east-1").run_instances(
        ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="c5.large", SubnetId=SUBNET_A
    )["Instances"][0]["InstanceId"]
    slurm.comments["hpc-c5-1"] = plan.Binding(other, datetime.now(UTC)).text()
    assert giveback.give_back(runtime(slurm), ["hpc-c5-1"], "suspend")
    assert [i["InstanceId"] for i in live()] == [other]


def test_a_job_whose_second_node_set_has_no_capacity_ends_the_first_sets_new_instances(
    emu: Any,
) -> None:
    emu.load_scenario(scenario((8, 8), m5=(0, 0)))
    slurm = FakeScontrol()
    # The c5 half launches; EC2 does not know its instances yet when they are given back.
    emu.fail("TerminateInstances", "InvalidInstanceID.NotFound", times=3)
    nodes = ["hpc-c5-1", "hpc-c5-2", "hpc-m5-1"]
    assert launch.resume(runtime(slurm), nodes, [(18, nodes)])
    assert fleets(emu) == 1
    assert live() == []
    [(down, reason)] = slurm.powered_down
    assert down == nodes
    assert reason.startswith("capacity-broker: no_capacity")


def test_a_lost_answer_is_looked_for_until_ec2_lists_what_it_launched(
    emu: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    emu.load_scenario(scenario((8, 8)))
    # Long enough for the emulator's listings to settle (2 listings or 2 s); EC2's take longer.
    monkeypatch.setattr(launch, "LOST_ANSWER_SECONDS", 4.0)
    slurm = FakeScontrol()
    run = runtime(slurm)
    run.broker = LosesAnswers(run.broker)  # type: ignore[assignment]
    assert launch.resume(run, ["hpc-c5-1", "hpc-c5-2"], [(19, ["hpc-c5-1", "hpc-c5-2"])])
    assert fleets(emu) == 1  # it did launch
    assert live() == []
    [(_, reason)] = slurm.powered_down
    assert reason.startswith("capacity-broker: error: BrokerError")


def test_a_node_slurm_powered_down_while_it_launched_has_its_instance_ended(emu: Any) -> None:
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    # An operator's POWER_DOWN_FORCE while the resume program was launching: the suspend
    # program ran before the binding existed, and found nothing.
    slurm.node_states["hpc-c5-2"] = "IDLE+CLOUD+POWERING_DOWN"
    assert launch.resume(runtime(slurm), ["hpc-c5-1", "hpc-c5-2"], [(20, ["hpc-c5-1", "hpc-c5-2"])])
    still = live()
    assert len(still) == 1
    assert plan.Binding.read(slurm.comments["hpc-c5-1"]).instance_id == still[0]["InstanceId"]
    assert slurm.powered_down == []


def test_the_jobs_of_one_resume_hold_their_capacity_at_the_same_time(emu: Any) -> None:
    """Direct mode: each job's reserve runs on the program's own root, at once (bounded by
    MAX_JOBS_AT_ONCE), no longer one at a time under a process lock. Both jobs' fleets must be
    in flight together (a gate on the program's session lets neither through until the other
    arrives: one job at a time would never open it), and the emulator's own record shows both
    holds alive at once on its clock: each created before the gate opened (CreateDate), each
    cancelled after (the cancel call's time)."""
    import threading

    from capacity_broker.slurm.runtime import aws_session

    emu.load_scenario(scenario((8, 8)))
    emu.freeze()
    gate = threading.Barrier(2, action=lambda: emu.advance(60), timeout=30)
    session = aws_session(CONFIG)

    def both_fleets_in_flight(**_: Any) -> None:
        gate.wait()  # (a before-call hook that returned a value would answer the call)

    session.events.register("before-call.ec2.CreateFleet", both_fleets_in_flight)
    slurm = FakeScontrol()
    run = Runtime.build(CONFIG, session=session)
    run.scontrol = slurm  # type: ignore[assignment]
    jobs = [(31, ["hpc-c5-1", "hpc-c5-2"]), (32, ["hpc-c5-3", "hpc-c5-4"])]
    assert launch.resume(run, [n for _, nodes in jobs for n in nodes], jobs)
    assert sorted(slurm.addresses) == ["hpc-c5-1", "hpc-c5-2", "hpc-c5-3", "hpc-c5-4"]
    assert fleets(emu) == 2
    capacity = emu.capacity("us-east-1")
    cancelled = {
        c.params["CapacityReservationId"]: c.at
        for c in emu.calls("CancelCapacityReservation")
        if c.outcome == "ok"
    }
    # Each job's hold the fleet launched into: given back last (a losing pair's, if any,
    # went back before the fleet).
    kept: dict[str, Any] = {}
    for rid, reservation in capacity.reservations.items():
        tags = capacity.tags_of(rid)
        if tags.get("capacity-broker:purpose") != "hold":
            continue
        job = tags["capacity-broker:job-id"]
        assert rid in cancelled  # nothing is left held
        if job not in kept or cancelled[rid] > cancelled[kept[job].id]:
            kept[job] = reservation
    assert set(kept) == {"31", "32"}
    latest_create = max(r.create_date for r in kept.values())
    earliest_cancel = min(cancelled[r.id] for r in kept.values())
    assert latest_create < earliest_cancel  # both held at once, on the emulator's clock


# -- the resume program, as slurmctld runs it, with a resume file that is partly wrong -----------
FAKE_SCONTROL = """#!{python}
import json, sys
args = sys.argv[1:]
with open({calls!r}, "a") as calls:
    calls.write(json.dumps(args) + "\\n")
if args[:3] == ["show", "job", "-o"]:
    print(f"JobId={{args[3]}} JobState=CONFIGURING Restarts=0 NodeList=(null)")
elif args[:3] == ["show", "node", "-o"]:
    for name in args[3].split(","):
        print(f"NodeName={{name}} State=MIXED+CLOUD+POWERING_UP Comment=(null)")
"""


@pytest.fixture
def programs_run(
    emu: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str, dict[str, Any]], tuple[int, list[list[str]]]]]:
    """``capacity-broker-slurm-resume HOSTLIST`` in this process (direct mode, against the
    emulator), with a resume file and an scontrol that records what it is told."""
    import logging
    import sys

    from capacity_broker.slurm import programs

    emu.load_scenario(scenario((8, 8)))
    calls = tmp_path / "calls.jsonl"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(FAKE_SCONTROL.format(python=sys.executable, calls=str(calls)))
    scontrol.chmod(0o755)
    config = tmp_path / "slurm.yaml"
    config.write_text(
        json.dumps({**CONFIG.model_dump(mode="json", exclude_none=True), "scontrol": str(scontrol)})
    )
    monkeypatch.setenv("CAPACITY_BROKER_SLURM_CONFIG", str(config))
    monkeypatch.setenv("CAPACITY_BROKER_SLURM_LOG", str(tmp_path / "programs.log"))
    slurm_log = logging.getLogger("capacity_broker.slurm")
    kept = (list(slurm_log.handlers), slurm_log.level, slurm_log.propagate)

    def run(hostlist: str, resume_file: dict[str, Any]) -> tuple[int, list[list[str]]]:
        path = tmp_path / "resume.json"
        path.write_text(json.dumps(resume_file))
        monkeypatch.setenv("SLURM_RESUME_FILE", str(path))
        code = programs.main("resume", ["capacity-broker-slurm-resume", hostlist])
        told = [json.loads(line) for line in calls.read_text().splitlines()]
        return code, told

    yield run
    slurm_log.handlers[:], slurm_log.level, slurm_log.propagate = kept


def _powered_down(told: list[list[str]]) -> list[tuple[str, str]]:
    return [
        (args[1].removeprefix("NodeName="), args[3].removeprefix("Reason="))
        for args in told
        if args[:1] == ["update"] and "State=POWER_DOWN_FORCE" in args
    ]


def _bound(told: list[list[str]]) -> list[str]:
    return [
        args[1].removeprefix("NodeName=")
        for args in told
        if args[:1] == ["update"] and any(a.startswith("NodeAddr=") for a in args)
    ]


def test_a_bad_hostlist_in_one_entry_powers_down_no_other_jobs_nodes(
    programs_run: Callable[[str, dict[str, Any]], tuple[int, list[list[str]]]],
) -> None:
    code, told = programs_run(
        "hpc-c5-[1-4]",
        {
            "all_nodes_resume": "hpc-c5-[1-4]",
            "jobs": [
                {"job_id": 21, "nodes_resume": "hpc-c5-[1-2]"},
                {"job_id": 22, "nodes_resume": "hpc-c5-[3-"},
            ],
        },
    )
    assert code == 0
    # Job 21 launched and bound; the nodes only the bad entry can be for are given back.
    assert sorted(_bound(told)) == ["hpc-c5-1", "hpc-c5-2"]
    [(nodes, reason)] = _powered_down(told)
    assert nodes == "hpc-c5-3,hpc-c5-4"
    assert reason.startswith("capacity-broker: error: SLURM_RESUME_FILE job entry 2: nodes:")
    assert len(live()) == 2


def test_a_job_id_of_true_is_not_job_1(
    programs_run: Callable[[str, dict[str, Any]], tuple[int, list[list[str]]]],
) -> None:
    code, told = programs_run(
        "hpc-c5-[1-3]",
        {
            "jobs": [
                {"job_id": True, "nodes_resume": "hpc-c5-3"},
                {"job_id": 23, "nodes_resume": "hpc-c5-[1-2]"},
            ]
        },
    )
    assert code == 0
    assert ["show", "job", "-o", "1"] not in told and ["show", "job", "-o", "True"] not in told
    assert sorted(_bound(told)) == ["hpc-c5-1", "hpc-c5-2"]
    assert _powered_down(told) == [
        (
            "hpc-c5-3",
            "capacity-broker: error: SLURM_RESUME_FILE job entry 1: "
            "job_id true is not a positive integer",
        )
    ]
    assert len(live()) == 2


def test_a_node_set_says_the_platform_its_nodes_are_held_for(emu: Any) -> None:
    """Contract v3: a node set's ``instance_platform`` reaches reserve, and the holds are
    made for it (RHEL nodes: a Linux/UNIX hold would refuse their launches)."""
    world = scenario((8, 8))
    world["regions"]["us-east-1"]["images"] = [
        {"id": AMI, "name": "compute", "platform_details": "Red Hat Enterprise Linux"}
    ]
    emu.load_scenario(world)
    rhel = nodeset("hpc-c5-[1-4]", "c5.large") | {"instance_platform": "Red Hat Enterprise Linux"}
    config = SlurmConfig.model_validate(
        {
            "region": "us-east-1",
            "cluster_id": "flows",
            "slurm_cluster": "flows",
            "nodesets": [rhel, nodeset("hpc-m5-[1-2]", "m5.large")],
        }
    )
    built = Runtime.build(config)
    slurm = FakeScontrol()
    built.scontrol = slurm  # type: ignore[assignment]
    asked = recorded(built)
    assert launch.resume(built, ["hpc-c5-1", "hpc-c5-2"], [(16, ["hpc-c5-1", "hpc-c5-2"])])
    assert [a.get("instance_platform") for a in asked] == ["Red Hat Enterprise Linux"]
    assert sorted(slurm.addresses) == ["hpc-c5-1", "hpc-c5-2"]
    platforms = {c.params["InstancePlatform"] for c in emu.calls("CreateCapacityReservation")}
    assert platforms == {"Red Hat Enterprise Linux"}


def test_the_jobs_time_limit_is_its_runtime(emu: Any) -> None:
    """Contract v3: the programs pass a job's time limit as ``runtime_seconds``, so a Capacity
    Block is used only when the job can finish before EC2 stops its instances."""
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol(time_limit=2 * 3600)
    built = runtime(slurm)
    asked = recorded(built)
    assert launch.resume(built, ["hpc-c5-1"], [(17, ["hpc-c5-1"])])
    assert [a.get("runtime_seconds") for a in asked] == [7200]
    unlimited = runtime(FakeScontrol())
    asked = recorded(unlimited)
    assert launch.resume(unlimited, ["hpc-c5-2"], [(18, ["hpc-c5-2"])])
    assert [a.get("runtime_seconds") for a in asked] == [None]


def test_an_operators_note_in_a_nodes_comment_is_kept_beside_the_binding(emu: Any) -> None:
    """Contract v3: the binding kept in a node's Comment preserves what an operator wrote
    there (it used to be overwritten at every launch)."""
    emu.load_scenario(scenario((8, 8)))
    slurm = FakeScontrol()
    slurm.comments["hpc-c5-1"] = "rack 12, DIMM swapped 2026-11-02"
    assert launch.resume(runtime(slurm), ["hpc-c5-1"], [(19, ["hpc-c5-1"])])
    binding, note = slurm.comments["hpc-c5-1"].split(" ", 1)
    assert plan.Binding.read(binding) is not None
    assert note == "rack 12, DIMM swapped 2026-11-02"
    # The next launch (another job) replaces the binding and keeps the note.
    assert launch.resume(runtime(slurm), ["hpc-c5-1"], [(20, ["hpc-c5-1"])])
    again, note = slurm.comments["hpc-c5-1"].split(" ", 1)
    assert note == "rack 12, DIMM swapped 2026-11-02"
    assert plan.Binding.read(again) is not None and again != binding
    assert slurm.comments["hpc-c5-1"].count("capacity-broker:") == 1
