"""Each local function calls AWS as its own role, as Lambda runs it.

Lambda gives every function its execution role's temporary credentials; the deployed roles
are what keeps a function to its own work (``infra/permissions.py``). ``capacity-broker local``
runs the five functions in one process, where they share the container's boto3 session and
clients, so the credentials are chosen per call instead: the session's credentials are
``RoleCredentials``, which sign each request with the role session of the function running
in that context (``acting_as``), and with the process's own credentials outside one.

"The function running" is a context variable. A function's work runs on threads of its own
(the probe fan-out, the cleaner's pools, the capacity memory's writer), and Python 3.11's
threads and thread pools start from an empty context, so while roles are in use threads
inherit the context of whoever started them, and pool tasks the context of whoever submitted
them: what Python 3.14's ``thread_inherit_context`` does for threads, and the submitter's
context for tasks (a pool shared by two functions runs each one's tasks as that function).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import boto3
import botocore.session
from botocore.credentials import (
    CredentialProvider,
    CredentialResolver,
    Credentials,
    ReadOnlyCredentials,
)

# (access key, secret key, session token) of function ``entry``'s role, or None.
RoleLookup = Callable[[str], tuple[str, str, str] | None]

_running: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "capacity_broker_function", default=None
)


def running() -> str | None:
    """The entry point (probe, reserve...) running in this context, if any."""
    return _running.get()


@contextlib.contextmanager
def acting_as(entry: str) -> Iterator[None]:
    """Calls made in this block (and on the threads it starts) are function ``entry``'s."""
    token = _running.set(entry)
    try:
        yield
    finally:
        _running.reset(token)


class RoleCredentials(Credentials):
    """Credentials that are the running function's role session, or ``fallback``."""

    def __init__(self, roles: RoleLookup, fallback: Credentials | None) -> None:
        # Not Credentials.__init__: there are no fixed keys to keep.
        self._roles = roles
        self._fallback = fallback
        self.method = "capacity-broker-local-roles"
        self.account_id = None

    def get_frozen_credentials(self) -> ReadOnlyCredentials:
        entry = running()
        found = self._roles(entry) if entry is not None else None
        if found is not None:
            key, secret, token = found
            return ReadOnlyCredentials(key, secret, token, None)
        if self._fallback is None:
            return ReadOnlyCredentials("", "", None, None)
        return self._fallback.get_frozen_credentials()

    # botocore reads these too (e.g. to decide whether to sign at all)
    @property
    def access_key(self) -> str:
        return str(self.get_frozen_credentials().access_key)

    @access_key.setter
    def access_key(self, value: str) -> None:
        return None

    @property
    def secret_key(self) -> str:
        return str(self.get_frozen_credentials().secret_key)

    @secret_key.setter
    def secret_key(self, value: str) -> None:
        return None

    @property
    def token(self) -> str | None:
        token = self.get_frozen_credentials().token
        return str(token) if token is not None else None

    @token.setter
    def token(self, value: str | None) -> None:
        return None


class _Provider(CredentialProvider):
    METHOD = "capacity-broker-local-roles"
    CANONICAL_NAME = "capacity-broker-local-roles"

    def __init__(self, credentials: RoleCredentials) -> None:
        super().__init__()
        self._credentials = credentials

    def load(self) -> RoleCredentials:
        return self._credentials


def role_session(roles: RoleLookup) -> boto3.session.Session:
    """A boto3 session whose requests are signed as the running function's role (the
    environment's credentials outside a function)."""
    fallback = botocore.session.Session().get_credentials()
    core = botocore.session.Session()
    core.register_component(
        "credential_provider", CredentialResolver([_Provider(RoleCredentials(roles, fallback))])
    )
    return boto3.session.Session(botocore_session=core)


# -- the running function's context on its threads -------------------------------------------

# Python's own, kept at import (before anything here patches them).
_THREAD_START = threading.Thread.start
_POOL_SUBMIT = ThreadPoolExecutor.submit
_inheriting = 0
_inheriting_lock = threading.Lock()


def _start(self: threading.Thread) -> None:
    context = contextvars.copy_context()
    run = self.run
    self.run = lambda: context.run(run)  # type: ignore[method-assign]
    _THREAD_START(self)


def _submit(
    self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
) -> Future[Any]:
    return _POOL_SUBMIT(self, contextvars.copy_context().run, fn, *args, **kwargs)


@contextlib.contextmanager
def threads_inherit_context() -> Iterator[None]:
    """While inside (counted: nested and concurrent uses share one patch), a thread starts in
    a copy of its starter's context and a pool task runs in a copy of its submitter's."""
    global _inheriting
    with _inheriting_lock:
        if _inheriting == 0:
            threading.Thread.start = _start  # type: ignore[method-assign]
            ThreadPoolExecutor.submit = _submit  # type: ignore[method-assign,assignment]
        _inheriting += 1
    try:
        yield
    finally:
        with _inheriting_lock:
            _inheriting -= 1
            if _inheriting == 0:
                threading.Thread.start = _THREAD_START  # type: ignore[method-assign]
                ThreadPoolExecutor.submit = _POOL_SUBMIT  # type: ignore[method-assign]
