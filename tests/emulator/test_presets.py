"""Presets: EC2's usual timings, and its documented worst cases (``emulator.presets``)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from emu_helpers import Api, error_of

from emulator.presets import PRESETS
from emulator.state import Settings, world


def test_the_default_preset_is_the_settings_as_they_stand(emu: Any) -> None:
    assert world.preset == "default"
    assert world.settings == Settings()


def test_the_slow_preset_gives_ec2s_documented_worst_cases(emu: Any) -> None:
    emu.preset("slow")
    settings = world.settings
    assert settings.lag_pending_seconds == 300  # "up to 5 minutes"
    assert settings.lag_pending_calls is not None
    assert settings.lag_pending_calls > Settings().lag_pending_calls  # type: ignore[operator]
    assert settings.lag_unknown_calls > Settings().lag_unknown_calls
    assert settings.lag_instance_calls > Settings().lag_instance_calls
    assert settings.lag_listing_calls > Settings().lag_listing_calls
    assert settings.quota_lag_checks and settings.quota_lag_checks > 1
    assert settings.block_cleanup_seconds >= 300  # "several minutes"
    assert settings.expiry_lag_seconds == 3600  # "within an hour"
    # Every name a preset sets is a setting.
    for preset in PRESETS.values():
        assert set(preset) <= set(vars(Settings()))


def test_a_preset_survives_a_reset_and_scenarios_refine_it(emu: Any) -> None:
    emu.preset("slow")
    emu.reset()
    assert world.settings.lag_pending_seconds == 300
    emu.load_scenario({"settings": {"lag_pending_seconds": 10}})
    assert world.settings.lag_pending_seconds == 10
    assert world.settings.lag_unknown_calls == PRESETS["slow"]["lag_unknown_calls"]


def test_a_scenario_can_choose_the_preset(emu: Any) -> None:
    emu.load_scenario({"preset": "slow", "settings": {"lag_unknown_calls": 7}})
    assert world.preset == "slow"
    assert world.settings.lag_unknown_calls == 7
    assert world.settings.lag_pending_seconds == 300


def test_an_unknown_preset_is_refused(emu: Any) -> None:
    with pytest.raises(ValueError, match="unknown emulator preset 'glacial'"):
        emu.preset("glacial")
    assert world.preset == "default"


def test_a_preset_chosen_inside_an_emulator_ends_with_it() -> None:
    import emulator

    with emulator.mock() as emu:
        emu.preset("slow")
    assert world.preset == "default"
    with emulator.mock():
        assert world.settings == Settings()


def test_on_the_slow_preset_a_new_reservation_stays_pending_for_several_calls(
    emu: Any, world_seeded: Any, ec2: Any
) -> None:
    emu.preset("slow")
    api = Api(emu, ec2)
    rid = api.reserve(count=1)["CapacityReservationId"]
    codes = []
    for _ in range(12):
        try:
            ec2.cancel_capacity_reservation(CapacityReservationId=rid)
            codes.append("ok")
            break
        except ClientError as error:
            codes.append(error_of(error)[0])
    unknown = PRESETS["slow"]["lag_unknown_calls"]
    pending = PRESETS["slow"]["lag_pending_calls"]
    assert codes == ["InvalidCapacityReservationId.NotFound"] * unknown + [
        "IncorrectState"
    ] * pending + ["ok"]


@pytest.fixture
def world_seeded(emu: Any) -> Any:
    """The emulator tests' world with eventual consistency on (the file turns it off)."""
    from emu_helpers import NOW

    emu.freeze(NOW)
    ids = emu.load_scenario("test_capacity.yaml")
    emu.configure(eventual_consistency=True)
    return ids
