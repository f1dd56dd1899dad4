"""``python -m emulator serve [--scenario FILE] [--port N]``: the emulator as a local server."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .server import Server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the capacity emulator on 127.0.0.1")
    serve.add_argument("--scenario", help="scenario file (YAML/JSON) or a bundled name")
    serve.add_argument("--port", type=int, default=0, help="port (0: any free port)")
    args = parser.parse_args(argv)

    server = Server(port=args.port, scenario=args.scenario)
    if args.scenario:
        server.emulator.load_scenario(args.scenario)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    # The first line is machine-readable: whoever started us reads the endpoint from it.
    print(f"AWS_ENDPOINT_URL={server.endpoint}", flush=True)
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
