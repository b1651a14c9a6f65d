"""The catalog: resolve, list and verify the published aliases (docs/design.md, "The catalog"),
each record validated. Reading only, with nothing of the scheduler (``Maintain``, in
``application.maintain``, changes the
catalog; ``CatalogReader`` reads it without validating the records again)."""

from __future__ import annotations

import platform

from slurm_image.application.catalog_reader import CatalogReader, Sees, require_unchangeable
from slurm_image.application.errors import UnknownAlias, VerificationFailed
from slurm_image.application.store_records import StoreRecords
from slurm_image.domain.publication import AliasDocument, AliasRecord
from slurm_image.domain.published import choose_entry
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import WorkspaceError


class Catalog:
    """Read the published aliases, each validated. Needs no scheduler."""

    def __init__(self, store: Store, sees: Sees | None = None) -> None:
        self._records = StoreRecords(store)
        self._reader = CatalogReader(store, sees)
        self._store = store
        self._sees = sees

    def document(self, name: str) -> AliasDocument:
        """Every entry of ``name``, one per architecture (``UnknownAlias`` too for a private
        alias the requester may not see)."""
        document = self._records.alias(name)
        if document is None or (self._sees is not None and not self._sees(document.ownership)):
            raise UnknownAlias.named(name)
        return document

    def show(
        self, name: str, *, arch: str | None = None, machine: str | None = None
    ) -> AliasRecord:
        """The entry of ``name`` for ``arch``, else for ``machine`` (default: the one this runs
        on; ``published.choose_entry``: ``NoImageForArchitecture`` names what the alias has)."""
        document = self.document(name)
        index = choose_entry(
            name, document.architectures, asked=arch, machine=machine or platform.machine()
        )
        record = document.entries[index]
        require_unchangeable(self._store, record.path)
        return record

    def verify(
        self, name: str, *, arch: str | None = None, machine: str | None = None
    ) -> AliasRecord:
        """``show``, after re-hashing the artifact: it must still hold the recorded bytes."""
        record = self.show(name, arch=arch, machine=machine)
        try:
            digest = self._store.digest(record.path)
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        if digest.sha256 != record.sqsh_sha256:
            raise VerificationFailed(
                field=record.path,
                rule=f"hashes to {digest.sha256}, not the published {record.sqsh_sha256}",
            )
        return record

    def list(self) -> list[AliasRecord]:
        """Every entry of every alias (an alias of three architectures is three entries)."""
        found: list[AliasRecord] = []
        for entries in self._reader.each(self._entries):
            found.extend(entries)
        return found

    def _entries(self, name: str) -> tuple[AliasRecord, ...]:
        entries = self.document(name).entries
        for entry in entries:
            require_unchangeable(self._store, entry.path)
        return entries
