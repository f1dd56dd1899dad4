"""The flows behind each entry point: they gather facts through the adapters, ask the domain
what the facts mean, and act. No flow imports boto3."""

from ..domain.failures import BrokerFailure


class InvalidInput(BrokerFailure):
    """The request is well-formed but names things that do not exist or do not fit.

    Raised before anything is changed; the handler answers ``invalid_request``.
    """

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors))
        self.errors = errors
