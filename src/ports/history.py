"""The History port: the store's append-only history (``domain.history``).

``append`` adds one event as one line to the file of its UTC month, under the store's history
lock, and returns only once the line is on disk (fsynced, and the directory too when the file
is new). It lays out what the history needs in a store where nothing was staged yet, so that a
store's history holds from its first request. An append interrupted by a crash leaves the event
either whole or absent: a torn line is never read as an event, and the next append starts on a
line of its own. ``read`` returns every whole event, oldest first (month files in order, lines in
the order appended), with the events before ``since`` left out, and counts the lines it skipped;
a store without a history yet reads as none. ``read_after`` reads what was appended after a
``HistoryPosition`` (a follower's), whole lines only, and says how far it read; it reads nothing
when no month file grew. Only the store's owner can write it; whoever may read the store may
read it.

Errors: ``HistoryError`` (field: the file or directory, rule: why), for anything that stops an
append or a read: a history directory or file that is not the store owner's regular one, a
symlink, or an I/O error. ``LockTimeout`` when the lock is held past the bounded wait.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from slurm_image.domain.errors import SlurmImageError

if TYPE_CHECKING:  # the error table imports this module: it loads no pydantic
    from datetime import datetime

    from slurm_image.domain.history import HistoryEvent, HistoryPosition, HistoryRead

HISTORY_LOCK = "history"
"""The name of the lock (``ports.lock``) every append to the store's history holds."""


class HistoryError(SlurmImageError):
    """The history could not be appended to or read."""


@runtime_checkable
class History(Protocol):
    def append(self, event: HistoryEvent) -> None:
        """Add ``event`` as the last line of its month's file, durably."""
        ...

    def read(self, since: datetime | None = None) -> HistoryRead:
        """Every whole event at or after ``since`` (all when None), oldest first."""
        ...

    def read_after(
        self, position: HistoryPosition | None, since: datetime | None = None
    ) -> tuple[HistoryRead, HistoryPosition]:
        """The whole events appended after ``position`` (None: from the first, like ``read``)
        at or after ``since``, oldest first, and the position after the last whole line. A
        month file smaller than the position (replaced by a site's rotation) is read from its
        start."""
        ...
