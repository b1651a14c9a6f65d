"""Read the store's history (docs/design.md, "History"): ``history [NAME] [--since T]``, and
follow it (``--follow``). Only the ``History`` port and the event model: anyone who may read
the store runs it, and it loads nothing of the lifecycle's use cases or the scheduler."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.history import HistoryEvent, HistoryRead
from slurm_image.ports.history import History

FOLLOW_INTERVAL_S = 1.0
"""How often a follower looks for new events (one listing of ``history/`` each time; a file
is read only when it grew)."""


def _checked(name: str | None, since: datetime | None) -> None:
    if name is not None:
        paths.name(name)
    if since is not None and since.utcoffset() is None:
        raise InvalidRequest(field="since", rule="must be an aware time (UTC, or with an offset)")


def _of(name: str | None, read: HistoryRead) -> HistoryRead:
    if name is None:
        return read
    return HistoryRead(
        events=tuple(event for event in read.events if event.alias == name), skipped=read.skipped
    )


class ReadHistory:
    """The store's history, oldest first: every event, or those of the alias ``name``, at or
    after ``since``; with the count of lines that were no event (a torn last line)."""

    def __init__(self, history: History) -> None:
        self._history = history

    def __call__(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead:
        _checked(name, since)
        return _of(name, self._history.read(since))


class FollowHistory:
    """The store's history as it grows: ``emit`` gets every event (of the alias ``name``, at or
    after ``since``) there is, then each one appended, oldest first, until ``stopped``, which
    waits up to its argument in seconds and says whether to stop (a signal came). Whole lines
    only: an append in progress is emitted once it is whole."""

    def __init__(self, history: History, *, interval_s: float = FOLLOW_INTERVAL_S) -> None:
        self._history = history
        self._interval = interval_s

    def __call__(
        self,
        emit: Callable[[HistoryEvent], None],
        stopped: Callable[[float], bool],
        name: str | None = None,
        *,
        since: datetime | None = None,
    ) -> None:
        _checked(name, since)
        position = None
        while True:
            read, position = self._history.read_after(position, since)
            for event in _of(name, read).events:
                emit(event)
            if stopped(self._interval):
                return
