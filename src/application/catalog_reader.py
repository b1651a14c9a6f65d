"""The catalog as launchers read it: ``show`` and ``list`` of the published aliases, each record
as it was written (validated then; ``Catalog.verify`` validates it again and re-hashes the
artifact). Needs neither the scheduler nor the model library, so resolving a name at every
job launch costs little (bench/RESULTS.md)."""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from slurm_image.application.errors import UnknownAlias, VerificationFailed
from slurm_image.domain import paths
from slurm_image.domain.architecture import check_architecture
from slurm_image.domain.by_name import NameLayout, StablePath, link_target
from slurm_image.domain.errors import DomainError
from slurm_image.domain.listing import ListQuery, SummaryPage, summary_of
from slurm_image.domain.published import PublishedAlias, PublishedEntries, read_published

if TYPE_CHECKING:
    from slurm_image.application.catalog_index import CatalogIndex
    from slurm_image.domain.access import Ownership
from slurm_image.domain.store_layout import STORE_RECORD_MAX_BYTES, StoreLayout
from slurm_image.ports.store import ChangedWhileRead, Store
from slurm_image.ports.workspace import NotFound, WorkspaceError

log = logging.getLogger(__name__)

Record = TypeVar("Record")


RECORD_READ_ATTEMPTS = 3
"""How often a record replaced while it was read is read again (records are replaced whole, by
rename: the next read finds the new one)."""


def read_record(store: Store, path: str) -> bytes | None:
    """The bytes of the store record at ``path``, or None when there is none. A record that is
    not a private regular file of bounded size fails verification; one replaced while it was
    read is read again, up to ``RECORD_READ_ATTEMPTS`` times."""
    attempt = 1
    while True:
        try:
            if store.entry_kind(path) is None:
                return None
            return store.read_stable(path, max_bytes=STORE_RECORD_MAX_BYTES).data
        except NotFound:
            return None  # removed between the look and the read: no record, as if never there
        except ChangedWhileRead as error:
            if attempt >= RECORD_READ_ATTEMPTS:
                raise VerificationFailed(field=error.field, rule=error.rule) from None
            attempt += 1
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None


def require_unchangeable(store: Store, path: str) -> None:
    """Refuse a published path whose bytes someone other than the store's owner and root could
    replace (``Workspace.image_problem``): its record would vouch for bytes it never saw."""
    problem = store.image_problem(path)
    if problem is not None and store.entry_kind(path) is None:
        raise VerificationFailed(
            field=path,
            rule="does not exist: the published image is gone (publish it again, or unregister)",
        )
    if problem is not None:
        raise VerificationFailed(
            field=path,
            rule=f"{problem}: another user could replace its bytes, so it is not vouched for;"
            " inspect a copy of your own (or unregister the alias)",
        )


Sees = Callable[["Ownership"], bool]
"""Whether the requester may know an alias exists (``domain.access.Access.sees``)."""


@dataclass(frozen=True)
class StablePathsChecked:
    """What ``CatalogReader.stable_paths_checked`` found: the aliases seen, and the stable
    paths among theirs that disagree with the catalog."""

    aliases: int
    wrong: tuple[str, ...]


class CatalogReader:
    """Read the published aliases as written (see the module docstring). ``sees``: the
    requester's rule for private aliases (through the gateway); None: what the store's
    files let this process read. ``index``: what the process keeps of the alias files between
    calls (``application.catalog_index``); None: each is read at every call."""

    def __init__(
        self, store: Store, sees: Sees | None = None, index: CatalogIndex | None = None
    ) -> None:
        self._store = store
        self._sees = sees
        self._index = index
        self.layout = StoreLayout(store.root)

    def data(self, name: str) -> bytes:
        """The alias record of ``name`` as stored; ``UnknownAlias`` when none is published."""
        paths.name(name)
        data = read_record(self._store, self.layout.alias(name))
        if data is None:
            raise UnknownAlias.named(name)
        return data

    def hidden(self, name: str) -> bool:
        """Whether ``name`` is published but not for the requester to see (``sees``)."""
        if self._sees is None:
            return False
        try:
            self.entries(name)
        except UnknownAlias:
            return self._store.entry_kind(self.layout.alias(name)) is not None
        except (DomainError, VerificationFailed):
            return False
        return False

    def names(self) -> list[str]:
        """The published aliases' names, in the directory's order."""
        if self._index is None:
            return self._names()
        generation = self._index.current()
        if generation.names is None:
            names = self._names()
            if generation.stamp is None:
                return names
            generation.names = names
        return list(generation.names)

    def _names(self) -> list[str]:
        if self._store.entry_kind(self.layout.aliases) != "directory":
            return []
        return [
            entry.removesuffix(".json")
            for entry in self._store.list_directory(self.layout.aliases)
            if entry.endswith(".json")
        ]

    def entries(self, name: str) -> PublishedEntries:
        if self._index is None:
            entries = self._published(name)
        else:
            paths.name(name)
            entries = self._index.current().kept(name, lambda: self._published(name))
        if self._sees is not None and not self._sees(entries.owned.ownership()):
            raise UnknownAlias.named(name)
        return entries

    def _published(self, name: str) -> PublishedEntries:
        data = self.data(name)
        try:
            return read_published(data, name)
        except DomainError as error:
            raise VerificationFailed(
                field=self.layout.alias(name), rule=f"{error.field}: {error.rule}"
            ) from None

    def show(
        self, name: str, *, arch: str | None = None, machine: str | None = None
    ) -> PublishedAlias:
        """The entry of ``name`` for ``arch``, else for ``machine`` (default: the one this runs
        on; ``published.choose_entry``)."""
        published = self.entries(name).resolve(asked=arch, machine=machine or platform.machine())
        require_unchangeable(self._store, published.record["path"])
        return published

    def stable_path(self, name: str, *, arch: str | None = None) -> StablePath:
        """``path NAME``: the stable path of ``name``'s entry for ``arch`` (else this
        machine's; ``show``'s choice) and the artifact it names now. ``VerificationFailed``
        when the store has no link there yet (``gc`` makes the links an older store lacks)."""
        paths.name(name)
        if arch is not None:
            arch = check_architecture(arch)
        entries = self.entries(name)
        published = entries.resolve(asked=arch, machine=platform.machine())
        pinned = published.record["path"]
        require_unchangeable(self._store, pinned)
        architecture = published.record.get("architecture")
        group = entries.owned.group if entries.owned.private else None
        link = NameLayout(self.layout).link(name, architecture, group)
        try:
            kind = self._store.entry_kind(link)
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        if kind != "symlink":
            raise VerificationFailed(
                field=link,
                rule="is no stable path yet: the store's owner makes it with gc (meanwhile,"
                " path --pinned)",
            )
        return StablePath(name=name, architecture=architecture, path=link, pinned=pinned)

    def stable_paths_checked(self) -> StablePathsChecked:
        """Of the aliases this reader sees, how many there are, and the stable paths of their
        entries that are missing or name another artifact than the entry's (``gc`` repairs
        them, as the store's owner). An alias that cannot be read is left out, as ``list``
        leaves it; a link that cannot be read counts as missing."""
        layout = NameLayout(self.layout)
        aliases, wrong = 0, []
        for entries in self.each(self.entries):
            aliases += 1
            group = entries.owned.group if entries.owned.private else None
            for entry in entries.entries:
                link = layout.link(entries.name, entry.record.get("architecture"), group)
                try:
                    current = self._store.read_link(link)
                except WorkspaceError:
                    current = None
                if current != link_target(link, entry.record["path"]):
                    wrong.append(link)
        return StablePathsChecked(aliases, tuple(wrong))

    def each(
        self, read: Callable[[str], Record], names: Sequence[str] | None = None
    ) -> list[Record]:
        """``read`` of every published alias (or of ``names``); one that cannot be read is
        skipped, with a warning (the others stay listable), and one the requester may not see,
        silently."""
        found = []
        for name in self.names() if names is None else names:
            try:
                found.append(read(name))
            except UnknownAlias:
                continue
            except (DomainError, VerificationFailed) as error:
                log.warning("skipping %s.json: %s", name, error)
        return found

    def list(self) -> list[PublishedAlias]:
        """Every entry of every alias."""
        found: list[PublishedAlias] = []
        for entries in self.each(self.every_entry):
            found.extend(entries)
        return found

    def page(self, query: ListQuery) -> SummaryPage:
        """One page of ``list``'s summaries (``domain.listing``): the aliases in name order
        after ``query.after`` that pass its filters, at most ``query.limit`` of them, each read
        (and left out) as ``list`` reads it; only the aliases up to the page's end are read."""
        names = sorted(name for name in self.names() if query.wants_name(name))
        images: list[dict[str, object]] = []
        taken = 0
        for index, name in enumerate(names):
            found = self.each(self.every_entry, (name,))
            wanted = [
                summary_of(entry) for entries in found for entry in entries if query.wants(entry)
            ]
            if not wanted:
                continue
            images.extend(wanted)
            taken += 1
            if taken == query.limit:
                more = index + 1 < len(names)
                return SummaryPage(tuple(images), next=name if more else None)
        return SummaryPage(tuple(images))

    def every_entry(self, name: str) -> tuple[PublishedAlias, ...]:
        """Every entry of ``name``, one per architecture, each artifact checked as ``show``
        checks it."""
        entries = self.entries(name).entries
        for entry in entries:
            require_unchangeable(self._store, entry.record["path"])
        return entries
