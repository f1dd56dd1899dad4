"""Build the CDK app: context -> validated config -> stack, with cdk-nag as a validation plugin."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import BrokerConfig, target_region
from infra.stack import CapacityBrokerStack

REPO_ROOT = Path(__file__).resolve().parent.parent
CONTEXT_KEYS = (
    "clusterId",
    "functionPrefix",
    "parameterPrefix",
    "stackNamePrefix",
    "regions",
    "enableCapacityReservation",
    "enforceStrictCapacityReservation",
    "instanceRoleArns",
    "imageParameters",
    "alarmEmail",
    "alarmTopicArn",
    "powertoolsLayerArn",
    "probeGraceSeconds",
    "stackGraceSeconds",
    "idleGraceSeconds",
    "holdLimitSeconds",
    "snapStart",
    "probeProvisionedConcurrency",
    "reservedConcurrency",
    "probeGrouping",
    "onDemandPrices",
    "poolGroups",
    "poolTag",
    "poolPriority",
)


def cdk_json_context() -> dict[str, Any]:
    """The `context` block of cdk.json (what the CLI would pass), for in-process builds."""
    document = json.loads((REPO_ROOT / "cdk.json").read_text())
    context = document.get("context", {})
    assert isinstance(context, dict)
    return context


def build_app(
    context: Mapping[str, Any] | None = None,
    *,
    outdir: str | None = None,
    nag: bool = True,
) -> tuple[App, CapacityBrokerStack]:
    """The app as `cdk synth` builds it.

    `context=None`: cdk.json's context, under whatever the CLI passes (cdk.json + `-c`, which
    take precedence over App's own context), so `python3 app.py` alone synthesizes the same
    template as `cdk synth`. Tests pass cdk.json's context plus their overrides.
    """
    app = App(context=dict(context) if context is not None else cdk_json_context(), outdir=outdir)
    config = BrokerConfig.from_context(
        {key: app.node.try_get_context(key) for key in CONTEXT_KEYS},
        region=target_region(os.environ),
    )
    # Environment-agnostic on purpose: no lookups, so synth needs no credentials and the
    # template deploys to whatever account/region the CLI targets.
    stack = CapacityBrokerStack(app, config.stack_name, config=config)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
