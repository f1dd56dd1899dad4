"""One error path: every typed failure is a BrokerFailure, and one table makes its answer."""

from __future__ import annotations

import pytest
from capacity_broker.adapters.aws import AwsError
from capacity_broker.config import InvalidConfiguration
from capacity_broker.domain.failures import BrokerFailure
from capacity_broker.domain.flags import FlagError
from capacity_broker.logic import InvalidInput
from capacity_broker.logic.failures import failed, item_error, step
from capacity_broker.logic.reservations import NotOwnedError


@pytest.mark.parametrize(
    ("failure", "status", "code", "message"),
    [
        (
            AwsError("CreateCapacityReservation", "InstanceLimitExceeded", "too many"),
            "error",
            "InstanceLimitExceeded",
            "too many",
        ),
        (
            AwsError("DescribeSubnets", None, "read timed out"),
            "error",
            "RequestTimeout",
            "read timed out",
        ),
        (
            FlagError("/p/Flag", "maybe"),
            "error",
            "InvalidConfiguration",
            "must be 'true' or 'false'",
        ),
        (
            InvalidConfiguration([("BROKER_CLUSTER_ID", "is required")]),
            "error",
            "InvalidConfiguration",
            "BROKER_CLUSTER_ID: is required",
        ),
        (NotOwnedError("cr-0123"), "error", "NotOwned", "cr-0123 is not owned"),
    ],
)
def test_one_table_answers_every_failure(
    failure: BrokerFailure, status: str, code: str, message: str
) -> None:
    assert isinstance(failure, BrokerFailure)
    fields = failed(failure)
    assert (fields["status"], fields["error_code"]) == (status, code)
    assert message in fields["message"]
    item = item_error(failure, "cr-1")
    assert (item.id, item.error_code) == ("cr-1", code)
    assert message in item.message


def test_invalid_input_is_a_broker_failure_the_handler_answers() -> None:
    # ``invalid_request`` (each field's error) is the handler's answer, before the flow.
    assert isinstance(InvalidInput([("subnet_ids", "unknown")]), BrokerFailure)


def test_a_step_names_what_the_flow_was_doing() -> None:
    with pytest.raises(BrokerFailure) as caught, step("Could not read the flags", unanswered="X"):
        raise AwsError("GetParametersByPath", None, "no answer")
    assert failed(caught.value) == {
        "status": "error",
        "error_code": "X",
        "message": "Could not read the flags: no answer",
    }
    with pytest.raises(BrokerFailure) as caught, step("Could not list the holds"):
        raise AwsError("DescribeCapacityReservations", "UnauthorizedOperation", "denied " * 200)
    assert caught.value.error_code == "UnauthorizedOperation"
    assert len(failed(caught.value)["message"]) == 500
