"""A piece of a flow run on a thread of its own while the flow goes on: reserve's template
check and its flags' read, a probe's look-ups beside its flags' read."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class Background(Generic[T]):
    """``fn(*args)`` started at once on a daemon thread; ``result()`` waits for it (and raises
    what it raised), ``wait()`` only waits (a flow that will not use it, so that nothing keeps
    running after its answer). A thread that cannot start (a process at its limit of threads)
    raises here, and nothing was started."""

    def __init__(self, fn: Callable[..., T], *args: object, name: str) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = fn(*args)
            except BaseException as error:  # noqa: BLE001 - handed to the waiting flow
                self._error = error

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def result(self) -> T:
        self.wait()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)

    def wait(self) -> None:
        self._thread.join()
