"""How long the cleaner waits before each of its rules applies: the contract's defaults.

A module of its own, apart from the rules in ``domain.cleaner`` and their ``Graces``: every
entry point's settings default to these (``config.Settings``), and a handler's cold import
should not build the cleaner's records for them (issue 44); only the cleaner makes ``Graces``
(``Settings.graces``).
"""

from __future__ import annotations

from datetime import timedelta

# The reserve function's longest run: its Lambda timeout (infra/functions.py, "reserve"; a
# test there keeps the two equal). Lambda stops an invocation at its timeout, so no invocation
# that launched a ladder's node is still running this long after the node's launch.
RESERVE_MAX_RUN = timedelta(seconds=120)
# Added to it before a ladder without its done record counts as abandoned: the clocks of the
# Lambda and of EC2's LaunchTime may differ by a little, the done record (a tag) takes a moment
# to show in a listing by tag, and a retry of the request that starts inside the window
# finishes the ladder (or undoes it) itself.
LADDER_GRACE = timedelta(minutes=5)
# The contract's defaults of the other graces (``Graces``, ``BROKER_*_GRACE_SECONDS``).
PROBE_GRACE = timedelta(seconds=90)
STACK_GRACE = timedelta(seconds=180)
IDLE_GRACE = timedelta(seconds=600)
HOLD_LIMIT = timedelta(seconds=1800)
# How old the youngest node of a ladder without its done record must be before the cleaner
# ends the ladder; the deployment sets it to the reserve function's timeout plus the grace.
LADDER_WINDOW = RESERVE_MAX_RUN + LADDER_GRACE
