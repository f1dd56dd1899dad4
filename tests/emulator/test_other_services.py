"""moto's SSM and CloudFormation still work behind the hub, and the hub can fault them."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from emu_helpers import error_of

pytestmark = pytest.mark.emulator

FLAG = "/capacity-broker/c1/configuration/FeatureFlags/EnableCapacityReservation"
TEMPLATE = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})


@pytest.fixture
def ssm(emu, client):
    ssm = client("ssm")
    ssm.put_parameter(Name=FLAG, Value="true", Type="String")
    return ssm


@pytest.fixture
def cfn(emu, client):
    cfn = client("cloudformation")
    cfn.create_stack(StackName="hpc-job-1", TemplateBody=TEMPLATE)
    return cfn


def test_ssm_get_parameter(ssm):
    assert ssm.get_parameter(Name=FLAG)["Parameter"]["Value"] == "true"
    with pytest.raises(ClientError) as exc:
        ssm.get_parameter(Name="/capacity-broker/c1/missing")
    assert error_of(exc) == ("ParameterNotFound", 400)


def test_ssm_can_be_faulted(ssm, emu):
    emu.fail("GetParameter", "ThrottlingException", service="ssm")
    with pytest.raises(ClientError) as exc:
        ssm.get_parameter(Name=FLAG)
    assert error_of(exc) == ("ThrottlingException", 400)
    assert ssm.get_parameter(Name=FLAG)["Parameter"]["Value"] == "true"


def test_ssm_fault_on_one_parameter_only(ssm, emu):
    ssm.put_parameter(Name="/other", Value="x", Type="String")
    emu.fail("GetParameter", "InternalServerError", service="ssm", when={"Name": FLAG}, status=500)
    assert ssm.get_parameter(Name="/other")["Parameter"]["Value"] == "x"
    with pytest.raises(ClientError) as exc:
        ssm.get_parameter(Name=FLAG)
    assert error_of(exc) == ("InternalServerError", 500)


def test_an_ec2_fault_does_not_touch_ssm(ssm, emu):
    emu.fail("GetParameter", "ThrottlingException")  # service defaults to ec2
    assert ssm.get_parameter(Name=FLAG)["Parameter"]["Value"] == "true"


def test_ssm_timeout(ssm, emu):
    emu.fail("PutParameter", mode="timeout", service="ssm")
    with pytest.raises(ReadTimeoutError):
        ssm.put_parameter(Name=FLAG, Value="false", Type="String", Overwrite=True)
    assert ssm.get_parameter(Name=FLAG)["Parameter"]["Value"] == "false"  # it took effect


def test_ssm_calls_are_logged(ssm, emu):
    emu.clear_calls()
    ssm.get_parameter(Name=FLAG)
    [call] = emu.calls(service="ssm")
    assert (call.action, call.params, call.outcome) == ("GetParameter", {"Name": FLAG}, "ok")
    assert emu.calls() == []  # the default service is ec2


def test_cloudformation_describe_stacks(cfn):
    [stack] = cfn.describe_stacks(StackName="hpc-job-1")["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    with pytest.raises(ClientError) as exc:
        cfn.describe_stacks(StackName="no-such-stack")
    assert error_of(exc) == ("ValidationError", 400)


@pytest.mark.filterwarnings("ignore:Exception\\(AnyServiceError\\)")
def test_cloudformation_can_be_faulted(cfn, emu):
    emu.fail("DescribeStacks", "Throttling", service="cloudformation", times=2)
    for _ in range(2):
        with pytest.raises(ClientError) as exc:
            cfn.describe_stacks(StackName="hpc-job-1")
        assert error_of(exc) == ("Throttling", 400)
    assert cfn.describe_stacks(StackName="hpc-job-1")["Stacks"]
    assert [c.outcome for c in emu.calls("DescribeStacks", service="cloudformation")] == [
        "Throttling",
        "Throttling",
        "ok",
    ]


def test_cloudformation_fault_on_one_stack(cfn, emu):
    cfn.create_stack(StackName="other", TemplateBody=TEMPLATE)
    emu.fail(
        "DescribeStacks", "ValidationError", service="cloudformation", when={"StackName": "other"}
    )
    assert cfn.describe_stacks(StackName="hpc-job-1")["Stacks"]
    with pytest.raises(ClientError) as exc:
        cfn.describe_stacks(StackName="other")
    assert error_of(exc) == ("ValidationError", 400)


def test_cloudformation_timeout(cfn, emu):
    emu.fail("DescribeStacks", mode="timeout", service="cloudformation")
    with pytest.raises(ReadTimeoutError):
        cfn.describe_stacks(StackName="hpc-job-1")
    assert cfn.describe_stacks(StackName="hpc-job-1")["Stacks"]


@pytest.fixture
def dynamodb(emu, client):
    """DynamoDB with a table ``state`` (partition key ``id``)."""
    dynamodb = client("dynamodb")
    dynamodb.create_table(
        TableName="state",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return dynamodb


def test_dynamodb_item_writes_are_atomic(dynamodb):
    """DynamoDB applies each UpdateItem atomically ("atomic counters"); moto alone loses some of
    many concurrent ADDs to one item."""
    import threading

    threads, adds = 16, 100

    def add() -> None:
        for _ in range(adds):
            dynamodb.update_item(
                TableName="state",
                Key={"id": {"S": "counter"}},
                UpdateExpression="ADD n :one",
                ExpressionAttributeValues={":one": {"N": "1"}},
            )

    workers = [threading.Thread(target=add) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    item = dynamodb.get_item(TableName="state", Key={"id": {"S": "counter"}})["Item"]
    assert int(item["n"]["N"]) == threads * adds


def test_dynamodb_reads_never_see_an_item_in_the_middle_of_a_write(dynamodb):
    """A read sees each item as one write left it (DynamoDB's reads are read-committed at
    least: "Isolation levels for DynamoDB transactions"). moto alone let a Scan copy an item
    while an UpdateItem changed it (RuntimeError: dictionary changed size during iteration,
    in a test of stop 30's CI), and GetItem serialize one half updated."""
    import threading

    writes, failures, seen = 100, [], []
    done = threading.Event()

    def write(worker: int) -> None:
        try:
            for n in range(writes):
                # Both halves in one write, and a new attribute each time (the item's size
                # changes); the answer is the item as this write left it.
                dynamodb.update_item(
                    TableName="state",
                    Key={"id": {"S": "pair"}},
                    UpdateExpression=f"SET x = :n, y = :n, w{worker}_{n} = :n",
                    ExpressionAttributeValues={":n": {"N": str(n)}},
                    ReturnValues="ALL_NEW",
                )
        except Exception as error:  # a write's answer serialized while another write ran
            failures.append(error)

    def read() -> None:
        try:
            while not done.is_set():
                items = dynamodb.scan(TableName="state", ConsistentRead=True)["Items"]
                got = dynamodb.get_item(TableName="state", Key={"id": {"S": "pair"}}).get("Item")
                for item in [*items, *([got] if got else [])]:
                    if "x" in item:
                        seen.append((item["x"]["N"], item["y"]["N"]))
        except Exception as error:
            failures.append(error)

    writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    readers = [threading.Thread(target=read) for _ in range(4)]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    for thread in readers:
        thread.join()
    assert failures == []
    assert seen and all(x == y for x, y in seen)


def test_dynamodb_compares_values_of_one_type_only(dynamodb):
    """A filter comparing a number with an item's string does not match that item (API
    Reference, ExpectedAttributeValue); moto alone raised TypeError out of the Scan."""
    for key, hour in (("number", {"N": "7200"}), ("text", {"S": "7200"}), ("list", {"L": []})):
        dynamodb.put_item(TableName="state", Item={"id": {"S": key}, "hour": hour})
    for comparison in (">=", ">", "<=", "<"):
        found = dynamodb.scan(
            TableName="state",
            FilterExpression=f"#hour {comparison} :h",
            ExpressionAttributeNames={"#hour": "hour"},
            ExpressionAttributeValues={":h": {"N": "7200" if "=" in comparison else "3600"}},
        )["Items"]
        expected = ["number"] if comparison in (">=", ">", "<=") else []
        assert [item["id"]["S"] for item in found] == expected, comparison
    between = dynamodb.scan(
        TableName="state",
        FilterExpression="#hour BETWEEN :a AND :b",
        ExpressionAttributeNames={"#hour": "hour"},
        ExpressionAttributeValues={":a": {"N": "0"}, ":b": {"N": "9000"}},
    )["Items"]
    assert [item["id"]["S"] for item in between] == ["number"]
