"""Error classification: every code the broker reacts to, and the code-over-status rule."""

from __future__ import annotations

import pytest
from capacity_broker.domain.errors import (
    CODES,
    ErrorClass,
    Outcome,
    classify,
    is_retryable,
    keeps_earlier,
    no_longer_holds,
    not_seen_yet,
)
from capacity_broker.domain.outcomes import attempt_outcome, leaves_capacity_open, stops_everything
from hypothesis import given
from hypothesis import strategies as st

C = ErrorClass

TABLE = [
    ("InsufficientInstanceCapacity", C.CAPACITY),
    ("InsufficientCapacity", C.CAPACITY),
    ("InsufficientReservedInstanceCapacity", C.CAPACITY),
    ("InsufficientHostCapacity", C.CAPACITY),
    ("ReservationCapacityExceeded", C.CAPACITY),
    ("Unsupported", C.UNSUPPORTED),
    ("UnsupportedOperation", C.UNSUPPORTED),
    ("InstanceLimitExceeded", C.QUOTA),
    ("VcpuLimitExceeded", C.QUOTA),
    ("ResourceLimitExceeded", C.QUOTA),
    ("MaxTemplateVersionLimitExceeded", C.QUOTA),
    ("MaxTemplateLimitExceeded", C.QUOTA),
    ("UnauthorizedOperation", C.PERMISSION),
    ("AccessDenied", C.PERMISSION),
    ("AccessDeniedException", C.PERMISSION),
    ("AuthFailure", C.PERMISSION),
    ("OptInRequired", C.PERMISSION),
    ("Blocked", C.PERMISSION),
    ("PendingVerification", C.PERMISSION),
    ("InvalidClientTokenId", C.PERMISSION),
    ("ExpiredToken", C.PERMISSION),
    ("RequestLimitExceeded", C.THROTTLE),
    ("Throttling", C.THROTTLE),
    ("ThrottlingException", C.THROTTLE),
    ("TooManyRequestsException", C.THROTTLE),
    ("RequestThrottled", C.THROTTLE),
    ("RequestThrottledException", C.THROTTLE),
    ("ProvisionedThroughputExceededException", C.THROTTLE),
    ("RateBudgetExhausted", C.RATE_BUDGET),  # the broker's own (contract v3), never AWS's
    ("InternalError", C.TRANSIENT),
    ("InternalFailure", C.TRANSIENT),
    ("ServiceUnavailable", C.TRANSIENT),
    ("Unavailable", C.TRANSIENT),
    ("RequestTimeout", C.TRANSIENT),
    ("InvalidCapacityReservationId.NotFound", C.NOT_FOUND),
    ("InvalidCapacityReservationId.Malformed", C.MALFORMED),
    ("IdempotentParameterMismatch", C.IDEMPOTENCY),
    ("IncorrectState", C.INCORRECT_STATE),
    ("InvalidParameterValue", C.INVALID),
    ("InvalidParameterCombination", C.INVALID),
    ("MissingParameter", C.INVALID),
    ("InvalidParameter", C.INVALID),
    ("UnknownParameter", C.INVALID),
    ("DryRunOperation", C.OTHER),
    ("InvalidSubnetID.NotFound", C.OTHER),
    ("SomethingNew", C.OTHER),
]


@pytest.mark.parametrize(("code", "expected"), TABLE)
def test_code_table(code: str, expected: ErrorClass) -> None:
    assert classify(code) is expected


@pytest.mark.parametrize(("code", "expected"), [(c, e) for c, e in TABLE if e is not C.OTHER])
@pytest.mark.parametrize("status", [400, 429, 500, 503])
def test_a_known_code_wins_over_the_status(code: str, expected: ErrorClass, status: int) -> None:
    assert classify(code, status) is expected


def test_insufficient_capacity_is_a_500_but_not_transient() -> None:
    assert classify("InsufficientInstanceCapacity", 500) is C.CAPACITY
    assert not is_retryable(classify("InsufficientInstanceCapacity", 500))


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        (None, None, C.TRANSIENT),  # timeout / connection lost: may have taken effect
        ("", None, C.TRANSIENT),
        (None, 500, C.TRANSIENT),
        (None, 502, C.TRANSIENT),
        (None, 503, C.TRANSIENT),
        (None, 504, C.TRANSIENT),
        ("Weird", 599, C.TRANSIENT),
        ("Weird", 429, C.THROTTLE),
        (None, 429, C.THROTTLE),
        ("Weird", 400, C.OTHER),
        (None, 400, C.OTHER),
        (None, 404, C.OTHER),
        ("Weird", None, C.OTHER),
    ],
)
def test_unknown_codes_fall_back_on_status(
    code: str | None, status: int | None, expected: ErrorClass
) -> None:
    assert classify(code, status) is expected


def test_state_reason_prefixes_are_understood() -> None:
    assert classify("Server.InsufficientInstanceCapacity") is C.CAPACITY
    assert classify("Client.UnauthorizedOperation") is C.PERMISSION


@pytest.mark.parametrize(
    ("error_class", "outcome"),
    [
        (C.CAPACITY, "insufficient_capacity"),
        (C.UNSUPPORTED, "unsupported"),
        (C.QUOTA, "limit_exceeded"),
        (C.THROTTLE, "throttled"),
        (C.RATE_BUDGET, "throttled"),
        (C.PERMISSION, "error"),
        (C.TRANSIENT, "error"),
        (C.NOT_FOUND, "error"),
        (C.MALFORMED, "error"),
        (C.IDEMPOTENCY, "error"),
        (C.INCORRECT_STATE, "error"),
        (C.INVALID, "error"),
        (C.OTHER, "error"),
    ],
)
def test_attempt_outcomes(error_class: ErrorClass, outcome: str) -> None:
    assert attempt_outcome(error_class) == outcome


def test_helpers_name_exactly_their_classes() -> None:
    assert {c for c in C if stops_everything(c)} == {C.QUOTA, C.PERMISSION}
    assert {c for c in C if is_retryable(c)} == {C.THROTTLE, C.TRANSIENT}
    assert {c for c in C if not_seen_yet(c)} == {C.NOT_FOUND, C.INCORRECT_STATE}
    # Not answers about capacity (contract v3): they block the candidates after them.
    assert {c for c in C if leaves_capacity_open(c)} == {C.THROTTLE, C.RATE_BUDGET, C.TRANSIENT}


@pytest.mark.parametrize("earlier", [None, *C])
@pytest.mark.parametrize("latest", list(C))
def test_the_broker_running_out_of_budget_never_hides_what_aws_said(
    earlier: ErrorClass | None, latest: ErrorClass
) -> None:
    # RequestLimitExceeded only when EC2 said so; RateBudgetExhausted when it said nothing.
    expected = latest is C.RATE_BUDGET and earlier not in (None, C.RATE_BUDGET)
    assert keeps_earlier(earlier, latest) is expected


def test_only_a_final_state_means_a_reservation_no_longer_holds() -> None:
    # CapacityReservationState values from botocore's model: every other one holds, or will.
    from botocore.session import get_session

    states = get_session().get_service_model("ec2").shape_for("CapacityReservationState").enum
    assert {s for s in states if no_longer_holds(s)} == {
        "cancelled",
        "expired",
        "failed",
        "payment-failed",  # a Capacity Block released (the broker never cancels one)
    }


def test_outcomes_are_the_contracts() -> None:
    assert [o.value for o in Outcome] == [
        "available",
        "insufficient_capacity",
        "unsupported",
        "limit_exceeded",
        "throttled",
        "error",
        "not_tried",
    ]


def test_no_code_is_in_two_classes() -> None:
    # CODES is built from one table per class; a code listed twice would silently move.
    from capacity_broker.domain import errors

    listed = [code for codes in errors._CODES.values() for code in codes]
    assert len(listed) == len(set(listed)) == len(CODES)


@given(st.none() | st.text(max_size=60), st.none() | st.integers(min_value=100, max_value=599))
def test_classify_is_total(code: str | None, status: int | None) -> None:
    result = classify(code, status)
    assert isinstance(result, ErrorClass)
    assert attempt_outcome(result) in set(Outcome) - {Outcome.AVAILABLE, Outcome.NOT_TRIED}


@pytest.mark.parametrize(
    ("code", "into_new_hold", "again"),
    [
        ("RequestLimitExceeded", False, True),
        ("InternalError", False, True),
        ("ServiceUnavailable", False, True),
        ("Unavailable", False, True),
        ("InvalidLaunchTemplateId.VersionNotFound", False, True),
        ("IncorrectState", True, True),
        ("IncorrectState", False, False),
        ("InsufficientInstanceCapacity", True, True),
        ("InsufficientInstanceCapacity", False, False),
        ("ReservationCapacityExceeded", True, False),
        ("VcpuLimitExceeded", True, False),
        ("InvalidParameterValue", True, False),
        ("UnauthorizedOperation", True, False),
    ],
)
def test_which_launch_errors_are_asked_again(code: str, into_new_hold: bool, again: bool) -> None:
    """CreateFleet's Errors[] (and RunInstances' errors): throttling, server trouble and a
    version EC2 does not show yet say "not now"; into a hold made a moment ago, so does the
    hold not being ready; the rest are answers."""
    from capacity_broker.domain.errors import launch_asks_again

    assert launch_asks_again(code, into_new_hold) is again
