"""The History on a local or shared POSIX filesystem: ``<ws>/images/history/YYYY-MM.jsonl``
(docs/design.md, "History").

The directory and the files are the store's, walked and opened by ``LocalStore`` (no symlink at
any level, the owner's own directories made 0755; a month file opened ``O_APPEND|O_NOFOLLOW``,
created 0644, else a regular file of the owner's that group and others cannot write). An append
first makes ``history/`` when missing (``images/`` too, in a store where nothing was staged yet),
then holds the ``history`` lock (``Locks``: fcntl on ``images/locks/history.lock``, a bounded wait),
writes the whole line with ONE ``write()`` and fsyncs the file (and the directory when the file
or the directory was created). A line a crash tore is left as it is: the next append starts its
own line after it (``domain.history.appended_bytes``), and readers skip it. Reading
(``adapters.history_files``) takes no lock, so that anyone who may read the store may read its
history; an append in progress is at worst a torn last line to such a reader, skipped.
"""

from __future__ import annotations

import os
from datetime import datetime

from slurm_image.adapters.history_files import (
    lay_out_history,
    line_to_append,
    read_history,
    read_history_after,
    refused_as_history,
)
from slurm_image.adapters.local_store import LocalStore
from slurm_image.domain.history import (
    HistoryEvent,
    HistoryPosition,
    HistoryRead,
    appended_bytes,
)
from slurm_image.domain.store_layout import RECORD_MODE, StoreLayout
from slurm_image.ports.history import HISTORY_LOCK, HistoryError
from slurm_image.ports.lock import Locks

DEFAULT_LOCK_TIMEOUT_S = 60.0


class LocalHistory:
    """A ``History`` (see ``ports.history``) in the store ``store``.

    ``locks`` serialise the appends; without them the history is read only (``history``, which
    anyone who may read the store runs, through the store's reader ``LocalStore.reader``).
    """

    def __init__(
        self,
        store: LocalStore,
        locks: Locks | None = None,
        *,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        self._store = store
        self._locks = locks
        self._layout = StoreLayout(store.root)
        self._timeout = lock_timeout_s

    def append(self, event: HistoryEvent) -> None:
        path, line, locks = line_to_append(self._layout, event, self._locks)
        lay_out_history(self._store, self._layout)
        with locks.exclusive(HISTORY_LOCK, timeout_s=self._timeout):
            with refused_as_history(path):
                fd = self._store.open_appending(path, mode=RECORD_MODE)
            try:
                size = os.fstat(fd).st_size
                data = appended_bytes(line, os.pread(fd, 1, size - 1) if size else b"")
                written = os.write(fd, data)
                if written != len(data):
                    raise HistoryError(
                        field=path, rule=f"only {written} of {len(data)} bytes were written"
                    )
                os.fsync(fd)
            except OSError as error:
                raise HistoryError(
                    field=path, rule=error.strerror or type(error).__name__
                ) from None
            finally:
                os.close(fd)

    def read(self, since: datetime | None = None) -> HistoryRead:
        return read_history(self._store, since)

    def read_after(
        self, position: HistoryPosition | None, since: datetime | None = None
    ) -> tuple[HistoryRead, HistoryPosition]:
        return read_history_after(self._store, position, since)
