"""Fixtures of the fan-out and memory tests; helpers import from this folder."""

from __future__ import annotations

import sys
from pathlib import Path

# The suite runs with --import-mode=importlib: test modules import helpers from here.
sys.path.insert(0, str(Path(__file__).parent))
