"""Latency, EC2 token-bucket throttling, fault injection (errors and timeouts), the call log."""

from __future__ import annotations

import time
from types import SimpleNamespace

import botocore.retryhandler
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from emu_helpers import REGION, error_of

pytestmark = pytest.mark.emulator

SLOW = 0.05  # seconds: small, and only ever asserted as a lower bound


@pytest.fixture
def retrying(emu, client, monkeypatch):
    """An EC2 client with botocore's retries (4 attempts), backoff without the wait."""
    monkeypatch.setattr(botocore.retryhandler, "random", SimpleNamespace(random=lambda: 0.0))
    return client("ec2", retries=4)


def reservations(ec2) -> list[dict]:
    return ec2.describe_capacity_reservations()["CapacityReservations"]


# -- latency -------------------------------------------------------------------------------
def test_latency_for_every_call(api, emu, ec2):
    emu.latency(SLOW)
    started = time.perf_counter()
    ec2.describe_capacity_reservations()
    assert time.perf_counter() - started >= SLOW
    [call] = emu.calls("DescribeCapacityReservations")
    assert call.ended - call.started >= SLOW


def test_latency_per_action(api, emu, ec2):
    emu.latency(0.0, {"CreateCapacityReservation": SLOW})
    started = time.perf_counter()
    api.reserve()
    assert time.perf_counter() - started >= SLOW
    emu.latency(0.0)
    ec2.describe_capacity_reservations()
    [call] = emu.calls("DescribeCapacityReservations")
    assert call.outcome == "ok"


def test_latency_applies_to_errors_too(api, emu):
    emu.latency(SLOW)
    started = time.perf_counter()
    with pytest.raises(ClientError):
        api.reserve("g6.xlarge", "us-east-1a", 1)
    assert time.perf_counter() - started >= SLOW


# -- throttling ----------------------------------------------------------------------------
def test_throttling_answers_request_limit_exceeded_with_503(api, emu, ec2):
    emu.throttle(buckets={"mutating": (2, 0.0), "non_mutating": (100, 0.0)})
    api.reserve()
    api.reserve()
    with pytest.raises(ClientError) as exc:
        api.reserve()
    assert error_of(exc) == ("RequestLimitExceeded", 503)
    assert len(reservations(ec2)) == 2  # the throttled call did nothing
    assert [c.outcome for c in emu.calls("CreateCapacityReservation")] == [
        "ok",
        "ok",
        "RequestLimitExceeded",
    ]


def test_each_action_has_its_own_bucket(api, emu, ec2):
    # EC2 throttles "on a per-API basis ... requests for other API are not affected" (EC2 API
    # reference, "Request throttling"). The emulator used to share one bucket per category
    # (every Describe* drew from one); this test asserted that and now asserts EC2's rule.
    emu.throttle(buckets={"mutating": (1, 0.0), "non_mutating": (3, 0.0)})
    rid = api.reserve()["CapacityReservationId"]
    with pytest.raises(ClientError) as exc:
        api.reserve()
    assert error_of(exc) == ("RequestLimitExceeded", 503)
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)  # mutating, its own bucket
    for _ in range(3):
        ec2.describe_capacity_reservations()
    with pytest.raises(ClientError) as exc:
        ec2.describe_capacity_reservations()
    assert error_of(exc) == ("RequestLimitExceeded", 503)
    for _ in range(3):  # another Describe: its own bucket, still full
        ec2.describe_vpcs()


OFFERINGS = {"InstanceType": "p5.48xlarge", "InstanceCount": 1, "CapacityDurationHours": 24}
RUNNING = {"Filters": [{"Name": "instance-state-name", "Values": ["running"]}]}


@pytest.mark.parametrize(
    ("action", "params", "tokens", "untouched"),
    [
        # "Uncategorized actions": DescribeCapacityBlockOfferings and PurchaseCapacityBlock, 10
        # tokens, refilled at 0.15/s (the non-mutating default would allow 100).
        (
            "describe_capacity_block_offerings",
            OFFERINGS,
            10,
            [("describe_capacity_reservations", {})],  # the non-mutating default
        ),
        # An unfiltered, unpaginated DescribeInstances; with a filter or pagination: the
        # standard bucket of 100, still full.
        (
            "describe_instances",
            {},
            50,
            [("describe_instances", {"MaxResults": 5}), ("describe_instances", RUNNING)],
        ),
    ],
    ids=["capacity-block-actions", "unfiltered-unpaginated-describe-instances"],
)
def test_a_call_with_a_small_bucket_of_its_own_is_throttled_alone(
    emu, ec2, action, params, tokens, untouched
):
    """At EC2's sizes with no refill, the call's small bucket runs dry; other calls still pass."""
    emu.throttle(time_scale=0)  # EC2's sizes, no refill
    for _ in range(tokens):
        getattr(ec2, action)(**params)
    with pytest.raises(ClientError) as exc:
        getattr(ec2, action)(**params)
    assert error_of(exc) == ("RequestLimitExceeded", 503)
    for other, other_params in untouched:
        getattr(ec2, other)(**other_params)


def test_buckets_can_refill_by_the_emulator_clock(emu, ec2):
    # A caller whose clocks are the emulator's (the broker in tests/integration, EmulatedTime):
    # the buckets refill as that clock moves, whatever the real clock does.
    emu.freeze()
    emu.throttle(buckets={"non_mutating": (20, 20.0)}, emulator_clock=True)
    for _ in range(20):
        ec2.describe_vpcs()
    time.sleep(2 * SLOW)  # real time passes (two tokens' worth): the emulator clock stands
    with pytest.raises(ClientError) as exc:
        ec2.describe_vpcs()
    assert error_of(exc) == ("RequestLimitExceeded", 503)
    emu.advance(0.075)  # on the emulator clock: one token and a half
    ec2.describe_vpcs()
    with pytest.raises(ClientError):
        ec2.describe_vpcs()


def test_raised_limits(emu, ec2):
    # Raised 6x as the page advises: refill 20 -> 120/s, which passes the bucket of 100, so the
    # bucket is raised with it (to 120). No refill here (time_scale=0): only the burst counts.
    emu.throttle(time_scale=0, raised=6)
    for _ in range(120):
        ec2.describe_availability_zones()
    with pytest.raises(ClientError) as exc:
        ec2.describe_availability_zones()
    assert error_of(exc) == ("RequestLimitExceeded", 503)


def test_another_client_takes_from_the_same_bucket(api, emu):
    # The other client's share is exercised call by call in tests/emulator/test_throttling.py
    # (a driven clock); here: the knob reaches the hub and its calls are accounted for.
    emu.throttle(buckets={"mutating": (50, 1000.0)}, others={"CreateCapacityReservation": 0.5})
    api.reserve()
    time.sleep(SLOW)  # 500 calls a second from the other client
    api.reserve()
    [(bucket, got)] = emu.throttled_others().items()
    assert bucket.endswith(f"/{REGION}/CreateCapacityReservation")
    assert got["taken"] > 0


def test_buckets_are_per_region(emu, ec2, client):
    emu.throttle(buckets={"mutating": (1, 0.0), "non_mutating": (1, 0.0)})
    ec2.describe_capacity_reservations()
    with pytest.raises(ClientError):
        ec2.describe_capacity_reservations()
    client("ec2", "us-west-2").describe_capacity_reservations()


def test_action_groups_can_be_overridden(api, emu, ec2):
    emu.throttle(
        buckets={"mutating": (100, 0.0), "non_mutating": (100, 0.0), "capacity": (1, 0.0)},
        groups={"CreateCapacityReservation": "capacity"},
    )
    rid = api.reserve()["CapacityReservationId"]
    with pytest.raises(ClientError) as exc:
        api.reserve()
    assert error_of(exc) == ("RequestLimitExceeded", 503)
    ec2.modify_capacity_reservation(CapacityReservationId=rid, InstanceCount=2)  # mutating
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)


def test_buckets_refill_and_time_scale_speeds_refill_up(emu, ec2):
    emu.throttle(buckets={"mutating": (50, 5.0), "non_mutating": (1, 1.0)})
    ec2.describe_capacity_reservations()
    with pytest.raises(ClientError):  # 1 token a second: not back within milliseconds
        ec2.describe_capacity_reservations()
    emu.throttle(buckets={"mutating": (50, 5.0), "non_mutating": (1, 1.0)}, time_scale=100)
    ec2.describe_capacity_reservations()
    time.sleep(SLOW)  # 100 tokens/s: one is back after 10 ms
    ec2.describe_capacity_reservations()


def test_ec2_default_buckets(emu, ec2):
    emu.throttle(time_scale=0)  # EC2's default bursts (non-mutating: 100), no refill
    for _ in range(100):
        ec2.describe_availability_zones()
    with pytest.raises(ClientError) as exc:
        ec2.describe_availability_zones()
    assert error_of(exc) == ("RequestLimitExceeded", 503)
    emu.throttle(enabled=False)
    ec2.describe_availability_zones()


def test_throttling_is_for_ec2_only(emu, client):
    emu.throttle(buckets={"mutating": (0, 0.0), "non_mutating": (0, 0.0)})
    ssm = client("ssm")
    ssm.put_parameter(Name="/p", Value="v", Type="String")
    assert ssm.get_parameter(Name="/p")["Parameter"]["Value"] == "v"


# -- faults: errors ------------------------------------------------------------------------
def test_fail_the_next_call(api, emu, ec2):
    fault = emu.fail("CreateCapacityReservation", "InsufficientInstanceCapacity")
    with pytest.raises(ClientError) as exc:
        api.reserve()
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)
    assert "Injected" in exc.value.response["Error"]["Message"]
    assert fault.remaining == 0
    assert reservations(ec2) == []
    assert api.pool("us-east-1a", "c5.large")["used"] == 0
    api.reserve()  # only the next call failed


def test_fail_the_next_n_calls(api, emu):
    emu.fail("CreateCapacityReservation", "InstanceLimitExceeded", times=2)
    for _ in range(2):
        with pytest.raises(ClientError) as exc:
            api.reserve()
        assert error_of(exc) == ("InstanceLimitExceeded", 400)
    api.reserve()


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("InsufficientInstanceCapacity", 500),
        ("RequestLimitExceeded", 503),
        ("Unavailable", 503),
        ("InternalError", 500),
        ("UnauthorizedOperation", 403),
        ("VcpuLimitExceeded", 400),
    ],
)
def test_injected_codes_carry_ec2_statuses(api, emu, code, status):
    emu.fail("CreateCapacityReservation", code)
    with pytest.raises(ClientError) as exc:
        api.reserve()
    assert error_of(exc) == (code, status)


def test_custom_status_and_message(api, emu):
    emu.fail("CreateCapacityReservation", "Blocked", status=403, message="No, thank you")
    with pytest.raises(ClientError) as exc:
        api.reserve()
    assert error_of(exc) == ("Blocked", 403)
    assert exc.value.response["Error"]["Message"] == "No, thank you"


def test_fault_conditions_on_parameters_and_region(api, emu, client):
    emu.fail(
        "CreateCapacityReservation",
        "InsufficientInstanceCapacity",
        when={"InstanceType": "m5.large"},
    )
    api.reserve("c5.large")  # does not match: no failure, fault kept
    with pytest.raises(ClientError) as exc:
        api.reserve("m5.large")
    assert error_of(exc) == ("InsufficientInstanceCapacity", 500)
    emu.fail("DescribeCapacityReservations", "Unavailable", region="us-west-2")
    api.ec2.describe_capacity_reservations()
    with pytest.raises(ClientError) as exc:
        client("ec2", "us-west-2").describe_capacity_reservations()
    assert error_of(exc) == ("Unavailable", 503)


def test_any_action(api, emu, ec2):
    emu.fail("*", "InternalError", times=2)
    with pytest.raises(ClientError):
        ec2.describe_vpcs()
    with pytest.raises(ClientError):
        api.reserve()
    api.reserve()


def test_clear_faults(api, emu):
    emu.fail("CreateCapacityReservation", "InternalError", times=5)
    emu.clear_faults()
    api.reserve()


def test_bad_fault_definitions(emu):
    with pytest.raises(ValueError, match="needs a code"):
        emu.fail("CreateCapacityReservation")
    with pytest.raises(ValueError, match="unknown fault mode"):
        emu.fail("CreateCapacityReservation", "X", mode="explode")


def test_sdk_retries_ride_out_a_transient_fault(api, emu, retrying):
    emu.fail("DescribeCapacityReservations", "RequestLimitExceeded", times=2)
    response = retrying.describe_capacity_reservations()
    assert response["ResponseMetadata"]["RetryAttempts"] == 2
    assert [c.outcome for c in emu.calls("DescribeCapacityReservations")] == [
        "RequestLimitExceeded",
        "RequestLimitExceeded",
        "ok",
    ]


# -- faults: timeouts ----------------------------------------------------------------------
def test_a_timeout_takes_effect_and_loses_the_answer(api, emu, ec2):
    emu.fail("CreateCapacityReservation", mode="timeout")
    with pytest.raises(ReadTimeoutError):
        api.reserve(count=2)
    [reservation] = reservations(ec2)  # EC2 did create it
    assert reservation["TotalInstanceCount"] == 2
    assert api.pool("us-east-1a", "c5.large")["used"] == 2
    assert [c.outcome for c in emu.calls("CreateCapacityReservation")] == ["timeout"]


def test_sdk_retry_after_a_timeout_with_a_client_token_creates_one(api, emu, retrying):
    emu.fail("CreateCapacityReservation", mode="timeout")
    response = retrying.create_capacity_reservation(
        InstanceType="c5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=2,
        ClientToken="probe-1-c5.large-subnet-a",
    )
    assert response["ResponseMetadata"]["RetryAttempts"] == 1
    [only] = reservations(retrying)
    assert only["CapacityReservationId"] == response["CapacityReservation"]["CapacityReservationId"]
    assert api.pool("us-east-1a", "c5.large")["used"] == 2
    assert [c.outcome for c in emu.calls("CreateCapacityReservation")] == ["timeout", "ok"]


def test_sdk_retry_after_a_timeout_without_a_client_token_creates_two(api, emu, retrying):
    emu.fail("CreateCapacityReservation", mode="timeout")
    retrying.create_capacity_reservation(
        InstanceType="c5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=1,
    )
    assert len(reservations(retrying)) == 2  # why the broker always sends a ClientToken


def test_a_timeout_on_cancel(api, emu, ec2, retrying):
    rid = api.reserve()["CapacityReservationId"]
    emu.fail("CancelCapacityReservation", mode="timeout")
    with pytest.raises(ClientError) as exc:  # the retry finds it already cancelled
        retrying.cancel_capacity_reservation(CapacityReservationId=rid)
    assert error_of(exc) == ("IncorrectState", 400)
    assert api.get(rid)["State"] == "cancelled"


# -- the call log --------------------------------------------------------------------------
def test_the_call_log(api, emu, ec2):
    emu.clear_calls()
    api.reserve("c5.large", "us-east-1a", 2)
    with pytest.raises(ClientError):
        api.reserve("g6.xlarge", "us-east-1a", 1)
    with pytest.raises(ClientError):
        ec2.describe_capacity_reservations(CapacityReservationIds=["cr-0123456789abcdef0"])
    calls = emu.calls()
    assert [(c.action, c.outcome) for c in calls] == [
        ("CreateCapacityReservation", "ok"),
        ("CreateCapacityReservation", "InsufficientInstanceCapacity"),
        ("DescribeCapacityReservations", "InvalidCapacityReservationId.NotFound"),
    ]
    first = calls[0]
    assert first.service == "ec2"
    assert first.region == REGION
    assert first.params["InstanceType"] == "c5.large"
    assert first.params["InstanceCount"] == 2
    assert first.ended >= first.started
    assert [c.params["InstanceType"] for c in emu.calls("CreateCapacityReservation")] == [
        "c5.large",
        "g6.xlarge",
    ]
    assert emu.calls("CreateCapacityReservation", service="ssm") == []
    emu.clear_calls()
    assert emu.calls() == []


# -- a barrier: concurrency proven without a clock ----------------------------------------
def test_a_gathering_is_met_by_calls_in_flight_together(api, emu, ec2):
    import threading

    together = emu.gather("DescribeCapacityReservations", parties=3, timeout=10)
    threads = [threading.Thread(target=ec2.describe_capacity_reservations) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert together.met and not together.broken
    ec2.describe_capacity_reservations()  # used up: later calls pass


def test_a_gathering_is_broken_by_calls_one_after_the_other(api, emu, ec2):
    together = emu.gather("DescribeCapacityReservations", parties=2, timeout=0.2)
    ec2.describe_capacity_reservations()  # waits alone until the barrier breaks, then served
    ec2.describe_capacity_reservations()
    assert together.broken and not together.met
