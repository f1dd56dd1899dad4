"""EC2 errors the capacity emulator raises, with the codes and HTTP statuses EC2 uses.

Client errors (HTTP 400) reuse moto's ``EC2ClientError`` so moto serializes them itself.
EC2 answers a few codes as server errors (``InsufficientInstanceCapacity`` is a 500, throttling
a 503); botocore's retry logic depends on that status, so those are ``EC2ServerError`` and the
dispatch hook (``emulator.install``) writes the response with the right status.
"""

from __future__ import annotations

from moto.core.exceptions import ServiceException
from moto.ec2.exceptions import EC2ClientError


class EC2ServerError(Exception):
    """An EC2 error answered with a 5xx status (botocore treats it as transient)."""

    status = 500

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        if status is not None:
            self.status = status


class AnyServiceError(ServiceException):
    """An error for any service's protocol (moto picks the error shape by module name)."""


def client_error(code: str, message: str) -> EC2ClientError:
    return EC2ClientError(code, message)


def insufficient_capacity(instance_type: str, az: str) -> EC2ServerError:
    return EC2ServerError(
        "InsufficientInstanceCapacity",
        (
            f"We currently do not have sufficient {instance_type} capacity in the Availability "
            f"Zone you requested ({az}). Our system will be working on provisioning additional "
            f"capacity. You can currently get {instance_type} capacity by not specifying an "
            f"Availability Zone in your request or choosing a different Availability Zone."
        ),
    )


def reservation_not_found(reservation_id: str) -> EC2ClientError:
    return EC2ClientError(
        "InvalidCapacityReservationId.NotFound",
        f"The capacity reservation ID '{reservation_id}' does not exist",
    )


def reservation_malformed(reservation_id: str) -> EC2ClientError:
    return EC2ClientError(
        "InvalidCapacityReservationId.Malformed",
        f'Invalid id: "{reservation_id}" (expecting "cr-...")',
    )


def instance_not_found(instance_ids: list[str]) -> EC2ClientError:
    """What EC2 answers a call naming instances it does not know (yet): "Error codes for the
    Amazon EC2 API", example error response ("The instance ID 'i-1a2b3c4d' does not exist")."""
    if len(instance_ids) == 1:
        return EC2ClientError(
            "InvalidInstanceID.NotFound", f"The instance ID '{instance_ids[0]}' does not exist"
        )
    return EC2ClientError(
        "InvalidInstanceID.NotFound",
        f"The instance IDs '{', '.join(instance_ids)}' do not exist",
    )
