"""Read the store's history (docs/design.md, "History"): ``history [NAME] [--since T]``. Only
the ``History`` port and the event model: anyone who may read the store runs it, and it loads
nothing of the lifecycle's use cases or the scheduler."""

from __future__ import annotations

from datetime import datetime

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.history import HistoryRead
from slurm_image.ports.history import History


class ReadHistory:
    """The store's history, oldest first: every event, or those of the alias ``name``, at or
    after ``since``; with the count of lines that were no event (a torn last line)."""

    def __init__(self, history: History) -> None:
        self._history = history

    def __call__(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead:
        if name is not None:
            paths.name(name)
        if since is not None and since.utcoffset() is None:
            raise InvalidRequest(
                field="since", rule="must be an aware time (UTC, or with an offset)"
            )
        read = self._history.read(since)
        if name is None:
            return read
        return HistoryRead(
            events=tuple(event for event in read.events if event.alias == name),
            skipped=read.skipped,
        )
