"""Knobs that make the emulator behave like a busy, imperfect AWS.

- latency: seconds added to every call (or to named actions);
- throttling: EC2's token buckets per account, region and action (``emulator.throttling``),
  answering ``RequestLimitExceeded`` when a bucket is empty;
- faults: fail the next N calls of an action with an error code, or let the call take effect
  and then lose the answer (a timeout after the request reached AWS), or let it see EC2 lagging
  behind (``lag``: eventual consistency, ``emulator.models.consistency``), or shape EC2's
  answer: ``failed`` (CreateCapacityReservation answers with a reservation in state
  ``failed``), ``errors`` (an instant CreateFleet answers 200 with an ``Errors[]`` entry of the
  fault's code and launches nothing), ``partial`` (it launches one node fewer than asked,
  whatever its minimum, with an ``Errors[]`` entry for the rest);
- a call log, so tests can count what the broker asked for.

The hub sits in front of every moto action (``emulator.install``) and costs a dictionary
look-up when nothing is configured.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .throttling import Throttling

# HTTP status EC2 answers these codes with; everything else is a 400.
SERVER_ERROR_STATUS = {
    "InsufficientInstanceCapacity": 500,
    "InsufficientReservedInstanceCapacity": 500,
    "InternalError": 500,
    "InternalFailure": 500,
    "ServiceUnavailable": 503,
    "Unavailable": 503,
    "RequestLimitExceeded": 503,
    "Throttling": 400,
    "ThrottlingException": 400,
    # "the request returns a Client.UnauthorizedOperation response (an HTTP 403 response)"
    # (STS API Reference, DecodeAuthorizationMessage); what IAM evaluation answers too.
    "UnauthorizedOperation": 403,
}


# Fault modes in which the call succeeds and its answer is shaped by the fault.
ANSWER_MODES = ("failed", "errors", "partial")


@dataclass
class Fault:
    action: str
    service: str = "ec2"
    code: str | None = None
    message: str = "Injected fault"
    # "error": fail before acting; "timeout": act, then lose the answer; "lag": act, but see
    # (or make) what was made in this world as EC2 does a moment after: not there yet;
    # "failed", "errors", "partial": the call succeeds with the answer the mode names (see
    # the module docstring)
    mode: str = "error"
    remaining: int = 1
    region: str | None = None
    when: dict[str, Any] = field(default_factory=dict)
    status: int | None = None
    times: int = 1  # as asked for (remaining counts down)

    def matches(self, service: str, action: str, region: str, params: Mapping[str, Any]) -> bool:
        if self.remaining <= 0 or self.service != service:
            return False
        if self.action not in ("*", action):
            return False
        if self.region and self.region != region:
            return False
        return all(params.get(k) == v for k, v in self.when.items())

    @property
    def http_status(self) -> int:
        if self.status is not None:
            return self.status
        return SERVER_ERROR_STATUS.get(self.code or "", 400)


@dataclass
class Call:
    service: str
    action: str
    region: str
    params: dict[str, Any]
    outcome: str = "ok"
    started: float = 0.0
    ended: float = 0.0
    # The emulator's clock (its "now": frozen or shifted by tests) when the call was served,
    # so tests can order what EC2 did without timing anything on the machine's clock.
    at: datetime | None = None
    # A "lag" fault on this call: how many calls long the lag it forces lasts (0: none).
    lag: int = 0
    # It named, listed or made something made in this world (eventual consistency can reach
    # it); and, under a lag fault, what it saw or made was changed by the lag.
    fresh: bool = False
    lagged: bool = False
    lag_fault: Fault | None = None
    # A fault that shapes this call's answer ("failed", "errors", "partial").
    answer_fault: Fault | None = None


@dataclass
class Gathering:
    """The next ``parties`` calls of ``action`` wait for each other (a barrier) before EC2
    answers them: they meet only when that many are in flight at once, which proves a caller
    concurrent without timing it. A caller that sends them one after the other leaves the
    first waiting until ``timeout``: the barrier breaks and ``met`` stays False."""

    action: str
    parties: int
    timeout: float
    barrier: threading.Barrier = field(init=False)
    met: bool = False
    broken: bool = False

    def __post_init__(self) -> None:
        self.barrier = threading.Barrier(self.parties)

    @property
    def done(self) -> bool:
        return self.met or self.broken

    def wait(self) -> None:
        try:
            self.barrier.wait(self.timeout)
            self.met = True
        except threading.BrokenBarrierError:
            self.broken = True


class InjectedError(Exception):
    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class Hub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.latency_default = 0.0
            self.latency_by_action: dict[str, float] = {}
            self.faults: list[Fault] = []
            self.throttling = Throttling()
            self.calls: list[Call] = []
            self.record = True
            self.gatherings: dict[str, Gathering] = {}

    # -- configuration ------------------------------------------------------------------
    def set_latency(self, seconds: float, actions: dict[str, float] | None = None) -> None:
        with self._lock:
            self.latency_default = seconds
            self.latency_by_action = dict(actions or {})

    def set_throttle(
        self,
        enabled: bool = True,
        buckets: dict[str, tuple[float, float]] | None = None,
        groups: dict[str, str] | None = None,
        time_scale: float = 1.0,
        raised: float = 1.0,
        others: dict[str, float] | None = None,
        clock: Callable[[], float] | None = None,
        seconds_per_call: float | None = None,
    ) -> None:
        """Turn EC2 throttling on (``emulator.throttling``: every action its own bucket)."""
        self.throttling.configure(
            enabled, buckets, groups, time_scale, raised, others, clock, seconds_per_call
        )

    def gather(self, action: str, parties: int, timeout: float = 10.0) -> Gathering:
        """The next ``parties`` calls of ``action`` meet before they are answered."""
        if parties < 2:
            raise ValueError("a gathering needs at least 2 parties")
        gathering = Gathering(action, parties, timeout)
        with self._lock:
            self.gatherings[action] = gathering
        return gathering

    def inject(
        self,
        action: str,
        code: str | None = None,
        *,
        times: int = 1,
        mode: str = "error",
        service: str = "ec2",
        message: str | None = None,
        region: str | None = None,
        when: dict[str, Any] | None = None,
        status: int | None = None,
    ) -> Fault:
        if mode not in (*ANSWER_MODES, "error", "timeout", "lag"):
            raise ValueError(f"unknown fault mode {mode!r}")
        if mode in ("error", "errors", "partial") and not code:
            raise ValueError("an error fault needs a code")
        fault = Fault(
            action=action,
            service=service,
            code=code,
            message=message or f"Injected {code or 'timeout'} for {action}",
            mode=mode,
            remaining=times,
            times=times,
            region=region,
            when=dict(when or {}),
            status=status,
        )
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self.faults = []

    # -- the calls ----------------------------------------------------------------------
    def calls_of(self, action: str | None = None, service: str = "ec2") -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.service == service and action in (None, c.action)]

    def clear_calls(self) -> None:
        with self._lock:
            self.calls = []

    def before(
        self,
        service: str,
        action: str,
        region: str,
        account: str,
        params: Callable[[], Mapping[str, Any]],
    ) -> tuple[Call, Fault | None]:
        """Run ahead of an action: latency, throttle, error faults.

        Returns the call record and, when the call must succeed but lose its answer, the
        timeout fault. Raises ``InjectedError`` when the call must fail.
        """
        call = Call(service, action, region, {}, started=time.monotonic())
        gathering = self.gatherings.get(action)
        if gathering is not None and not gathering.done:
            gathering.wait()
        wait = self.latency_by_action.get(action, self.latency_default)
        if wait > 0:
            time.sleep(wait)
        has_faults = bool(self.faults)
        values: Mapping[str, Any] = params() if (has_faults or self.record) else {}
        call.params = dict(values)
        with self._lock:
            if self.record:
                self.calls.append(call)
            if service == "ec2" and not self.throttling.allow(account, region, action, params):
                call.outcome = "RequestLimitExceeded"
                call.ended = time.monotonic()
                raise InjectedError("RequestLimitExceeded", "Request limit exceeded.", 503)
            timeout: Fault | None = None
            for fault in self.faults:
                if fault.matches(service, action, region, values):
                    if fault.mode == "lag":
                        # As long as the fault was asked for: a transient lag is short, a
                        # persistent one outlasts the invocation. It is used up by the calls
                        # it changed (``after``): one that reached nothing made a moment ago
                        # passes as it would have.
                        call.lag = fault.times
                        call.lag_fault = fault
                        break
                    fault.remaining -= 1
                    if fault.mode == "timeout":
                        timeout = fault
                        break
                    if fault.mode in ANSWER_MODES:
                        call.answer_fault = fault
                        break
                    call.outcome = fault.code or "error"
                    call.ended = time.monotonic()
                    raise InjectedError(
                        fault.code or "InternalError", fault.message, fault.http_status
                    )
            self.faults = [f for f in self.faults if f.remaining > 0]
        return call, timeout

    def after(self, call: Call, status: int, error_code: str | None = None) -> None:
        call.ended = time.monotonic()
        if call.lagged and call.lag_fault is not None:
            with self._lock:
                call.lag_fault.remaining -= 1
                self.faults = [f for f in self.faults if f.remaining > 0]
        if status >= 400:
            call.outcome = error_code or str(status)
