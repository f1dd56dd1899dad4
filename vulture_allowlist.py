"""What only a framework or an outside caller uses, so ``vulture`` (``make lint``) cannot see a
use. Each line names the caller. Typer commands, pydantic validators, pytest fixtures and hooks
are left out by decorator and name in pyproject.toml's ``[tool.vulture]``.
"""

# ruff: noqa: B018
from __future__ import annotations

from typing import Any

_: Any = None

# Console scripts (pyproject.toml [project.scripts]): Slurm's SuspendProgram and
# ResumeFailProgram.
_.suspend
_.resume_fail
# Module __getattr__ (PEP 562): the package's lazy names.
_.__getattr__
# Lambda's context object, read by Powertools (Logger's and Metrics' context fields): the
# in-process client's, the benchmark's and the tests' stand-ins for it.
_.function_version
_.memory_limit_in_mb
_.invoked_function_arn
_.log_group_name
_.log_stream_name
# Powertools' idempotency response hook is called with (response, idempotent_data).
_.idempotent_data
# pydantic fields: contract answers serialized to JSON, and events AWS sends (only validated).
_.template_versions_deleted
_.template_version_errors
_.ladder_nodes_terminated
_.ladder_errors
_.limit_exceeded
_.status_reason
_.client_request_token
_.purchase_date
# Enum values that arrive as text (the contract's statuses, the CLI's --workload choices).
_.INVALID_REQUEST
_.SPLIT
_.EXTEND
_.INFERENCE
_.DEV
_.training
_.dev
# reprlib.Repr's limits, read by Repr.repr.
_.maxstring
_.maxother
_.maxdict
_.maxlist
_.maxset
_.maxtuple
_.maxlevel
# moto: a backend's _url_module and a response class's url_paths are read by moto's server;
# the attributes below by moto's response templates; WSGIApp is a type alias.
_._url_module
_.url_paths
_.target_capacity
_.target_capacity_specification
_.fulfilled_capacity
_.usage_operation
_.WSGIApp
# http.server.BaseHTTPRequestHandler.log_request (overridden to keep the emulator quiet).
_.log_request
# Hypothesis: a RuleBasedStateMachine's teardown; pytest: a fixture asked for its effect.
_.teardown
_.realistic
_.world_seeded
# A limiter's clock protocol.
_.current_time
# Data read from EC2's answers and kept whole (an AZ's zone type, a fleet's id).
_.zone_type
_.fleet_id
# html.parser.HTMLParser calls these on the page it parses (emulator/documented.py).
_.handle_starttag
_.handle_endtag
_.handle_data
# socketserver.TCPServer.server_activate reads it (emulator/server.py's listen queue).
_.request_queue_size
# http.server.BaseHTTPRequestHandler reads and calls these for each request it serves (a
# test's endpoint: keep-alive HTTP/1.1, a POST, no log line).
_.protocol_version
_.do_POST
_.log_message
# botocore's CredentialResolver reads a provider's canonical name (adapters/aws.py).
_.CANONICAL_NAME
# moto's serializer reads a fleet's members from its attributes by their snake-cased shape
# names (FleetData.ReservedCapacityOptions): emulator/responses/launches.py.
_.reserved_capacity_options
# ... and an instance's LaunchTime from its launch_time (emulator/models/launches.py).
_.launch_time
