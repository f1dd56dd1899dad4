"""What one create's answer means, in one table: to the caller, to the fan-out, to the memory
and to the metrics.

A create (``CreateCapacityReservation`` for a probe or a hold) either holds capacity or fails
with an AWS error, which ``errors.classify`` sorts into an ``ErrorClass``. Four readers need
the answer in their own words, and each word is a column of ``MEANINGS`` below, never a table
of its own:

- ``outcome``: the attempt's ``outcome`` in the probe and reserve answers (the contract's
  words: ``available``, ``insufficient_capacity``, ``limit_exceeded``...);
- ``kind``: what the fan-out does next (``domain.fanout``): hold on, move on, stop, ask again;
- ``seen``: what the shared capacity memory keeps of it (``domain.memory``);
- ``metric``: the CloudWatch metric it is counted in (``handlers._spending``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from .errors import ErrorClass, Outcome
from .memory import Seen


class Kind(StrEnum):
    """What one create's answer means to the fan-out."""

    HELD = "held"  # capacity: decisive
    INSUFFICIENT = "insufficient"  # move on
    UNSUPPORTED = "unsupported"  # move on
    QUOTA = "quota"  # decisive only when the attempt ran solo; otherwise retried
    STOP = "stop"  # permission-type: decisive
    # Throttled, a server error or no answer: nothing said about capacity. Asked again while
    # the budget lasts; blocks every later candidate (decisive, as BLOCKED, at the deadline).
    UNANSWERED = "unanswered"
    ERROR = "error"  # anything else (an invalid request, a token mismatch...): move on


@dataclass(frozen=True)
class Meaning:
    """What one create's outcome means: the attempt's outcome, the fan-out's kind, what the
    memory remembers, and the metric it counts in."""

    outcome: Outcome
    kind: Kind
    seen: Seen
    metric: str


_HELD = Meaning(Outcome.AVAILABLE, Kind.HELD, Seen.AVAILABLE, "AttemptsAvailable")
_FAILED = "AttemptsFailed"
_OTHER = Meaning(Outcome.ERROR, Kind.ERROR, Seen.ERROR, _FAILED)

# ``None``: the create held capacity. Every ErrorClass has its row (a test checks).
MEANINGS: Mapping[ErrorClass | None, Meaning] = MappingProxyType(
    {
        None: _HELD,
        ErrorClass.CAPACITY: Meaning(
            Outcome.INSUFFICIENT_CAPACITY,
            Kind.INSUFFICIENT,
            Seen.INSUFFICIENT,
            "AttemptsInsufficient",
        ),
        ErrorClass.UNSUPPORTED: Meaning(
            Outcome.UNSUPPORTED, Kind.UNSUPPORTED, Seen.UNSUPPORTED, "AttemptsUnsupported"
        ),
        # Capacity Reservations count towards the On-Demand limits: no other subnet can help,
        # unless the request's own holds were what filled the limit (``domain.fanout``).
        ErrorClass.QUOTA: Meaning(
            Outcome.LIMIT_EXCEEDED, Kind.QUOTA, Seen.QUOTA, "AttemptsLimitExceeded"
        ),
        ErrorClass.PERMISSION: Meaning(Outcome.ERROR, Kind.STOP, Seen.ERROR, _FAILED),
        # Not answers about capacity (contract v3): asked again, blocking the later candidates.
        ErrorClass.THROTTLE: Meaning(Outcome.THROTTLED, Kind.UNANSWERED, Seen.ERROR, _FAILED),
        ErrorClass.RATE_BUDGET: Meaning(Outcome.THROTTLED, Kind.UNANSWERED, Seen.ERROR, _FAILED),
        ErrorClass.TRANSIENT: Meaning(Outcome.ERROR, Kind.UNANSWERED, Seen.ERROR, _FAILED),
        ErrorClass.NOT_FOUND: _OTHER,
        ErrorClass.MALFORMED: _OTHER,
        ErrorClass.IDEMPOTENCY: _OTHER,
        ErrorClass.INCORRECT_STATE: _OTHER,
        ErrorClass.INVALID: _OTHER,
        ErrorClass.OTHER: _OTHER,
    }
)


# -- the derived views ------------------------------------------------------------------------
def attempt_outcome(error_class: ErrorClass) -> Outcome:
    """The contract's attempt outcome for a failed create."""
    return MEANINGS[error_class].outcome


def kind_of(error_class: ErrorClass | None) -> Kind:
    """What the fan-out makes of a create's answer (``None``: it held capacity)."""
    return MEANINGS[error_class].kind


def leaves_capacity_open(error_class: ErrorClass) -> bool:
    """A create that ended without an answer about capacity: throttled (by EC2, or by the
    broker's own rate budget before anything was sent), a server error, or no answer at all (a
    timeout or a dropped connection, after which the reservation may well exist). Such an
    attempt is not "no capacity here": it blocks the candidates after it (``domain.fanout``).

    Server errors count with throttling: EC2 answers them for its own trouble, not for the
    AZ's capacity (InsufficientInstanceCapacity is a 500 too, but has its own code, and
    ``classify`` reads the code first), and a 5xx or a timeout after the request reached EC2
    may have made the reservation. Other failures (an invalid request, a mismatched
    ClientToken) are answers: retrying the same call cannot change them."""
    return MEANINGS[error_class].kind is Kind.UNANSWERED


def stops_everything(error_class: ErrorClass) -> bool:
    """A quota or permission failure: attempts not yet started are ``not_tried``."""
    return MEANINGS[error_class].kind in (Kind.QUOTA, Kind.STOP)


# What the memory keeps of each fan-out kind, and the metric each memory word is counted in.
SEEN: Mapping[Kind, Seen] = MappingProxyType({m.kind: m.seen for m in MEANINGS.values()})
OUTCOME_METRICS: Mapping[Seen, str] = MappingProxyType(
    {m.seen: m.metric for m in MEANINGS.values()}
)
