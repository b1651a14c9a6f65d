"""Publish a finished lifecycle into the content-addressed store and the alias registry
(docs/design.md, "Publication").

Under the alias's lock (and a shared hold of the store lock, which ``gc`` takes exclusively),
in this order:

1. finish or roll back a publication of this alias that a crashed process left (its marker);
2. the same attempt published already: answer its record (idempotent); another record: refuse
   unless ``replace``;
3. the job COMPLETED with exit code 0; the plan is the one submitted (its digest);
4. an import's ``chain.json`` is read through one descriptor (regular file, size bound) and
   validated: the chain the job verified, from the plan's pinned source digest on;
5. ``inspection.json`` is read through one descriptor (no symlink, no FIFO, size bound before
   reading, unchanged while read) and validated for the plan's role and the digest of the
   ``.sqsh`` as hashed now through one descriptor;
6. the marker is written; an import's candidate is moved into ``artifacts/<sha256>.sqsh`` (0444,
   fsynced, never replacing anything; identical bytes already there are reused, anything else
   there is refused); the source record (with the chain), then the alias record are replaced
   atomically; the marker is removed.

A crash between any two steps leaves the old alias record or the new one, and the next
publisher of the alias (or ``recover``) finishes what the marker describes or drops it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from slurm_image.application.catalog_reader import require_unchangeable
from slurm_image.application.credentials import remove_staged_credentials
from slurm_image.application.errors import (
    AliasExists,
    JobNotSuccessful,
    VerificationFailed,
)
from slurm_image.application.records import attempt_directory, read_submission
from slurm_image.application.status import Statuses, is_final, succeeded
from slurm_image.application.store_records import (
    ENTRY_ARTICLE,
    STORE_LOCK,
    StoreRecords,
    alias_lock,
)
from slurm_image.domain.architecture import (
    ARCHITECTURE_RECORD_MAX_BYTES,
    ARCHITECTURES,
    from_machine,
    read_architecture_record,
)
from slurm_image.domain.canonical import sha256_hex
from slurm_image.domain.errors import DomainError
from slurm_image.domain.inspection import MAX_INSPECTION_BYTES, validate_inspection
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.plan import PLAN_MAX_BYTES, Plan, format_time, load_plan
from slurm_image.domain.publication import (
    RECORD_SCHEMA_VERSION,
    SIGNED_SOURCE_SCHEMA_VERSION,
    AliasDocument,
    AliasRecord,
    PublicationMarker,
    RoleFacts,
    SourceRecord,
    alias_schema_version,
    facts_of,
)
from slurm_image.domain.request import Request
from slurm_image.domain.resolution import ResolvedFrom
from slurm_image.domain.signed_by import SignedBy
from slurm_image.domain.store_layout import ARTIFACT_MODE
from slurm_image.domain.verified_chain import (
    CHAIN_RECORD_MAX_BYTES,
    VerifiedChain,
    validate_chain_record,
)
from slurm_image.ports.clock import Clock
from slurm_image.ports.hasher import FileDigest
from slurm_image.ports.lock import Locks
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import AlreadyExists, NotFound, WorkspaceError

log = logging.getLogger(__name__)

DEFAULT_LOCK_TIMEOUT_S = 60.0
CHECKPOINTS = ("verified", "marker", "artifact", "source", "alias", "done")
"""The steps after which ``checkpoint`` is called: a crash test stops the process there."""


def _same_binding(one: AliasRecord, other: AliasRecord) -> bool:
    keys = (
        "role",
        "architecture",
        "path",
        "sqsh_sha256",
        "source_digest",
        "chain",
        "facts",
        "lifecycle_id",
    )
    return all(getattr(one, key) == getattr(other, key) for key in keys) and _same_tag(
        one.resolved_from, other.resolved_from
    )


def _same_tag(one: ResolvedFrom | None, other: ResolvedFrom | None) -> bool:
    """The same tag pinned to the same digest, whenever it was resolved."""
    if one is None or other is None:
        return one is other
    return (one.tag, one.digest) == (other.tag, other.digest)


def no_checkpoint(step: str) -> None:
    """The production checkpoint: nothing happens between steps."""


@dataclass(frozen=True)
class Publication:
    """The published record, and whether this call changed the store."""

    record: AliasRecord
    changed: bool


class Publish:
    """Publish one finished lifecycle (see the module docstring).

    Raises ``JobNotSuccessful`` (exit 4), ``VerificationFailed`` (5: nothing published,
    nothing lost), ``AliasExists`` and ``LockTimeout`` (6), ``UnknownLifecycle``.
    """

    def __init__(
        self,
        store: Store,
        locks: Locks,
        statuses: Statuses,
        clock: Clock,
        *,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
        checkpoint: Callable[[str], None] = no_checkpoint,
    ) -> None:
        self._store = store
        self._records = StoreRecords(store)
        self._layout = self._records.layout
        self._locks = locks
        self._statuses = statuses
        self._clock = clock
        self._timeout = lock_timeout_s
        self._checkpoint = checkpoint

    def __call__(self, lifecycle_id: str, *, replace: bool = False) -> Publication:
        plan = self._plan(lifecycle_id)
        with self._alias_held(plan.request.name):
            existing = self._records.alias(plan.request.name)
            for entry in existing.entries if existing is not None else ():
                if entry.lifecycle_id == lifecycle_id:
                    return Publication(entry, changed=False)
            if plan.architecture is not None:  # refused before the image is hashed
                _check_binding(
                    existing,
                    name=plan.request.name,
                    role=plan.request.role,
                    architecture=plan.architecture,
                    replace=replace,
                )
            self._require_success(lifecycle_id)
            record, digest, sources = self._verify(plan)
            document = _next_document(existing, record, replace)
            self._checkpoint("verified")
            self._commit(plan, document, record, digest, sources)
            bound = existing.entry(record.architecture) if existing is not None else None
            if bound is not None:
                log.info(
                    "%s (%s) rebound from %s to %s",
                    record.name,
                    record.architecture,
                    bound.sqsh_sha256,
                    record.sqsh_sha256,
                    extra={"lifecycle_id": lifecycle_id},
                )
            return Publication(record, changed=True)

    def stored_source(self, source_digest: str, architecture: str) -> SourceRecord | None:
        """The source record of ``source_digest`` for ``architecture`` when it holds the chain
        its import verified and its artifact is in the store and still hashes to the recorded
        digest (re-hashed now), else None. A record without a chain was written before the
        import job verified anything: it may name whatever a lying registry served, so it
        answers nothing; one without an architecture is never looked up."""
        source = self._records.source(source_digest, architecture)
        if source is None:
            return None
        if not source.verified:
            log.info(
                "the store's record of %s holds no verified chain: importing again", source_digest
            )
            return None
        path = self._layout.artifact(source.sqsh_sha256)
        return source if self._records.artifact_matches(path, source.sqsh_sha256) else None

    def bind_stored(
        self, request: Request, source: SourceRecord, *, replace: bool = False
    ) -> Publication:
        """Answer an import from the store: bind ``request.name`` to the stored artifact of
        its source with the facts recorded for its role. No job runs."""
        facts = source.roles.get(request.role)
        if facts is None:
            raise VerificationFailed(field="role", rule=f"the store holds no {request.role} facts")
        path = self._layout.artifact(source.sqsh_sha256)
        with self._alias_held(request.name):
            try:
                digest = self._store.digest(path)
            except WorkspaceError as error:
                raise VerificationFailed(field=error.field, rule=error.rule) from None
            if digest.sha256 != source.sqsh_sha256:
                raise VerificationFailed(
                    field=path, rule="does not hold the bytes its source recorded"
                )
            record = self._alias_record(
                request,
                path=path,
                digest=digest,
                facts=facts,
                source=request.source,
                source_digest=source.source_digest,
                chain=source.chain,
                architecture=source.architecture,
                signed_by=source.signed_by,
            )
            existing = self._records.alias(request.name)
            current = existing.entry(record.architecture) if existing is not None else None
            if current is not None and _same_binding(current, record):
                return Publication(current, changed=False)
            self._records.write_alias(_next_document(existing, record, replace))
            log.info(
                "%s answered from the store: %s (sha256 %s), no job",
                request.name,
                path,
                digest.sha256,
                extra={"lifecycle_id": facts.lifecycle_id},
            )
            return Publication(record, changed=True)

    # -- the alias -----------------------------------------------------------------------

    @contextmanager
    def _alias_held(self, name: str) -> Iterator[None]:
        """A shared hold of the store lock and the alias's own lock, with any publication of
        the alias that a crash interrupted finished or dropped first."""
        self._records.prepare_directories()
        with (
            self._locks.shared(STORE_LOCK, timeout_s=self._timeout),
            self._locks.exclusive(alias_lock(name), timeout_s=self._timeout),
        ):
            self._records.recover(name)
            yield

    def _alias_record(
        self,
        request: Request,
        *,
        path: str,
        digest: FileDigest,
        facts: RoleFacts,
        source: str,
        source_digest: str | None,
        chain: VerifiedChain | None,
        architecture: str | None,
        signed_by: SignedBy | None,
    ) -> AliasRecord:
        """The one way an alias entry is made: ``request``'s name and role bound, for
        ``architecture``, to the file at ``path`` as hashed (``digest``), with the facts of the
        lifecycle that inspected it, the tag the request's source was resolved from, and the
        signature the site policy accepted for the source."""
        if architecture is None:
            raise VerificationFailed(
                field="architecture", rule="is unknown: only an image of a known one is published"
            )
        return AliasRecord(
            schema_version=alias_schema_version(request.resolved_from, signed_by),
            name=request.name,
            role=request.role,
            path=path,
            sqsh_sha256=digest.sha256,
            size=digest.size,
            identity=digest.identity,
            operation=request.operation,
            source=source,
            source_digest=source_digest,
            inspection_schema_version=facts.inspection_schema_version,
            inspector_version=facts.inspector_version,
            facts=facts.facts,
            lifecycle_id=facts.lifecycle_id,
            published_at=format_time(self._clock.now()),
            chain=chain,
            architecture=architecture,
            resolved_from=request.resolved_from,
            signed_by=signed_by,
        )

    # -- steps ---------------------------------------------------------------------------

    def _plan(self, lifecycle_id: str) -> Plan:
        submission = read_submission(self._store, lifecycle_id)
        if submission is None:
            raise JobNotSuccessful(
                field="lifecycle_id", rule=f"{lifecycle_id} was never submitted: nothing to publish"
            )
        layout, identity = attempt_directory(self._store, lifecycle_id)
        try:
            data = self._store.read_verified(
                layout.plan, max_bytes=PLAN_MAX_BYTES, within=identity
            ).data
            plan = load_plan(data)
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        except DomainError as error:
            raise VerificationFailed(
                field=layout.plan, rule=f"{error.field}: {error.rule}"
            ) from None
        if plan.lifecycle_id != lifecycle_id or sha256_hex(data) != submission.plan_sha256:
            raise VerificationFailed(field=layout.plan, rule="is not the plan that was submitted")
        if plan.profile.workspace_root != self._store.root:
            raise VerificationFailed(
                field="workspace_root", rule=f"the plan names {plan.profile.workspace_root}"
            )
        return plan

    def _require_success(self, lifecycle_id: str) -> None:
        (status,) = self._statuses([lifecycle_id])
        if status.state is not LifecycleState.SUBMISSION_UNKNOWN and is_final(
            status
        ):  # a job that never ran its trap
            try:  # left its registry credentials
                remove_staged_credentials(self._store, lifecycle_id)
            except WorkspaceError as error:
                raise VerificationFailed(field=error.field, rule=error.rule) from None
        if succeeded(status):
            return
        detail = f" (exit {status.exit_code})" if status.exit_code is not None else ""
        reason = f": {status.reason}" if status.reason else ""
        raise JobNotSuccessful(
            field="state",
            rule=f"job {status.job_id} of {lifecycle_id} is {status.state}{detail}{reason};"
            " only a COMPLETED job with exit code 0 is published",
        )

    def _verified_chain(self, plan: Plan) -> VerifiedChain:
        """The chain the import job verified, from its ``chain.json``: written only when every
        link from the pinned digest to the config hashed right, so without it nothing is
        known about what the registry served."""
        layout, identity = attempt_directory(self._store, plan.lifecycle_id)
        path = layout.chain_record
        if plan.source_digest is None:
            raise VerificationFailed(
                field=path, rule="an import plan without a source digest has no chain"
            )
        try:
            data = self._store.read_verified(
                path, max_bytes=CHAIN_RECORD_MAX_BYTES, within=identity
            ).data
        except NotFound:
            raise VerificationFailed(
                field=path,
                rule="does not exist: the job recorded no verified chain from the pinned digest"
                f" {plan.source_digest}, so the import is not published",
            ) from None
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        try:
            return validate_chain_record(data, pinned=plan.source_digest)
        except DomainError as error:
            raise VerificationFailed(field=path, rule=f"{error.field}: {error.rule}") from None

    def _verify(self, plan: Plan) -> tuple[AliasRecord, FileDigest, tuple[SourceRecord, ...]]:
        role = plan.request.role
        importing = plan.operation == "import_oci"
        if plan.schema_version == 1:
            raise VerificationFailed(
                field=plan.paths.plan,
                rule="was staged before architectures were recorded: run the import (or"
                " inspect) again",
            )
        chain = self._verified_chain(plan) if importing else None
        recorded = self._recorded_architecture(plan)
        if not importing:
            require_unchangeable(self._store, plan.paths.sqsh)
        try:
            data = self._store.read_stable(plan.paths.result, max_bytes=MAX_INSPECTION_BYTES).data
            digest = self._store.digest(self._image_of(plan, data))
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        try:
            inspection = validate_inspection(data, role=role, sqsh_sha256=digest.sha256)
        except DomainError as error:
            raise VerificationFailed(
                field=f"inspection.{error.field}" if error.field != "inspection" else error.field,
                rule=error.rule,
            ) from None
        architecture = _image_architecture(recorded, inspection.machine)
        log.info(
            "result verified: %s image for %s, .sqsh %s sha256 %s",
            role,
            architecture,
            plan.paths.sqsh,
            digest.sha256,
            extra={"lifecycle_id": plan.lifecycle_id},
        )
        facts = facts_of(inspection, plan.lifecycle_id)
        path = self._layout.artifact(digest.sha256) if importing else plan.paths.sqsh
        source_text, source_digest = plan.request.source, plan.source_digest
        sources: list[SourceRecord] = []
        signed_by = plan.signed_by
        if importing and chain is not None:
            for digest_of_source in dict.fromkeys((chain.pinned, chain.manifest)):
                source = SourceRecord(
                    schema_version=(
                        SIGNED_SOURCE_SCHEMA_VERSION
                        if plan.signed_by is not None
                        else RECORD_SCHEMA_VERSION
                    ),
                    source_digest=digest_of_source,
                    source=source_text,
                    sqsh_sha256=digest.sha256,
                    roles={},
                    chain=chain,
                    architecture=architecture,
                    signed_by=plan.signed_by,
                )
                known = self._records.source(digest_of_source, architecture)
                if known is not None and known.sqsh_sha256 == digest.sha256:
                    # the same bytes: their facts stand, and this import's chain now proves them
                    source = source.model_copy(update={"roles": known.roles})
                sources.append(source)
        elif self._layout.in_store(path) == digest.sha256:
            sources = self._records.sources_of_artifact(digest.sha256, architecture)
            named = _named_source(sources)
            if named is not None:
                source_text, source_digest, chain = named.source, named.source_digest, named.chain
                signed_by = named.signed_by
        sources = [source.with_role(role, facts) for source in sources]
        record = self._alias_record(
            plan.request,
            path=path,
            digest=digest,
            facts=facts,
            source=source_text,
            source_digest=source_digest,
            chain=chain,
            architecture=architecture,
            signed_by=signed_by,
        )
        return record, digest, tuple(sources)

    def _recorded_architecture(self, plan: Plan) -> str | None:
        """The architecture the job recorded (``architecture``: it imported for it, or checked
        the node runs it), None when it recorded none (an inspect of the image's own); it must
        be the plan's when the plan names one, and an import always records one."""
        layout, identity = attempt_directory(self._store, plan.lifecycle_id)
        path = layout.architecture_record
        try:
            data: bytes | None = self._store.read_verified(
                path, max_bytes=ARCHITECTURE_RECORD_MAX_BYTES, within=identity
            ).data
        except NotFound:
            data = None
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        if data is None:
            if plan.operation == "import_oci" or plan.architecture is not None:
                raise VerificationFailed(
                    field=path, rule="does not exist: the job recorded no architecture"
                )
            return None
        try:
            recorded = read_architecture_record(data)
        except DomainError as error:
            raise VerificationFailed(field=path, rule=error.rule) from None
        if plan.architecture is not None and recorded != plan.architecture:
            raise VerificationFailed(
                field=path, rule=f"names {recorded}, not the plan's {plan.architecture}"
            )
        return recorded

    def _image_of(self, plan: Plan, result: bytes) -> str:
        """The ``.sqsh`` to hash: the attempt's own, or, when an earlier publication of this
        import moved its candidate into the store, the stored artifact the result names (its
        bytes hashed now must still match, so the claim is only a place to look)."""
        if plan.paths.candidate is None or self._store.entry_kind(plan.paths.candidate):
            return plan.paths.sqsh
        try:
            claimed = json.loads(result).get("sqsh_sha256")
            return self._layout.artifact(claimed) if isinstance(claimed, str) else plan.paths.sqsh
        except (ValueError, AttributeError, RecursionError, DomainError):
            return plan.paths.sqsh

    def _commit(
        self,
        plan: Plan,
        document: AliasDocument,
        record: AliasRecord,
        digest: FileDigest,
        sources: tuple[SourceRecord, ...],
    ) -> None:
        candidate = plan.paths.candidate
        if candidate is not None:
            kind = self._store.entry_kind(record.path)
            if kind is not None:
                self._refuse_unless_identical(record)
                candidate = None  # identical bytes are in the store already: reuse them
        marker = PublicationMarker(
            candidate=candidate, alias=record, document=document, sources=sources
        )
        self._store.publish_file(
            self._layout.marker(record.name),
            marker.model_dump_json().encode(),
            mode=0o600,
            staging=self._layout.publishing,
        )
        self._checkpoint("marker")
        if candidate is not None:
            try:
                self._store.install(candidate, record.path, expected=digest, mode=ARTIFACT_MODE)
            except AlreadyExists:
                self._refuse_unless_identical(record)  # a concurrent publisher of equal bytes
            except WorkspaceError as error:
                self._store.remove_file(self._layout.marker(record.name))
                raise VerificationFailed(field=error.field, rule=error.rule) from None
        self._checkpoint("artifact")
        for source in sources:
            self._records.write_source(source)
        self._checkpoint("source")
        self._records.write_alias(document)
        self._checkpoint("alias")
        self._store.remove_file(self._layout.marker(record.name))
        self._checkpoint("done")
        log.info(
            "published %s (%s) -> %s (sha256 %s)",
            record.name,
            record.architecture,
            record.path,
            record.sqsh_sha256,
            extra={"lifecycle_id": plan.lifecycle_id},
        )

    def _refuse_unless_identical(self, record: AliasRecord) -> None:
        kind = self._store.entry_kind(record.path)
        if kind != "file":
            self._drop_marker(record.name)
            raise VerificationFailed(
                field=record.path,
                rule=f"is {ENTRY_ARTICLE.get(kind or '', 'missing')}, not a regular file: refused",
            )
        if not self._records.artifact_matches(record.path, record.sqsh_sha256):
            self._drop_marker(record.name)
            raise VerificationFailed(
                field=record.path,
                rule=f"does not hold the bytes of sha256 {record.sqsh_sha256}: refused",
            )

    def _drop_marker(self, name: str) -> None:
        if self._store.entry_kind(self._layout.marker(name)) is not None:
            self._store.remove_file(self._layout.marker(name))


def _check_binding(
    existing: AliasDocument | None,
    *,
    name: str,
    role: str,
    architecture: str | None,
    replace: bool,
) -> None:
    """Whether ``name`` may bind ``role`` for ``architecture``: an entry of a new architecture
    joins the others; one that rebinds an architecture, the role, or an alias published before
    architectures were recorded needs ``replace``. Raises ``AliasExists``."""
    if existing is None:
        return
    if existing.legacy or existing.role != role:
        if replace:
            return
        what = (
            f"{existing.role} image of unknown architecture (published before architectures"
            " were recorded)"
            if existing.legacy
            else f"{existing.role} image for {', '.join(map(str, existing.architectures))}"
        )
        raise AliasExists(
            field="name",
            rule=f"{name} is published already as a {what};"
            " rebind the whole alias with --replace (its artifacts stay)",
        )
    current = existing.entry(architecture)
    if current is not None and not replace:
        raise AliasExists(
            field="name",
            rule=f"{name} is published already for {architecture} (lifecycle"
            f" {current.lifecycle_id}); rebind it with --replace (its artifact stays)",
        )


def _next_document(
    existing: AliasDocument | None, record: AliasRecord, replace: bool
) -> AliasDocument:
    """The alias as publishing ``record`` leaves it (``_check_binding`` says whether it may):
    with ``record`` in its architecture's place, the other architectures kept; a new alias, a
    new role or an alias from before architectures were recorded is ``record`` alone."""
    _check_binding(
        existing,
        name=record.name,
        role=record.role,
        architecture=record.architecture,
        replace=replace,
    )
    if existing is None or existing.legacy or existing.role != record.role:
        return AliasDocument.of(record)
    return existing.with_entry(record)


def _named_source(sources: list[SourceRecord]) -> SourceRecord | None:
    """The record an alias of a stored artifact names as its source: the pinned digest's,
    rather than its per-architecture manifest's."""
    for source in sources:
        if source.chain is not None and source.source_digest == source.chain.pinned:
            return source
    return sources[0] if sources else None


def _image_architecture(recorded: str | None, machine: str | None) -> str:
    """The architecture of the inspected image: what the inspector ran as
    (``platform.machine()``), which must be what the job recorded, when it recorded one."""
    running = from_machine(machine or "")
    if running is None:
        raise VerificationFailed(
            field="inspection.machine",
            rule=f"the image ran as {machine!r}, none of {', '.join(ARCHITECTURES)}",
        )
    if recorded is not None and running != recorded:
        raise VerificationFailed(
            field="inspection.machine",
            rule=f"the image ran as {running}, not as {recorded}, which the job recorded",
        )
    return running
