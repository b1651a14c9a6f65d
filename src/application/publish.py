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
   fsynced, never replacing anything; identical bytes already there are reused, and opened to
   everyone when a public alias names bytes kept for a group alone; anything else there is
   refused); the source record (with the chain), then the alias record are replaced
   atomically; the marker is removed.

A crash between any two steps leaves the old alias record or the new one, and the next
publisher of the alias (or ``recover``) finishes what the marker describes or drops it.

Once the alias record is written, still under the locks, the binding is recorded in the store's
history (``published``, or ``replaced`` with the artifact it displaced, with how long the job
ran; ``application.history``), and so is a binding from the store; a history that cannot take
it is warned about, and the publication stands. The marker carries the event, so that a process
that finishes the publication after a crash records it, as this publisher, with
``recovered`` (``StoreRecords.recover``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from slurm_image.application.alias_binding import (
    alias_record,
    check_binding,
    next_document,
    same_binding,
)
from slurm_image.application.errors import ApplicationError, VerificationFailed
from slurm_image.application.history import (
    RecordHistory,
    binding_event,
    entry_fields,
    latency_seconds,
    privacy_fields,
)
from slurm_image.application.lifecycle_rights import LifecycleRights
from slurm_image.application.name_links import NameLinks
from slurm_image.application.orders import Orders, import_lock
from slurm_image.application.permissions import Permissions
from slurm_image.application.records import read_submission
from slurm_image.application.status import LifecycleStatus, Statuses
from slurm_image.application.store_records import (
    ENTRY_ARTICLE,
    STORE_LOCK,
    StoreRecords,
    alias_lock,
)
from slurm_image.application.verify_result import VerifyResult
from slurm_image.domain.errors import DomainError
from slurm_image.domain.history import HistoryEvent
from slurm_image.domain.orders import Order
from slurm_image.domain.plan import Plan
from slurm_image.domain.publication import (
    EVENT_MARKER_SCHEMA_VERSION,
    MARKER_SCHEMA_VERSION,
    AliasDocument,
    AliasRecord,
    PublicationMarker,
    SourceRecord,
)
from slurm_image.domain.request import Request
from slurm_image.ports.clock import Clock
from slurm_image.ports.hasher import FileDigest
from slurm_image.ports.lock import Locks
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import AlreadyExists, WorkspaceError

log = logging.getLogger(__name__)

DEFAULT_LOCK_TIMEOUT_S = 60.0
CHECKPOINTS = ("verified", "marker", "artifact", "source", "alias", "done")
"""The steps after which ``checkpoint`` is called: a crash test stops the process there."""


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
        history: RecordHistory | None = None,
        permissions: Permissions | None = None,
        orders: Orders | None = None,
        rights: LifecycleRights | None = None,
    ) -> None:
        self._store = store
        self._rights = rights
        self._permissions = permissions
        self._orders = orders
        self._history = history
        self._records = StoreRecords(store, history=history)
        self._layout = self._records.layout
        self._links = NameLinks(store)
        self._locks = locks
        self._clock = clock
        self._verify = VerifyResult(store, self._records, statuses, clock)
        self._timeout = lock_timeout_s
        self._checkpoint = checkpoint

    def __call__(self, lifecycle_id: str, *, replace: bool = False) -> Publication:
        """Publish the lifecycle (see the module docstring), then bind the orders that joined
        it (``fulfil``). With ``rights``: only the lifecycle's owner, its group, a request that
        joined it and the admins may; to anyone who may not know of it, it is unknown."""
        if self._rights is not None:
            self._rights.require_publisher(lifecycle_id)
        return self.permitted(lifecycle_id, replace=replace)

    def permitted(self, lifecycle_id: str, *, replace: bool = False) -> Publication:
        """``__call__`` for a caller whose right to publish was weighed already, once: a
        joined request may publish while its order is in the book, and the book closes as soon
        as any of its requests has published, so asking a second time could refuse it."""
        publication = self._publish(lifecycle_id, replace=replace)
        self.fulfil(lifecycle_id, publication.record.architecture)
        return publication

    def fulfil(self, lifecycle_id: str, built: str | None) -> None:
        """Bind every order that joined the published lifecycle to its artifact, each by its
        requester's rights, and close its book. An order that cannot be bound (its alias is
        another's, or bound already without ``replace``) is left unbound and said in the log;
        its requester, waiting, is told by binding it again (``bind_stored``). When the job
        ``built`` another architecture than the book's (one assumed: ``OrderBook.assumed``),
        no order is bound: each was for the architecture of the book."""
        if self._orders is None:
            return
        book = self._orders.book(lifecycle_id)
        if book is None:
            return
        if not book.joinable or book.source_digest is None or book.architecture is None:
            self._orders.close(lifecycle_id)  # nothing could join it
            return
        if built != book.architecture:
            if len(book.orders) > 1:
                log.warning(
                    "%s built %s, not the %s its %d joined orders are for: none is bound",
                    lifecycle_id,
                    built,
                    book.architecture,
                    len(book.orders) - 1,
                    extra={"lifecycle_id": lifecycle_id},
                )
            self._orders.close(lifecycle_id)
            return
        with self._locks.exclusive(import_lock(book.source_digest), timeout_s=self._timeout):
            source = self.stored_source(book.source_digest, book.architecture)
            current = self._orders.book(lifecycle_id)
            joined = current.orders[1:] if current is not None else ()
            if source is not None:
                self._bind_joined(joined, source, lifecycle_id)
            elif joined:
                log.warning(
                    "%d orders joined %s, which published nothing the store can answer from",
                    len(joined),
                    lifecycle_id,
                    extra={"lifecycle_id": lifecycle_id},
                )
            self._orders.close(lifecycle_id)

    def _bind_joined(
        self, orders: Sequence[Order], source: SourceRecord, lifecycle_id: str
    ) -> None:
        for order in orders:
            try:
                self.bind_stored(order.request, source, replace=order.replace)
            except (ApplicationError, DomainError) as error:
                log.warning(
                    "%s was not bound to the import it joined: %s",
                    order.request.name,
                    error,
                    extra={"lifecycle_id": lifecycle_id},
                )

    def _publish(self, lifecycle_id: str, *, replace: bool) -> Publication:
        plan = self._verify.plan(lifecycle_id)
        with self._alias_held(plan.request.name):
            existing = self._records.alias(plan.request.name)
            for entry in existing.entries if existing is not None else ():
                if entry.lifecycle_id == lifecycle_id:
                    return Publication(entry, changed=False)
            self._require_owner(plan.request, existing)
            if plan.architecture is not None:  # refused before the image is hashed
                check_binding(
                    existing,
                    name=plan.request.name,
                    role=plan.request.role,
                    architecture=plan.architecture,
                    replace=replace,
                )
            status = self._verify.require_success(lifecycle_id)
            record, digest, sources = self._verify(plan, status)
            document = next_document(existing, record, replace, plan.request.ownership)
            event = self._event(existing, record, plan, status, plan.request)
            self._checkpoint("verified")
            self._commit(plan, document, record, digest, sources, event)
            if self._history is not None and event is not None:
                self._history.append(event)
            self._bind_links(existing, document)
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

    def plan(self, lifecycle_id: str) -> Plan:
        """The submitted plan of ``lifecycle_id``, verified."""
        return self._verify.plan(lifecycle_id)

    def first_order_replace(self, lifecycle_id: str) -> bool:
        """Whether the lifecycle's own request may replace its alias, as its order book says
        (False without one)."""
        book = self._orders.book(lifecycle_id) if self._orders is not None else None
        return book.first.replace if book is not None else False

    def alias(self, name: str) -> AliasDocument | None:
        """The alias ``name`` as published now, or None."""
        return self._records.alias(name)

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
            record = alias_record(
                request,
                path=path,
                digest=digest,
                facts=facts,
                source=request.source,
                source_digest=source.source_digest,
                chain=source.chain,
                architecture=source.architecture,
                signed_by=source.signed_by,
                clock=self._clock,
            )
            existing = self._records.alias(request.name)
            current = existing.entry(record.architecture) if existing is not None else None
            if current is not None and same_binding(current, record):
                return Publication(current, changed=False)
            self._require_owner(request, existing)
            document = next_document(existing, record, replace, request.ownership)
            try:
                self._records.open_artifact(path, document)
            except WorkspaceError as error:
                raise VerificationFailed(field=error.field, rule=error.rule) from None
            self._records.write_alias(document)
            event = self._event(existing, record, None, None, request)
            if self._history is not None and event is not None:
                self._history.append(event)
            self._bind_links(existing, document)
            log.info(
                "%s answered from the store: %s (sha256 %s), no job",
                request.name,
                path,
                digest.sha256,
                extra={"lifecycle_id": facts.lifecycle_id},
            )
            return Publication(record, changed=True)

    def _bind_links(self, existing: AliasDocument | None, document: AliasDocument) -> None:
        """Swap the alias's stable paths to the artifacts it is bound to now (the publication
        stands either way: a link left behind is one ``gc`` repairs)."""
        try:
            self._links.bind(existing, document, now=self._clock.now())
        except (WorkspaceError, DomainError) as error:
            log.warning(
                "the stable path of %s is left as it was (gc repairs it): %s: %s",
                document.name,
                error.field,
                error.rule,
            )

    def _require_owner(self, request: Request, existing: AliasDocument | None) -> None:
        """Only the alias's owner, its group and the admins may change a published alias
        (``domain.access``); the rule is the requester's, whoever publishes for them."""
        if existing is None or self._permissions is None:
            return
        self._permissions.of(request.requester).require_owner(
            existing.ownership, field="name", what=f"changing alias {request.name}"
        )

    def _event(
        self,
        existing: AliasDocument | None,
        record: AliasRecord,
        plan: Plan | None,
        status: LifecycleStatus | None,
        request: Request,
    ) -> HistoryEvent | None:
        """The history event of binding ``record`` (``published`` or ``replaced``) for
        ``request``, recorded still under the alias's lock: with the job, how long it ran
        (``status``) and the latency of ``plan``'s publication, none for an answer from the
        store, naming the request's requester (a request through the gateway) when given, and
        the group of a private one. None without a history, or when it cannot be built
        (``RecordHistory.event`` warns)."""
        if self._history is None:
            return None
        kind, previous = binding_event(existing, record)
        fields = entry_fields(record) | privacy_fields(request.ownership)
        fields["previous_artifact"] = previous
        if plan is not None:
            try:
                submission = read_submission(self._store, plan.lifecycle_id)
            except (ApplicationError, DomainError):
                submission = None
            fields["job_id"] = submission.job_id if submission is not None else None
            fields["publish_latency_seconds"] = latency_seconds(plan, record)
            fields["job_seconds"] = status.job_seconds if status is not None else None
        return self._history.event(kind, requester=request.requester, **fields)

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

    def _commit(
        self,
        plan: Plan,
        document: AliasDocument,
        record: AliasRecord,
        digest: FileDigest,
        sources: tuple[SourceRecord, ...],
        event: HistoryEvent | None,
    ) -> None:
        candidate = plan.paths.candidate
        if candidate is not None:
            kind = self._store.entry_kind(record.path)
            if kind is not None:
                self._refuse_unless_identical(record)
                self._reuse_artifact(record, document)
                candidate = None  # identical bytes are in the store already: reuse them
        marker = PublicationMarker(
            schema_version=MARKER_SCHEMA_VERSION if event is None else EVENT_MARKER_SCHEMA_VERSION,
            candidate=candidate,
            alias=record,
            document=document,
            sources=sources,
            event=event,
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
                self._records.install_artifact(candidate, record.path, digest, document)
            except AlreadyExists:
                self._refuse_unless_identical(record)  # a concurrent publisher of equal bytes
                self._reuse_artifact(record, document)
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

    def _reuse_artifact(self, record: AliasRecord, document: AliasDocument) -> None:
        try:
            self._records.open_artifact(record.path, document)
        except WorkspaceError as error:
            self._drop_marker(record.name)
            raise VerificationFailed(field=error.field, rule=error.rule) from None

    def _drop_marker(self, name: str) -> None:
        if self._store.entry_kind(self._layout.marker(name)) is not None:
            self._store.remove_file(self._layout.marker(name))
