"""Fixtures of the fan-out and memory tests; helpers import from this folder."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

# The suite runs with --import-mode=importlib: test modules import helpers from here.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def table(emu: Any) -> str:
    """The state table (the contract's schema) in the emulator's DynamoDB; its name."""
    name = "broker-state"
    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name
