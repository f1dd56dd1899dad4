"""One container's probe, as a process of its own (``python -m bench.group_probe``), for the
crash tests of grouped probes (``tests/integration/test_group_crash.py``) and the burst bench's
crash row (``bench.crash``): it builds a cold root from its environment (the
served emulator, the state table), says ``ready``, probes once when a line arrives on its
standard input, and prints the answer as JSON.

``CRASH_AT`` kills the process with SIGKILL, as Lambda's timeout or the kernel's OOM killer
would (no ``finally`` runs, no answer is sent):

- ``create``: a group's leader, the moment EC2 answered its first create (it holds the group's
  whole count and has told nobody);
- ``publish``: a group's leader, after every hold is given back and the group is PUBLISHED,
  before any member's answer is written;
- ``look``: a member, at its first look for its answer.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    from capacity_broker.adapters.dynamodb_group import TableStore
    from capacity_broker.client.in_process import InProcessContext, handler_module
    from capacity_broker.config import Settings
    from capacity_broker.handlers._runtime import PLAIN, serve
    from capacity_broker.root import Root

    root = Root(Settings.from_env(os.environ))
    crash_at = os.environ.get("CRASH_AT", "")
    if crash_at == "create":
        real_hold = root.core.hold

        def hold(spec: Any, *args: Any, **kwargs: Any) -> Any:
            made = real_hold(spec, *args, **kwargs)
            if spec.group_id is not None:
                _die()
            return made

        root.core.hold = hold  # type: ignore[method-assign]
    elif crash_at in ("publish", "look"):
        real = TableStore.publish if crash_at == "publish" else TableStore.answer

        def crash(*_: Any, **__: Any) -> Any:
            _die()
            return real  # (never reached)

        setattr(TableStore, "publish" if crash_at == "publish" else "answer", crash)
    module = handler_module("probe")
    event = json.loads(os.environ["PROBE_EVENT"])
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()
    context = InProcessContext(
        function_name="capacity-broker-probe", timeout_ms=int(os.environ["PROBE_TIMEOUT_MS"])
    )
    answer = dict(serve("probe", module.run, dict(event), context, lambda: root, PLAIN))
    print(json.dumps(answer, default=str), flush=True)
    root.close(timeout=2)


if __name__ == "__main__":
    main()
