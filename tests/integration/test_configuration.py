"""A Lambda deployed with a bad setting answers one structured error naming every wrong
variable, and does nothing else: no import error, no traceback, no AWS call.

The settings are read once, at the entry (``capacity_broker.config.Settings.from_env``); before
they were read three ways (a hand parser, raw grace strings handed to the cleaner, and
``BROKER_EC2_RATE_SCALE`` at the pacer's import, where ``=fast`` made importing any handler
raise and ``=0`` divided by zero on the first EC2 call)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from capacity_broker.client import ENTRY_POINTS

pytestmark = pytest.mark.integration

EVENTS = Path(__file__).parents[2] / "events"
EVENT_OF = {
    "probe": "probe.json",
    "reserve": "reserve.json",
    "release": "release.json",
    "cleaner": "cleaner_sweep.json",
    "capacity": "capacity.json",
}
BAD = [
    ("BROKER_CLUSTER_ID", ""),
    ("BROKER_PARAMETER_PREFIX", "no-leading-slash"),
    ("AWS_REGION", "moon-base-1a"),
    ("BROKER_REGIONS", "us-east-1,eu west"),
    ("BROKER_STATE_TABLE", "x"),
    ("BROKER_MAX_CONCURRENCY", "lots"),
    ("BROKER_PROBE_GRACE_SECONDS", "a minute"),
    ("BROKER_STACK_GRACE_SECONDS", "-3"),
    ("BROKER_IDLE_GRACE_SECONDS", "ten minutes"),
    ("BROKER_HOLD_LIMIT_SECONDS", "inf"),
    ("BROKER_EC2_RATE_SCALE", "fast"),
    ("BROKER_EC2_RATE_SCALE", "0"),
]


def event(entry: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / EVENT_OF[entry]).read_text())
    data.setdefault("request_id", f"cfg-{entry}")
    return data


def calls(emu: Any) -> list[Any]:
    return [
        c
        for service in ("ec2", "ssm", "dynamodb", "cloudformation")
        for c in emu.calls(None, service)
    ]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize(("variable", "raw"), BAD)
def test_a_bad_variable_is_one_structured_answer(
    entry: str,
    variable: str,
    raw: str,
    broker: Any,
    container: Any,
    context: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(variable, raw)
    container.close()  # a fresh Lambda container: its root is built from the environment
    broker.clear_calls()
    sent = event(entry)
    answer = import_module(f"capacity_broker.handlers.{entry}").handler(sent, context)
    assert set(answer) == {"status", "error_code", "request_id", "message"}, answer
    assert answer["status"] == "error"
    assert answer["error_code"] == "InvalidConfiguration"
    assert answer["request_id"] == sent["request_id"]
    assert variable in answer["message"]
    assert calls(broker) == []  # nothing asked of AWS, so nothing created


def test_every_wrong_variable_is_named_in_the_one_answer(
    broker: Any, container: Any, context: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capacity_broker.handlers.probe import handler

    wrong = {name: raw for name, raw in BAD if name != "BROKER_CLUSTER_ID"}
    for name, raw in wrong.items():
        monkeypatch.setenv(name, raw)
    container.close()
    answer = handler(event("probe"), context)
    assert answer["error_code"] == "InvalidConfiguration"
    named = [name for name in wrong if name in answer["message"]]
    assert named == list(wrong)


def test_a_cold_start_with_a_bad_environment_imports_and_answers() -> None:
    """A fresh interpreter, as Lambda's: every handler module imports with every variable
    wrong, and each handler answers the structured error (no AWS endpoint is reachable: an
    attempt to call one would fail the answer's shape)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    env |= dict(BAD)
    env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"  # nothing listens: any call would fail
    code = (
        "import json, sys\n"
        "from importlib import import_module\n"
        "class Context:\n"
        "    function_name = 'capacity-broker-cold'\n"
        "    memory_limit_in_mb = 512\n"
        "    invoked_function_arn = 'arn:aws:lambda:us-east-1:123456789012:function:cold'\n"
        "    aws_request_id = '00000000-0000-0000-0000-000000000001'\n"
        "    def get_remaining_time_in_millis(self):\n"
        "        return 30_000\n"
        "answers = {}\n"
        f"for entry in {list(ENTRY_POINTS)!r}:\n"
        "    module = import_module(f'capacity_broker.handlers.{entry}')\n"
        "    answers[entry] = module.handler({'request_id': 'cold-1'}, Context())\n"
        "sys.stdout.write('ANSWERS ' + json.dumps(answers))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    answers = json.loads(out.stdout.split("ANSWERS ", 1)[1])
    assert set(answers) == set(ENTRY_POINTS)
    for answer in answers.values():
        assert answer["status"] == "error"
        assert answer["error_code"] == "InvalidConfiguration"
        assert answer["request_id"] == "cold-1"
        for name, _ in BAD:
            assert name in answer["message"]
