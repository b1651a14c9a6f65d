"""Keep each alias's stable path naming its current artifact (``domain.by_name``): ``bind``
after the alias file is written or removed, ``repair`` from ``gc`` for links a crash left
behind the catalog, and when an artifact lost an alias (``released``) so that ``gc`` keeps it
for the jobs that started with it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from slurm_image.domain.by_name import (
    LINK_DIRECTORY_MODE,
    PRIVATE_LINK_DIRECTORY_MODE,
    RELEASED_MAX_BYTES,
    RELEASED_MODE,
    NameLayout,
    link_target,
    released_at,
    released_bytes,
)
from slurm_image.domain.errors import DomainError
from slurm_image.domain.publication import AliasDocument
from slurm_image.domain.store_layout import StoreLayout
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import NotFound, WorkspaceError

log = logging.getLogger(__name__)


def wanted_links(layout: NameLayout, document: AliasDocument | None) -> dict[str, str]:
    """The links ``document`` has, by path, each with its target (none for no alias)."""
    if document is None:
        return {}
    group = document.group if document.private else None
    found = {}
    for entry in document.entries:
        link = layout.link(document.name, entry.architecture, group)
        found[link] = link_target(link, entry.path)
    return found


class NameLinks:
    """The stable links of one store, written by its owner under the alias's lock (``bind``)
    or the store lock (``repair``)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.layout = NameLayout(StoreLayout(store.root))

    def bind(
        self,
        previous: AliasDocument | None,
        document: AliasDocument | None,
        *,
        now: datetime | None = None,
    ) -> None:
        """Make the links of ``document`` (None: the alias is gone) name its artifacts, and
        remove those of ``previous`` it no longer has. With ``now``, each artifact
        ``previous`` named and ``document`` does not is recorded as released then."""
        wanted = wanted_links(self.layout, document)
        for link, target in wanted.items():
            self._set(link, target, document)
        for link in wanted_links(self.layout, previous):
            if link not in wanted:
                self._remove(link)
        if now is None or previous is None:
            return
        kept = {entry.sqsh_sha256 for entry in document.entries} if document else set()
        for entry in previous.entries:
            if entry.sqsh_sha256 not in kept:
                self._release(entry.sqsh_sha256, now)

    def _set(self, link: str, target: str, document: AliasDocument | None) -> None:
        self._directories(link, document)
        try:
            if self._store.read_link(link) == target:
                return
        except WorkspaceError:
            pass  # not a symlink: replaced by one
        self._store.set_link(link, target)

    def _directories(self, link: str, document: AliasDocument | None) -> None:
        directory = link.rsplit("/", 1)[0]
        group = document.group if document is not None and document.private else None
        if group is None:
            self._store.ensure_directory(directory, mode=LINK_DIRECTORY_MODE)
            return
        self._store.ensure_directory(self.layout.groups, mode=LINK_DIRECTORY_MODE)
        for path in (self.layout.group(group), directory):
            self._store.ensure_directory(path, mode=PRIVATE_LINK_DIRECTORY_MODE, group=group)

    def _remove(self, link: str) -> None:
        if self._store.entry_kind(link) in ("symlink", "file"):
            self._store.remove_file(link)

    def _release(self, sqsh_sha256: str, now: datetime) -> None:
        self._store.ensure_directory(self.layout.released, mode=0o700)
        self._store.publish_file(
            self.layout.released_record(sqsh_sha256),
            released_bytes(now),
            mode=RELEASED_MODE,
            staging=self.layout.store.publishing,
        )

    def released(self, sqsh_sha256: str) -> datetime | None:
        """When the artifact last lost an alias, None when no record says so."""
        path = self.layout.released_record(sqsh_sha256)
        try:
            if self._store.entry_kind(path) is None:
                return None
            return released_at(self._store.read_stable(path, max_bytes=RELEASED_MAX_BYTES).data)
        except WorkspaceError:
            return None

    def forget(self, sqsh_sha256: str) -> None:
        """Drop the released record of an artifact ``gc`` removed."""
        path = self.layout.released_record(sqsh_sha256)
        if self._store.entry_kind(path) is not None:
            self._store.remove_file(path)

    def repair(self, documents: dict[str, AliasDocument]) -> list[str]:
        """Make every link agree with ``documents`` (every alias, by name): set those missing
        or naming another artifact, remove those of no alias (and a swap's leftovers). The
        paths changed."""
        wanted: dict[str, tuple[str, AliasDocument]] = {}
        for document in documents.values():
            for link, target in wanted_links(self.layout, document).items():
                wanted[link] = (target, document)
        changed = []
        for link, (target, document) in sorted(wanted.items()):
            try:
                current = self._store.read_link(link)
            except WorkspaceError:
                current = None
            if current != target and self._tried(self._set, link, target, document):
                changed.append(link)
        for link in self._present():
            if link not in wanted and self._tried(self._store.remove_file, link):
                changed.append(link)
        return changed

    @staticmethod
    def _tried(change: Callable[..., None], link: str, *arguments: Any) -> bool:
        """Whether ``change`` of ``link`` was made; one that cannot be (a directory in its
        place) is left, with a warning, and the others are still made."""
        try:
            change(link, *arguments)
        except (WorkspaceError, DomainError) as error:
            log.warning("the stable path %s is left as it is: %s", link, error.rule)
            return False
        return True

    def _present(self) -> list[str]:
        """Every entry of the links directories that is not a directory."""
        found: list[str] = []
        directories = [self.layout.root]
        directories += [
            f"{self.layout.groups}/{group}" for group in self._entries(self.layout.groups)
        ]
        for base in directories:
            for architecture in self._entries(base):
                directory = f"{base}/{architecture}"
                if directory == self.layout.groups:
                    continue
                for entry in self._entries(directory):
                    path = f"{directory}/{entry}"
                    if self._store.entry_kind(path) not in (None, "directory"):
                        found.append(path)
        return found

    def _entries(self, directory: str) -> list[str]:
        try:
            if self._store.entry_kind(directory) != "directory":
                return []
            return list(self._store.list_directory(directory))
        except (NotFound, WorkspaceError, DomainError):
            return []
