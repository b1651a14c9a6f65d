"""Builders for the publication tests: a store over each workspace harness, and finished
lifecycles (staged, submitted, their job COMPLETED, result and candidate written as the job
would write them)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from slurm_image.adapters import local_store
from slurm_image.adapters.fcntl_lock import FcntlLocks
from slurm_image.adapters.local_history import LocalHistory
from slurm_image.adapters.local_store import LocalStore
from slurm_image.adapters.memory import (
    FakeClock,
    FakeSubmitter,
    MemoryHistory,
    MemoryLocks,
    MemoryStore,
)
from slurm_image.application.observe import Observe
from slurm_image.application.prepare import Prepare
from slurm_image.application.publish import Publication, Publish
from slurm_image.application.signature_check import CheckSignature
from slurm_image.application.submit import Submit
from slurm_image.domain.plan import Plan
from slurm_image.domain.publication import AliasRecord, load_alias
from slurm_image.domain.request import make_request
from slurm_image.domain.resolution import ResolvedFrom
from slurm_image.domain.store_layout import StoreLayout
from slurm_image.ports.history import History
from slurm_image.ports.lock import Locks
from slurm_image.ports.store import Store

SOURCE_DIGEST = "5" * 64
SOURCE = f"registry.example.org/team/app:1@sha256:{SOURCE_DIGEST}"
SQSH_BYTES = b"hsqs" + b"\x00" * 60 + b"the image"

CLIENT_FACTS: dict[str, Any] = {
    "python": {"implementation": "cpython", "version": "3.11.2", "abi": "cp311"},
    "distributions": [{"name": "pip", "version": "23.0.1"}],
    "installer": {"name": "pip", "version": "23.0.1", "path": "/usr/bin/pip"},
}
SERVING_FACTS: dict[str, Any] = {
    "server": {"name": "vllm", "version": "0.6.3", "path": "/usr/local/bin/vllm"}
}


CONFIG_DIGEST = "sha256:" + "c" * 64
RECORDED_BY_JOB = "as the job records it"


def chain_json(pinned: str, manifest: str | None = None, config: str = CONFIG_DIGEST) -> bytes:
    """``chain.json`` as the import job writes it (its printf, not the product's serializer)."""
    manifest = pinned if manifest is None else manifest
    line = f'{{"config": "{config}", "manifest": "{manifest}", "pinned": "{pinned}"}}\n'
    return line.encode()


def inspection(role: str, sqsh: bytes, machine: str = "x86_64", **changes: Any) -> bytes:
    """An inspection record as the inspector writes it (schema version 3), for an image that
    ran as ``machine``."""
    facts = copy.deepcopy(CLIENT_FACTS if role == "client" else SERVING_FACTS)
    facts["shadowed"] = []
    if role == "client":
        facts["python"]["executable"] = "/usr/bin/python3.11"
    record: dict[str, Any] = {
        "schema_version": 3,
        "inspector_version": "3.0.0",
        "role": role,
        "sqsh_sha256": hashlib.sha256(sqsh).hexdigest(),
        "machine": machine,
        "facts": facts,
    }
    record.update(changes)
    return json.dumps(record).encode()


def store_for(harness: Any, groups: frozenset[str] = frozenset()) -> Store:
    """The store of ``harness``'s kind; a memory store's owner is in ``groups`` (on the local
    store, the machine's own groups hold)."""
    if harness.kind == "local":
        return LocalStore(harness.root)
    return MemoryStore(harness.root, harness.filesystem, uid=harness.uid, groups=groups)


def locks_for(harness: Any, store: Store) -> Locks:
    if harness.kind == "local":
        assert isinstance(store, LocalStore)
        return FcntlLocks(store)
    return MemoryLocks()


def history_for(
    harness: Any, store: Store, locks: Locks | None, *, lock_timeout_s: float = 60.0
) -> History:
    """The history of ``store`` (``locks`` None: opened for reading only)."""
    if harness.kind == "local":
        assert isinstance(store, LocalStore)
        return LocalHistory(store, locks, lock_timeout_s=lock_timeout_s)
    assert isinstance(store, MemoryStore)
    assert locks is None or isinstance(locks, MemoryLocks)
    return MemoryHistory(store, locks, lock_timeout_s=lock_timeout_s)


def during_read(
    harness: Any, store: Store, monkeypatch: pytest.MonkeyPatch, act: Callable[[str], None]
) -> None:
    """Call ``act(path)`` once in the middle of the next read or hash through ``store``."""
    if harness.kind == "memory":
        assert isinstance(store, MemoryStore)
        fired: list[str] = []

        def once(path: str) -> None:
            if not fired:
                fired.append(path)
                act(path)

        store.during_read = once
        return
    original_read = local_store.read_bounded
    original_readv = os.readv
    paths_open: dict[int, str] = {}

    def read(fd: int, max_bytes: int, field: str) -> bytes:
        data = original_read(fd, max_bytes, field)
        act(field)
        monkeypatch.setattr(local_store, "read_bounded", original_read)
        return data

    def readv(fd: int, buffers: Any) -> int:
        count = original_readv(fd, buffers)
        target = os.readlink(f"/proc/self/fd/{fd}")
        paths_open.setdefault(fd, target)
        monkeypatch.setattr(os, "readv", original_readv)
        act(target)
        return count

    monkeypatch.setattr(local_store, "read_bounded", read)
    monkeypatch.setattr(os, "readv", readv)


class PublishLab:
    """One workspace with a fake scheduler, and the use cases wired to it."""

    def __init__(
        self,
        harness: Any,
        profile_for: Any,
        runtime: Any,
        *,
        store: Store | None = None,
        locks: Locks | None = None,
        scheduler: FakeSubmitter | None = None,
    ) -> None:
        self.harness = harness
        self.store = store if store is not None else store_for(harness)
        self.locks = locks if locks is not None else locks_for(harness, self.store)
        self.clock = FakeClock()
        self.scheduler = scheduler if scheduler is not None else FakeSubmitter(clock=self.clock)
        self.profile, self.selection = profile_for(harness.root)
        self.runtime = runtime
        self.layout = StoreLayout(harness.root)
        self.observe = Observe(self.store, self.scheduler)
        self.plans: dict[str, Plan] = {}
        self.check_signature: CheckSignature | None = None
        """What ``submitted`` prepares with (the site policy's signature check), if any."""

    def publisher(self, **options: Any) -> Publish:
        return Publish(
            self.store, self.locks, self.observe, self.clock, lock_timeout_s=5, **options
        )

    def publish(self, lifecycle_id: str, *, replace: bool = False) -> Publication:
        return self.publisher()(lifecycle_id, replace=replace)

    def outside(self, name: str) -> str:
        """A path beside the workspace root, as a site's shared image directory."""
        base = self.harness.root.rsplit("/", 1)[0] + "/shared"
        if not self.harness.exists(base):
            self.harness.makedirs(base)
        return f"{base}/{name}"

    def submitted(
        self,
        lifecycle_id: str,
        *,
        name: str = "app",
        role: str = "client",
        operation: str = "import_oci",
        source: str | None = None,
        arch: str | None = None,
        resolved_from: ResolvedFrom | None = None,
    ) -> Plan:
        if source is None:
            source = SOURCE if operation == "import_oci" else self.outside("image.sqsh")
        request = make_request(
            operation,  # type: ignore[arg-type]
            name=name,
            role=role,
            source=source,
            architecture=arch,
            resolved_from=resolved_from,
        )
        check = self.check_signature
        prepared = Prepare(
            self.clock,
            self.runtime,
            self.store,
            check_signature=None if check is None else lambda: check,
        )(request, self.profile, self.selection, lifecycle_id)
        Submit(self.store, self.scheduler, self.clock)(prepared)
        self.plans[lifecycle_id] = prepared.plan
        return prepared.plan

    def chain_path(self, plan: Plan) -> str:
        return f"{plan.paths.job_dir}/chain.json"

    def architecture_path(self, plan: Plan) -> str:
        return f"{plan.paths.job_dir}/architecture"

    def alias_entry(self, name: str, architecture: str | None = "x86_64") -> AliasRecord:
        """The entry of ``architecture`` in the alias file of ``name``, as stored."""
        entry = load_alias(self.harness.read(self.layout.alias(name))).entry(architecture)
        assert entry is not None, f"{name} has no {architecture} entry"
        return entry

    def job_of(self, lifecycle_id: str) -> str:
        marker = f"slurm-image:{lifecycle_id}"
        return next(j.job_id for j in self.scheduler.jobs.values() if j.spec.comment == marker)

    def finished(
        self,
        lifecycle_id: str,
        *,
        sqsh: bytes = SQSH_BYTES,
        result: bytes | None = None,
        chain: bytes | None = None,
        recorded: str | None = RECORDED_BY_JOB,
        machine: str | None = None,
        ran: timedelta | None = None,
        **request: Any,
    ) -> Plan:
        """A lifecycle whose job COMPLETED: the .sqsh, inspection.json and (import) chain.json
        as the job leaves them; ``chain``: other bytes for chain.json, ``b""``: none; ``ran``:
        how long the job ran by the lab's clock (none: it ended as it started).
        ``recorded``: the architecture the job records (default: the plan's, else x86_64 for
        an import and none for an inspect; None: no record); ``machine``: what the inspector
        ran as (default: the recorded architecture, else x86_64)."""
        plan = self.submitted(lifecycle_id, **request)
        if recorded == RECORDED_BY_JOB:
            importing = plan.operation == "import_oci"
            recorded = plan.architecture or ("x86_64" if importing else None)
        if recorded is not None:
            self.harness.write(self.architecture_path(plan), f"{recorded}\n".encode())
        machine = machine or recorded or "x86_64"
        if plan.operation == "import_oci" or not self.harness.exists(plan.paths.sqsh):
            self.harness.write(plan.paths.sqsh, sqsh)
        if plan.operation == "import_oci" and chain != b"":
            assert plan.source_digest is not None
            self.harness.write(
                self.chain_path(plan),
                chain if chain is not None else chain_json(plan.source_digest),
            )
        data = (
            result if result is not None else inspection(plan.request.role, sqsh, machine=machine)
        )
        self.harness.write(plan.paths.result, data)
        if ran is not None:
            self.scheduler.start(self.job_of(lifecycle_id))
            self.clock.advance(ran)
        self.scheduler.finish(self.job_of(lifecycle_id), 0)
        return plan

    def store_listing(self) -> list[str]:
        """Every path under images/ except the attempts (the published state and its temps)."""
        jobs = self.layout.jobs
        return [p for p in self.harness.listing() if not p.startswith(jobs)]
