"""What a long-running reader (the gateway) keeps of the published aliases between requests:
their names and each one's entries as read, valid while the store's change stamp
(``application.catalog_changes``) stays what it was when they were read. Each request looks at
the stamp once; a change by any process, on any host sharing the store, makes the next
request read again. What an alias's artifact is (``require_unchangeable``) and who may see it
are still checked at every request: only what the alias file said is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from slurm_image.application.catalog_changes import quiet_stamp
from slurm_image.application.errors import UnknownAlias
from slurm_image.domain.store_layout import StoreLayout
from slurm_image.ports.store import ChangeStamp, Store

Kept = TypeVar("Kept")

MAX_KEPT_ALIASES = 20_000
"""Aliases whose entries one process keeps at most (about 20 KB each with an image's facts);
past it, the others are read at each request as without an index."""


@dataclass
class Generation:
    """What was read while the stamp was ``stamp`` (None: nothing is kept, a change is under
    way or was interrupted)."""

    stamp: ChangeStamp | None
    names: list[str] | None = None
    read: dict[str, object] = field(default_factory=dict)

    def kept(self, name: str, read: Callable[[], Kept]) -> Kept:
        """``read()``'s answer for ``name``, or the error it raised, as first found in this
        generation (``read`` is called once); a name that is not published is looked for
        again at each call (asking for names that do not exist fills nothing)."""
        found = self.read.get(name, self)
        if found is self:
            try:
                found = read()
            except UnknownAlias:
                raise
            except Exception as error:  # the same refusal, every time, until the alias changes
                found = _Refusal(error)
            if self.stamp is not None and len(self.read) < MAX_KEPT_ALIASES:
                self.read[name] = found
        if isinstance(found, _Refusal):
            raise found.again()
        return found  # type: ignore[return-value]


class _Refusal:
    def __init__(self, error: Exception) -> None:
        self._error = error

    def again(self) -> Exception:
        return self._error.with_traceback(None)


class CatalogIndex:
    """The ``Generation`` of ``store``'s aliases that holds now (see the module docstring);
    shared by every request of the process."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._layout = StoreLayout(store.root)
        self._generation = Generation(None)
        self._lock = threading.Lock()

    def current(self) -> Generation:
        """The kept generation while the stamp has not moved; else a new one (kept from now
        on if no change is under way)."""
        stamp = self._store.stamp(self._layout.aliases_begun)
        generation = self._generation
        if stamp is not None and generation.stamp == stamp:
            return generation
        with self._lock:
            fresh = Generation(quiet_stamp(self._store, self._layout))
            self._generation = fresh
        return fresh
