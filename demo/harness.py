"""Start the emulator as its own process and talk to it like AWS; leave nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from emulator.remote import RemoteEmulator

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def emulator_process(scenario: str = "demo") -> Iterator[RemoteEmulator]:
    """`python -m emulator serve` on a free port; AWS_ENDPOINT_URL points boto3 at it."""
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "emulator", "serve", "--scenario", scenario],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL",)}
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        if not first.startswith("AWS_ENDPOINT_URL="):
            raise RuntimeError(f"the emulator did not start: {first!r}")
        endpoint = first.split("=", 1)[1]
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        yield RemoteEmulator(endpoint)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
