"""A probe's look-ups beside its flags' read (``logic.probe.Placing``): started once, on a
thread of their own; their result (or their error) is the probe's when it is used; a probe the
flags stop drops them, waiting for one under way, and none starts after that. Ordering is by
events, never by the machine's speed."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from capacity_broker.adapters.aws import AwsError
from capacity_broker.logic import InvalidInput
from capacity_broker.logic import probe as flow
from capacity_broker.models import ProbeRequest

REQUEST = ProbeRequest(instance_type="g6.xlarge", subnet_ids=["subnet-0a0000000000000a1"])
DEADLINE = 1e12


class Resolving:
    """``placement.resolve`` stood in for: each look-up says where it ran, and waits for
    ``release`` before it answers (or raises ``raises``)."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self.raises = raises
        self.threads: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.order: list[str] = []

    def __call__(
        self, ec2: Any, request: ProbeRequest, subnet_ids: list[str], deadline: float
    ) -> Any:
        assert (request, subnet_ids, deadline) == (REQUEST, REQUEST.subnet_ids, DEADLINE)
        self.threads.append(threading.current_thread().name)
        self.started.set()
        assert self.release.wait(30)
        self.order.append("looked up")
        if self.raises is not None:
            raise self.raises
        return "the places"


@pytest.fixture
def resolving(monkeypatch: pytest.MonkeyPatch) -> Resolving:
    found = Resolving()
    monkeypatch.setattr(flow.placement, "resolve", found)
    return found


def placing() -> flow.Placing:
    return flow.Placing(ec2=None, request=REQUEST, deadline=DEADLINE)  # type: ignore[arg-type]


def test_started_look_ups_run_once_on_a_thread_of_their_own(resolving: Resolving) -> None:
    looking = placing()
    looking.start()
    looking.start()
    assert resolving.started.wait(30)
    resolving.release.set()
    assert looking.result() == "the places"
    assert looking.result() == "the places"
    assert resolving.threads == ["probe-placing"]


def test_never_started_they_run_on_the_caller_s_thread_when_used(resolving: Resolving) -> None:
    """A group's member never starts them; one that ends up probing alone looks up then."""
    resolving.release.set()
    assert placing().result() == "the places"
    assert resolving.threads == [threading.current_thread().name]


@pytest.mark.parametrize(
    "error",
    [
        AwsError("DescribeSubnets", "UnauthorizedOperation", "not allowed"),
        InvalidInput([("subnet_ids.0", "subnet subnet-0a0000000000000a1 does not exist")]),
    ],
)
def test_what_the_look_ups_raise_is_raised_where_they_are_used(
    resolving: Resolving, error: BaseException
) -> None:
    resolving.raises = error
    looking = placing()
    looking.start()
    resolving.release.set()
    with pytest.raises(type(error)) as raised:
        looking.result()
    assert raised.value is error


def test_a_drop_waits_for_the_look_ups_under_way_and_lets_their_error_go(
    resolving: Resolving,
) -> None:
    resolving.raises = AwsError("DescribeSubnets", "UnauthorizedOperation", "not allowed")
    looking = placing()
    looking.start()
    assert resolving.started.wait(30)
    dropped = threading.Event()

    def drop() -> None:
        looking.drop()
        resolving.order.append("dropped")
        dropped.set()

    dropping = threading.Thread(target=drop)
    dropping.start()
    assert not dropped.wait(0.2)  # still looking up: the drop waits
    resolving.release.set()
    dropping.join(30)
    assert dropped.is_set()
    assert resolving.order == ["looked up", "dropped"]


def test_after_a_drop_no_look_up_starts(resolving: Resolving) -> None:
    """A grouped probe's look-ups start when its arrival says it is no member: after its
    flags stopped it, that starts nothing (nothing may run after the answer)."""
    looking = placing()
    looking.drop()
    looking.start()
    resolving.release.set()
    assert not resolving.started.wait(0.2)
    assert resolving.threads == []


def test_look_ups_whose_thread_could_not_start_are_made_where_they_are_used(
    resolving: Resolving, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread that cannot start (a process at its limit of threads) raises where the
    look-ups were started (a grouped probe's preparation logs it) and leaves nothing to wait
    for: the probe looks its places up when it uses them, and a drop returns at once, instead
    of both waiting for a thread that never ran (until Lambda's timeout)."""

    class Unstartable(threading.Thread):
        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    looking = placing()
    with monkeypatch.context() as patched:
        patched.setattr(flow.threading, "Thread", Unstartable)
        with pytest.raises(RuntimeError):
            looking.start()
    resolving.release.set()
    answered: list[Any] = []
    using = threading.Thread(target=lambda: answered.append(looking.result()), daemon=True)
    using.start()
    using.join(30)
    assert answered == ["the places"]
    assert resolving.threads == [using.name]
    dropping = threading.Thread(target=looking.drop, daemon=True)
    dropping.start()
    dropping.join(30)
    assert not dropping.is_alive()
