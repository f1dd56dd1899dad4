"""Feature flags: SSM String parameters with the contract's names and defaults."""

from __future__ import annotations

import pytest
from infra_helpers import Synth

pytestmark = pytest.mark.infra


def flags(synth: Synth) -> dict[str, tuple[str, str]]:
    return {
        resource["Properties"]["Name"]: (
            resource["Properties"]["Type"],
            resource["Properties"]["Value"],
        )
        for resource in synth.resources("AWS::SSM::Parameter").values()
    }


def test_defaults_enable_reservations_and_are_not_strict(broker: Synth) -> None:
    assert flags(broker) == {
        "/capacity-broker/demo/configuration/FeatureFlags/EnableCapacityReservation": (
            "String",
            "true",
        ),
        "/capacity-broker/demo/configuration/FeatureFlags/EnforceStrictCapacityReservation": (
            "String",
            "false",
        ),
    }


def test_context_overrides_values_and_prefix(custom: Synth) -> None:
    # custom: enableCapacityReservation=false, enforceStrictCapacityReservation=TRUE,
    # parameterPrefix=/hpc/broker
    assert flags(custom) == {
        "/hpc/broker/configuration/FeatureFlags/EnableCapacityReservation": ("String", "false"),
        "/hpc/broker/configuration/FeatureFlags/EnforceStrictCapacityReservation": (
            "String",
            "true",
        ),
    }
