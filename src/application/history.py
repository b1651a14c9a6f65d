"""The store's history as the use cases write it (docs/design.md, "History").

``RecordHistory`` appends one event (``domain.history.HistoryEvent``) for each change of what
users get: who (``Actor``, given by the entry points), when (the ``Clock``), what. It is called
after the change succeeded, inside the locks that made it, so the events of one alias are in
the order of its changes. A change is never undone, nor reported as failed, because its event
could not be appended: the failure is logged as a warning naming the history file (or lock)
and the event that is missing, and the command's own result stands.

``NoticeJobEnds`` records a job that ended without a result to publish (``job_failed``, or
``cancelled`` when the scheduler says CANCELLED: someone's ``scancel``) the first time any
command observes it (``status``, ``wait``, ``publish``, ``import --wait``), exactly once per
lifecycle: the attempt's marker ``history.recorded`` is created exclusively first, and removed
again when the append fails, so that a later observation tries again. A crash between the two
leaves the event absent, never twice. ``Cancel`` takes the same marker, so a job it cancelled is
recorded once. Only who may write the attempt records it: a reader of the store (the operating
system refuses the marker) observes without a word about the history.

``RecordHistory.refused`` records a refusal (``refused``): the rule, the exit code, what was
asked for; a front end calls it for its own refusals. ``RecordRefusals`` records the product's
(an error whose class names a ``refusal``: a source outside the policy, a signature refused, a
registry's answer that lied), for the entry points, which know the exit code. Every event is
recorded from a store's first request on: the ``History`` lays out what it needs in a store
where nothing was staged yet.

``application.read_history.ReadHistory`` reads it back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from slurm_image.application.attempt_plan import attempt_plan
from slurm_image.application.errors import ApplicationError
from slurm_image.application.records import attempt_directory, read_submission
from slurm_image.application.status import LifecycleStatus, is_final, succeeded
from slurm_image.domain.access import Ownership
from slurm_image.domain.errors import DomainError, SlurmImageError
from slurm_image.domain.history import EventKind, HistoryEvent, reason_text
from slurm_image.domain.job import JobState
from slurm_image.domain.plan import Plan
from slurm_image.domain.publication import AliasDocument, AliasRecord
from slurm_image.domain.requester import Requester
from slurm_image.ports.clock import Clock
from slurm_image.ports.history import History
from slurm_image.ports.workspace import AccessDenied, AlreadyExists, Workspace, WorkspaceError

if TYPE_CHECKING:
    from slurm_image.application.observe import Observe

log = logging.getLogger(__name__)

JOB_END_MARKER = "history.recorded"
"""In the attempt directory: the end of its job is in the history (``job_failed``,
``cancelled``)."""


@dataclass(frozen=True)
class Actor:
    """Who runs the command: the account's name and uid, and the host it runs on."""

    user: str
    uid: int
    host: str


def operation_word(operation: str) -> str:
    """``import`` or ``inspect``, as the history names a plan's or a record's operation."""
    return "import" if operation == "import_oci" else "inspect"


def privacy_fields(ownership: Ownership) -> dict[str, Any]:
    """What an event of something private records: the group it is private to
    (``ReadHistory`` leaves the event out for whoever may not see it)."""
    return {"group": ownership.group, "private": True} if ownership.private else {}


def plan_fields(plan: Plan) -> dict[str, Any]:
    """What a plan tells every event of its lifecycle."""
    return {
        "lifecycle_id": plan.lifecycle_id,
        "alias": plan.request.name,
        "architecture": plan.architecture,
        "operation": operation_word(plan.operation),
        "role": plan.request.role,
        "source_digest": plan.source_digest,
    } | privacy_fields(plan.request.ownership)


def entry_fields(entry: AliasRecord) -> dict[str, Any]:
    """What an alias entry tells the event that binds or unbinds it."""
    return {
        "lifecycle_id": entry.lifecycle_id,
        "alias": entry.name,
        "architecture": entry.architecture,
        "operation": operation_word(entry.operation),
        "role": entry.role,
        "source_digest": entry.source_digest,
        "artifact": entry.sqsh_sha256,
    }


def binding_event(
    existing: AliasDocument | None, record: AliasRecord
) -> tuple[EventKind, str | None]:
    """``published`` with no previous artifact when ``record`` binds an architecture the alias
    did not have (or a new alias); else ``replaced`` with the artifact of the entry it displaced:
    the architecture's own, or the one entry of an alias from before architectures (None when
    a new role displaced only other architectures' entries)."""
    if existing is None:
        return "published", None
    if existing.legacy:
        return "replaced", existing.entries[0].sqsh_sha256
    displaced = existing.entry(record.architecture)
    if existing.role != record.role:
        return "replaced", displaced.sqsh_sha256 if displaced is not None else None
    if displaced is None:
        return "published", None
    return "replaced", displaced.sqsh_sha256


def latency_seconds(plan: Plan, record: AliasRecord) -> float | None:
    """From the plan's creation to the publication of ``record``; None when a clock moved
    back between them."""
    try:
        published = datetime.fromisoformat(record.published_at)
        seconds = (published - datetime.fromisoformat(plan.created_at)).total_seconds()
    except (ValueError, TypeError):
        return None
    return seconds if seconds >= 0 else None


def attempt_fields(
    workspace: Workspace, lifecycle_id: str, plan: Plan | None = None
) -> dict[str, Any]:
    """What the attempt's own records (plan, submission) say about it, as far as they can be
    read: the lifecycle id at least. An event is still recorded when they cannot."""
    fields: dict[str, Any] = {"lifecycle_id": lifecycle_id}
    plan = plan if plan is not None else attempt_plan(workspace, lifecycle_id)
    if plan is not None:
        fields |= plan_fields(plan)
    try:
        submission = read_submission(workspace, lifecycle_id)
    except (DomainError, ApplicationError):
        submission = None
    if submission is not None:
        fields["job_id"] = submission.job_id
    return fields


class RecordHistory:
    """Append one event to the store's history; a failure is a warning, never an error (see
    the module docstring). ``failures`` keeps what could not be recorded, in order."""

    def __init__(self, history: History, clock: Clock, actor: Actor) -> None:
        self._history = history
        self._clock = clock
        self._actor = actor
        self.failures: list[SlurmImageError | ValueError] = []

    def event(
        self, event: EventKind, *, requester: Requester | None = None, **fields: Any
    ) -> HistoryEvent | None:
        """The event as this actor would record it now, not appended (a publication's marker
        carries it, so that a recovery records it as its publisher); None when a field breaks
        its rule (warned about). ``requester``: the account the change was made for (a request
        through the gateway), which the event names instead of the account that made it."""
        user, uid = (
            (self._actor.user, self._actor.uid)
            if requester is None
            else (requester.user, requester.uid)
        )
        try:
            return HistoryEvent(
                event=event,
                time=self._clock.now(),
                user=user,
                uid=uid,
                host=self._actor.host,
                **fields,
            )
        except ValueError as error:
            self._missed(event, fields, error)
            return None

    def __call__(
        self, event: EventKind, *, requester: Requester | None = None, **fields: Any
    ) -> HistoryEvent | None:
        """The event as appended, or None when it could not be (warned about); ``requester``
        as for ``event``."""
        built = self.event(event, requester=requester, **fields)
        return None if built is None else self.append(built)

    def append(self, event: HistoryEvent) -> HistoryEvent | None:
        """Append ``event`` as built (by this process, or by the crashed one a recovery
        finishes for), timed now; None when it could not be (warned about)."""
        timed = event.model_copy(update={"time": self._clock.now()})
        try:
            self._history.append(timed)
        except (SlurmImageError, ValueError) as error:
            self._missed(event.event, event.model_dump(), error)
            return None
        return timed

    def refused(
        self,
        rule: str,
        exit_code: int,
        *,
        reason: str,
        source: str | None = None,
        alias: str | None = None,
        requester: Requester | None = None,
        **fields: Any,
    ) -> HistoryEvent | None:
        """Record a refusal of what someone asked for: ``rule`` (``domain.history.REFUSAL_RULE``:
        ``source_not_allowed``, ``signature_missing``, a front end's ``unauthenticated``...),
        the ``exit_code`` the command (or request) ended with, and ``reason`` as it was told;
        ``source`` and ``alias`` as asked for (a source is cut like the reason). The event
        names ``requester`` when given (a front end's authenticated requester), else the
        actor."""
        return self(
            "refused",
            requester=requester,
            rule=rule,
            exit_code=exit_code,
            reason=reason_text(reason),
            source=None if source is None else reason_text(source),
            alias=alias,
            **fields,
        )

    def _missed(
        self, event: str, fields: dict[str, Any], error: SlurmImageError | ValueError
    ) -> None:
        self.failures.append(error)
        what = fields.get("alias") or fields.get("lifecycle_id") or fields.get("artifact")
        log.warning(
            "the store's history misses this %s event%s: %s",
            event,
            f" ({what})" if what else "",
            error,
            extra={"lifecycle_id": fields.get("lifecycle_id") or "-"},
        )

    def job_end(
        self,
        workspace: Workspace,
        lifecycle_id: str,
        event: EventKind,
        *,
        requester: Requester | None = None,
        **fields: Any,
    ) -> HistoryEvent | None:
        """Record the end of the lifecycle's job once (``JOB_END_MARKER``); None when it was
        recorded before, or cannot be now."""
        try:
            layout, identity = attempt_directory(workspace, lifecycle_id)
            marker = layout.in_job(JOB_END_MARKER)
            workspace.write_new(marker, b"", mode=0o600, within=identity)
        except AlreadyExists:
            return None
        except AccessDenied as error:
            # a reader of the store, or a store mounted read-only here: the writer records it
            log.info(
                "the %s event of %s is left to whoever may write the store: %s",
                event,
                lifecycle_id,
                error,
                extra={"lifecycle_id": lifecycle_id},
            )
            return None
        except (WorkspaceError, ApplicationError) as error:
            log.warning(
                "the store's history misses the %s event of %s: %s",
                event,
                lifecycle_id,
                error,
                extra={"lifecycle_id": lifecycle_id},
            )
            return None
        plan = attempt_plan(workspace, lifecycle_id)
        if requester is None and plan is not None:
            requester = plan.request.requester  # a job run for a request through the gateway
        recorded = self(
            event, requester=requester, **(attempt_fields(workspace, lifecycle_id, plan) | fields)
        )
        if recorded is None:
            try:
                workspace.remove_file(marker, within=identity)
            except WorkspaceError as error:
                log.warning("%s stays: %s", marker, error, extra={"lifecycle_id": lifecycle_id})
        return recorded


class RecordRefusals:
    """Record ``error`` as a refusal when its class names one (``SlurmImageError.refusal``),
    with the ``exit_code`` and ``reason`` the command ends with; nothing for any other error."""

    def __init__(self, record: RecordHistory) -> None:
        self._record = record

    def __call__(
        self,
        error: BaseException,
        exit_code: int,
        *,
        reason: str,
        source: str | None,
        alias: str | None,
        requester: Requester | None = None,
    ) -> HistoryEvent | None:
        """The refusal as recorded, naming ``requester`` when given (a request through the
        gateway); None when ``error`` is no refusal or it could not be recorded (warned
        about)."""
        rule = error.refusal if isinstance(error, SlurmImageError) else None
        if rule is None:
            return None
        return self._record.refused(
            rule, exit_code, reason=reason, source=source, alias=alias, requester=requester
        )


def ended_without_result(status: LifecycleStatus) -> bool:
    """The job ended (the scheduler's terminal state, or lost) and left nothing to publish."""
    return isinstance(status.state, JobState) and is_final(status) and not succeeded(status)


def job_end_event(status: LifecycleStatus) -> EventKind:
    """How the history names a job that ended without a result: ``cancelled`` when the
    scheduler says it was (whoever cancelled it: ``cancel``, or ``scancel`` past the product),
    else ``job_failed``."""
    return "cancelled" if status.state is JobState.CANCELLED else "job_failed"


def job_end_fields(status: LifecycleStatus) -> dict[str, Any]:
    """What an observed end of a job tells its event: job, exit code, state and run time."""
    return {
        "job_id": status.job_id,
        "exit_code": status.exit_code,
        "state": str(status.state),
        "job_seconds": status.job_seconds,
    }


class NoticeJobEnds:
    """``Observe``, recording each job that ended without a result (``job_failed``, or
    ``cancelled``) the first time it is observed (see the module docstring)."""

    def __init__(self, observe: Observe, workspace: Workspace, record: RecordHistory) -> None:
        self._observe = observe
        self._workspace = workspace
        self._record = record

    def __call__(self, lifecycle_ids: Sequence[str]) -> list[LifecycleStatus]:
        statuses = self._observe(lifecycle_ids)
        for status in statuses:
            if ended_without_result(status):
                self._record.job_end(
                    self._workspace,
                    status.lifecycle_id,
                    job_end_event(status),
                    **job_end_fields(status),
                )
        return statuses

    def with_progress(self, status: LifecycleStatus) -> LifecycleStatus:
        return self._observe.with_progress(status)
