"""probe against the emulator: the issue's "Done when", one test each."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from capacity_broker.adapters.aws import RetryPolicy
from capacity_broker.handlers.probe import handler

from emulator import Emulator

# The broker's waits on the emulator's clock (conftest: ``waits_on_emulated_time``).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("waits_on_emulated_time")]

SUBNETS = ["subnet-0a0000000000000a1", "subnet-0b0000000000000b2", "subnet-0c0000000000000c3"]
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]


def world(
    capacity: list[int | None], instance_type: str = "g6.xlarge", **region: Any
) -> dict[str, Any]:
    return {
        "regions": {
            "us-east-1": {
                "vpcs": [
                    {
                        "name": "cluster",
                        "cidr": "10.1.0.0/16",
                        "subnets": [
                            {
                                "id": s,
                                "name": f"s{i}",
                                "availability_zone": az,
                                "cidr": f"10.1.{i}.0/24",
                            }
                            for i, (s, az) in enumerate(zip(SUBNETS, AZS, strict=True))
                        ],
                    }
                ],
                "pools": [
                    {"availability_zone": az, "instance_type": instance_type, "capacity": c}
                    for az, c in zip(AZS, capacity, strict=True)
                ],
                "images": [
                    {
                        "id": "ami-0aaaaaaaaaaaaaaa1",
                        "name": "rhel-byol",
                        "platform_details": "Red Hat BYOL Linux",
                    },
                    {"id": "ami-0aaaaaaaaaaaaaaa2", "name": "odd", "platform_details": "Plan 9"},
                ],
                **region,
            }
        }
    }


def probe(context: Any, **fields: Any) -> dict[str, Any]:
    event = {"instance_type": "g6.xlarge", "subnet_ids": SUBNETS, **fields}
    return handler(event, context)  # type: ignore[no-any-return]


def owned(request_id: str) -> list[dict[str, Any]]:
    """The request's reservations as they are, read from the emulator's model: an API call
    would see them as EC2 shows them a moment after creation (eventually consistent) and
    would count toward their settling."""
    capacity = Emulator().capacity("us-east-1")
    found = [r.to_dict(capacity.tags_of(r.id)) for r in capacity.reservations.values()]
    return [
        r
        for r in found
        if {"Key": "capacity-broker:request-id", "Value": request_id} in r.get("Tags", [])
    ]


def test_only_the_third_az_has_capacity(broker: Any, context: Any) -> None:
    broker.load_scenario(world([0, 0, 4]))
    answer = probe(context, request_id="vdi-1")
    assert answer["status"] == "available"
    assert answer["subnet_id"] == SUBNETS[2]
    assert answer["availability_zone"] == "us-east-1c"
    assert answer["availability_zone_id"].startswith("use1-az")
    assert [a["outcome"] for a in answer["attempts"]] == [
        "insufficient_capacity",
        "insufficient_capacity",
        "available",
    ]
    assert answer["attempts"][2]["cancelled"] is True
    made = owned("vdi-1")
    assert len(made) == 1
    assert all(r["State"] != "active" for r in made)
    assert broker.pool("us-east-1", "us-east-1c", "g6.xlarge")["available"] == 4


def test_the_first_subnet_in_request_order_wins(broker: Any, context: Any) -> None:
    broker.load_scenario(world([0, 4, 4]))
    answer = probe(context, request_id="vdi-2")
    assert answer["subnet_id"] == SUBNETS[1]
    assert all(r["State"] == "cancelled" for r in owned("vdi-2"))


def test_exhausted_everywhere_is_unavailable(broker: Any, context: Any) -> None:
    broker.load_scenario(world([0, 0, 0]))
    answer = probe(context, request_id="vdi-3")
    assert answer["status"] == "unavailable"
    assert {a["outcome"] for a in answer["attempts"]} == {"insufficient_capacity"}
    assert all(a["error_code"] == "InsufficientInstanceCapacity" for a in answer["attempts"])
    assert owned("vdi-3") == []


def test_unsupported_counts_as_no_capacity(broker: Any, context: Any) -> None:
    broker.load_scenario(
        world(
            [0, 0, 0],
            unsupported=[{"availability_zone": "us-east-1c", "instance_type": "g6.xlarge"}],
        )
    )
    answer = probe(context)
    assert answer["status"] == "unavailable"
    assert answer["attempts"][2]["outcome"] == "unsupported"


def test_a_quota_error_stops_the_attempts_not_started(
    broker: Any, context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One attempt at a time, so the order of events is certain.
    monkeypatch.setenv("BROKER_MAX_CONCURRENCY", "1")
    broker.load_scenario(world([4, 4, 4], quotas={"instances": {"g6.xlarge": 0}}))
    answer = probe(context, request_id="vdi-4")
    assert answer["status"] == "error"
    assert answer["error_code"] == "InstanceLimitExceeded"
    assert [a["outcome"] for a in answer["attempts"]] == [
        "limit_exceeded",
        "not_tried",
        "not_tried",
    ]
    assert len(broker.calls("CreateCapacityReservation")) == 1


def test_a_permission_error_stops_too(
    broker: Any, context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROKER_MAX_CONCURRENCY", "1")
    broker.load_scenario(world([4, 4, 4]))
    broker.fail("CreateCapacityReservation", "UnauthorizedOperation", times=1)
    answer = probe(context)
    assert answer["status"] == "error"
    assert answer["error_code"] == "UnauthorizedOperation"
    assert answer["attempts"][1]["outcome"] == "not_tried"


# What a cold probe looks up beside its flags' read (``logic.placement``): reads only.
LOOK_UPS = {"DescribeInstanceTypeOfferings", "DescribeSubnets", "DescribeVpcs", "DescribeImages"}


def set_flag(value: str) -> None:
    """The cluster's EnableCapacityReservation feature flag in Parameter Store."""
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name="/capacity-broker/demo-cluster/configuration/FeatureFlags/EnableCapacityReservation",
        Value=value,
        Type="String",
    )


def test_flag_off_is_skipped_and_creates_nothing(broker: Any, context: Any) -> None:
    """Contract: EnableCapacityReservation false is ``skipped`` (the first subnet, no
    reservation). A cold container looks its places up beside the flags' read (one round trip
    instead of two in a row): those reads are all EC2 sees, each answered before the probe
    answers (nothing keeps running after it). A warm one asks EC2 nothing at all."""
    broker.load_scenario(world([4, 4, 4]))
    set_flag("FALSE")
    broker.clear_calls()
    answer = probe(context)
    assert answer["status"] == "skipped"
    assert answer["subnet_id"] == SUBNETS[0]
    calls = broker.calls()
    assert {c.action for c in calls} <= LOOK_UPS, calls
    assert all(c.ended for c in calls), calls
    broker.clear_calls()
    again = probe(context)
    assert again["status"] == "skipped"
    assert broker.calls() == []  # not even a describe
    assert owned(answer["request_id"]) == owned(again["request_id"]) == []


def test_a_skipped_probe_drops_what_its_look_ups_found(broker: Any, context: Any) -> None:
    """What the look-ups found is the probe's only when the flags say to probe: with the flag
    off, a subnet that does not exist (``invalid_request`` when probing) or EC2 refusing the
    look-ups (``error``) changes nothing, the answer is ``skipped`` as when the flags were
    read first."""
    broker.load_scenario(world([4, 4, 4]))
    set_flag("FALSE")
    missing = probe(context, subnet_ids=[SUBNETS[0], "subnet-0ddddddddddddddd4"])
    assert missing["status"] == "skipped", missing
    assert missing["subnet_id"] == SUBNETS[0]
    broker.clear_calls()
    broker.fail("DescribeSubnets", "UnauthorizedOperation", times=1000)
    refused = probe(context, subnet_ids=[SUBNETS[1]])
    assert refused["status"] == "skipped", refused
    assert refused["subnet_id"] == SUBNETS[1]
    assert {c.action for c in broker.calls()} <= LOOK_UPS


@pytest.mark.parametrize("grouping", ["true", "false"])
def test_a_cold_probe_looks_its_places_up_beside_its_flags_read(
    broker: Any,
    container: Any,
    context: Any,
    monkeypatch: pytest.MonkeyPatch,
    side_by_side: Any,
    grouping: str,
) -> None:
    """The look-ups are not a step after the flags' read but beside it: each waits to see the
    other under way (a probe that made them one after the other would never see both at
    once; the 60 s only guard a hang). Without grouping they start at once; with it, once the
    probe's arrival says it is not a group's member."""
    monkeypatch.setenv("BROKER_PROBE_GROUPING", grouping)
    broker.load_scenario(world([0, 0, 4]))
    root = container.root
    seen = side_by_side((root.ec2("us-east-1"), "subnets"), (root.flags, "read"))
    answer = probe(context)
    assert seen == {"subnets saw read": True, "read saw subnets": True}
    assert answer["status"] == "available" and answer["subnet_id"] == SUBNETS[2]


def test_unreadable_flags_answer_as_before_whatever_the_look_ups_say(
    broker: Any, context: Any
) -> None:
    """Flags that cannot be read answer the flags' error, as when they were read first: the
    look-ups beside them (failing too, here) are not the answer, and nothing is created."""
    broker.load_scenario(world([4, 4, 4]))
    broker.fail("GetParametersByPath", "AccessDeniedException", service="ssm", times=1000)
    broker.fail("DescribeSubnets", "UnauthorizedOperation", times=1000)
    answer = probe(context)
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "AccessDeniedException"
    assert answer["message"].startswith("Could not read the feature flags"), answer
    assert {c.action for c in broker.calls()} <= LOOK_UPS
    assert broker.calls("CreateCapacityReservation") == []


def test_a_failed_look_up_answers_as_before(broker: Any, context: Any) -> None:
    """A look-up EC2 refuses is the probe's answer once its flags say to probe: the step's
    error, nothing created (a place that does not exist: ``invalid_request``, below)."""
    broker.load_scenario(world([4, 4, 4]))
    broker.fail("DescribeSubnets", "UnauthorizedOperation", times=1000)
    answer = probe(context)
    assert answer["status"] == "error", answer
    assert answer["error_code"] == "UnauthorizedOperation"
    assert answer["message"].startswith(
        "Could not look up the instance types, subnets, image or VPC"
    ), answer
    assert broker.calls("CreateCapacityReservation") == []


def test_a_malformed_flag_is_a_configuration_error(broker: Any, context: Any) -> None:
    broker.load_scenario(world([4, 4, 4]))
    set_flag("yes please")
    answer = probe(context)
    assert answer["status"] == "error"
    assert "EnableCapacityReservation" in answer["message"]
    assert broker.calls("CreateCapacityReservation") == []


def test_a_throttled_create_that_succeeds_on_retry_makes_one_reservation(
    broker: Any, context: Any
) -> None:
    broker.load_scenario(world([0, 0, 4]))
    broker.fail("CreateCapacityReservation", "RequestLimitExceeded", times=2)
    answer = probe(context, request_id="vdi-5")
    assert answer["status"] == "available"
    assert len(owned("vdi-5")) == 1


def test_a_create_whose_answer_is_lost_is_not_made_twice(broker: Any, context: Any) -> None:
    broker.load_scenario(world([0, 0, 4]))
    broker.fail("CreateCapacityReservation", mode="timeout", times=3)
    answer = probe(context, request_id="vdi-6")
    assert answer["status"] == "available"
    made = owned("vdi-6")
    assert len(made) == 1
    assert made[0]["State"] == "cancelled"


def test_a_request_id_reused_probe_after_probe_gets_a_fresh_answer_each_time(
    broker: Any, container: Any, context: Any, emulated_time: Any
) -> None:
    """A VDI client that reuses its session id: every probe is answered afresh (contract),
    never IdempotentParameterMismatch once the first tokens are spent, and none leaves a
    reservation behind. The broker's clock moves a second per probe (new EndDates); its
    waits are on the emulator's clock."""
    broker.load_scenario(world([0, 0, 4]))
    start, ticks = broker.now(), iter(range(1000))

    def a_second_later() -> datetime:
        return start + timedelta(seconds=next(ticks))

    container.build(
        clock=a_second_later,
        monotonic=emulated_time.monotonic,
        sleep=emulated_time.sleep,
        retry=emulated_time.paused(RetryPolicy()),
    )
    for _ in range(6):
        answer = probe(context, request_id="vdi-session-42")
        assert answer["status"] == "available", answer
        assert answer["subnet_id"] == SUBNETS[2]
    made = owned("vdi-session-42")
    assert {r["State"] for r in made} == {"cancelled"}
    assert len(made) == 6  # one per probe in the subnet with room, each given back


def test_a_probe_costs_ec2_one_create_and_one_cancel(
    broker: Any, context: Any, ec2_preset: str, emulated_time: Any, monkeypatch: Any
) -> None:
    """EC2's mutating bucket (50, 5/s per account and region) is what a class of desktops
    spends: a probe's cancel right after its create waits, with describes (their own bucket of
    100, 20/s), until EC2 can take it, and is sent once (issue 23: it cost three, NotFound,
    IncorrectState, then ok). Eventual consistency is on, as by default; counts, not time.

    On the emulator's clock: a create slower than the hedge delay (0.2 s once the first probe
    has measured EC2) starts the next subnet's too, which a loaded machine did on the real
    clock (22 creates for 20 probes, CI of stop 28)."""
    broker.load_scenario(world([4, 4, 4]))
    emulated_time.install(monkeypatch)
    probe(context, request_id="vdi-warm")  # the subnets' look-ups are cached from here
    broker.clear_calls()
    for i in range(20):
        answer = probe(context, request_id=f"vdi-count-{i}")
        assert (answer["status"], answer["attempts"][0]["cancelled"]) == ("available", True)
    mutating = [c for c in broker.calls() if not c.action.startswith(("Describe", "Get", "List"))]
    assert Counter((c.action, c.outcome) for c in mutating) == {
        ("CreateCapacityReservation", "ok"): 20,
        ("CancelCapacityReservation", "ok"): 20,
    }
    looks = Counter(c.outcome for c in broker.calls("DescribeCapacityReservations"))
    # The waiting: unknown, pending, then cancellable; as long as the preset's EC2 lags them
    # (one call each by default, 3 and 8 on the slow preset).
    from dataclasses import asdict

    from emulator.presets import settings_of
    from emulator.state import Settings

    lags = {**asdict(Settings()), **settings_of(ec2_preset)}
    assert sum(looks.values()) <= (lags["lag_unknown_calls"] + lags["lag_pending_calls"] + 1) * 20


def test_a_probe_short_of_the_account_s_creates_makes_none_in_case(
    broker: Any, context: Any, emulated_time: Any, monkeypatch: Any
) -> None:
    """Issue 23: in a class of desktops, a create made only in case the subnets before it fail
    (and its cancel) is two of the calls the account's mutating bucket has for the next
    desktop. A container whose bucket has no token to spare goes one subnet at a time; with
    tokens to spare, the first subnet out of capacity starts all the rest at once."""
    broker.load_scenario(world([0, 4, 4]))

    def creates(request_id: str, short: bool) -> Counter[tuple[str, str]]:
        root = emulated_time.install(monkeypatch)  # a fresh container: nothing remembered
        if short:
            bucket = root.adapters.pacer.bucket("us-east-1", "CreateCapacityReservation")
            while not bucket.short:  # spent by this container's earlier probes
                bucket.acquire()
        broker.clear_calls()
        answer = probe(context, request_id=request_id)
        assert (answer["status"], answer["subnet_id"]) == ("available", SUBNETS[1])
        mutating = [c for c in broker.calls() if c.action.endswith("CapacityReservation")]
        return Counter((c.action, c.outcome) for c in mutating)

    assert creates("vdi-spare", short=False) == {
        ("CreateCapacityReservation", "InsufficientInstanceCapacity"): 1,
        ("CreateCapacityReservation", "ok"): 2,
        ("CancelCapacityReservation", "ok"): 2,
    }
    assert creates("vdi-short", short=True) == {
        ("CreateCapacityReservation", "InsufficientInstanceCapacity"): 1,
        ("CreateCapacityReservation", "ok"): 1,
        ("CancelCapacityReservation", "ok"): 1,
    }
    assert {r["State"] for r in owned("vdi-short") + owned("vdi-spare")} == {"cancelled"}


def test_a_failed_cancel_is_retried_then_reported(broker: Any, context: Any) -> None:
    broker.load_scenario(world([0, 0, 4]))
    broker.fail("CancelCapacityReservation", "UnauthorizedOperation", times=5)
    answer = probe(context, request_id="vdi-7")
    assert answer["status"] == "available"
    assert answer["cleanup"] == "pending"
    assert answer["attempts"][2]["cancelled"] is False
    assert [r["State"] for r in owned("vdi-7")] == ["active"]


def test_a_throttled_cancel_is_retried(broker: Any, context: Any) -> None:
    broker.load_scenario(world([0, 0, 4]))
    broker.fail("CancelCapacityReservation", "RequestLimitExceeded", times=2)
    answer = probe(context, request_id="vdi-8")
    assert "cleanup" not in answer
    assert [r["State"] for r in owned("vdi-8")] == ["cancelled"]


def test_platform_is_derived_from_the_image(broker: Any, context: Any) -> None:
    broker.load_scenario(world([4, 4, 4]))
    answer = probe(context, request_id="vdi-9", image_id="ami-0aaaaaaaaaaaaaaa1")
    assert answer["status"] == "available"
    assert owned("vdi-9")[0]["InstancePlatform"] == "Linux/UNIX"


def test_an_unknown_platform_or_subnet_is_invalid_and_changes_nothing(
    broker: Any, context: Any
) -> None:
    broker.load_scenario(world([4, 4, 4]))
    odd = probe(context, image_id="ami-0aaaaaaaaaaaaaaa2")
    assert odd["status"] == "invalid_request"
    assert odd["errors"][0]["field"] == "image_id"
    missing = probe(context, subnet_ids=[SUBNETS[0], "subnet-0ddddddddddddddd4"])
    assert missing["status"] == "invalid_request"
    assert missing["errors"][0]["field"] == "subnet_ids.1"
    assert broker.calls("CreateCapacityReservation") == []


def test_malformed_requests_make_no_call(broker: Any, context: Any) -> None:
    broker.load_scenario(world([4, 4, 4]))
    broker.clear_calls()
    for event in (
        {},
        {"instance_type": "g6.xlarge", "subnet_ids": []},
        {"instance_type": "g6.xlarge", "subnet_ids": SUBNETS, "instance_count": "2"},
        {"instance_type": "g6.xlarge", "subnet_ids": SUBNETS, "tags": {"aws:x": "y"}},
        ["not", "an", "object"],
    ):
        answer = handler(event, context)
        assert answer["status"] == "invalid_request", event
        assert answer["errors"]
    assert broker.calls() == []


def test_the_reservation_is_made_the_contract_way(broker: Any, context: Any) -> None:
    broker.load_scenario(world([4, 4, 4]))
    probe(context, request_id="vdi-10", tags={"desktop": "alice"}, subnet_ids=[SUBNETS[0]])
    (made,) = owned("vdi-10")
    tags = {t["Key"]: t["Value"] for t in made["Tags"]}
    assert tags["capacity-broker:cluster-id"] == "demo-cluster"
    assert tags["capacity-broker:purpose"] == "probe"
    assert tags["capacity-broker:subnet-id"] == SUBNETS[0]
    assert tags["Name"] == "capacity-broker-probe-vdi-10"
    assert tags["desktop"] == "alice"
    assert made["InstanceMatchCriteria"] == "targeted"
    assert made["EndDateType"] == "limited"
    lifetime = made["EndDate"] - made["CreateDate"]
    assert 100 <= lifetime.total_seconds() <= 121
    (create,) = broker.calls("CreateCapacityReservation")
    assert create.params["ClientToken"].startswith("cb-probe-")


def test_n_subnets_are_probed_at_once(broker: Any, context: Any) -> None:
    six = [f"subnet-0e{i:015x}" for i in range(6)]
    broker.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "vpcs": [
                        {
                            "cidr": "10.2.0.0/16",
                            "subnets": [
                                {"id": s, "availability_zone": AZS[i % 3], "cidr": f"10.2.{i}.0/24"}
                                for i, s in enumerate(six)
                            ],
                        }
                    ],
                    "pools": [
                        {"availability_zone": az, "instance_type": "g6.xlarge", "capacity": 0}
                        for az in AZS
                    ],
                }
            }
        }
    )
    # Warm the caches (subnets, flags, capacity memory: none anywhere, so every subnet is
    # tried at once). The six creates then meet in EC2 before any is answered: only a probe
    # that sends them at the same time gets past (it used to compare timings, 6 subnets
    # against 1, which a busy machine could upset).
    handler({"instance_type": "g6.xlarge", "subnet_ids": six}, context)
    together = broker.gather("CreateCapacityReservation", parties=len(six))
    answer = handler({"instance_type": "g6.xlarge", "subnet_ids": six}, context)
    assert answer["status"] == "unavailable", answer
    assert together.met, "the subnets were probed one after the other"


def test_warm_probe_makes_only_creates_and_cancels(broker: Any, context: Any) -> None:
    broker.load_scenario(world([0, 4, 4]))
    probe(context)
    broker.clear_calls()
    answer = probe(context)
    assert answer["status"] == "available"
    calls = broker.calls()
    actions = sorted(c.action for c in calls)
    winners = {a["reservation_id"] for a in answer["attempts"] if a["outcome"] == "available"}
    creates = actions.count("CreateCapacityReservation")
    assert creates <= 3
    # No look-ups (subnets and flags are cached); besides the creates, only the cancels and
    # the describes that confirm them, each naming a winner: EC2 may not know a reservation
    # made a moment ago, or not let it be cancelled yet, so a cancel can take a few calls.
    assert set(actions) <= {
        "CreateCapacityReservation",
        "CancelCapacityReservation",
        "DescribeCapacityReservations",
    }
    cancelled = {c.params["CapacityReservationId"] for c in calls if c.action.startswith("Cancel")}
    assert cancelled == winners
    for call in calls:
        if call.action == "DescribeCapacityReservations":
            assert set(call.params["CapacityReservationIds"]) <= winners


def test_a_cold_container_looks_everything_up_in_one_round_trip(broker: Any, context: Any) -> None:
    """The first probe of a container asks for the subnets, the image and every VPC's
    tenancy at once (issue 16): the VPCs are listed, not asked for by the subnets' answer."""
    broker.load_scenario(world([0, 0, 4]))
    broker.latency(0.1)
    answer = probe(context, image_id="ami-0aaaaaaaaaaaaaaa1")
    assert answer["status"] == "available"
    lookups = {
        c.action: c
        for c in broker.calls()
        if c.action in ("DescribeSubnets", "DescribeVpcs", "DescribeImages")
    }
    assert set(lookups) == {"DescribeSubnets", "DescribeVpcs", "DescribeImages"}
    assert "VpcIds" not in lookups["DescribeVpcs"].params
    # Each started before any other ended: one round trip, not three in a row.
    assert max(c.started for c in lookups.values()) < min(c.ended for c in lookups.values())
    # A warm container asks none of them again.
    broker.clear_calls()
    assert probe(context, image_id="ami-0aaaaaaaaaaaaaaa1")["status"] == "available"
    assert not {c.action for c in broker.calls()} & set(lookups)


def test_a_create_answered_failed_is_no_capacity_there(broker: Any, context: Any) -> None:
    """EC2 may answer a create with a reservation in state ``failed`` ("capacity constraints,
    or instance limit constraints"). It holds nothing: an answer about capacity in that subnet,
    not a spent ClientToken to ask again under a new one (the broker used to make up to four
    failed reservations there and answer IdempotentParameterMismatch)."""
    broker.load_scenario(world([4, 4, 4]))
    first = str(Emulator().capacity("us-east-1").zones[AZS[0]])
    broker.fail(
        "CreateCapacityReservation", mode="failed", times=10, when={"AvailabilityZoneId": first}
    )
    answer = probe(context, request_id="vdi-failed")
    assert answer["status"] == "available", answer
    assert answer["subnet_id"] == SUBNETS[1]
    attempt = answer["attempts"][0]
    assert attempt["outcome"] == "insufficient_capacity", attempt
    assert "failed" in attempt["message"]
    made = [r for r in owned("vdi-failed") if r["AvailabilityZone"] == AZS[0]]
    assert [r["State"] for r in made] == ["failed"]
