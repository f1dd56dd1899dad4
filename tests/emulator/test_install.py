"""The extension is installed on moto in place, idempotently and reversibly."""

from __future__ import annotations

import pytest
from moto.core.responses import BaseResponse
from moto.ec2.responses import EC2Response

from emulator import install as installer

pytestmark = pytest.mark.emulator


def test_install_is_idempotent_and_reversible():
    installer.install()
    installed_call_action = BaseResponse.call_action
    assert hasattr(EC2Response, "create_capacity_reservation")
    installer.install()
    assert BaseResponse.call_action is installed_call_action  # not wrapped twice
    try:
        installer.uninstall()
        assert not hasattr(EC2Response, "create_capacity_reservation")
        assert BaseResponse.call_action is not installed_call_action
        assert "cr" not in installer.EC2_PREFIX_TO_RESOURCE
    finally:
        installer.install()
    assert hasattr(EC2Response, "create_capacity_reservation")
    assert installer.EC2_PREFIX_TO_RESOURCE["cr"] == "capacity-reservation"


def test_moto_without_the_extension_does_not_know_capacity_reservations(client):
    """What the extension adds: plain moto answers these actions with an error."""
    import emulator

    with emulator.mock():
        installer.uninstall()
        try:
            with pytest.raises(Exception):  # noqa: B017, PT011 - moto's own not-implemented
                client("ec2").describe_capacity_reservations()
        finally:
            installer.install()
        assert client("ec2").describe_capacity_reservations()["CapacityReservations"] == []
