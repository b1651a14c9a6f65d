"""Change the catalog: unregister an alias, collect garbage, clean up an attempt (§8)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from slurm_image.application.credentials import remove_staged_credentials
from slurm_image.application.errors import (
    StillRunning,
    UnknownAlias,
    VerificationFailed,
)
from slurm_image.application.observe import IN_DOUBT, STAGED, Observe
from slurm_image.application.records import attempt_directory
from slurm_image.application.store_records import STORE_LOCK, StoreRecords, alias_lock
from slurm_image.application.wait import is_final
from slurm_image.domain import paths
from slurm_image.domain.credentials import staged_credentials_path
from slurm_image.domain.errors import DomainError
from slurm_image.domain.plan import PLAN_MAX_BYTES, load_plan
from slurm_image.domain.publication import load_marker
from slurm_image.ports.clock import Clock
from slurm_image.ports.lock import Locks
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import WorkspaceError

log = logging.getLogger(__name__)

DEFAULT_LOCK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Removed:
    kind: str
    """``artifact``, ``source``, ``attempt`` or ``temporary``."""
    path: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "path": self.path}


class Maintain:
    """Change the catalog: unregister, gc, cleanup."""

    def __init__(
        self,
        store: Store,
        locks: Locks,
        observe: Observe,
        clock: Clock,
        *,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        self._store = store
        self._records = StoreRecords(store)
        self._layout = self._records.layout
        self._locks = locks
        self._observe = observe
        self._clock = clock
        self._timeout = lock_timeout_s

    def unregister(self, name: str) -> str:
        """Remove the alias; its artifact stays (``gc`` removes it once nothing refers to it)."""
        paths.name(name)
        with (
            self._locks.shared(STORE_LOCK, timeout_s=self._timeout),
            self._locks.exclusive(alias_lock(name), timeout_s=self._timeout),
        ):
            self._records.recover(name)
            if self._records.alias(name) is None:
                raise UnknownAlias.named(name)
            self._store.remove_file(self._layout.alias(name))
        return name

    def cleanup(self, lifecycle_id: str) -> str:
        """Remove an attempt directory, unless its job may still run or its submission is
        unknown. Never follows a symlink, never descends into a directory swapped in."""
        paths.name(lifecycle_id, "lifecycle_id")
        layout, identity = attempt_directory(self._store, lifecycle_id)
        (status,) = self._observe([lifecycle_id])
        if status.state == IN_DOUBT or (status.state != STAGED and not is_final(status)):
            raise StillRunning(
                "lifecycle_id",
                f"{lifecycle_id} is {status.state}: kept (cancel it, or wait for it, first)",
            )
        try:
            remove_staged_credentials(self._store, lifecycle_id)  # first: the secret
            self._store.remove_tree(layout.job_dir, expected=identity)
        except WorkspaceError as error:
            raise VerificationFailed(error.field, error.reason) from None
        return lifecycle_id

    def gc(self, *, older_than: timedelta, dry_run: bool = False) -> list[Removed]:
        """Remove artifacts no alias (or publication in progress) refers to, their source
        records, and finished attempts created more than ``older_than`` ago.

        Holding the store lock alone means no publisher is at work (they hold it shared): a
        marker is a publication a crash interrupted, finished or dropped here first (not in a
        dry run), and every temporary record is a leftover."""
        with self._locks.exclusive(STORE_LOCK, timeout_s=self._timeout):
            if not dry_run:
                for entry in self._names(self._layout.markers):
                    if entry.endswith(".json"):
                        self._records.recover(entry.removesuffix(".json"))
            removed = self._temporaries()
            removed += self._unreferenced()
            removed += self._stale_attempts(self._clock.now() - older_than)
            removed += self._finished_credentials(removed)
            if not dry_run:
                for item in removed:
                    self._remove(item)
        return removed

    def _finished_credentials(self, removed: list[Removed]) -> list[Removed]:
        """Registry credentials still staged in an attempt whose job has ended, of any age (a
        job cancelled while queued never ran the trap that removes them)."""
        going = {item.path for item in removed if item.kind == "attempt"}
        holding = [
            lifecycle_id
            for lifecycle_id in self._names(self._layout.jobs)
            if f"{self._layout.jobs}/{lifecycle_id}" not in going
            and self._holds_credentials(lifecycle_id)
        ]
        if not holding:
            return []
        return [
            Removed("credentials", staged_credentials_path(self._store.root, status.lifecycle_id))
            for status in self._observe(holding)
            if status.state not in (IN_DOUBT, STAGED) and is_final(status)
        ]

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

    def _temporaries(self) -> list[Removed]:
        return [
            Removed("temporary", f"{directory}/{entry}")
            for directory in (self._layout.publishing, self._layout.staging)
            for entry in self._names(directory)
            if entry.endswith(".tmp")
        ]

    def _unreferenced(self) -> list[Removed]:
        referenced = set()
        for entry in self._names(self._layout.aliases):
            try:
                record = self._records.alias(entry.removesuffix(".json"))
            except (DomainError, VerificationFailed):
                log.warning("an alias record is unreadable (%s): no artifact is collected", entry)
                return []
            if record is not None:
                referenced.add(record.path)
        for entry in self._names(self._layout.markers):
            try:
                data = self._store.read_stable(f"{self._layout.markers}/{entry}", max_bytes=1 << 22)
                referenced.add(load_marker(data.data).alias.path)
            except (WorkspaceError, DomainError):
                continue
        removed = []
        for entry in self._names(self._layout.artifacts):
            path = f"{self._layout.artifacts}/{entry}"
            if path not in referenced:
                removed.append(Removed("artifact", path))
                digest = self._layout.in_store(path)
                source = self._records.source_of_artifact(digest) if digest else None
                if source is not None:
                    removed.append(Removed("source", self._layout.source(source.source_digest)))
        return removed

    def _stale_attempts(self, before: datetime) -> list[Removed]:
        candidates = []
        for lifecycle_id in self._names(self._layout.jobs):
            try:
                layout, identity = attempt_directory(self._store, lifecycle_id)
                data = self._store.read_verified(
                    layout.plan, max_bytes=PLAN_MAX_BYTES, within=identity
                ).data
                created = datetime.fromisoformat(load_plan(data).created_at)
            except (WorkspaceError, DomainError, VerificationFailed, ValueError):
                continue  # not an attempt this product can vouch for: left alone
            if created < before:
                candidates.append(lifecycle_id)
        if not candidates:
            return []
        removed = []
        for status in self._observe(candidates):
            if status.state not in (IN_DOUBT, STAGED) and is_final(status):
                removed.append(Removed("attempt", f"{self._layout.jobs}/{status.lifecycle_id}"))
        return removed

    def _remove(self, item: Removed) -> None:
        if item.kind == "attempt":
            self.cleanup(item.path.rsplit("/", 1)[1])
        elif self._store.entry_kind(item.path) is not None:
            self._store.remove_file(item.path)
        log.info("gc removed %s %s", item.kind, item.path)
