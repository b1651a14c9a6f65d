"""Read the store's history (docs/design.md, "History"): ``history [NAME] [--since T]``, and
follow it (``--follow``). Only the ``History`` port and the event model: anyone who may read
the store runs it, and it loads nothing of the lifecycle's use cases or the scheduler."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from slurm_image.application.errors import UnknownAlias
from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.history import HistoryEvent, HistoryRead
from slurm_image.ports.history import History

FOLLOW_INTERVAL_S = 1.0
"""How often a follower looks for new events (one listing of ``history/`` each time; a file
is read only when it grew)."""

Hidden = Callable[[str], bool]
"""Whether an alias is one the requester may not see (through the gateway: a private alias of
another group)."""
Unseen = Callable[[HistoryEvent], bool]
"""Whether an event is one of a private lifecycle or alias the requester may not see
(``application.lifecycle_rights``)."""


class _Shown:
    """Which events a reader gets: those of the alias ``name`` (all when None), none of an
    alias ``hidden`` from it nor any ``unseen`` by it; a hidden alias named is unknown. Checks
    ``name`` and ``since``."""

    def __init__(
        self,
        hidden: Hidden | None,
        name: str | None,
        since: datetime | None,
        unseen: Unseen | None = None,
    ) -> None:
        if name is not None:
            paths.name(name)
        if since is not None and since.utcoffset() is None:
            raise InvalidRequest(
                field="since", rule="must be an aware time (UTC, or with an offset)"
            )
        if name is not None and hidden is not None and hidden(name):
            raise UnknownAlias.named(name)
        self._hidden = hidden
        self._unseen = unseen
        self._name = name
        self._seen: dict[str, bool] = {}

    def _visible(self, event: HistoryEvent) -> bool:
        alias = event.alias
        if alias is not None and self._hidden is not None:
            if alias not in self._seen:
                self._seen[alias] = not self._hidden(alias)
            if not self._seen[alias]:
                return False
        return self._unseen is None or not self._unseen(event)

    def __call__(self, read: HistoryRead) -> HistoryRead:
        return HistoryRead(
            events=tuple(
                event
                for event in read.events
                if (self._name is None or event.alias == self._name) and self._visible(event)
            ),
            skipped=read.skipped,
        )


class ReadHistory:
    """The store's history, oldest first: every event, or those of the alias ``name``, at or
    after ``since``; with the count of lines that were no event (a torn last line). ``hidden``:
    whether an alias is one the requester may not see (through the gateway: a private alias of
    another group), whose events are then left out, and which is unknown when named;
    ``unseen``: whether an event is one of a lifecycle or alias the requester may not know of
    (a private import of another group, ``application.lifecycle_rights``), left out whatever
    became of it: a failed job's, a removed attempt's, an unregistered alias's."""

    def __init__(
        self, history: History, hidden: Hidden | None = None, unseen: Unseen | None = None
    ) -> None:
        self._history = history
        self._hidden = hidden
        self._unseen = unseen

    def __call__(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead:
        """Through the gateway (``hidden``), a named alias with no event the requester may see
        is unknown, as a hidden one is: an empty answer for a name that never existed beside a
        refusal for a private one would tell that the private one exists."""
        shown = _Shown(self._hidden, name, since, self._unseen)
        read = shown(self._history.read(since))
        hiding = self._hidden is not None or self._unseen is not None
        if name is not None and hiding and not read.events:
            raise UnknownAlias.named(name)
        return read


class FollowHistory:
    """The store's history as it grows: ``emit`` gets every event (of the alias ``name``, at or
    after ``since``, none of a ``hidden`` alias) there is, then each one appended, oldest first,
    until ``stopped``, which waits up to its argument in seconds and says whether to stop (a
    signal came). Whole lines only: an append in progress is emitted once it is whole."""

    def __init__(
        self,
        history: History,
        hidden: Hidden | None = None,
        *,
        interval_s: float = FOLLOW_INTERVAL_S,
    ) -> None:
        self._history = history
        self._hidden = hidden
        self._interval = interval_s

    def __call__(
        self,
        emit: Callable[[HistoryEvent], None],
        stopped: Callable[[float], bool],
        name: str | None = None,
        *,
        since: datetime | None = None,
    ) -> None:
        shown = _Shown(self._hidden, name, since)
        position = None
        while True:
            read, position = self._history.read_after(position, since)
            for event in shown(read).events:
                emit(event)
            if stopped(self._interval):
                return
