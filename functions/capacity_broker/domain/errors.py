"""What an AWS error code means for the broker: try elsewhere, stop, retry, or done.

Codes are EC2's ("Error codes for the Amazon EC2 API") plus the throttling and transient codes
botocore's standard retry mode knows (``botocore/retries/standard.py``), so the same table
serves EC2, SSM, CloudFormation and DynamoDB calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class ErrorClass(StrEnum):
    CAPACITY = "capacity"  # no capacity for this type here: another AZ/type may have some
    UNSUPPORTED = "unsupported"  # this type cannot be reserved here: another AZ may do
    QUOTA = "quota"  # an account limit: no other subnet can help
    PERMISSION = "permission"  # credentials/IAM/account: no other subnet can help
    THROTTLE = "throttle"  # slow down and retry the same call
    # The broker's own pacer has no token for the call before its deadline: nothing was sent,
    # and no pause within that deadline can change it (contract v3: ``RateBudgetExhausted``).
    RATE_BUDGET = "rate_budget"
    TRANSIENT = "transient"  # server-side or network trouble: retry the same call
    NOT_FOUND = "not_found"  # the reservation does not exist (any more)
    MALFORMED = "malformed"  # the reservation id is not an id
    IDEMPOTENCY = "idempotency"  # ClientToken reused with other parameters
    INCORRECT_STATE = "incorrect_state"  # e.g. cancelling what is already cancelled/expired
    INVALID = "invalid"  # the request itself is wrong: no retry or other subnet helps
    OTHER = "other"


class Outcome(StrEnum):
    """An attempt's ``outcome`` in probe and reserve answers (contract)."""

    AVAILABLE = "available"
    INSUFFICIENT_CAPACITY = "insufficient_capacity"
    UNSUPPORTED = "unsupported"
    LIMIT_EXCEEDED = "limit_exceeded"
    THROTTLED = "throttled"
    ERROR = "error"
    NOT_TRIED = "not_tried"


# The broker's own code for ``RATE_BUDGET`` (contract v3); never one an AWS service sends.
RATE_BUDGET_EXHAUSTED = "RateBudgetExhausted"

_CODES: dict[ErrorClass, tuple[str, ...]] = {
    ErrorClass.CAPACITY: (
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientReservedInstanceCapacity",
        "InsufficientHostCapacity",
        # "The targeted Capacity Reservation does not [have] enough available instance
        # capacity to fulfill your request ... or target a different Capacity Reservation"
        # (EC2's error table): an answer about that reservation's capacity, never a call to
        # repeat as it is. EC2 answers it too for a launch whose platform or tenancy does not
        # match the reservation ("sufficient compatible and available capacity").
        "ReservationCapacityExceeded",
    ),
    ErrorClass.UNSUPPORTED: (
        # "you might be trying to launch an instance in an Availability Zone that currently
        # has constraints on that instance type". EC2 has no "UnsupportedInstanceType" code.
        "Unsupported",
        "UnsupportedOperation",
    ),
    ErrorClass.QUOTA: (
        # Capacity Reservations count towards On-Demand limits (EC2 error table).
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "ResourceLimitExceeded",
        # A launch template's versions (10,000) and an account's templates (EC2's error
        # table: "You've reached the limit on the number of launch template versions").
        "MaxTemplateVersionLimitExceeded",
        "MaxTemplateLimitExceeded",
    ),
    ErrorClass.PERMISSION: (
        "UnauthorizedOperation",
        "AccessDenied",
        "AccessDeniedException",
        "AuthFailure",
        "OptInRequired",
        "Blocked",
        "PendingVerification",
        "AccountDisabled",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "MissingAuthenticationToken",
        "ExpiredToken",
        "ExpiredTokenException",
    ),
    ErrorClass.THROTTLE: (
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestThrottled",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "LimitExceededException",
        "SlowDown",
    ),
    ErrorClass.RATE_BUDGET: (RATE_BUDGET_EXHAUSTED,),
    ErrorClass.TRANSIENT: (
        "InternalError",
        "InternalFailure",
        "ServerInternal",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "Unavailable",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
    ),
    ErrorClass.NOT_FOUND: ("InvalidCapacityReservationId.NotFound",),
    ErrorClass.MALFORMED: ("InvalidCapacityReservationId.Malformed",),
    ErrorClass.IDEMPOTENCY: ("IdempotentParameterMismatch",),
    ErrorClass.INCORRECT_STATE: ("IncorrectState",),
    ErrorClass.INVALID: (
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "InvalidParameterDependency",
        "InvalidParameter",
        "MissingParameter",
        "UnknownParameter",
        "ValidationError",
        "TagPolicyViolation",
    ),
}

CODES: Mapping[str, ErrorClass] = MappingProxyType(
    {code: error_class for error_class, codes in _CODES.items() for code in codes}
)


def classify(code: str | None, http_status: int | None = None) -> ErrorClass:
    """The class of an AWS error.

    The code decides whenever it is known: EC2 answers InsufficientInstanceCapacity with
    HTTP 500, which must not be mistaken for (and retried as) a server fault. An unknown code
    falls back on the status (429 throttling, 5xx transient). No code and no status is a
    network failure or timeout: the call may or may not have taken effect, so it is retried
    (with the same ClientToken).
    """
    if code:
        # StateReason codes carry a "Client."/"Server." prefix; API errors do not.
        bare = code.strip().removeprefix("Server.").removeprefix("Client.")
        found = CODES.get(bare)
        if found is not None:
            return found
    if http_status is None:
        return ErrorClass.TRANSIENT if not code else ErrorClass.OTHER
    if http_status == 429:
        return ErrorClass.THROTTLE
    if 500 <= http_status <= 599:
        return ErrorClass.TRANSIENT
    return ErrorClass.OTHER


def keeps_earlier(earlier: ErrorClass | None, latest: ErrorClass) -> bool:
    """Whether a call (or an attempt) that failed with ``earlier`` and then, tried again, with
    ``latest`` reports ``earlier``: the broker's own rate budget running out never hides what
    AWS answered a try before it (contract v3: ``RequestLimitExceeded`` only when EC2 said so,
    ``RateBudgetExhausted`` when the broker's budget ran out first)."""
    return (
        latest is ErrorClass.RATE_BUDGET
        and earlier is not None
        and earlier is not ErrorClass.RATE_BUDGET
    )


def is_retryable(error_class: ErrorClass) -> bool:
    """Worth retrying the very same call (same ClientToken) after a pause. Not the broker's own
    rate budget: its pacer already found no token before the call's deadline."""
    return error_class in (ErrorClass.THROTTLE, ErrorClass.TRANSIENT)


# CapacityReservationState values in which a reservation no longer holds (or bills) capacity.
FINAL_STATES = frozenset({"cancelled", "expired", "failed", "payment-failed"})


def no_longer_holds(state: str) -> bool:
    """EC2 shows the reservation cancelled, expired or failed: it holds nothing any more."""
    return state in FINAL_STATES


def not_seen_yet(error_class: ErrorClass) -> bool:
    """A call naming a reservation the broker made a moment ago failed as "not there yet".

    EC2 is eventually consistent ("Eventual consistency in the Amazon EC2 API"): a new
    reservation can be unknown to the next calls (NotFound), and its state shows ``pending``
    for a while, in which CancelCapacityReservation refuses it (IncorrectState; only
    ``assessing`` and ``active`` are cancellable). Neither answer says the reservation is gone:
    a cancel is done only when EC2 accepted it or shows the reservation in a final state.
    """
    return error_class in (ErrorClass.NOT_FOUND, ErrorClass.INCORRECT_STATE)


# -- launches: CreateFleet's Errors[] and RunInstances' errors ---------------------------------
#
# An instant EC2 Fleet answers HTTP 200 with ``Errors[]`` for what it could not launch
# (CreateFleetError: ErrorCode, ErrorMessage), whatever the reason: some of those are answers
# ("no capacity here", "the template is wrong"), some only say "not now". Karpenter learnt it
# (aws/karpenter-provider-aws, issue #8923 and its fix, commit 6613010f "prevent
# RequestLimitExceeded CreateFleet error from marking ODCRs unavailable", which classifies the
# fleet's error codes): a throttled fleet says nothing about capacity. The
# codes a launch of the job's nodes asks again for, with a NEW fleet ClientToken (EC2 answers
# a token with its first answer, the errors included), while the hold is kept:
LAUNCH_ASKS_AGAIN = frozenset(
    {
        # The version the broker made a moment ago: EC2 is eventually consistent ("Eventual
        # consistency in the Amazon EC2 API"); the error table: "The specified launch
        # template version does not exist".
        "InvalidLaunchTemplateId.VersionNotFound",
    }
)
# ...and only into a hold made a moment ago: EC2 may show a new reservation pending for up to
# 5 minutes ("it might already be available for use"; a launch before it is ready is refused
# as not in the right state, or finds no capacity yet).
LAUNCH_ASKS_AGAIN_INTO_A_NEW_HOLD = frozenset({"IncorrectState", "InsufficientInstanceCapacity"})


def launch_asks_again(code: str | None, into_new_hold: bool) -> bool:
    """A launch that failed with ``code`` is worth asking again (a new fleet token, the hold
    kept): throttling and server trouble (``is_retryable``), a version EC2 does not show yet,
    and, into the hold the broker made a moment ago, that hold not ready yet. Anything else
    (no capacity in a reservation that was ready, a quota, a wrong template) is final."""
    if code in LAUNCH_ASKS_AGAIN:
        return True
    if into_new_hold and code in LAUNCH_ASKS_AGAIN_INTO_A_NEW_HOLD:
        return True
    return is_retryable(classify(code))
