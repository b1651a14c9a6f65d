"""The catalog: resolve, list and verify the published aliases (§8), each record validated.
Reading only, with nothing of the scheduler (``Maintain``, in ``application.maintain``, changes
the catalog; ``CatalogReader`` reads it without validating the records again)."""

from __future__ import annotations

import logging

from slurm_image.application.catalog_reader import CatalogReader
from slurm_image.application.errors import UnknownAlias, VerificationFailed
from slurm_image.domain.errors import DomainError
from slurm_image.domain.publication import AliasRecord, load_alias
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import WorkspaceError

log = logging.getLogger(__name__)


class Catalog:
    """Read the published aliases, each validated. Needs no scheduler."""

    def __init__(self, store: Store) -> None:
        self._reader = CatalogReader(store)
        self._store = store

    def show(self, name: str) -> AliasRecord:
        data = self._reader.data(name)
        path = self._reader.layout.alias(name)
        try:
            record = load_alias(data)
        except DomainError as error:
            raise VerificationFailed(path, f"{error.field}: {error.rule}") from None
        if record.name != name:
            raise VerificationFailed(path, "names another alias")
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
        found = []
        for name in self._reader.names():
            try:
                found.append(self.show(name))
            except (DomainError, VerificationFailed, UnknownAlias) as error:
                log.warning("skipping %s.json: %s", name, error)
        return found
