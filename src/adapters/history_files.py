"""What both History adapters share, over the ``Store`` port: the refusals of the store as the
port's ``HistoryError``, the directory an append lays out first, the line it writes and where,
and the read of the month files (``LocalHistory``, ``MemoryHistory``).

A read lists ``history/`` (a store without one has no history yet), takes the month files in
name order from ``since``'s month on (other names are ignored), reads each through one
descriptor without following a symlink (the store's ``read_verified``: a regular file of the
store's owner, at most ``HISTORY_FILE_MAX_BYTES``), refuses one that group or others could
write, and parses it (``domain.history.parse_history``: a torn last line is skipped and
counted). No lock is taken: whoever may read the store may read its history.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TypeVar

from slurm_image.domain.errors import DomainError
from slurm_image.domain.file_kinds import WORDS
from slurm_image.domain.history import (
    HISTORY_FILE_MAX_BYTES,
    HistoryEvent,
    HistoryPosition,
    HistoryRead,
    event_line,
    month_file,
    month_files,
    parse_history,
    parse_whole_lines,
    since_then,
)
from slurm_image.domain.paths import others_may_write
from slurm_image.domain.store_layout import PUBLIC_DIRECTORY_MODE, StoreLayout
from slurm_image.ports.history import HistoryError
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import NotFound, TooLarge, WorkspaceError


@contextmanager
def refused_as_history(field: str) -> Iterator[None]:
    """The store's refusals (a symlink, another owner, not a regular file, an I/O error) as the
    port's ``HistoryError``, naming the path at fault."""
    try:
        yield
    except TooLarge as error:
        raise HistoryError(
            field=error.field,
            rule=f"holds more than {HISTORY_FILE_MAX_BYTES} bytes: rotate the history files",
        ) from None
    except WorkspaceError as error:
        raise HistoryError(field=error.field or field, rule=error.rule) from None
    except DomainError as error:
        raise HistoryError(field=field, rule=f"{error.field}: {error.rule}") from None


def lay_out_history(store: Store, layout: StoreLayout) -> None:
    """Make ``history/`` (and ``images/`` above it) when the store has none yet, 0755 like
    ``artifacts/``, through the store's verified walk: the first event of a store where nothing
    was staged yet (a refused first request) is recorded like any other."""
    with refused_as_history(layout.history):
        store.ensure_directory(layout.history, mode=PUBLIC_DIRECTORY_MODE)


_Locks = TypeVar("_Locks")


def line_to_append(
    layout: StoreLayout, event: HistoryEvent, locks: _Locks | None
) -> tuple[str, bytes, _Locks]:
    """The month file ``event`` goes to, its line, and the locks to append it under; refused
    when the event cannot be one line or the history was opened for reading only (no locks)."""
    path = layout.history_file(month_file(event.time))
    with refused_as_history(path):
        line = event_line(event)
    if locks is None:
        raise HistoryError(field=path, rule="this history was opened for reading only")
    return path, line, locks


def history_names(store: Store, layout: StoreLayout) -> list[str]:
    """The entries of the store's ``history/``; none when there is no such directory yet."""
    directory = layout.history
    with refused_as_history(directory):
        kind = store.entry_kind(directory)
        if kind is None:
            return []
        if kind != "directory":
            raise HistoryError(field=directory, rule=f"is {WORDS[kind]}, not a directory")
        try:
            return list(store.list_directory(directory))
        except NotFound:
            return []


def read_history(store: Store, since: datetime | None) -> HistoryRead:
    """Every whole event of the store's history at or after ``since`` (see the module
    docstring)."""
    layout = StoreLayout(store.root)
    reads: list[HistoryRead] = []
    for name in month_files(history_names(store, layout), since):
        data = _month_data(store, layout, name)
        if data is not None:
            reads.append(parse_history(data))
    return since_then(reads, since)


def _month_data(store: Store, layout: StoreLayout, name: str) -> bytes | None:
    """The bytes of one month file under the read rules; None when it went since listed."""
    path = layout.history_file(name)
    with refused_as_history(path):
        try:
            read = store.read_verified(path, max_bytes=HISTORY_FILE_MAX_BYTES)
        except NotFound:
            return None  # rotated away since the directory was listed
    if others_may_write(read.mode):
        raise HistoryError(field=path, rule="is writable by group or others")
    return read.data


def read_history_after(
    store: Store, position: HistoryPosition | None, since: datetime | None
) -> tuple[HistoryRead, HistoryPosition]:
    """The whole events appended after ``position`` (``ports.history.History.read_after``):
    the month files from the position's on, each read whole (under the read rules) only when
    its listed size says it grew, parsed from the position's offset in its own file."""
    layout = StoreLayout(store.root)
    at = position if position is not None else HistoryPosition()
    names = month_files(history_names(store, layout), since if position is None else None)
    if at.month is not None:
        names = [name for name in names if name >= at.month]
        with refused_as_history(layout.history):
            try:
                sizes = store.file_sizes(layout.history)
            except NotFound:
                sizes = {}
        if names == [at.month] and sizes.get(at.month) == at.offset:
            return HistoryRead(events=()), at  # nothing appended: nothing read
    reads: list[HistoryRead] = []
    for name in names:
        data = _month_data(store, layout, name)
        if data is None:
            continue
        start = at.offset if name == at.month and at.offset <= len(data) else 0
        read, used = parse_whole_lines(data[start:])
        reads.append(read)
        at = HistoryPosition(name, start + used)
    return since_then(reads, since), at
