"""The emulator's control surface: scenario, clock, knobs and a look at capacity.

The same operations are served over HTTP by ``emulator.server`` (``/_emulator/...``) and
reached from another process with ``emulator.remote.RemoteEmulator``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID

from . import scenario as scenarios
from .dynamodb_bill import Meter
from .faults import Call, Fault, Gathering
from .iam.catalogue import Broker
from .iam.enforcement import Roles
from .install import install
from .models import CapacityBackend, capacity_backend
from .state import world

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


class Emulator:
    def __init__(self, account_id: str = DEFAULT_ACCOUNT_ID) -> None:
        install()
        self.account_id = account_id

    # -- world --------------------------------------------------------------------------
    def load_scenario(self, source: str | Path | dict[str, Any]) -> scenarios.ScenarioIds:
        return scenarios.load(source, self.account_id)

    def reset(self, keep_roles: bool = False) -> None:
        """A fresh world. ``keep_roles``: the function roles ``enforce_roles`` made are made
        again in it (new sessions: ``role_credentials`` answers them)."""
        from moto.core.base_backend import BackendDict

        roles = world.iam
        BackendDict.reset()
        world.reset()
        if keep_roles and roles is not None:
            world.iam = roles.install()

    # -- IAM ----------------------------------------------------------------------------
    def enforce_roles(
        self,
        cluster_id: str,
        *,
        function_prefix: str,
        region: str,
        regions: Sequence[str],
        state_table: str,
        stack_name_prefix: str | None = None,
    ) -> Roles:
        """The broker functions' roles as ``infra/`` deploys them for this cluster, made in
        this world; a call signed with one's session (``role_credentials``) is decided under
        its policies from now on (``Settings.iam_evaluation`` turns that off)."""
        broker = Broker(
            cluster_id=cluster_id,
            function_prefix=function_prefix,
            region=region,
            regions=tuple(regions),
            account=self.account_id,
            state_table=state_table,
            stack_name_prefix=stack_name_prefix,
        )
        if world.iam is not None:
            world.iam.uninstall()
        world.iam = Roles(broker).install()
        return world.iam

    def role_credentials(self, entry: str) -> tuple[str, str, str] | None:
        """(access key, secret key, session token) of function ``entry``'s role session, or
        ``None`` without roles."""
        roles = world.iam
        return roles.credentials(entry) if roles is not None else None

    def capacity(self, region: str = "us-east-1") -> CapacityBackend:
        from moto.ec2.models import ec2_backends

        return capacity_backend(ec2_backends[self.account_id][region])

    def pool(self, region: str, availability_zone: str, instance_type: str) -> dict[str, Any]:
        pool = self.capacity(region).pool(availability_zone, instance_type)
        return {"capacity": pool.capacity, "used": pool.used, "available": pool.available}

    def set_pool(
        self, region: str, availability_zone: str, instance_type: str, capacity: int | None
    ) -> None:
        self.capacity(region).set_pool(availability_zone, instance_type, capacity)

    # -- time ---------------------------------------------------------------------------
    def now(self) -> datetime:
        return world.clock.now()

    def advance(self, seconds: float) -> datetime:
        return world.clock.advance(seconds)

    def freeze(self, at: datetime | None = None) -> datetime:
        return world.clock.freeze(at)

    def set_time(self, at: datetime) -> datetime:
        return world.clock.set(at)

    def reset_clock(self) -> datetime:
        """Back to real time (a demo that jumped ahead returns to the present)."""
        world.clock.reset()
        return world.clock.now()

    def settle(self, region: str = "us-east-1") -> None:
        """Let everything made a moment ago in ``region`` settle now (eventual consistency)."""
        with world.lock:
            self.capacity(region).propagation.settle()

    def preset(self, name: str) -> None:
        """EC2's timings by name (``emulator.presets``: "default", "slow"); what a scenario or
        ``configure`` sets afterwards refines it."""
        world.use_preset(name)

    def configure(self, **settings: Any) -> None:
        for key, value in settings.items():
            if not hasattr(world.settings, key):
                raise ValueError(f"unknown emulator setting {key!r}")
            setattr(world.settings, key, value)

    # -- knobs --------------------------------------------------------------------------
    def latency(self, seconds: float, actions: dict[str, float] | None = None) -> None:
        world.hub.set_latency(seconds, actions)

    def throttle(
        self,
        enabled: bool = True,
        buckets: dict[str, tuple[float, float]] | None = None,
        groups: dict[str, str] | None = None,
        time_scale: float = 1.0,
        raised: float = 1.0,
        others: dict[str, float] | None = None,
        emulator_clock: bool = False,
        seconds_per_call: float | None = None,
    ) -> None:
        """EC2's request throttling (``emulator.throttling``): every action its own bucket at
        EC2's published size, ``raised`` N times, with ``others`` taking a share. With
        ``emulator_clock`` the buckets refill by the emulator's clock, not the real one: for a
        caller whose own clocks are the emulator's (a frozen clock refills as it is moved); with
        ``seconds_per_call`` the buckets' time moves with the calls, not with any clock."""
        clock = (lambda: world.clock.now().timestamp()) if emulator_clock else None
        world.hub.set_throttle(
            enabled, buckets, groups, time_scale, raised, others, clock, seconds_per_call
        )

    def throttle_limits(self, action: str) -> tuple[float, float]:
        """(burst, refill per second) of ``action``'s bucket as configured (before
        ``time_scale``)."""
        return world.hub.throttling.limits(action)

    def throttled_others(self) -> dict[str, dict[str, int]]:
        """What the ``others`` clients got from their shared buckets (taken, throttled)."""
        return world.hub.throttling.others_report()

    def gather(self, action: str, parties: int, timeout: float = 10.0) -> Gathering:
        """The next ``parties`` calls of ``action`` wait for each other before EC2 answers:
        ``.met`` says whether that many were in flight at once (concurrency proven without
        a clock: a sequential caller breaks the barrier after ``timeout``)."""
        return world.hub.gather(action, parties, timeout)

    def fail(self, action: str, code: str | None = None, **kwargs: Any) -> Fault:
        """Fail the next ``times`` calls of ``action`` with ``code`` (or ``mode="timeout"``)."""
        return world.hub.inject(action, code, **kwargs)

    def clear_faults(self) -> None:
        world.hub.clear_faults()

    def calls(self, action: str | None = None, service: str = "ec2") -> list[Call]:
        return world.hub.calls_of(action, service)

    def clear_calls(self) -> None:
        world.hub.clear_calls()

    # -- DynamoDB's bill ----------------------------------------------------------------------
    def dynamodb_bill(self) -> dict[str, Any]:
        """DynamoDB's capacity units so far (``emulator.dynamodb_bill``): per table its write
        and read units and throttled calls, and the busiest partition key's largest second."""
        return world.dynamodb_meter.report()

    def clear_dynamodb_bill(self) -> None:
        """Start the meter again (a benchmark's next run is billed on its own)."""
        world.dynamodb_meter = Meter()


@contextmanager
def mock(scenario: str | Path | dict[str, Any] | None = None) -> Iterator[Emulator]:
    """The emulator in this process: moto's mock plus the capacity extension."""
    from moto import mock_aws

    saved = {k: os.environ.get(k) for k in FAKE_CREDENTIALS}
    # A preset chosen inside (``Emulator.preset``) ends with the emulator; one chosen before
    # entering (a test's fixture) is kept.
    preset = world.preset
    os.environ.update(FAKE_CREDENTIALS)
    install()
    world.reset()
    world.mode = "in-process"
    try:
        with mock_aws():
            emulator = Emulator()
            if scenario is not None:
                emulator.load_scenario(scenario)
            yield emulator
    finally:
        world.preset = preset
        world.reset()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
