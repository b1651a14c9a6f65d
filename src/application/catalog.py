"""The catalog: resolve, list and verify the published aliases (docs/design.md, "The catalog"),
each record validated. Reading only, with nothing of the scheduler (``Maintain``, in
``application.maintain``, changes the
catalog; ``CatalogReader`` reads it without validating the records again)."""

from __future__ import annotations

from slurm_image.application.catalog_reader import CatalogReader, require_unchangeable
from slurm_image.application.errors import UnknownAlias, VerificationFailed
from slurm_image.application.store_records import StoreRecords
from slurm_image.domain.publication import AliasRecord
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import WorkspaceError


class Catalog:
    """Read the published aliases, each validated. Needs no scheduler."""

    def __init__(self, store: Store) -> None:
        self._records = StoreRecords(store)
        self._reader = CatalogReader(store)
        self._store = store

    def show(self, name: str) -> AliasRecord:
        record = self._records.alias(name)
        if record is None:
            raise UnknownAlias.named(name)
        require_unchangeable(self._store, record.path)
        return record

    def verify(self, name: str) -> AliasRecord:
        """``show``, after re-hashing the artifact: it must still hold the recorded bytes."""
        record = self.show(name)
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
        return self._reader.each(self.show)
