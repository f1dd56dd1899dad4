"""What the client answers with: the reservation types, listings, and its errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..adapters.regions import unknown_region_message
from ..domain.discovery import Verdict, listing_verdict
from ..models.capacity import CapacitySummary
from ..models.item_error import ItemError

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


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
    are the regions that were asked (an empty listing says where it looked). ``verdict``
    (``capacity``, ``offerings``): the contract's word for the answer, as ``plan`` says it:
    ``ready`` (capacity is held) or ``buy`` (something is on sale) when rows were found,
    ``unavailable`` when none.
    """

    def __init__(
        self,
        items: Iterable[T] = (),
        errors: Iterable[ItemError] = (),
        regions: Iterable[str] = (),
        summary: CapacitySummary | None = None,
        message: str = "",
        *,
        when_found: Verdict | None = None,
    ) -> None:
        super().__init__(items)
        self.errors = list(errors)
        self.regions = list(regions)
        self.summary = summary
        self.message = message
        self._when_found = when_found

    @property
    def verdict(self) -> str | None:
        if self._when_found is None:
            return None
        return listing_verdict(bool(self), self._when_found).value

    @property
    def status(self) -> str:
        return "partial" if self.errors else "ok"


def typed(model: type[M], answer: Mapping[str, Any]) -> M:
    """An entry point's JSON answer as its model; ``invalid_request`` as ``InvalidArguments``,
    anything the model refuses as ``BrokerError``."""
    if answer.get("status") == "invalid_request":
        errors = [
            (str(e.get("field", "request")), str(e.get("message", "")))
            for e in answer.get("errors") or []
        ]
        raise InvalidArguments(errors or [("request", str(answer.get("message")))], answer)
    try:
        return model.model_validate(answer)
    except ValidationError:
        raise BrokerError(str(answer.get("message") or answer), answer) from None


def validated(model: type[M], fields: Mapping[str, Any]) -> M:
    """A request model from the caller's arguments, or ``InvalidArguments`` naming each."""
    try:
        return model.model_validate(dict(fields))
    except ValidationError as error:
        raise InvalidArguments(
            [
                (".".join(str(p) for p in e.get("loc", ())) or "request", str(e.get("msg")))
                for e in error.errors(include_url=False)
            ]
        ) from None
