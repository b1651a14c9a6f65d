"""``MemoryLocks``: ``Locks`` for the threads of one process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from slurm_image.ports.lock import LockTimeout


class MemoryLocks:
    """A ``Locks`` (see ``ports.lock``) for threads of one process."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._writers: set[str] = set()
        self._readers: dict[str, int] = {}

    def _wait(self, name: str, free: Callable[[], bool], timeout_s: float) -> None:
        if not self._condition.wait_for(free, timeout=timeout_s):
            raise LockTimeout(
                field=f"lock {name}",
                rule=f"held by another process for more than {timeout_s:g} s;"
                " retry when it has finished",
            )

    @contextmanager
    def exclusive(self, name: str, *, timeout_s: float) -> Iterator[None]:
        with self._condition:
            self._wait(
                name,
                lambda: name not in self._writers and not self._readers.get(name),
                timeout_s,
            )
            self._writers.add(name)
        try:
            yield
        finally:
            with self._condition:
                self._writers.discard(name)
                self._condition.notify_all()

    @contextmanager
    def shared(self, name: str, *, timeout_s: float) -> Iterator[None]:
        with self._condition:
            self._wait(name, lambda: name not in self._writers, timeout_s)
            self._readers[name] = self._readers.get(name, 0) + 1
        try:
            yield
        finally:
            with self._condition:
                self._readers[name] -= 1
                self._condition.notify_all()
