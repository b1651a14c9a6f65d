"""Change the catalog: unregister an alias, collect garbage, clean up an attempt (docs/design.md,
"gc and cleanup"); each change is recorded in the store's history (``unregistered``,
``cleaned_up``, ``gc_artifact`` and ``gc_attempt`` per item, and what else ``gc`` removes as one
``gc_removed`` per kind with its count and bytes)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from slurm_image.application.catalog_changes import settle_changes
from slurm_image.application.credentials import remove_staged_credentials
from slurm_image.application.errors import (
    ApplicationError,
    StillRunning,
    UnknownAlias,
    VerificationFailed,
)
from slurm_image.application.history import (
    RecordHistory,
    attempt_fields,
    entry_fields,
    privacy_fields,
)
from slurm_image.application.lifecycle_rights import LifecycleRights
from slurm_image.application.name_links import NameLinks
from slurm_image.application.records import attempt_directory, read_submission
from slurm_image.application.status import Statuses, is_final
from slurm_image.application.store_records import STORE_LOCK, StoreRecords, alias_lock
from slurm_image.domain import layer_cache, paths
from slurm_image.domain.access import Access, Ownership
from slurm_image.domain.by_name import DEFAULT_RELEASE_GRACE, within_grace
from slurm_image.domain.credentials import staged_credentials_path
from slurm_image.domain.errors import DomainError
from slurm_image.domain.history import GC_KINDS, EventKind
from slurm_image.domain.layer_cache import CacheBound
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.plan import PLAN_MAX_BYTES, load_plan
from slurm_image.domain.publication import AliasDocument, load_marker
from slurm_image.domain.store_layout import STORE_RECORD_MAX_BYTES
from slurm_image.ports.clock import Clock
from slurm_image.ports.lock import Locks
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import NotFound, WorkspaceError

log = logging.getLogger(__name__)

DEFAULT_LOCK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Removed:
    kind: str
    """``artifact``, ``source``, ``attempt``, ``temporary``, ``credentials``; of the layer
    cache ``layer`` (a blob), ``layer-temporary`` (a download never finished) or ``token``."""
    path: str
    size: int | None = None
    """Its bytes as its directory's listing gave them (None for an attempt, a tree)."""

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "path": self.path, "bytes": self.size}


class Maintain:
    """Change the catalog: unregister, gc, cleanup."""

    def __init__(
        self,
        store: Store,
        locks: Locks,
        observe: Statuses,
        clock: Clock,
        *,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
        history: RecordHistory | None = None,
        access: Access | None = None,
        rights: LifecycleRights | None = None,
        release_grace: timedelta = DEFAULT_RELEASE_GRACE,
    ) -> None:
        self._store = store
        self._links = NameLinks(store)
        self._grace = release_grace
        """How long ``gc`` keeps an artifact after its last alias let go of it."""
        self._rights = rights
        """Who may know of and change a lifecycle (``application.lifecycle_rights``); None:
        the store's own account."""
        self._history = history
        self._access = access
        """The requester's rights (``domain.access``); None: the store's own account."""
        self._records = StoreRecords(store, history=history)
        self._layout = self._records.layout
        self._locks = locks
        self._observe = observe
        self._clock = clock
        self._timeout = lock_timeout_s

    def _sees(self, ownership: Ownership) -> bool:
        return self._access is None or self._access.sees(ownership)

    def unregister(self, name: str) -> str:
        """Remove the alias; its artifact stays (``gc`` removes it once nothing refers to it).
        The history gets one ``unregistered`` event per entry (architecture) it held."""
        paths.name(name)
        with (
            self._locks.shared(STORE_LOCK, timeout_s=self._timeout),
            self._locks.exclusive(alias_lock(name), timeout_s=self._timeout),
        ):
            self._records.recover(name)
            document = self._records.alias(name)
            if document is None or not self._sees(document.ownership):
                raise UnknownAlias.named(name)
            if self._access is not None:
                self._access.require_owner(
                    document.ownership, field="name", what=f"unregistering {name}"
                )
            self._records.remove_alias(name)
            if self._history is not None:
                for entry in document.entries:
                    fields = entry_fields(entry) | privacy_fields(document.ownership)
                    self._history("unregistered", **fields)
            try:
                self._links.bind(document, None, now=self._clock.now())
            except (WorkspaceError, DomainError) as error:
                log.warning("the stable path of %s stays until gc: %s", name, error.rule)
        return name

    def cleanup(self, lifecycle_id: str) -> str:
        """Remove an attempt directory, unless its job may still run or its submission is
        unknown. Never follows a symlink, never descends into a directory swapped in. The
        attempt's records go last, so that a removal interrupted half way (an I/O error, a
        kill) leaves an attempt the next ``cleanup`` or ``gc`` finishes."""
        paths.name(lifecycle_id, "lifecycle_id")
        self._remove_attempt(lifecycle_id, "cleaned_up")
        return lifecycle_id

    def _remove_attempt(self, lifecycle_id: str, event: EventKind) -> None:
        """Remove the attempt unless its job may still run (``StillRunning``), and record
        ``event`` with what its records said of it."""
        layout, identity = attempt_directory(self._store, lifecycle_id)
        if self._rights is not None:
            self._rights.require_owner(lifecycle_id, what=f"removing the attempt {lifecycle_id}")
        (status,) = self._observe([lifecycle_id])
        if status.state is LifecycleState.SUBMISSION_UNKNOWN or (
            status.state is not LifecycleState.STAGED and not is_final(status)
        ):
            raise StillRunning(
                field="lifecycle_id",
                rule=f"{lifecycle_id} is {status.state}: kept (cancel it, or wait for it, first)",
            )
        fields = attempt_fields(self._store, lifecycle_id) if self._history is not None else {}
        try:
            remove_staged_credentials(self._store, lifecycle_id)  # first: the secret
            self._store.remove_tree(
                layout.job_dir, expected=identity, last=paths.AttemptLayout.RECORDS_REMOVED_LAST
            )
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        if self._history is not None:
            self._history(event, **fields)

    def gc(
        self, *, older_than: timedelta, dry_run: bool = False, layer_cache: CacheBound | None = None
    ) -> list[Removed]:
        """Remove artifacts no alias (or publication in progress) refers to, their source
        records, finished attempts created more than ``older_than`` ago, and the staged
        registry credentials of ended attempts and of attempts never submitted that are older;
        and bound ``layer_cache`` (``_cache``). The history gets each artifact and attempt, and
        one ``gc_removed`` for each other kind removed (``GC_KINDS``) with the count and bytes;
        a dry run records nothing.

        Holding the store lock alone means no publisher is at work (they hold it shared): a
        marker is a publication a crash interrupted, finished or dropped here first (not in a
        dry run), a change of the aliases a crash left uncounted is counted
        (``catalog_changes.settle_changes``), and every temporary record is a leftover."""
        if self._access is not None:
            self._access.require_admin("gc", "gc")
        with self._locks.exclusive(STORE_LOCK, timeout_s=self._timeout):
            if not dry_run:
                for entry in self._names(self._layout.markers):
                    name = entry.removesuffix(".json")
                    if entry.endswith(".json") and paths.NAME_PATTERN.fullmatch(name):
                        self._records.recover(name)
                self._repair_links()
                settle_changes(self._store, self._layout)
            removed = self._temporaries()
            removed += self._unreferenced()
            removed += self._attempts(self._clock.now() - older_than)
            if not dry_run:
                self._record_counts([item for item in removed if self._remove(item)])
        if layer_cache is not None:
            cache = self._cache(layer_cache, self._clock.now() - older_than, dry_run)
            if not dry_run:
                self._record_counts(cache)
            removed += cache
        return removed

    def _record_counts(self, removed: list[Removed]) -> None:
        """One ``gc_removed`` per kind of ``GC_KINDS`` that ``removed`` holds: count, bytes."""
        if self._history is None:
            return
        for kind in GC_KINDS:
            items = [item for item in removed if item.kind == kind]
            if items:
                size = sum(item.size or 0 for item in items)
                self._history("gc_removed", removed=kind, count=len(items), bytes=size)

    def _cache(self, bound: CacheBound, before: datetime, dry_run: bool) -> list[Removed]:
        """The layer cache's blobs last used before ``before``, then the oldest-used others
        until the rest fit ``bound.max_bytes``; downloads never finished and registry tokens
        older than ``before`` (a running import's are younger). Only regular files named as
        Enroot names them; nothing is followed. A cache that is missing here (on a node's own
        disk) is left alone, and so, with a warning, is one another user could change."""
        try:
            entries = self._store.cache_entries(bound.path)
        except NotFound:
            return []
        except WorkspaceError as error:
            log.warning("the layer cache is left alone: %s", error.rule)
            return []
        cutoff = before.timestamp()
        blobs = sorted(
            (
                entry
                for entry in entries
                if entry.regular and layer_cache.BLOB_NAME.fullmatch(entry.name)
            ),
            key=lambda entry: (entry.used_at, entry.name),
        )
        chosen: list[tuple[str, str, int]] = []
        total = sum(entry.size for entry in blobs)
        for entry in blobs:
            if entry.used_at < cutoff or total > bound.max_bytes:
                chosen.append(("layer", entry.name, entry.size))
                total -= entry.size
        for entry in entries:
            if not entry.regular or entry.used_at >= cutoff:
                continue
            directory, _, name = entry.name.rpartition("/")
            if not directory and layer_cache.TEMPORARY_NAME.fullmatch(name):
                chosen.append(("layer-temporary", entry.name, entry.size))
            elif directory and layer_cache.TOKEN_DIRECTORY.fullmatch(directory):
                chosen.append(("token", entry.name, entry.size))
        removed = []
        for kind, name, size in chosen:
            if not dry_run:
                try:
                    self._store.remove_cache_file(bound.path, name)
                except NotFound:
                    continue  # a peer's gc, or Enroot's own cleanup
                except WorkspaceError as error:
                    log.warning("gc kept %s/%s: %s", bound.path, name, error.rule)
                    continue
                log.info("gc removed %s %s/%s", kind, bound.path, name)
            removed.append(Removed(kind, f"{bound.path}/{name}", size))
        return removed

    def _attempts(self, before: datetime) -> list[Removed]:
        """Finished attempts created before ``before``; and the registry credentials still
        staged in the others whose job has ended, of any age (a job cancelled while queued
        never ran the trap that removes them), or that were never submitted and are older
        (``import --no-submit``, a refused submit)."""
        names = self._names(self._layout.jobs)
        old = {lifecycle_id for lifecycle_id in names if self._created_before(lifecycle_id, before)}
        holding = {lifecycle_id for lifecycle_id in names if self._holds_credentials(lifecycle_id)}
        watched = [lifecycle_id for lifecycle_id in names if lifecycle_id in old | holding]
        attempts: list[Removed] = []
        credentials: list[Removed] = []
        for status in self._observe(watched) if watched else []:
            lifecycle_id = status.lifecycle_id
            ended = status.state not in (
                LifecycleState.SUBMISSION_UNKNOWN,
                LifecycleState.STAGED,
            ) and is_final(status)
            if ended and lifecycle_id in old:
                attempts.append(Removed("attempt", f"{self._layout.jobs}/{lifecycle_id}"))
            elif lifecycle_id in holding and (
                ended or (status.state is LifecycleState.STAGED and lifecycle_id in old)
            ):
                path = staged_credentials_path(self._store.root, lifecycle_id)
                credentials.append(Removed("credentials", path, self._size(path)))
        return attempts + credentials

    def _created_before(self, lifecycle_id: str, before: datetime) -> bool:
        """Whether the attempt was created before ``before``: the plan's time, else (a cleanup
        interrupted after the plan went) the submission's. False for a directory this product
        cannot vouch for: it is left alone."""
        try:
            layout, identity = attempt_directory(self._store, lifecycle_id)
            try:
                data = self._store.read_verified(
                    layout.plan, max_bytes=PLAN_MAX_BYTES, within=identity
                ).data
            except NotFound:
                record = read_submission(self._store, lifecycle_id)
                if record is None:
                    return False
                created = record.submitted_at
            else:
                created = load_plan(data).created_at
            return datetime.fromisoformat(created) < before
        except (WorkspaceError, DomainError, ApplicationError, ValueError):
            return False

    def _holds_credentials(self, lifecycle_id: str) -> bool:
        try:
            path = staged_credentials_path(self._store.root, lifecycle_id)
            return self._store.entry_kind(path) is not None
        except (WorkspaceError, DomainError):
            return False

    def _names(self, directory: str) -> list[str]:
        if self._store.entry_kind(directory) != "directory":
            return []
        return list(self._store.list_directory(directory))

    def _sizes(self, directory: str) -> dict[str, int]:
        """The regular files of ``directory`` and their sizes, from one listing (none when it
        is not there or cannot be listed: a size is only what ``gc`` reports and records)."""
        try:
            return dict(self._store.file_sizes(directory))
        except (WorkspaceError, DomainError):
            return {}

    def _size(self, path: str) -> int | None:
        directory, _, name = path.rpartition("/")
        return self._sizes(directory).get(name)

    def _temporaries(self) -> list[Removed]:
        found: list[Removed] = []
        for directory in (self._layout.publishing, self._layout.staging):
            sizes = self._sizes(directory)
            found.extend(
                Removed("temporary", f"{directory}/{entry}", sizes.get(entry))
                for entry in self._names(directory)
                if entry.endswith(".tmp")
            )
        return found

    def _documents(self) -> dict[str, AliasDocument] | None:
        """Every alias's document, by name; None when one is unreadable (what it names is
        unknown)."""
        documents = {}
        for entry in self._names(self._layout.aliases):
            try:
                document = self._records.alias(entry.removesuffix(".json"))
            except (DomainError, VerificationFailed):
                log.warning("an alias record is unreadable (%s)", entry)
                return None
            if document is not None:
                documents[document.name] = document
        return documents

    def _repair_links(self) -> None:
        """Make every stable path agree with the catalog (a crash between an alias file and
        its link, a link removed by hand)."""
        documents = self._documents()
        if documents is None:
            log.warning("no stable path is repaired while an alias record is unreadable")
            return
        for link in self._links.repair(documents):
            log.info("gc repaired the stable path %s", link)

    def _released_lately(self, path: str) -> bool:
        """Whether the artifact at ``path`` lost its last alias less than the grace ago."""
        digest = self._layout.in_store(path)
        released = self._links.released(digest) if digest is not None else None
        if not within_grace(released, self._clock.now(), self._grace):
            return False
        log.info("gc kept %s: released at %s, within the grace", path, released)
        return True

    def _unreferenced(self) -> list[Removed]:
        referenced: set[str] = set()
        documents = self._documents()
        if documents is None:
            log.warning("no artifact is collected while an alias record is unreadable")
            return []
        for document in documents.values():
            referenced.update(entry.path for entry in document.entries)
        for entry in self._names(self._layout.markers):
            try:
                data = self._store.read_stable(
                    f"{self._layout.markers}/{entry}", max_bytes=STORE_RECORD_MAX_BYTES
                )
                marker = load_marker(data.data)
            except (WorkspaceError, DomainError):
                continue
            referenced.add(marker.alias.path)
            referenced.update(entry.path for entry in marker.alias_document.entries)
        removed = []
        sources = self._records.sources()
        artifact_sizes = self._sizes(self._layout.artifacts)
        source_sizes = self._sizes(self._layout.sources)
        for entry in self._names(self._layout.artifacts):
            path = f"{self._layout.artifacts}/{entry}"
            if path not in referenced and not self._released_lately(path):
                removed.append(Removed("artifact", path, artifact_sizes.get(entry)))
                digest = self._layout.in_store(path)
                removed.extend(
                    Removed("source", source_path, source_sizes.get(source_path.rsplit("/")[-1]))
                    for source_path, source in sources
                    if source.sqsh_sha256 == digest
                )
        return removed

    def _remove(self, item: Removed) -> bool:
        """Remove ``item``, and record an artifact or an attempt in the history (``gc_artifact``
        with its bytes, ``gc_attempt``); False when it was gone already."""
        if item.kind == "attempt":
            self._remove_attempt(item.path.rsplit("/", 1)[1], "gc_attempt")
        elif self._store.entry_kind(item.path) is not None:
            self._store.remove_file(item.path)
            digest = self._layout.in_store(item.path)
            if item.kind == "artifact" and digest is not None:
                self._links.forget(digest)
                if self._history is not None:
                    self._history("gc_artifact", artifact=digest, bytes=item.size)
        else:
            return False
        log.info("gc removed %s %s", item.kind, item.path)
        return True
