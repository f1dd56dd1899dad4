"""DynamoDB: request records, so a retried or duplicated request never makes a second hold.

Powertools Idempotency does the work (conditional writes, in-progress records, expiry) on the
contract's table schema (partition key ``id``, TTL attribute ``expiration``). Only settled
answers are remembered; a failure is forgotten so the scheduler's retry can try again.

The table can be written by others (anyone with access, a bug, another version): a record
Powertools cannot read, or whose answer is not one this broker would replay, is reported as
``UnreadableRecord``; what to do about it is the caller's decision (``logic.remember``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from botocore.exceptions import BotoCoreError, ClientError

from .aws import AwsError, Clients

# A hold lives 5 minutes, and EC2 may keep it an hour past that: remember answers longer.
RECORD_SECONDS = 2 * 60 * 60
WAIT_STEP = 0.25


class Unsettled(Exception):
    """An answer that must not be remembered (an error worth retrying)."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(answer.get("message", "unsettled"))
        self.answer = answer


class BodyMismatch(Exception):
    """The request id was used before with a different body."""


class StillRunning(Exception):
    """Another invocation with this request id has not finished within our time budget."""


class UnreadableRecord(Exception):
    """The record kept under this request id is not one this broker wrote: it does not parse,
    or its answer is not one to replay (corrupt, foreign, another version's)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class RequestRecords:
    def __init__(self, table: str, region: str, function: str, clients: Clients) -> None:
        self.table = table
        self.region = region
        self.function = function
        self.clients = clients
        self._store: DynamoDBPersistenceLayer | None = None

    @property
    def store(self) -> DynamoDBPersistenceLayer:
        if self._store is None:
            self._store = DynamoDBPersistenceLayer(
                table_name=self.table, boto3_client=self.clients.client("dynamodb", self.region)
            )
        return self._store

    def once(
        self,
        request_id: str,
        body: Mapping[str, Any],
        run: Callable[[], dict[str, Any]],
        deadline: float,
        context: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        replayable: Callable[[Mapping[str, Any]], bool] = lambda answer: True,
    ) -> dict[str, Any]:
        """``run()`` once per (function, request id); later calls get the first answer.

        ``run`` raises ``Unsettled`` for an answer that must not be remembered. A concurrent
        duplicate waits for the first invocation's answer until ``deadline``. A record that
        cannot be read, or whose answer is not a JSON object ``replayable`` accepts, raises
        ``UnreadableRecord`` (and ``run`` is not called).
        """

        def replay(response: Any, idempotent_data: DataRecord) -> Any:
            # Powertools' hook for a replayed answer (``response``: the record's, parsed).
            if not isinstance(response, dict) or not replayable(response):
                raise UnreadableRecord("its answer is not one this broker records")
            return response

        config = IdempotencyConfig(
            event_key_jmespath="request_id",
            payload_validation_jmespath="body",
            expires_after_seconds=RECORD_SECONDS,
            response_hook=replay,
        )
        if context is not None:
            config.register_lambda_context(context)
        ran: list[bool] = []

        @idempotent_function(  # type: ignore[untyped-decorator]
            data_keyword_argument="record",
            persistence_store=self.store,
            config=config,
            key_prefix=f"capacity-broker.{self.function}",
        )
        def remembered(record: dict[str, Any]) -> dict[str, Any]:
            ran.append(True)
            return run()

        record = {"request_id": request_id, "body": dict(body)}
        while True:
            try:
                return remembered(record=record)  # type: ignore[no-any-return]
            except IdempotencyValidationError:
                raise BodyMismatch(request_id) from None
            except IdempotencyAlreadyInProgressError:
                if monotonic() + WAIT_STEP >= deadline:
                    raise StillRunning(request_id) from None
                sleep(WAIT_STEP)
            except IdempotencyPersistenceLayerError as error:
                cause = error.__cause__
                if ran or isinstance(cause, ClientError | BotoCoreError):
                    raise AwsError(
                        "DynamoDB", getattr(cause, "code", None), str(cause or error)
                    ) from error
                # Not DynamoDB's error: Powertools could not make a record of the item.
                raise UnreadableRecord(_why(cause or error)) from error
            except UnreadableRecord:
                raise
            except Exception as error:
                if ran:
                    raise  # the flow's own failure (Unsettled included), not the record's
                # Before the flow ran, only the record can have failed (a status Powertools
                # does not know, an answer that is not JSON, a time that is not a number).
                raise UnreadableRecord(_why(error)) from error


def _why(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:200]
