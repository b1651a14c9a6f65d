"""How ``serve --workers`` keeps its workers' shares of the connections even (docs/gateway.md,
"Deployment"). Every worker is woken when a connection waits on the socket they share, and the
first to get to it takes it: the kernel does not balance, and one worker came to hold three
quarters of 50 clients' kept-alive connections, its clients waiting three times as long as the
other's while it saturated its core.

So each worker publishes how many connections it has open, in memory the workers share (made
before they fork), and a worker holding more than the fewest plus ``SLACK`` leaves a waiting
connection to the others, for at most ``DEFER_S``: after that it takes it, so that a stalled or
dead worker never keeps a client waiting longer.
"""

from __future__ import annotations

import mmap
import socket
import time
from typing import Any

SLACK = 1
"""Connections a worker may hold beyond the fewest any worker holds before it defers."""
DEFER_S = 0.005
"""The longest a worker leaves one waiting connection to the others."""


class OpenCounts:
    """Each worker's count of open connections, shared by the processes forked after it is
    made. Each worker writes only its own slot."""

    def __init__(self, workers: int) -> None:
        self._memory = mmap.mmap(-1, 8 * workers)
        self._counts = memoryview(self._memory).cast("q")

    def publish(self, index: int, count: int) -> None:
        self._counts[index] = count

    def crowded(self, index: int) -> bool:
        """Whether worker ``index`` holds more than the fewest plus ``SLACK``."""
        return self._counts[index] > min(self._counts) + SLACK


class SharedListener(socket.socket):
    """Worker ``index``'s handle on a socket the first process bound and made listen. Its
    ``listen(backlog)`` leaves the socket as it is (the server's backlog is the connections
    taken at once, not the kernel's queue, which the workers share); its ``accept`` declines,
    as if nothing waited, while this worker is ``crowded``, for at most ``DEFER_S``."""

    def __init__(self, *, fileno: int, counts: OpenCounts, index: int) -> None:
        super().__init__(fileno=fileno)
        self._counts = counts
        self._index = index
        self._declined_since = self._declined_last = 0.0

    def listen(self, backlog: int = 0, /) -> None:
        return None

    def accept(self) -> tuple[socket.socket, Any]:
        if self._counts.crowded(self._index):
            now = time.monotonic()
            if now - self._declined_last > DEFER_S:  # a new connection waits, not the last one
                self._declined_since = now
            self._declined_last = now
            if now - self._declined_since < DEFER_S:
                raise BlockingIOError
        self._declined_last = 0.0
        return super().accept()
