"""Read the store's history (docs/design.md, "History"): ``history [NAME] [--since T]``. Only
the ``History`` port and the event model: anyone who may read the store runs it, and it loads
nothing of the lifecycle's use cases or the scheduler."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.history import HistoryRead
from slurm_image.ports.history import History


class ReadHistory:
    """The store's history, oldest first: every event, or those of the alias ``name``, at or
    after ``since``; with the count of lines that were no event (a torn last line). ``hidden``:
    whether an alias is one the requester may not see (through the gateway: a private alias of
    another group), whose events are then left out, and which is unknown when named."""

    def __init__(self, history: History, hidden: Callable[[str], bool] | None = None) -> None:
        self._history = history
        self._hidden = hidden

    def __call__(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead:
        if name is not None:
            paths.name(name)
        if since is not None and since.utcoffset() is None:
            raise InvalidRequest(
                field="since", rule="must be an aware time (UTC, or with an offset)"
            )
        hidden = self._hidden
        if name is not None and hidden is not None and hidden(name):
            from slurm_image.application.errors import UnknownAlias

            raise UnknownAlias.named(name)
        read = self._history.read(since)
        seen: dict[str, bool] = {}

        def shown(alias: str | None) -> bool:
            if alias is None or hidden is None:
                return True
            if alias not in seen:
                seen[alias] = not hidden(alias)
            return seen[alias]

        return HistoryRead(
            events=tuple(
                event
                for event in read.events
                if (name is None or event.alias == name) and shown(event.alias)
            ),
            skipped=read.skipped,
        )
