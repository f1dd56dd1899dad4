"""reserve and release against the emulator: the issue's "Done when", one test each."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import boto3
import pytest
from capacity_broker.handlers.release import handler as release
from capacity_broker.handlers.reserve import handler as reserve

from emulator import Emulator

# The broker's waits on the emulator's clock (conftest: ``waits_on_emulated_time``).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("waits_on_emulated_time")]

SCENARIO = Path(__file__).parent / "scenarios" / "hpc.yaml"
SUBNETS = ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2", "subnet-0aaaaaaaaaaaaaaa3"]
TYPES = ["c7i.48xlarge", "hpc7a.96xlarge"]
TEMPLATE = "lt-0ddddddddddddddd1"
USER_ODCR = "cr-0eeeeeeeeeeeeeee1"
BLOCK_NOW = "cr-0fffffffffffffff1"
BLOCK_LATER = "cr-0fffffffffffffff2"
FLAGS = "/capacity-broker/demo-cluster/configuration/FeatureFlags"


@pytest.fixture
def hpc(broker: Any) -> Any:
    broker.load_scenario(SCENARIO)
    return broker


def job(**fields: Any) -> dict[str, Any]:
    return {
        "job_id": "1234",
        "instance_types": TYPES,
        "subnet_ids": SUBNETS,
        "instance_count": 8,
        **fields,
    }


def ec2() -> Any:
    return boto3.client("ec2", region_name="us-east-1")


def holds(request_id: str | None = None) -> list[dict[str, Any]]:
    """The broker's holds as they are, read from the emulator's model: through the API they
    would look as EC2 shows them a moment after creation (a tag listing misses new ones)."""
    capacity = Emulator().capacity("us-east-1")
    every = [r.to_dict(capacity.tags_of(r.id)) for r in capacity.reservations.values()]
    found = [r for r in every if {"Key": "capacity-broker:purpose", "Value": "hold"} in r["Tags"]]
    if request_id is None:
        return list(found)
    return [
        r for r in found if {"Key": "capacity-broker:request-id", "Value": request_id} in r["Tags"]
    ]


def active(reservations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in reservations if r["State"] in ("active", "pending")]


def template_data(version: int) -> dict[str, Any]:
    versions = ec2().describe_launch_template_versions(
        LaunchTemplateId=TEMPLATE, Versions=[str(version)]
    )["LaunchTemplateVersions"]
    return dict(versions[0]["LaunchTemplateData"])


def set_flag(name: str, value: str) -> None:
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name=f"{FLAGS}/{name}", Value=value, Type="String", Overwrite=True
    )


def test_two_types_three_subnets_only_the_last_pair_has_capacity(hpc: Any, context: Any) -> None:
    answer = reserve(job(request_id="job-1234-a1", launch_template={"id": TEMPLATE}), context)
    assert answer["status"] == "reserved"
    assert answer["instance_types"] == ["hpc7a.96xlarge"]
    assert answer["subnet_ids"] == [SUBNETS[2]]
    reservation = answer["reservation"]
    assert reservation["owned"] is True
    assert reservation["availability_zone"] == "us-east-1c"
    assert reservation["instance_count"] == 8
    assert len(answer["attempts"]) == 6
    assert [a["outcome"] for a in answer["attempts"]][-1] == "available"
    live = active(holds("job-1234-a1"))
    assert [r["CapacityReservationId"] for r in live] == [reservation["id"]]
    version = answer["launch_template"]["version"]
    data = template_data(version)
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": reservation["id"]},
    }
    assert data["ImageId"] == "ami-0ccccccccccccccc1"  # built on the job's own version


def test_a_hold_in_a_placement_group_gives_a_version_that_launches_into_the_group(
    hpc: Any, context: Any
) -> None:
    arn = "arn:aws:ec2:us-east-1:123456789012:placement-group/job-1234-pg"
    answer = reserve(
        job(request_id="job-pg", launch_template={"id": TEMPLATE}, placement_group_arn=arn),
        context,
    )
    assert answer["status"] == "reserved", answer
    (held,) = active(holds("job-pg"))
    assert held["PlacementGroupArn"] == arn
    data = template_data(answer["launch_template"]["version"])
    assert data["Placement"] == {"GroupName": "job-1234-pg", "Tenancy": "default"}
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"] == {
        "CapacityReservationId": held["CapacityReservationId"]
    }


def test_the_best_preferred_pair_wins_and_the_others_are_cancelled(hpc: Any, context: Any) -> None:
    # the two user ODCRs in us-east-1b already hold 10 of its hpc7a capacity
    hpc.set_pool("us-east-1", "us-east-1b", "hpc7a.96xlarge", 18)
    hpc.set_pool("us-east-1", "us-east-1c", "c7i.48xlarge", 8)
    answer = reserve(job(request_id="job-best"), context)
    # type-major: (c7i, c) comes before (hpc7a, b) and (hpc7a, c)
    assert answer["instance_types"] == ["c7i.48xlarge"]
    assert answer["subnet_ids"] == [SUBNETS[2]]
    live = active(holds("job-best"))
    assert [r["CapacityReservationId"] for r in live] == [answer["reservation"]["id"]]
    for pool in (("us-east-1b", "hpc7a.96xlarge"), ("us-east-1c", "hpc7a.96xlarge")):
        assert hpc.pool("us-east-1", *pool)["available"] == 8


@pytest.mark.parametrize(("strict", "expected"), [("true", "no_capacity"), ("false", "unreserved")])
def test_no_capacity_anywhere_follows_the_strict_flag(
    hpc: Any, context: Any, strict: str, expected: str
) -> None:
    hpc.set_pool("us-east-1", "us-east-1c", "hpc7a.96xlarge", 0)
    set_flag("EnforceStrictCapacityReservation", strict)
    answer = reserve(job(attempt=2), context)
    assert answer["status"] == expected
    assert answer["instance_types"] == TYPES
    assert answer["subnet_ids"] == SUBNETS
    assert active(holds()) == []
    if expected == "no_capacity":
        assert answer["retry_after_seconds"] == 240
    else:
        assert "retry_after_seconds" not in answer


def test_a_pair_the_az_does_not_offer_is_not_a_place_to_try(hpc: Any, context: Any) -> None:
    """Two subnets, but us-east-1a does not offer the type: only one pair was possible, so
    the job waits (``no_capacity``) even when not strict, as with a single pair."""
    hpc.capacity("us-east-1").unsupported.add(("us-east-1a", "hpc7a.96xlarge"))
    hpc.set_pool("us-east-1", "us-east-1b", "hpc7a.96xlarge", 0)
    set_flag("EnforceStrictCapacityReservation", "false")
    answer = reserve(job(instance_types=["hpc7a.96xlarge"], subnet_ids=SUBNETS[:2]), context)
    assert [a["outcome"] for a in answer["attempts"]] == ["unsupported", "insufficient_capacity"]
    assert answer["status"] == "no_capacity", answer
    assert active(holds()) == []


def test_the_request_overrides_the_strict_flag(hpc: Any, context: Any) -> None:
    hpc.set_pool("us-east-1", "us-east-1c", "hpc7a.96xlarge", 0)
    set_flag("EnforceStrictCapacityReservation", "false")
    assert reserve(job(strict=True), context)["status"] == "no_capacity"


@pytest.mark.parametrize("strict", ["true", "false"])
def test_a_single_pair_is_no_capacity_whatever_the_flag(
    hpc: Any, context: Any, strict: str
) -> None:
    set_flag("EnforceStrictCapacityReservation", strict)
    answer = reserve(job(instance_types=["c7i.48xlarge"], subnet_ids=[SUBNETS[0]]), context)
    assert answer["status"] == "no_capacity"
    assert answer["retry_after_seconds"] == 60


def test_retry_after_grows_with_the_attempt(hpc: Any, context: Any) -> None:
    single = job(instance_types=["c7i.48xlarge"], subnet_ids=[SUBNETS[0]])
    waits = [reserve({**single, "attempt": n}, context)["retry_after_seconds"] for n in range(5)]
    assert waits == sorted(waits)
    assert waits[0] < waits[-1]


def test_flag_off_skips_with_placement_unchanged(hpc: Any, context: Any) -> None:
    set_flag("EnableCapacityReservation", "false")
    hpc.clear_calls()
    answer = reserve(job(), context)
    assert answer["status"] == "skipped"
    assert answer["subnet_ids"] == SUBNETS
    mutations = [c for c in hpc.calls() if not c.action.startswith("Describe")]
    assert mutations == []


def test_a_cold_reserve_reads_its_flags_beside_its_look_ups(
    hpc: Any, container: Any, context: Any, side_by_side: Any
) -> None:
    """The flags' read is not a step after the look-ups but beside them: each waits to see
    the other under way (a reserve that made them one after the other would never see both
    at once; the 60 s only guard a hang)."""
    root = container.root
    seen = side_by_side((root.ec2("us-east-1"), "subnets"), (root.flags, "read"))
    answer = reserve(job(request_id="job-beside"), context)
    assert seen == {"subnets saw read": True, "read saw subnets": True}
    assert answer["status"] == "reserved", answer
    assert answer["subnet_ids"] == [SUBNETS[2]]


def test_the_look_ups_answer_before_the_flags_as_when_read_one_after_the_other(
    hpc: Any, container: Any, context: Any
) -> None:
    """The flags' answer is taken after the look-ups': a place that does not exist is
    ``invalid_request`` and a refused look-up its error whatever the flags say, as when the
    flags were read after the look-ups; and flags that cannot be read are the answer once the
    look-ups are done. Nothing is held."""
    set_flag("EnableCapacityReservation", "false")
    missing = reserve(job(subnet_ids=[SUBNETS[0], "subnet-0ddddddddddddddd4"]), context)
    assert missing["status"] == "invalid_request", missing
    assert missing["errors"][0]["field"] == "subnet_ids.1"
    hpc.fail("GetParametersByPath", "AccessDeniedException", service="ssm", times=1000)
    hpc.fail("DescribeSubnets", "UnauthorizedOperation", times=1000)
    looked_up = reserve(job(subnet_ids=[SUBNETS[1]]), context)
    assert looked_up["status"] == "error", looked_up
    assert looked_up["error_code"] == "UnauthorizedOperation"
    assert looked_up["message"].startswith("Could not look up the job's places"), looked_up
    hpc.clear_faults()
    container.fresh()  # (the flags read beside the first look-ups are cached: a new container)
    hpc.fail("GetParametersByPath", "AccessDeniedException", service="ssm", times=1000)
    flags = reserve(job(subnet_ids=[SUBNETS[1]]), context)
    assert flags["status"] == "error", flags
    assert flags["error_code"] == "AccessDeniedException"
    assert flags["message"].startswith("Could not read the feature flags"), flags
    assert holds() == []


@pytest.mark.parametrize("flags", ["off", "unreadable"])
def test_a_reserve_the_flags_stop_answers_once_its_template_check_is_done(
    hpc: Any, container: Any, context: Any, monkeypatch: pytest.MonkeyPatch, flags: str
) -> None:
    """The job's template is checked beside the flow from its look-ups on; when the flags
    stop the job (``skipped``, or their error), the answer still waits for that check:
    nothing keeps running after it (Lambda freezes the container once it answers, and a call
    under way would land in whatever invocation thaws it). The flags' read beside the
    look-ups makes that answer come at once, while the check has only just started."""
    if flags == "off":
        set_flag("EnableCapacityReservation", "false")
    else:
        hpc.fail("GetParametersByPath", "AccessDeniedException", service="ssm", times=1000)
    launch = container.root.reserve.launch
    checking, release = threading.Event(), threading.Event()
    order: list[str] = []
    real_source = launch.source

    def source(*args: Any, **kwargs: Any) -> Any:
        checking.set()
        assert release.wait(60)
        order.append("template checked")
        return real_source(*args, **kwargs)

    monkeypatch.setattr(launch, "source", source)
    answers: list[dict[str, Any]] = []

    def ask() -> None:
        answers.append(reserve(job(launch_template={"id": TEMPLATE}), context))
        order.append("answered")

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    assert checking.wait(60)
    asking.join(0.2)  # (a reserve that does not wait for the check has answered by now)
    release.set()
    asking.join(60)
    assert order == ["template checked", "answered"]
    assert answers[0]["status"] == ("skipped" if flags == "off" else "error"), answers
    assert holds() == []


def test_provision_launches_exactly_the_count_in_one_az_and_releases_the_hold(
    hpc: Any, context: Any
) -> None:
    answer = reserve(
        job(request_id="job-prov", launch_template={"id": TEMPLATE}, provision=True), context
    )
    assert answer["status"] == "provisioned", answer
    assert len(answer["instances"]) == 8
    # Read once EC2 has caught up: instances launched a moment ago may be unknown by id.
    Emulator().settle()
    described = ec2().describe_instances(InstanceIds=answer["instances"])["Reservations"]
    instances = [i for r in described for i in r["Instances"]]
    assert {i["Placement"]["AvailabilityZone"] for i in instances} == {"us-east-1c"}
    assert {i["InstanceType"] for i in instances} == {"hpc7a.96xlarge"}
    assert {i["SubnetId"] for i in instances} == {SUBNETS[2]}
    assert active(holds("job-prov")) == []


def test_an_all_or_nothing_failure_leaves_neither_instances_nor_a_hold(
    hpc: Any, container: Any, context: Any
) -> None:
    # A reservation EC2 has not finished provisioning cannot be launched into yet, nor
    # cancelled (CancelCapacityReservation: only `assessing` or `active`): the broker waits
    # until it can give the hold back. Its pauses move the emulator's frozen clock here.
    # The fleet fails for good (an answer about the launch itself, not "not now": issue 21
    # asks again into a hold that is still being provisioned, see the next test).
    hpc.freeze()
    hpc.configure(pending_seconds=5)  # inside the broker's patience (10 looks: 6.5 s at least)
    hpc.fail("CreateFleet", "InvalidParameterValue", mode="errors", times=99)
    container.build(sleep=hpc.advance)
    answer = reserve(
        job(request_id="job-fail", launch_template={"id": TEMPLATE}, provision=True), context
    )
    assert answer["status"] == "error"
    assert answer["instances"] == []
    assert answer["error_code"] == "InvalidParameterValue"
    assert active(holds("job-fail")) == []
    running = ec2().describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )["Reservations"]
    assert running == []


def test_a_launch_into_a_hold_ec2_is_still_provisioning_is_asked_again(
    hpc: Any, context: Any, container: Any
) -> None:
    """EC2 may take a while before a new reservation takes launches ("it can take up to 5
    minutes for the state of the Capacity Reservation to reflect that it is active"): a launch
    refused meanwhile is asked again (a new fleet token each time) while the hold is kept. The
    broker used to cancel the hold and fail the job."""
    hpc.freeze()
    hpc.configure(pending_seconds=3)
    container.build(sleep=hpc.advance)
    answer = reserve(
        job(request_id="job-ramp", launch_template={"id": TEMPLATE}, provision=True), context
    )
    assert answer["status"] == "provisioned", answer
    assert len(hpc.calls("CreateFleet")) >= 2
    assert active(holds("job-ramp")) == []


def test_a_failed_template_step_gives_the_hold_back(hpc: Any, context: Any) -> None:
    hpc.fail("CreateLaunchTemplateVersion", "UnauthorizedOperation")
    answer = reserve(job(request_id="job-lt", launch_template={"id": TEMPLATE}), context)
    assert answer["status"] == "error"
    assert answer["error_code"] == "UnauthorizedOperation"
    assert "hold is cancelled" in answer["message"]
    assert active(holds("job-lt")) == []


def test_a_hold_that_cannot_be_given_back_is_said_so(hpc: Any, context: Any) -> None:
    hpc.fail("CreateLaunchTemplateVersion", "UnauthorizedOperation")
    hpc.fail("CancelCapacityReservation", "UnauthorizedOperation", times=10)
    answer = reserve(job(request_id="job-stuck", launch_template={"id": TEMPLATE}), context)
    assert answer["status"] == "error"
    assert answer["cleanup"] == "pending"
    assert len(active(holds("job-stuck"))) == 1


def test_a_users_odcr_is_validated_used_and_never_cancelled(hpc: Any, context: Any) -> None:
    answer = reserve(
        job(capacity_reservation_id=USER_ODCR, launch_template={"id": TEMPLATE}, provision=True),
        context,
    )
    assert answer["status"] == "provisioned", answer
    assert answer["reservation"]["owned"] is False
    assert answer["subnet_ids"] == [SUBNETS[1]]
    assert hpc.calls("CancelCapacityReservation") == []
    (odcr,) = ec2().describe_capacity_reservations(CapacityReservationIds=[USER_ODCR])[
        "CapacityReservations"
    ]
    assert odcr["State"] == "active"
    assert odcr["AvailableInstanceCount"] == 0
    released = release({"reservation_id": USER_ODCR}, context)
    assert released["status"] == "released"
    assert released["cancelled"] == []
    assert released["skipped"] == [{"id": USER_ODCR, "reason": "not owned by this broker"}]
    assert hpc.calls("CancelCapacityReservation") == []


def test_another_jobs_hold_cannot_be_passed_in(hpc: Any, context: Any) -> None:
    """Owned reservations are the cleaner's to cancel: adopting one would put a job on a
    reservation that may vanish under it, so it is refused and left as it was."""
    first = reserve(job(request_id="job-owner"), context)
    assert first["status"] == "reserved", first
    theirs = first["reservation"]["id"]
    creates = len(hpc.calls("CreateCapacityReservation"))
    answer = reserve(
        job(job_id="5678", request_id="job-borrower", capacity_reservation_id=theirs), context
    )
    assert answer["status"] == "rejected"
    assert "one of this broker's own reservations" in answer["reason"]
    assert len(hpc.calls("CreateCapacityReservation")) == creates
    assert hpc.calls("CancelCapacityReservation") == []
    assert [r["CapacityReservationId"] for r in active(holds("job-owner"))] == [theirs]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"capacity_reservation_id": "cr-0eeeeeeeeeeeeeee2"}, "available"),
        ({"capacity_reservation_id": USER_ODCR, "subnet_ids": [SUBNETS[0]]}, "none of the job"),
        ({"capacity_reservation_id": USER_ODCR, "instance_types": ["c7i.48xlarge"]}, "not among"),
        ({"capacity_reservation_id": "cr-0abcabcabcabcabc9"}, "does not exist"),
        ({"capacity_reservation_id": USER_ODCR, "instance_platform": "Windows"}, "Windows"),
    ],
)
def test_an_unfit_reservation_is_rejected(
    hpc: Any, context: Any, fields: dict[str, Any], reason: str
) -> None:
    answer = reserve(job(**fields), context)
    assert answer["status"] == "rejected"
    assert reason in answer["reason"]
    assert hpc.calls("CreateCapacityReservation") == []
    assert hpc.calls("CancelCapacityReservation") == []


def test_an_active_capacity_block_is_used_with_its_market_type(hpc: Any, context: Any) -> None:
    answer = reserve(
        job(
            instance_types=["p5.48xlarge"],
            instance_count=4,
            capacity_reservation_id=BLOCK_NOW,
            launch_template={"id": TEMPLATE},
            provision=True,
        ),
        context,
    )
    assert answer["status"] == "provisioned", answer
    assert answer["reservation"]["type"] == "capacity-block"
    data = template_data(answer["launch_template"]["version"])
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": BLOCK_NOW},
    }
    assert hpc.calls("CancelCapacityReservation") == []


def test_a_scheduled_block_says_when_to_ask_again(hpc: Any, context: Any) -> None:
    answer = reserve(
        job(instance_types=["p5.48xlarge"], instance_count=4, capacity_reservation_id=BLOCK_LATER),
        context,
    )
    assert answer["status"] == "no_capacity"
    assert 3 * 3600 - 120 <= answer["retry_after_seconds"] <= 3 * 3600 + 5


def test_the_same_request_twice_makes_one_hold(hpc: Any, context: Any) -> None:
    first = reserve(job(request_id="job-twice", launch_template={"id": TEMPLATE}), context)
    hpc.advance(90)  # the scheduler retries a minute and a half later
    second = reserve(job(request_id="job-twice", launch_template={"id": TEMPLATE}), context)
    assert first["status"] == second["status"] == "reserved"
    assert first["reservation"]["id"] == second["reservation"]["id"]
    assert first["launch_template"] == second["launch_template"]
    assert len(holds("job-twice")) == 1


@pytest.fixture
def state_table(hpc: Any, container: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName="broker-state",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    monkeypatch.setenv("BROKER_STATE_TABLE", "broker-state")
    container.rebuild()
    return "broker-state"


def test_with_the_state_table_a_replay_returns_the_first_answer(
    state_table: str, hpc: Any, context: Any
) -> None:
    first = reserve(job(request_id="job-rec", attempt=0), context)
    # capacity is gone now, but the answer to this request was settled
    hpc.set_pool("us-east-1", "us-east-1c", "hpc7a.96xlarge", 0)
    second = reserve(job(request_id="job-rec", attempt=1), context)
    # Contract v3: the same outcome, said to be a replay, with the hold's state now.
    assert second["replayed"] is True
    assert second["reservation"] == {
        **first["reservation"],
        "state": second["reservation"]["state"],
    }
    assert second["reservation"]["state"] in ("pending", "active")  # EC2 may lag a moment
    same = ("replayed", "reservation", "message", "reservation_seconds")
    assert {k: v for k, v in second.items() if k not in same} == {
        k: v for k, v in first.items() if k not in same
    }
    assert second["message"].startswith(first["message"])
    assert len(holds("job-rec")) == 1
    other = reserve(job(request_id="job-rec", instance_count=4), context)
    assert other["status"] == "invalid_request"
    assert other["errors"][0]["field"] == "request_id"


# Threads in one process share Powertools' metric store (Lambda never does): see test_concurrency.
@pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
def test_concurrent_duplicates_make_one_hold(state_table: str, hpc: Any, context: Any) -> None:
    hpc.latency(0.05)
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def call() -> None:
        answer = reserve(job(request_id="job-dup"), context)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 8
    assert {a["status"] for a in answers} == {"reserved"}
    assert len({a["reservation"]["id"] for a in answers}) == 1
    assert len(holds("job-dup")) == 1


def test_release_by_job_stack_and_id_cancels_only_owned_holds(hpc: Any, context: Any) -> None:
    hpc.set_pool("us-east-1", "us-east-1a", "c7i.48xlarge", 16)
    a = reserve(job(job_id="j-1", request_id="r-1", stack_name="soca-job-1"), context)
    b = reserve(job(job_id="j-2", request_id="r-2", stack_name="soca-job-2"), context)
    c = reserve(job(job_id="j-3", request_id="r-3"), context)
    assert {a["status"], b["status"], c["status"]} == {"reserved"}
    by_job = release({"job_id": "j-1"}, context)
    assert by_job["cancelled"] == [a["reservation"]["id"]]
    by_stack = release({"stack_name": "soca-job-2"}, context)
    assert by_stack["cancelled"] == [b["reservation"]["id"]]
    by_id = release({"reservation_id": c["reservation"]["id"], "request_id": "rel-3"}, context)
    assert by_id["status"] == "released"
    assert by_id["cancelled"] == [c["reservation"]["id"]]
    again = release({"job_id": "j-1"}, context)
    assert again == {**again, "status": "released", "cancelled": [], "skipped": []}
    assert active(holds()) == []
    odcr = ec2().describe_capacity_reservations(CapacityReservationIds=[USER_ODCR])
    assert odcr["CapacityReservations"][0]["State"] == "active"


def test_release_input_is_checked(hpc: Any, context: Any) -> None:
    for event in ({}, {"job_id": "1", "stack_name": "x"}, {"reservation_id": "cr-nothex"}):
        assert release(event, context)["status"] == "invalid_request"


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ({"id": "lt-0123456789abcdef0"}, "launch_template.id"),
        ({"id": TEMPLATE, "version": "42"}, "launch_template.version"),
    ],
)
def test_a_template_that_does_not_exist_costs_no_hold(
    hpc: Any, context: Any, template: dict[str, str], field: str
) -> None:
    answer = reserve(job(request_id="job-no-lt", launch_template=template), context)
    assert answer["status"] == "invalid_request"
    assert answer["errors"][0]["field"] == field
    assert hpc.calls("CreateCapacityReservation") == []
