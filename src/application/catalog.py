"""The catalog: resolve, list and verify the published aliases (§8). Reading only: it needs
nothing of the scheduler, so a launcher resolves names cheaply (``Maintain``, in
``application.maintain``, changes the catalog)."""

from __future__ import annotations

import logging

from slurm_image.application.errors import UnknownAlias, VerificationFailed
from slurm_image.application.store_records import StoreRecords
from slurm_image.domain import paths
from slurm_image.domain.errors import DomainError
from slurm_image.domain.publication import AliasRecord
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import WorkspaceError

log = logging.getLogger(__name__)


class Catalog:
    """Read the published aliases. Needs no scheduler: a launcher resolves names cheaply."""

    def __init__(self, store: Store) -> None:
        self._records = StoreRecords(store)
        self._store = store

    def show(self, name: str) -> AliasRecord:
        paths.name(name)
        record = self._records.alias(name)
        if record is None:
            raise UnknownAlias("name", f"no alias {name} is published (see: slurm-image list)")
        return record

    def verify(self, name: str) -> AliasRecord:
        """``show``, after re-hashing the artifact: it must still hold the recorded bytes."""
        record = self.show(name)
        try:
            digest = self._store.digest(record.path)
        except WorkspaceError as error:
            raise VerificationFailed(error.field, error.reason) from None
        if digest.sha256 != record.sqsh_sha256:
            raise VerificationFailed(
                record.path,
                f"hashes to {digest.sha256}, not the published {record.sqsh_sha256}",
            )
        return record

    def list(self) -> list[AliasRecord]:
        layout = self._records.layout
        if self._store.entry_kind(layout.aliases) != "directory":
            return []
        found = []
        for entry in self._store.list_directory(layout.aliases):
            if not entry.endswith(".json"):
                continue
            try:
                record = self._records.alias(entry.removesuffix(".json"))
            except (DomainError, VerificationFailed) as error:
                log.warning("skipping %s: %s", entry, error)
                continue
            if record is not None:
                found.append(record)
        return found
