"""The store's records: read and write aliases, sources and publication markers, and finish
a publication a crash interrupted (docs/design.md, "Publication"). Shared by ``Publish``,
``Maintain`` and the read-only ``Catalog``, which needs nothing else of publication and nothing of
the scheduler."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from slurm_image.application.catalog_changes import changing
from slurm_image.application.catalog_reader import read_record
from slurm_image.application.errors import VerificationFailed
from slurm_image.application.name_links import NameLinks
from slurm_image.domain.errors import DomainError
from slurm_image.domain.publication import (
    AliasDocument,
    PublicationMarker,
    SourceRecord,
    load_alias,
    load_marker,
    load_source,
)
from slurm_image.domain.store_layout import (
    ARTIFACT_MODE,
    PRIVATE_ARTIFACT_MODE,
    PRIVATE_RECORD_MODE,
    PUBLIC_DIRECTORY_MODE,
    RECORD_MODE,
    StoreLayout,
    source_entry,
)
from slurm_image.ports.hasher import FileDigest
from slurm_image.ports.store import ChangedWhileRead, Store
from slurm_image.ports.workspace import WorkspaceError

if TYPE_CHECKING:
    from slurm_image.application.history import RecordHistory

log = logging.getLogger(__name__)

STORE_LOCK = "store"
_TEMPORARY = re.compile(r"\.[0-9a-f]{16}\.tmp")
# A publisher of the same bytes under another alias links the artifact, then unlinks its own
# candidate name: the link count, hence the ctime, of the artifact changes once more after it
# appears. A hash that saw that change is tried again; a file that keeps changing is refused.
_HASH_ATTEMPTS = 3


ENTRY_ARTICLE = {
    "directory": "a directory",
    "symlink": "a symlink",
    "fifo": "a FIFO",
    "other": "a special file",
}


def alias_lock(name: str) -> str:
    return f"alias.{name}"


class StoreRecords:
    """Read and write the store's records (shared by publish, recovery and the catalog).
    ``history``: where a recovery records the publication it finishes."""

    def __init__(self, store: Store, *, history: RecordHistory | None = None) -> None:
        self.store = store
        self.layout = StoreLayout(store.root)
        self._history = history

    def prepare_directories(self) -> None:
        for directory in (self.layout.artifacts, self.layout.aliases, self.layout.sources):
            self.store.ensure_directory(directory, mode=PUBLIC_DIRECTORY_MODE)
        for directory in (self.layout.publishing, self.layout.markers, self.layout.staging):
            self.store.ensure_directory(directory, mode=0o700)

    def _read(self, path: str) -> bytes | None:
        return read_record(self.store, path)

    def alias(self, name: str) -> AliasDocument | None:
        """The alias file of ``name`` (its entries, one per architecture), or None."""
        data = self._read(self.layout.alias(name))
        if data is None:
            return None
        try:
            record = load_alias(data)
        except DomainError as error:
            raise VerificationFailed(
                field=self.layout.alias(name), rule=f"{error.field}: {error.rule}"
            ) from None
        if record.name != name:
            raise VerificationFailed(field=self.layout.alias(name), rule="names another alias")
        return record

    def source(self, source_digest: str, architecture: str | None) -> SourceRecord | None:
        """The source record of ``source_digest`` for ``architecture`` (None: the record of an
        import from before architectures were recorded), or None."""
        data = self._read(self.layout.source(source_digest, architecture))
        if data is None:
            return None
        try:
            record = load_source(data)
        except DomainError:
            return None  # a damaged source record only costs a new import
        wanted = source_digest.removeprefix("sha256:")
        if record.source_digest.removeprefix("sha256:") != wanted:
            return None
        return record if record.architecture == architecture else None

    def sources(self) -> list[tuple[str, SourceRecord]]:
        """Every readable source record, with its path."""
        if self.store.entry_kind(self.layout.sources) != "directory":
            return []
        found = []
        for entry in self.store.list_directory(self.layout.sources):
            key = source_entry(entry)
            record = self.source(*key) if key is not None else None
            if record is not None:
                found.append((f"{self.layout.sources}/{entry}", record))
        return found

    def sources_of_artifact(self, sqsh_sha256: str, architecture: str) -> list[SourceRecord]:
        """The source records (pin and per-architecture manifest) that became this artifact."""
        return [
            record
            for _, record in self.sources()
            if record.sqsh_sha256 == sqsh_sha256 and record.architecture == architecture
        ]

    def write_alias(self, document: AliasDocument) -> None:
        """Replace the alias file: readable by everyone, or by its group alone when private.
        Counted as a change of the aliases (``application.catalog_changes``)."""
        group = document.group if document.private else None
        with changing(self.store, self.layout):
            self.store.publish_file(
                self.layout.alias(document.name),
                document.canonical_bytes(),
                mode=RECORD_MODE if group is None else PRIVATE_RECORD_MODE,
                staging=self.layout.publishing,
                group=group,
            )

    def remove_alias(self, name: str) -> None:
        """Remove the alias file of ``name``, counted as a change of the aliases."""
        with changing(self.store, self.layout):
            self.store.remove_file(self.layout.alias(name))

    def write_source(self, record: SourceRecord) -> None:
        group = record.private_group
        self.store.publish_file(
            self.layout.source(record.source_digest, record.architecture),
            record.canonical_bytes(),
            mode=RECORD_MODE if group is None else PRIVATE_RECORD_MODE,
            staging=self.layout.staging,
            group=group,
        )

    def install_artifact(
        self, candidate: str, path: str, digest: FileDigest, document: AliasDocument
    ) -> None:
        """Link a verified candidate into the store as the artifact at ``path``: readable by
        everyone, or by the group of a private alias alone."""
        group = document.group if document.private else None
        self.store.install(
            candidate,
            path,
            expected=digest,
            mode=ARTIFACT_MODE if group is None else PRIVATE_ARTIFACT_MODE,
            group=group,
        )

    def open_artifact(self, path: str, document: AliasDocument) -> None:
        """A public alias names an artifact everyone reads: one kept for a group alone (0440),
        whose bytes a public import has since brought too, is opened to everyone (0444)."""
        if not document.private:
            self.store.set_mode(path, mode=ARTIFACT_MODE)

    def artifact_matches(self, path: str, sqsh_sha256: str) -> bool:
        for _ in range(_HASH_ATTEMPTS):
            if self.store.entry_kind(path) != "file":
                return False
            try:
                return self.store.digest(path).sha256 == sqsh_sha256
            except ChangedWhileRead:
                continue
            except WorkspaceError:
                return False
        return False

    def recover(self, name: str) -> None:
        """Finish or roll back a publication of ``name`` that a crashed process left.

        The caller holds the alias lock. The marker is written whole (atomically) or not at all.
        A publication finished here is recorded in the history once, after its marker is gone
        (a crash in between leaves the event absent, never twice): the event the marker
        carries, as its publisher, with ``recovered``. A marker from before markers carried
        their event (version 1 or 2) finishes without one.
        """
        marker_path = self.layout.marker(name)
        self._drop_non_marker(marker_path)
        data = self._read(marker_path)
        if data is not None:
            try:
                marker: PublicationMarker | None = load_marker(data)
            except DomainError:
                marker = None
            finished = marker is not None and marker.alias.name == name and self._finish(marker)
            self.store.remove_file(marker_path)
            log.info(
                "recovered an interrupted publication of %s (%s)",
                name,
                "finished" if finished else "dropped",
            )
            if finished and marker is not None and self._history is not None:
                if marker.event is None:
                    log.info("its marker names no history event: none is recorded")
                else:
                    self._history.append(marker.event.model_copy(update={"recovered": True}))
        if self.store.entry_kind(self.layout.publishing) != "directory":
            return
        prefix = f"{name}.json"
        for entry in self.store.list_directory(self.layout.publishing):
            rest = entry[len(prefix) :] if entry.startswith(prefix) else ""
            if _TEMPORARY.fullmatch(rest):
                self.store.remove_file(f"{self.layout.publishing}/{entry}")

    def _drop_non_marker(self, path: str) -> None:
        """A marker is only ever a regular file (written by rename): anything else at its path
        (a directory an image's ``WorkingDir`` made, a symlink, a FIFO) describes no
        publication and is removed, never followed; what cannot be removed is refused."""
        kind = self.store.entry_kind(path)
        if kind in (None, "file"):
            return
        try:
            if kind == "directory":
                self.store.remove_tree(path, expected=self.store.directory_identity(path))
            else:
                self.store.remove_file(path)
        except WorkspaceError as error:
            raise VerificationFailed(
                field=path,
                rule=f"is {ENTRY_ARTICLE[kind]}, not a publication marker, and could not be removed"
                f" ({error.rule}): remove it by hand, then publish again",
            ) from None
        log.warning("removed %s at %s: not a publication marker", ENTRY_ARTICLE[kind], path)

    def _finish(self, marker: PublicationMarker) -> bool:
        """Write what ``marker`` describes when its artifact is in place: True when the alias
        was written, False when the old state stands."""
        alias = marker.alias
        candidate = marker.candidate
        if (
            candidate is not None
            and self.store.entry_kind(alias.path) is None
            and self.store.entry_kind(candidate) == "file"
        ):
            digest = self.store.digest(candidate)
            if digest.sha256 == alias.sqsh_sha256:
                self.install_artifact(candidate, alias.path, digest, marker.alias_document)
        if not self.artifact_matches(alias.path, alias.sqsh_sha256):
            return False  # never got as far as the artifact: the old state stands
        for source in marker.source_records:
            self.write_source(source)
        self.write_alias(marker.alias_document)
        try:
            NameLinks(self.store).bind(None, marker.alias_document)
        except (WorkspaceError, DomainError) as error:
            log.warning("the stable path is left as it was (gc repairs it): %s", error.rule)
        return True
