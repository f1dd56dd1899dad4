"""What the client answers with: the reservation types, listings, and its errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, TypeVar

from ..adapters.regions import unknown_region_message
from ..models.capacity import CapacitySummary
from ..models.common import ItemError

T = TypeVar("T")


class ReservationType(StrEnum):
    """Which reservations ``capacity`` lists (EC2's ``ReservationType``)."""

    ODCR = "odcr"
    CAPACITY_BLOCKS = "capacity-block"
    ALL = "all"
    # the singular, as the contract's request field spells it
    CAPACITY_BLOCK = "capacity-block"


class BrokerError(Exception):
    """The broker could not answer (configuration, every region failing, a function error)."""

    def __init__(self, message: str, answer: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.answer = dict(answer) if answer is not None else None


class InvalidArguments(BrokerError, ValueError):
    """The request was refused before anything was done (``invalid_request``)."""

    def __init__(
        self, errors: Sequence[tuple[str, str]], answer: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__("; ".join(f"{f}: {m}" for f, m in errors), answer)
        self.errors = list(errors)


class UnknownRegions(InvalidArguments):
    """Region names AWS does not have (as far as botocore's partition data knows), refused
    before any call: a typo would otherwise cost a connection time-out per retry."""

    def __init__(self, names: Sequence[str], hints: Mapping[str, Sequence[str]]) -> None:
        super().__init__(
            [("regions", unknown_region_message(name, hints.get(name, ()))) for name in names]
        )
        self.names = list(names)


class RegionsFailed(BrokerError):
    """Every region asked for failed; ``errors`` says why, region by region."""

    def __init__(self, errors: Sequence[ItemError]) -> None:
        super().__init__(
            "every region failed: "
            + "; ".join(f"{e.region}: {e.error_code}: {e.message}" for e in errors)
        )
        self.errors = list(errors)


class EntryPointUnavailable(BrokerError):
    """The entry point is not part of this installation (or deployment)."""


class FunctionError(BrokerError):
    """The function raised instead of answering (``X-Amz-Function-Error``)."""


class InvokeFailed(BrokerError):
    """Lambda's ``Invoke`` itself failed, so the function gave no answer: refused
    (``AccessDeniedException``), throttled (``TooManyRequestsException``), unreachable.
    ``code`` is Lambda's error code (``None`` when there was no answer at all)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class Results(list[T]):
    """A listing: the rows, plus what could not be listed.

    ``status`` is ``ok``, or ``partial`` when some regions failed (``errors``); ``regions``
    are the regions that were asked (an empty listing says where it looked).
    """

    def __init__(
        self,
        items: Iterable[T] = (),
        errors: Iterable[ItemError] = (),
        regions: Iterable[str] = (),
        summary: CapacitySummary | None = None,
        message: str = "",
    ) -> None:
        super().__init__(items)
        self.errors = list(errors)
        self.regions = list(regions)
        self.summary = summary
        self.message = message

    @property
    def status(self) -> str:
        return "partial" if self.errors else "ok"
