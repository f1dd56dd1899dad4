"""SnapStart waking up (issue 41): a version Lambda re-initializes answers 409
``SnapStartNotReadyException``, a restore that timed out 408 ``SnapStartTimeoutException``.
``capacity-broker local`` answers them on the emulator's clock; the deployed client waits them
out within its patience and surfaces a restore hook's ``SnapStartException`` with its message."""

from __future__ import annotations

from collections.abc import Iterator
from random import Random

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from capacity_broker import CapacityBroker
from capacity_broker.client import InvokeFailed
from capacity_broker.client.deployed import Patience
from capacity_broker.local import LocalBroker, SnapStart

pytestmark = pytest.mark.integration

PREFIX = "capacity-broker-local"


class EmulatorTime:
    """The client's clock and sleep are the emulator's: a pause moves the clock the sleeping
    version wakes by, and nothing waits for real."""

    def __init__(self) -> None:
        from emulator.state import world

        self.clock = world.clock
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.clock.now().timestamp()

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.clock.advance(seconds)


@pytest.fixture
def asleep() -> Iterator[LocalBroker]:
    """A local broker whose functions answer as a SnapStart version asleep for 20 s of the
    emulator's clock, then failing two restores. (It points AWS_ENDPOINT_URL at itself while
    it runs, and puts it back.)"""
    with LocalBroker(
        scenario="discovery",
        cluster_id="discovery-cluster",
        snapstart=SnapStart(asleep_seconds=20, restore_timeouts=2),
    ) as broker:
        broker.server.emulator.freeze()
        yield broker


def test_the_local_lambda_answers_as_a_waking_snapstart_version(asleep: LocalBroker) -> None:
    lam = boto3.client(
        "lambda",
        endpoint_url=asleep.endpoint,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1}),
    )

    def code() -> tuple[str, int]:
        with pytest.raises(lam.exceptions.ClientError) as raised:
            lam.invoke(FunctionName=f"{PREFIX}-capacity", Payload=b"{}")
        error = raised.value.response
        return error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]

    assert code() == ("SnapStartNotReadyException", 409)
    asleep.server.emulator.advance(19)
    assert code() == ("SnapStartNotReadyException", 409)
    asleep.server.emulator.advance(1)
    assert code() == ("SnapStartTimeoutException", 408)
    assert code() == ("SnapStartTimeoutException", 408)
    answer = lam.invoke(FunctionName=f"{PREFIX}-capacity", Payload=b"{}")
    assert answer["StatusCode"] == 200 and "FunctionError" not in answer
    # None of the refused invokes ran the function.
    assert [kind for _, kind in asleep.route.invocations] == [
        "SnapStartNotReadyException",
        "SnapStartNotReadyException",
        "SnapStartTimeoutException",
        "SnapStartTimeoutException",
        "RequestResponse",
    ]


def test_the_deployed_client_waits_a_waking_version_out(asleep: LocalBroker) -> None:
    time = EmulatorTime()
    broker = CapacityBroker.deployed(function_prefix=PREFIX)
    broker.patience = Patience(seconds=60, sleep=time.sleep, monotonic=time, rng=Random(41))
    found = broker.capacity(reservation_type="all", regions=["us-east-1"])
    assert found.message
    refused = [k for _, k in asleep.route.invocations if k.startswith("SnapStart")]
    assert refused.count("SnapStartTimeoutException") == 2
    assert refused.count("SnapStartNotReadyException") >= 2
    # Jittered, growing pauses, within the patience.
    assert len(set(time.pauses)) == len(time.pauses)
    assert sum(time.pauses) < 60


def test_the_deployed_client_gives_up_within_its_patience(asleep: LocalBroker) -> None:
    time = EmulatorTime()
    broker = CapacityBroker.deployed(function_prefix=PREFIX)
    broker.patience = Patience(seconds=10, sleep=time.sleep, monotonic=time, rng=Random(7))
    with pytest.raises(InvokeFailed) as raised:
        broker.capacity(reservation_type="all", regions=["us-east-1"])
    assert raised.value.code == "SnapStartNotReadyException"
    assert sum(time.pauses) < 10


def test_a_restore_hook_error_is_surfaced_with_its_message() -> None:
    lam = boto3.client(
        "lambda", region_name="us-east-1", config=Config(retries={"total_max_attempts": 1})
    )
    stub = Stubber(lam)
    stub.add_client_error(
        "invoke", "SnapStartException", "afterRestore: the database pool did not reconnect", 400
    )
    with stub:
        broker = CapacityBroker.deployed("cb-prod", lambda_client=lam)
        with pytest.raises(InvokeFailed) as raised:
            broker.clean()
    assert raised.value.code == "SnapStartException"
    assert "afterRestore: the database pool did not reconnect" in str(raised.value)
