"""A DynamoDB endpoint that hangs: a socket that accepts every connection and never answers.
The burst bench points a lone probe's table at it (``lone/hung_table``), and
``tests/integration/test_group_store.py`` its dead-table tests (contract v4: the table is
advice, a probe answers as a lone probe)."""

from __future__ import annotations

import socket
import threading


class Hung:
    """A socket that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.accepted: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        self.listener.settimeout(0.1)
        while not self.stop.is_set():
            try:
                self.accepted.append(self.listener.accept()[0])
            except TimeoutError:
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for s in self.accepted:
            s.close()
        self.listener.close()
