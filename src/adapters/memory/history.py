"""``MemoryHistory``: a ``History`` over ``MemoryStore``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from slurm_image.adapters.history_files import (
    lay_out_history,
    line_to_append,
    read_history,
    read_history_after,
    refused_as_history,
)
from slurm_image.adapters.memory.lock import MemoryLocks
from slurm_image.adapters.memory.store import MemoryStore
from slurm_image.domain.history import (
    HistoryEvent,
    HistoryPosition,
    HistoryRead,
    appended_bytes,
)
from slurm_image.domain.store_layout import RECORD_MODE, StoreLayout
from slurm_image.ports.history import HISTORY_LOCK, HistoryError

DEFAULT_LOCK_TIMEOUT_S = 60.0


class MemoryHistory:
    """A ``History`` (see ``ports.history``) in a ``MemoryStore``, with the local adapter's
    observable rules: the same files, modes, owners, symlink refusals, lock and torn lines.

    Hooks for tests: ``before_append`` is called with every event before it is written (raise
    there: a full disk, a lock held too long); ``tear_next(keep)`` makes the next append write
    only the first ``keep`` bytes of what it would write and fail (``HistoryError``), as a write
    cut short leaves the file.
    """

    def __init__(
        self,
        store: MemoryStore,
        locks: MemoryLocks | None = None,
        *,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        self._store = store
        self._locks = locks
        self._layout = StoreLayout(store.root)
        self._timeout = lock_timeout_s
        self._tear: int | None = None
        self.before_append: Callable[[HistoryEvent], None] | None = None

    def tear_next(self, keep: int) -> None:
        self._tear = keep

    def append(self, event: HistoryEvent) -> None:
        path, line, locks = line_to_append(self._layout, event, self._locks)
        if self.before_append is not None:
            self.before_append(event)
        lay_out_history(self._store, self._layout)
        with locks.exclusive(HISTORY_LOCK, timeout_s=self._timeout):
            with refused_as_history(path):
                node = self._store.appending(path, mode=RECORD_MODE)
            with self._store.filesystem.lock:
                data = appended_bytes(line, bytes(node.data[-1:]))
                keep, self._tear = self._tear, None
                if keep is not None and keep < len(data):
                    node.data += data[:keep]
                    raise HistoryError(
                        field=path, rule=f"only {keep} of {len(data)} bytes were written"
                    )
                node.data += data

    def read(self, since: datetime | None = None) -> HistoryRead:
        return read_history(self._store, since)

    def read_after(
        self, position: HistoryPosition | None, since: datetime | None = None
    ) -> tuple[HistoryRead, HistoryPosition]:
        return read_history_after(self._store, position, since)
