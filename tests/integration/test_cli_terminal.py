"""Every table command, rendered in a real pseudo-terminal (util-linux ``script``) at 80, 100
and 120 columns, and piped: no line wider than the terminal (a pipe: 80), every id whole on
one line, the key columns there, nothing cut with "…".

The commands run as a person runs them: the console script, against ``capacity-broker local
--background`` (the discovery scenario), configured only by the exports it prints."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLI = str(Path(sys.executable).with_name("capacity-broker"))
WIDTHS = (80, 100, 120)
REGIONS = "us-east-1,us-west-2,eu-west-1"
SUBNET_A = "subnet-0d1a0000000000e1a"
SUBNET_B = "subnet-0d1b0000000000e1b"
ODCR_KEYS = ["Instance Type", "AZ", "Total", "Avail", "State", "End", "Reservation"]
# Left: the hours a block can still run, which the README promises for training (issue 42)
BLOCK_KEYS = ["Instance Type", "Count", "AZ", "End", "Left", "State", "Reservation"]
ATTEMPT_KEYS = ["Subnet", "AZ", "Outcome", "Cancelled"]
# name: (arguments, the table headers that must be there, the JSON run giving the ids)
COMMANDS: dict[str, tuple[str, list[str], str | None]] = {
    "capacity-all": (
        "capacity --all",
        ODCR_KEYS,
        "capacity --all -o json",
    ),
    "capacity-blocks": ("capacity --blocks", BLOCK_KEYS, "capacity --blocks -o json"),
    "offerings": (
        f"-r {REGIONS} offerings -t p5.48xlarge -n 16 --days 7",
        ["Offering", "AZ", "Count", "Start", "Upfront fee", "$/inst-hour"],
        f"-r {REGIONS} offerings -t p5.48xlarge -n 16 --days 7 -o json",
    ),
    "search": (
        f"-r {REGIONS} search g6",
        ["Instance Type", "Region", "vCPUs", "Memory (GiB)"],
        None,
    ),
    "az": (
        f"-r {REGIONS} az p5.48xlarge",
        ["Instance Type", "Region", "AZs", "Availability Zones"],
        None,
    ),
    "spot": (
        f"-r {REGIONS} spot g6 --show-savings",
        ["Instance Type", "AZ", "Spot $/h", "On-Demand $/h", "Savings"],
        None,
    ),
    "plan": (
        f"-r {REGIONS} plan -w training -t p5.48xlarge -n 32 --days 7",
        BLOCK_KEYS,
        f"-r {REGIONS} plan -w training -t p5.48xlarge -n 32 --days 7 -o json",
    ),
    "probe": (f"probe -t g6.xlarge -s {SUBNET_B},{SUBNET_A}", ATTEMPT_KEYS, None),
    "reserve": (
        f"reserve --job-id {{job}} -t g6.xlarge -n 2 -s {SUBNET_B},{SUBNET_A}",
        ATTEMPT_KEYS,
        None,
    ),
    "release": ("release --job-id {job}", ["id"], None),
    "clean": ("clean --dry-run", [], None),
    # what the probe and reserve above left in the local state table's capacity memory
    "history": ("history", ["Instance type", "AZ id", "Attempts"], None),
    "slurm-check": (
        "slurm check -c {slurm_config}",
        ["nodes", "types (AZs)", "subnets (AZ)"],
        None,
    ),
}
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]|\r")


@pytest.fixture(scope="module")
def local_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a shell that ran ``eval "$(capacity-broker local --background)"``."""
    if not shutil.which("script"):
        pytest.skip("util-linux `script` is not installed")
    runtime = tmp_path_factory.mktemp("run")
    runtime.chmod(0o700)  # a login's private runtime directory: this module's broker alone
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "BROKER_", "CAPACITY_BROKER_"))
        and k not in ("COLUMNS", "LINES")
    } | {"XDG_RUNTIME_DIR": str(runtime)}
    started = subprocess.run(
        [
            CLI,
            "local",
            "--background",
            "--scenario",
            "discovery",
            "--cluster-id",
            "discovery-cluster",
        ],
        env=base,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    env = dict(base)
    for line in started.stdout.splitlines():
        for word in shlex.split(line)[1:]:  # "export A=1 B=2"
            key, _, value = word.partition("=")
            env[key] = value
    assert env.get("AWS_ENDPOINT_URL", "").startswith("http://127.0.0.1:"), started
    try:
        env |= slurm_config(env, tmp_path_factory.mktemp("slurm"))
        yield env
    finally:
        subprocess.run([CLI, "local", "--stop"], env=env, capture_output=True, timeout=60)


def slurm_config(env: dict[str, str], folder: Path) -> dict[str, str]:
    """A Slurm node set on the scenario's subnets and a launch template made for it, as an
    operator writes them before ``capacity-broker slurm check``."""
    import boto3

    ec2 = boto3.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    template = ec2.create_launch_template(
        LaunchTemplateName="slurm-terminal-nodes",
        LaunchTemplateData={"ImageId": "ami-0123456789abcdef0", "InstanceType": "g6.xlarge"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    config = folder / "slurm.yaml"
    config.write_text(
        "region: us-east-1\n"
        "cluster_id: discovery-cluster\n"
        "nodesets:\n"
        "  - nodes: gpu-g6-[1-16]\n"
        "    instance_types: [g6.xlarge, g6.2xlarge]\n"
        f"    subnet_ids: [{SUBNET_B}, {SUBNET_A}]\n"
        f"    launch_template: {{id: {template}, version: $Latest}}\n"
    )
    return {"SLURM_CHECK_CONFIG": str(config), "SLURM_TEMPLATE_ID": template}


def batch(env: dict[str, str], width: int | None, job: str) -> dict[str, str]:
    """Every table command once, in one terminal ``width`` columns wide (``None``: piped);
    the text each printed, escape sequences removed."""
    lines = ["set -u"]
    errors = str(Path(env["TMP_DIR"]) / f"stderr-{width}.txt")
    if width is not None:
        lines.append(f"stty cols {width} rows 1000")
    for name, (args, _, _) in COMMANDS.items():
        lines.append(f"printf '\\n@@@ {name}\\n'")
        # stdout is the terminal; stderr (warnings, the progress display: its own test) aside
        command = args.format(job=job, slurm_config=shlex.quote(env["SLURM_CHECK_CONFIG"]))
        lines.append(f"{shlex.quote(CLI)} {command} 2>>{shlex.quote(errors)}")
    script_file = Path(env["TMP_DIR"]) / f"batch-{width}.sh"
    script_file.write_text("\n".join(lines) + "\n")
    if width is None:
        command = ["bash", str(script_file)]
    else:
        command = ["script", "-qec", f"bash {shlex.quote(str(script_file))}", "/dev/null"]
    run = subprocess.run(
        command, env=env, capture_output=True, timeout=900, check=False, stdin=subprocess.DEVNULL
    )
    text = ANSI.sub("", run.stdout.decode("utf-8", errors="replace"))
    found: dict[str, str] = {}
    for part in text.split("\n@@@ ")[1:]:
        name, _, body = part.partition("\n")
        found[name.strip()] = body
    assert set(found) == set(COMMANDS), text[-3000:]
    assert "Traceback" not in Path(errors).read_text()
    return found


@pytest.fixture(scope="module")
def rendered(local_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Any:
    env = local_env | {"TMP_DIR": str(tmp_path_factory.mktemp("batches"))}

    @cache
    def at(width: int | None) -> dict[str, str]:
        return batch(env, width, f"term-{width or 'pipe'}")

    return at


@pytest.fixture(scope="module")
def ids(local_env: dict[str, str]) -> dict[str, list[str]]:
    """The ids each listing must show whole, from its JSON (never from a table)."""

    def data(args: str) -> Any:
        run = subprocess.run(
            [CLI, *shlex.split(args)], env=local_env, capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)

    found: dict[str, list[str]] = {}
    for name, (_, _, source) in COMMANDS.items():
        if source is None:
            continue
        value = data(source)
        if name == "plan":
            found[name] = [b["reservation_id"] for b in value["capacity_blocks"]]
        elif name == "offerings":
            found[name] = [o["offering_id"] for o in value]
        else:
            found[name] = [r["reservation_id"] for r in value]
    found["probe"] = [SUBNET_A, SUBNET_B]
    found["reserve"] = [SUBNET_A, SUBNET_B]
    found["slurm-check"] = [SUBNET_A, SUBNET_B, local_env["SLURM_TEMPLATE_ID"]]
    assert all(found.values()), found
    return found


def whole(identifier: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(identifier)}(?![\w-])", text) is not None


def header_line(text: str, first: str) -> str:
    # a table with a box (``slurm check``) starts its header line with the box's edge
    return next(line for line in text.splitlines() if line.lstrip("┃│ ").startswith(first + " "))


@pytest.mark.parametrize("width", [*WIDTHS, None], ids=[*map(str, WIDTHS), "piped"])
def test_every_table_fits_with_ids_whole_and_key_columns(
    rendered: Any, ids: dict[str, list[str]], width: int | None
) -> None:
    limit = width or 80  # piped: the width an 80-column terminal gets
    outputs = rendered(width)
    for name, text in outputs.items():
        assert "Traceback" not in text, (name, text)
        assert "…" not in text, (name, text)
        wide = [line for line in text.splitlines() if len(line) > limit]
        assert wide == [], (name, width, wide)
        for identifier in ids.get(name, []):
            assert whole(identifier, text), (name, width, identifier, text)
        keys = COMMANDS[name][1]
        if keys:
            header = header_line(text, keys[0])
            for key in keys:
                assert key in header, (name, width, key, header)
    # the actions' own ids: the hold reserve made is the one release gave back
    (held,) = re.findall(r"reservation\.id: (cr-[0-9a-f]{17})", outputs["reserve"])
    assert whole(held, outputs["release"])


def hours_left(text: str) -> str:
    """``text`` with each block's hours left (``143.49h``) as ``<hours>``, and the spaces that
    right-align it: a table of the live broker is rendered at one moment, the next a moment
    later (a column of ``99.99h`` is one character narrower than one of ``100.00h``)."""
    return re.sub(r" +\d+(\.\d+)?h\b", " <hours>", text)


def test_wider_terminals_show_more(rendered: Any) -> None:
    narrow, wide = rendered(80)["capacity-all"], rendered(120)["capacity-all"]
    assert "left out to fit 80 columns" in narrow
    assert "Region" not in header_line(narrow, "Instance Type")
    assert "Region" in header_line(wide, "Instance Type")
    # piped output is laid out as an 80-column terminal, never as a 200-column one (the blocks'
    # hours left, shown at 80 columns, count down between the two runs: their digits aside)
    assert hours_left(rendered(None)["capacity-all"]) == hours_left(narrow)


def test_progress_on_a_terminal_only(local_env: dict[str, str], tmp_path: Path) -> None:
    """With no --regions, discovery looks at every enabled region, with a progress display on
    a terminal's stderr; when stderr is not a terminal there is none."""
    env = local_env
    shown = subprocess.run(
        ["script", "-qec", f"stty cols 100 rows 100; {CLI} search g6.xlarge", "/dev/null"],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    raw = shown.stdout.decode("utf-8", errors="replace")
    assert "search: 17 regions" in raw  # the account's enabled regions (DescribeRegions)
    text = ANSI.sub("", raw)
    for region in ("us-east-1", "eu-west-1", "ap-northeast-3", "sa-east-1"):
        assert whole(region, text)
    piped = subprocess.run(
        [CLI, "search", "g6.xlarge"], env=env, capture_output=True, text=True, timeout=300
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
