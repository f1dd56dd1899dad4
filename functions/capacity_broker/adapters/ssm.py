"""SSM Parameter Store: the feature flags, read through Powertools Parameters (cached 60 s)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from aws_lambda_powertools.utilities.parameters import SSMProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from ..domain import flags as rules
from .aws import AwsError, Clients, RetryPolicy, call

FLAGS_MAX_AGE = 60  # seconds: the contract's bound on how stale a flag may be

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FlagValues:
    enable: bool
    strict: bool
    missing: tuple[str, ...] = ()


class Flags:
    def __init__(
        self, prefix: str, region: str, clients: Clients, retry: RetryPolicy | None = None
    ) -> None:
        self.prefix = prefix.rstrip("/")
        self.region = region
        self.clients = clients
        self.retry = retry or RetryPolicy()
        self._provider: SSMProvider | None = None
        self._warned = -float(FLAGS_MAX_AGE)

    @property
    def provider(self) -> SSMProvider:
        if self._provider is None:
            self._provider = SSMProvider(boto3_client=self.clients.client("ssm", self.region))
        return self._provider

    def read(self, deadline: float | None = None) -> FlagValues:
        """Both flags with one GetParametersByPath, cached; missing ones take the defaults.

        Throttling and 5xx are retried under ``deadline`` like every other AWS call. Raises
        ``domain.flags.FlagError`` for a malformed value and ``AwsError`` when SSM cannot be
        read.
        """
        folder = rules.flag_path(self.prefix, rules.FLAG_ENABLE).rsplit("/", 1)[0]

        def fetch() -> dict[str, object]:
            try:
                return dict(self.provider.get_multiple(folder, max_age=FLAGS_MAX_AGE))
            except GetParameterError as error:
                # Powertools raises GetParameterError inside its except block without "from":
                # the botocore error (and its code) is the implicit context, not the cause.
                cause = error.__cause__ or error.__context__ or error
                raise AwsError("GetParametersByPath", _code(cause), str(cause)) from error

        values = self.retry.run("GetParametersByPath", fetch, deadline=deadline)
        found = {name.lstrip("/"): str(value) for name, value in values.items()}
        missing = tuple(
            path
            for name in (rules.FLAG_ENABLE, rules.FLAG_STRICT)
            if name not in found
            for path in [rules.flag_path(self.prefix, name)]
        )
        if missing and time.monotonic() - self._warned >= FLAGS_MAX_AGE:
            # Contract: a missing flag means its default, said as a warning (once per cache
            # period, not on every invocation that reads the cached answer).
            self._warned = time.monotonic()
            log.warning("feature flag parameter missing, using its default: %s", ", ".join(missing))
        return FlagValues(
            enable=rules.parse_flag(
                rules.flag_path(self.prefix, rules.FLAG_ENABLE),
                found.get(rules.FLAG_ENABLE),
                rules.DEFAULT_ENABLE,
            ),
            strict=rules.parse_flag(
                rules.flag_path(self.prefix, rules.FLAG_STRICT),
                found.get(rules.FLAG_STRICT),
                rules.DEFAULT_STRICT,
            ),
            missing=missing,
        )


def _code(error: BaseException) -> str | None:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


class ImageParameters:
    """Systems Manager parameters that name a launch template's image (``resolve:ssm:<name>``,
    EC2 User Guide, "Use a Systems Manager parameter instead of an AMI ID"). Read with
    ``GetParameters``, the permission EC2 itself asks of whoever launches from such a template;
    never cached: a parameter such as AWS's ``/aws/service/…/latest`` moves on its own."""

    def __init__(self, region: str, clients: Clients, retry: RetryPolicy | None = None) -> None:
        self.region = region
        self.clients = clients
        self.retry = retry or RetryPolicy()

    def value(self, name: str, deadline: float | None = None) -> str | None:
        """The parameter's value (``name`` may carry a ``:version`` or ``:label``), or None
        when Systems Manager does not know it."""
        ssm = self.clients.client("ssm", self.region)
        answer = self.retry.run(
            "GetParameters",
            lambda: call("GetParameters", ssm.get_parameters, Names=[name]),
            deadline=deadline,
        )
        found = answer.get("Parameters") or []
        return str(found[0]["Value"]) if found else None
