#!/usr/bin/env python3
"""CDK entry point (`npx cdk synth|deploy -c clusterId=...`; cdk.json runs `python3 app.py`)."""

from __future__ import annotations

import sys

from infra.app import build_app
from infra.config import ConfigError


def main() -> int:
    try:
        app, _stack = build_app()
    except ConfigError as error:
        # A clear one-line message beats a jsii stack trace for a context typo.
        print(f"capacity-broker: {error}", file=sys.stderr)
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
