"""``capacity-broker local``'s Lambda, as a Lambda client sees it (issue 42): it knows its
functions (``ListFunctions``, ``GetFunction``), returns the log tail ``LogType=Tail`` asks for,
and runs a function's invocations at once, each in a container of its own, up to its stated
concurrency (then Lambda's 429), so a class of probes sent together is served together as a
deployed function serves it (they used to queue, one at a time per function).

Concurrency is shown without timing anything: the emulator holds the first calls of an action
until that many are in flight (``Emulator.gather``); each new container reads the broker's
feature flags once (SSM ``GetParametersByPath``), so 20 of those meet only when 20 containers
run at once. One at a time, the first waits alone and the gathering breaks."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import import_module
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from capacity_broker.client import ENTRY_POINTS
from capacity_broker.local import LocalBroker

pytestmark = pytest.mark.integration

# Import the handlers first: a Powertools logger keeps the stdout it was created with.
HANDLERS = [import_module(f"capacity_broker.handlers.{name}") for name in ENTRY_POINTS]

PREFIX = "capacity-broker-local"
PROBE_NAME = f"{PREFIX}-probe"
SUBNET_A = "subnet-0d1a0000000000e1a"
PROBE = {"instance_type": "g6.xlarge", "subnet_ids": [SUBNET_A]}
CLASS = 20
# Ample for 20 containers to start on a loaded machine; only a broken run waits it out.
GATHERING_SECONDS = 120.0


@pytest.fixture
def local() -> Iterator[LocalBroker]:
    with LocalBroker(scenario="discovery", cluster_id="discovery-cluster") as broker:
        yield broker


def lambda_client(endpoint: str) -> Any:
    return boto3.client(
        "lambda",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1}, max_pool_connections=CLASS + 5),
    )


def test_lambda_knows_its_functions(local: LocalBroker) -> None:
    client = lambda_client(local.endpoint)
    listed = client.list_functions()["Functions"]
    assert sorted(f["FunctionName"] for f in listed) == sorted(local.function_names)
    probe = client.get_function(FunctionName=PROBE_NAME)["Configuration"]
    assert probe["FunctionArn"] == f"arn:aws:lambda:us-east-1:123456789012:function:{PROBE_NAME}"
    assert probe["Handler"] == "capacity_broker.handlers.probe.handler"
    assert probe["State"] == "Active"
    # "The function's execution role": the role the emulator signs the function's calls as.
    role = boto3.client("iam", endpoint_url=local.endpoint, region_name="us-east-1").get_role(
        RoleName=PROBE_NAME
    )["Role"]
    assert probe["Role"] == role["Arn"]
    by_arn = client.get_function_configuration(FunctionName=probe["FunctionArn"])
    assert {key: by_arn[key] for key in probe} == probe
    page = client.list_functions(MaxItems=2)
    assert len(page["Functions"]) == 2 and page["NextMarker"]
    rest = client.list_functions(Marker=page["NextMarker"])["Functions"]
    assert len(page["Functions"]) + len(rest) == len(ENTRY_POINTS)
    with pytest.raises(ClientError) as caught:
        client.get_function(FunctionName=f"{PREFIX}-nope")
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_invoke_with_log_type_tail_returns_the_log_tail(local: LocalBroker) -> None:
    answer = lambda_client(local.endpoint).invoke(
        FunctionName=PROBE_NAME, Payload=json.dumps(PROBE).encode(), LogType="Tail"
    )
    assert json.loads(answer["Payload"].read())["status"] in ("available", "unavailable")
    log = base64.b64decode(answer["LogResult"]).decode()
    request_id = answer["ResponseMetadata"]["RequestId"]
    lines = log.splitlines()
    assert lines[0] == f"START RequestId: {request_id} Version: $LATEST"
    assert f"END RequestId: {request_id}" in lines
    assert lines[-1].startswith(f"REPORT RequestId: {request_id}\tDuration: ")
    # The function's own lines, with the same request id ("answered" ends every invocation).
    answered = [json.loads(line) for line in lines if '"answered"' in line]
    assert [line["function_request_id"] for line in answered] == [request_id]
    assert len(answer["LogResult"]) <= 4 * 1024 * 4 // 3 + 4  # the last 4 KB, base64


def test_twenty_probes_at_once_run_in_twenty_containers_at_once(local: LocalBroker) -> None:
    together = local.server.emulator.gather(
        "GetParametersByPath", parties=CLASS, timeout=GATHERING_SECONDS
    )
    client = lambda_client(local.endpoint)

    def probe(index: int) -> dict[str, Any]:
        event = {**PROBE, "request_id": f"desk-{index}"}
        answer = client.invoke(FunctionName=PROBE_NAME, Payload=json.dumps(event).encode())
        return json.loads(answer["Payload"].read())

    with ThreadPoolExecutor(CLASS) as pool:
        answers = list(pool.map(probe, range(CLASS)))
    assert together.met and not together.broken
    assert all(a["status"] in ("available", "unavailable") for a in answers), answers
    assert len({a["request_id"] for a in answers}) == CLASS
    # Twenty containers, kept: the next probe is served by one of them (no new flags read).
    calls = len(local.server.emulator.calls("GetParametersByPath", "ssm"))
    probe(CLASS)
    assert len(local.server.emulator.calls("GetParametersByPath", "ssm")) == calls


def test_beyond_its_concurrency_an_invocation_is_throttled_as_lambda_throttles() -> None:
    with LocalBroker(scenario="discovery", cluster_id="discovery-cluster", concurrency=1) as local:
        held = local.server.emulator.gather("GetParametersByPath", parties=2, timeout=30.0)
        client = lambda_client(local.endpoint)
        first: dict[str, Any] = {}

        def invoke() -> None:
            answer = client.invoke(FunctionName=PROBE_NAME, Payload=json.dumps(PROBE).encode())
            first["status"] = json.loads(answer["Payload"].read())["status"]

        worker = threading.Thread(target=invoke)
        worker.start()
        # The first invocation is under way once its container waits at the gathering.
        while held.barrier.n_waiting < 1 and worker.is_alive():
            threading.Event().wait(0.01)
        with pytest.raises(ClientError) as caught:
            client.invoke(FunctionName=PROBE_NAME, Payload=json.dumps(PROBE).encode())
        error = caught.value.response
        assert error["Error"]["Code"] == "TooManyRequestsException"
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 429
        held.barrier.abort()  # let the first one go on
        worker.join()
        assert first["status"] in ("available", "unavailable")
