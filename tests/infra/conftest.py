"""Synthesize the CDK app once per test process and share it (the first synth costs ~2 s).

Two variants: cdk.json's defaults with the one required value (what `make deploy
CDK_ARGS="-c clusterId=demo"` deploys) and one with
every optional context key set, to prove the overrides reach the template.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# jsii prints an end-of-life banner for Node 20 unless told which major to keep quiet about.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# --import-mode=importlib: make `infra` (repo root) and the helper module importable.
sys.path.insert(0, str(Path(__file__).parent))
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

from infra_helpers import CUSTOM_CONTEXT, Synth, synthesize  # noqa: E402


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """cdk.json's context as is (every default) and clusterId=demo, which it leaves out."""
    return synthesize({"clusterId": "demo"}, outdir=tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def custom(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Every optional context key set (as strings, the way `-c key=value` passes them)."""
    return synthesize(CUSTOM_CONTEXT, outdir=tmp_path_factory.mktemp("cdk-custom"))


@pytest.fixture(scope="session")
def snapstart(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """SnapStart on (docs/deploy.md): versions, the alias, invokers calling it."""
    return synthesize(
        {"clusterId": "demo", "snapStart": "true"}, outdir=tmp_path_factory.mktemp("cdk-snap")
    )


@pytest.fixture(scope="session")
def warm_probe(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Provisioned concurrency for probe (docs/deploy.md)."""
    return synthesize(
        {"clusterId": "demo", "probeProvisionedConcurrency": "4"},
        outdir=tmp_path_factory.mktemp("cdk-warm"),
    )


EXISTING_TOPIC = "arn:aws:sns:us-east-1:123456789012:hpc-ops-alarms"


@pytest.fixture(scope="session")
def existing_topic(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Alarms to the operator's own SNS topic (-c alarmTopicArn=..., docs/deploy.md)."""
    return synthesize(
        {"clusterId": "demo", "alarmTopicArn": EXISTING_TOPIC},
        outdir=tmp_path_factory.mktemp("cdk-topic"),
    )
