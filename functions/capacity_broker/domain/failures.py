"""Why the broker could not do what it was asked: one base class for its typed failures.

Every failure a flow answers with instead of a result is a ``BrokerFailure``: an AWS call that
failed (``adapters.aws.AwsError``), a request that names what does not exist or fit
(``logic.InvalidInput``), settings or a feature flag that cannot run the broker
(``config.InvalidConfiguration``, ``flags.FlagError``), a reservation that is not this
cluster's (``logic.reservations.NotOwnedError``), a step of a flow that one of them stopped
(``StepFailed``), or a request the broker refuses as asked (``Refused``: a template that is
another cluster's, a reservation that does not fit the job). Each says its ``error_code`` and
``detail``; a flow catches the base once, and ``logic.failures`` turns any of them into the
fields of the typed answer.
"""

from __future__ import annotations


class BrokerFailure(Exception):
    @property
    def error_code(self) -> str:
        """The answer's ``error_code`` (contract)."""
        return "InternalError"

    @property
    def detail(self) -> str:
        """What went wrong, in words for the answer's ``message``."""
        return str(self)


class StepFailed(BrokerFailure):
    """A step of a flow (``what`` it was doing) stopped by an AWS error: the answer says the
    step and what AWS said."""

    def __init__(self, what: str, code: str, message: str) -> None:
        super().__init__(f"{what}: {message}")
        self.code = code

    @property
    def error_code(self) -> str:
        return self.code


class Refused(BrokerFailure):
    """The broker will not do what the request asks, as asked (reserve's ``rejected``: the job's
    template is another cluster's, the reservation it brings does not exist or fit). Asking
    again unchanged gets the same answer, so it has a reason and no error code."""
