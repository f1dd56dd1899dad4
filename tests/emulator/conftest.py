"""Fixtures for the emulator's own tests: a seeded world, a boto3 EC2 client, helpers.

Every test talks to the emulator through boto3, so botocore validates each request against
the real EC2 model and parses each response with it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

# The suite runs with --import-mode=importlib: test modules import helpers from here.
sys.path.insert(0, str(Path(__file__).parent))

from emu_helpers import NO_RETRIES, NOW, REGION, Api


@pytest.fixture(autouse=True)
def _no_default_amis(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto loads ~1,300 public AMIs per EC2 backend; these tests seed their own."""
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")


@pytest.fixture(scope="session")
def client() -> Callable[..., Any]:
    """boto3 clients, built once per worker (building one costs ~0.2 s; they hold no state).

    ``client("ec2")`` has no SDK retries; ``retries=N`` gives one that makes up to N
    attempts with botocore's legacy retry handler (whose backoff a test can patch away).
    """

    @functools.cache
    def make(service: str = "ec2", region: str = REGION, retries: int | None = None) -> Any:
        config = NO_RETRIES
        if retries is not None:
            config = Config(retries={"mode": "legacy", "total_max_attempts": retries})
        return boto3.client(service, region_name=region, config=config)

    return make


@pytest.fixture
def ec2(emu: Any, client: Callable[..., Any]) -> Any:
    """An EC2 client without SDK retries: each call is exactly one request."""
    return client("ec2")


@pytest.fixture
def world(emu: Any) -> Any:
    """The emulator seeded with ``test_capacity.yaml``, its clock frozen at ``NOW``."""
    emu.freeze(NOW)
    return emu.load_scenario("test_capacity.yaml")


@pytest.fixture
def api(emu: Any, ec2: Any, world: Any) -> Api:
    return Api(emu, ec2)
