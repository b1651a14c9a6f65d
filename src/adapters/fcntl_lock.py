"""Named locks as POSIX ``fcntl`` record locks on files in ``images/locks/`` (docs/design.md,
"Publication").

``fcntl`` locks (unlike BSD ``flock``) are shared across the clients of NFS and Lustre mounts.
They belong to the process, not to a descriptor: a second holder in the same process would be
granted at once, and closing ANY descriptor of the file drops them all. So holders within one
process first agree among themselves (a reader-writer state per name), shared holds share one
descriptor, and only then is the ``fcntl`` lock taken.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from slurm_image.adapters.local_store import LocalStore
from slurm_image.domain import paths
from slurm_image.domain.store_layout import StoreLayout
from slurm_image.ports.lock import LockTimeout

_BUSY = frozenset({errno.EAGAIN, errno.EACCES})


@dataclass
class _Name:
    """One lock name as this process holds it."""

    writer: bool = False
    readers: int = 0
    shared_fd: int | None = None


class FcntlLocks:
    """A ``Locks`` (see ``ports.lock``) in the store's ``locks/`` directory."""

    def __init__(self, store: LocalStore, *, poll_s: float = 0.02, max_poll_s: float = 0.5) -> None:
        self._store = store
        self._layout = StoreLayout(store.root)
        self._poll_s = poll_s
        self._max_poll_s = max_poll_s
        self._condition = threading.Condition()
        self._names: dict[str, _Name] = {}

    def _open(self, name: str) -> int:
        paths.name(name, "lock")
        self._store.ensure_directory(self._layout.locks, mode=0o700)
        return self._store.open_lock_file(f"{self._layout.locks}/{name}.lock")

    def _timeout(self, name: str, timeout_s: float) -> LockTimeout:
        return LockTimeout(
            field=f"lock {name}",
            rule=f"held by another process for more than {timeout_s:g} s;"
            " retry when it has finished",
        )

    def _acquire(self, name: str, operation: int, deadline: float, timeout_s: float) -> int:
        fd = self._open(name)
        pause = self._poll_s
        try:
            while True:
                try:
                    fcntl.lockf(fd, operation | fcntl.LOCK_NB)
                    return fd
                except OSError as error:
                    if error.errno not in _BUSY:
                        raise
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timeout(name, timeout_s)
                time.sleep(min(pause, remaining))
                pause = min(pause * 2, self._max_poll_s)
        except BaseException:
            os.close(fd)
            raise

    def _wait(self, name: str, free: Callable[[], bool], deadline: float, timeout_s: float) -> None:
        if not self._condition.wait_for(free, timeout=max(0.0, deadline - time.monotonic())):
            raise self._timeout(name, timeout_s)

    @contextmanager
    def exclusive(self, name: str, *, timeout_s: float) -> Iterator[None]:
        deadline = time.monotonic() + timeout_s
        with self._condition:
            state = self._names.setdefault(name, _Name())
            self._wait(name, lambda: not state.writer and not state.readers, deadline, timeout_s)
            state.writer = True
        try:
            fd = self._acquire(name, fcntl.LOCK_EX, deadline, timeout_s)
            try:
                yield
            finally:
                os.close(fd)
        finally:
            with self._condition:
                state.writer = False
                self._condition.notify_all()

    @contextmanager
    def shared(self, name: str, *, timeout_s: float) -> Iterator[None]:
        deadline = time.monotonic() + timeout_s
        with self._condition:
            state = self._names.setdefault(name, _Name())
            self._wait(
                name,
                lambda: not state.writer and (not state.readers or state.shared_fd is not None),
                deadline,
                timeout_s,
            )
            first = state.readers == 0
            state.readers += 1
        try:
            if first:
                fd = self._acquire(name, fcntl.LOCK_SH, deadline, timeout_s)
                with self._condition:
                    state.shared_fd = fd
                    self._condition.notify_all()
        except BaseException:
            with self._condition:
                state.readers -= 1
                self._condition.notify_all()
            raise
        try:
            yield
        finally:
            with self._condition:
                state.readers -= 1
                if not state.readers and state.shared_fd is not None:
                    os.close(state.shared_fd)
                    state.shared_fd = None
                self._condition.notify_all()
