"""cdk-nag (AwsSolutions) with nothing unacknowledged, cfn-lint clean, and the real CLI synth."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import Validations
from cdk_nag import AwsSolutionsChecks
from infra_helpers import Synth

pytestmark = pytest.mark.infra

REPO_ROOT = Path(__file__).resolve().parents[2]


def offline_env() -> dict[str, str]:
    """No real credentials, no endpoint overrides, the venv first on PATH (as the Makefile)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "CDK_")) or key == "AWS_DEFAULT_REGION"
    }
    env.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": os.environ.get(
                "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20"
            ),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    return env


# -- cdk-nag ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_cdk_nag_finds_nothing_unacknowledged(
    broker: Synth, custom: Synth, snapstart: Synth, warm_probe: Synth, existing_topic: Synth
) -> None:
    # One test for every variant: loading cdk-nag into the jsii kernel is the costly part.
    for synth in (broker, custom, snapstart, warm_probe, existing_topic):
        report = AwsSolutionsChecks(synth.app).validate_scope(synth.app)
        findings = [
            f"{violation.rule_name} at {[r.construct_path for r in violation.violating_resources]}"
            f": {violation.description}"
            for violation in report.violations
        ]
        assert findings == [], synth.stack.stack_name
        assert report.success


def acknowledgments(synth: Synth) -> dict[str, list[tuple[str, str]]]:
    """rule id -> [(construct path, reason)] for every acknowledgment in the app."""
    found: dict[str, list[tuple[str, str]]] = {}
    for construct in synth.app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule_id, reason in entry.data.items():
                    found.setdefault(rule_id, []).append((construct.node.path, reason))
    return found


def test_acknowledgments_are_narrow_and_explained(custom: Synth) -> None:
    found = acknowledgments(custom)
    assert found
    for rule_id, places in found.items():
        rule = rule_id.removeprefix("Annotation::")
        # Only the two findings we expect to explain; anything new needs a human decision.
        assert rule.startswith(("AwsSolutions-IAM5[Resource::", "AwsSolutions-SQS3")), rule
        for path, reason in places:
            # On one policy or queue, never on the stack as a whole.
            assert path.count("/") >= 2, (rule, path)
            assert len(reason) >= 100, (rule, reason)
    # The wildcard on reservations is explained by the tag conditions.
    reasons = [reason for places in found.values() for _, reason in places]
    assert any("aws:ResourceTag" in reason for reason in reasons)


# -- cfn-lint --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "variant", ["broker", "custom", "snapstart", "warm_probe", "existing_topic"]
)
def test_cfn_lint_reports_no_errors(variant: str, request: pytest.FixtureRequest) -> None:
    from cfnlint.api import ManualArgs, lint

    synth: Synth = request.getfixturevalue(variant)
    matches = lint(
        json.dumps(synth.doc),
        config=ManualArgs(regions=["us-east-1", "eu-west-1", "ap-southeast-2"]),
    )
    errors = [
        f"{match.rule.id} {'/'.join(str(p) for p in match.path)}: {match.message}"
        for match in matches
        if match.rule.id.startswith("E")
    ]
    assert errors == []


# -- the real entry points -------------------------------------------------------------------


@pytest.mark.slow
def test_app_py_refuses_a_missing_cluster_id_with_a_clear_message() -> None:
    # The CLI passes context in CDK_CONTEXT_JSON (an empty value is "not set").
    env = offline_env() | {"CDK_CONTEXT_JSON": json.dumps({"clusterId": ""})}
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "clusterId is required" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_npx_cdk_synth_works_offline_with_the_pinned_cli(tmp_path: Path) -> None:
    cdk = REPO_ROOT / "node_modules" / ".bin" / "cdk"
    if not cdk.exists():
        pytest.skip("node_modules/.bin/cdk is missing: run `npm ci` (the Makefile does)")
    npx = shutil.which("npx")
    assert npx, "npx is not on PATH"

    pinned = json.loads((REPO_ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    version = subprocess.run(
        [str(cdk), "--version"],
        cwd=REPO_ROOT,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert version.stdout.startswith(f"{pinned} "), version.stdout

    outdir = tmp_path / "cdk.out"
    # A cluster id on the command line names the stack (cdk.json has none: it is required).
    result = subprocess.run(
        [
            *(npx, "--no-install", "cdk", "synth", "--quiet"),
            *("-c", "clusterId=ci-offline", "--output", str(outdir)),
        ],
        cwd=REPO_ROOT,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    template = json.loads((outdir / "capacity-broker-ci-offline.template.json").read_text())
    assert (
        len([r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"])
        == 5
    )
    # The cdk-nag plugin ran during that synth and found nothing unacknowledged.
    report = json.loads((outdir / "validation-report.json").read_text())
    assert report["pluginReports"] == []
