"""Fixtures of the Slurm tests (the harness: slurm_helpers.py).

Without Slurm the tests skip with the reason (``make test`` prints it in its summary); under
CI (``CI=true``) a missing slurmctld is a failure: .ci/run installs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from slurm_helpers import (
    BIN,
    REGION,
    SKIP_PREFIX,
    TOOLS,
    Cluster,
    Endpoint,
    _slurm_conf,
    _stop,
    _tool,
    missing_tools,
    start_endpoint,
    wait_for,
)


@pytest.fixture(scope="session")
def slurm_tools() -> dict[str, str]:
    missing = missing_tools()
    if missing:
        what = (
            f"{', '.join(missing)} not found (Debian: apt-get install slurm-wlm munge; "
            "the programs: make venv)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Slurm tests cannot run under CI: {what}; .ci/run installs them")
        pytest.skip(f"{SKIP_PREFIX} {what}")
    return {name: str(_tool(name)) for name in TOOLS}


@pytest.fixture
def make_cluster(
    slurm_tools: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(aws, programs_config, nodes=[NodeName lines], partitions=[...],
    parameters=[more SlurmctldParameters])``."""
    made: list[Cluster] = []

    def make(
        aws: Endpoint,
        config: dict[str, Any],
        nodes: list[str],
        partitions: list[str],
        parameters: Sequence[str] = (),
    ) -> Cluster:
        # munged wants every directory above its socket searchable by all.
        root = tmp_path_factory.mktemp("slurm")
        root.chmod(0o755)
        for sub in ("state", "spool"):
            (root / sub).mkdir()
        name = f"cb{os.getpid() % 10000}{len(made)}{int(time.time() * 1000) % 100000}"
        cluster = Cluster(root, slurm_tools, aws, name)
        made.append(cluster)
        key = root / "munge.key"
        subprocess.run(
            [slurm_tools["mungekey"], "--create", f"--keyfile={key}"], check=True, timeout=30
        )
        key.chmod(0o600)
        cluster.processes.append(
            subprocess.Popen(
                [
                    slurm_tools["munged"],
                    "--foreground",
                    "--force",
                    f"--socket={root / 'munge.sock'}",
                    f"--key-file={key}",
                    f"--log-file={root / 'munged.log'}",
                    f"--pid-file={root / 'munged.pid'}",
                    f"--seed-file={root / 'munged.seed'}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        wait_for("munged's socket", (root / "munge.sock").exists, 30, 0.05)
        # The programs' AWS access: a credentials file and the endpoint, as an operator
        # outside EC2 would give them (no environment reaches them under slurmctld).
        credentials = root / "aws-credentials"
        credentials.write_text(
            "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n"
        )
        programs = {
            "region": REGION,
            "log_file": str(cluster.program_log),
            "log_level": "DEBUG",
            "scontrol": slurm_tools["scontrol"],
            "aws": {
                "credentials_file": str(credentials),
                "config_file": str(root / "aws-config-none"),
                "endpoint_url": aws.url,
            },
        } | config
        (root / "capacity-broker.yaml").write_text(yaml.safe_dump(programs, sort_keys=False))
        (root / "slurm.conf").write_text(_slurm_conf(root, name, nodes, partitions, parameters))
        cluster.start_slurmctld()
        return cluster

    yield make
    for cluster in made:
        cluster.stop()


@pytest.fixture
def emulator_endpoint(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], Endpoint]]:
    """``emulator_endpoint(scenario)``: ``python -m emulator serve`` with that world."""
    started: list[Endpoint] = []

    def start(scenario: dict[str, Any]) -> Endpoint:
        path = tmp_path / f"scenario-{len(started)}.json"
        path.write_text(json.dumps(scenario))
        endpoint = start_endpoint(
            tmp_path,
            [sys.executable, "-m", "emulator", "serve", "--scenario", str(path), "--port", "0"],
        )
        started.append(endpoint)
        return endpoint

    yield start
    for endpoint in started:
        _stop(endpoint.process)


@pytest.fixture
def local_broker(tmp_path: Path) -> Iterator[Callable[..., Endpoint]]:
    """``local_broker(scenario, cluster_id, *options)``: ``capacity-broker local`` (emulator +
    the functions behind Lambda Invoke) as its own process, with more of its options."""
    started: list[Endpoint] = []

    def start(scenario: dict[str, Any], cluster_id: str, *options: str) -> Endpoint:
        path = tmp_path / f"scenario-{len(started)}.json"
        path.write_text(json.dumps(scenario))
        endpoint = start_endpoint(
            tmp_path,
            [
                str(BIN / "capacity-broker"),
                "local",
                "--port",
                "0",
                "--scenario",
                str(path),
                "--cluster-id",
                cluster_id,
                *options,
            ],
        )
        started.append(endpoint)
        return endpoint

    yield start
    for endpoint in started:
        _stop(endpoint.process)
