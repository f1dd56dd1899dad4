"""``capacity-broker local`` signs each function's calls with its own role's session, on
whatever thread the function's work runs (``capacity_broker.local_roles``)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from capacity_broker.local_roles import (
    acting_as,
    role_session,
    running,
    threads_inherit_context,
)

KEYS = {
    "probe": ("ASIAPROBE", "probe-secret", "probe-token"),
    "reserve": ("ASIARESERVE", "reserve-secret", "reserve-token"),
}


def signed_as() -> str:
    """The access key a request made here would be signed with."""
    credentials = role_session(KEYS.get).get_credentials()
    assert credentials is not None
    return str(credentials.get_frozen_credentials().access_key)


def test_requests_are_signed_as_the_running_function() -> None:
    assert signed_as() == "testing"  # the process's own (tests/conftest.py)
    with acting_as("probe"):
        assert signed_as() == "ASIAPROBE"
        frozen = role_session(KEYS.get).get_credentials().get_frozen_credentials()
        assert (frozen.secret_key, frozen.token) == ("probe-secret", "probe-token")
        with acting_as("reserve"):
            assert signed_as() == "ASIARESERVE"
        assert signed_as() == "ASIAPROBE"
    with acting_as("cleaner"):  # a function without a role: the process's credentials
        assert signed_as() == "testing"


def test_a_functions_threads_and_pool_tasks_are_its_own() -> None:
    """A thread runs as whoever started it, a pool task as whoever submitted it: one pool
    shared by two functions (the capacity memory's writer) runs each one's work as that
    function."""
    seen: dict[str, str | None] = {}
    with threads_inherit_context():
        with acting_as("probe"):
            thread = threading.Thread(target=lambda: seen.update(thread=running()))
            thread.start()
            thread.join()
        with ThreadPoolExecutor(max_workers=1) as shared:
            with acting_as("probe"):
                seen["first"] = shared.submit(running).result()
            with acting_as("reserve"):
                seen["second"] = shared.submit(running).result()
            seen["outside"] = shared.submit(running).result()
    assert seen == {"thread": "probe", "first": "probe", "second": "reserve", "outside": None}


def test_threads_start_empty_again_once_no_broker_needs_it() -> None:
    """The inheritance is Python 3.14's (``thread_inherit_context``), on only while a local
    broker uses roles (counted), and gone after."""
    start, submit = threading.Thread.start, ThreadPoolExecutor.submit
    with threads_inherit_context(), threads_inherit_context():
        assert threading.Thread.start is not start
    assert (threading.Thread.start, ThreadPoolExecutor.submit) == (start, submit)
    seen: list[str | None] = []
    with acting_as("probe"):
        thread = threading.Thread(target=lambda: seen.append(running()))
        thread.start()
        thread.join()
    assert seen == [None]
