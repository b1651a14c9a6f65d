"""Read what an attempt recorded about itself (``submission.json``), verified."""

from __future__ import annotations

from slurm_image.application.errors import UnknownLifecycle, VerificationFailed
from slurm_image.domain import paths
from slurm_image.domain.attempt import RECORD_MAX_BYTES, SubmissionRecord, load_submission_record
from slurm_image.domain.errors import DomainError
from slurm_image.domain.identity import FileIdentity
from slurm_image.ports.workspace import NotFound, Workspace, WorkspaceError


def unknown_lifecycle(workspace: Workspace, lifecycle_id: str) -> UnknownLifecycle:
    """What every use case answers for an id no attempt has, and for one the requester may
    not know of (``application.lifecycle_rights``): the same words, so that neither tells."""
    return UnknownLifecycle(
        field="lifecycle_id", rule=f"no staged attempt {lifecycle_id} in {workspace.root}"
    )


def attempt_directory(
    workspace: Workspace, lifecycle_id: str
) -> tuple[paths.AttemptLayout, FileIdentity]:
    """The attempt's layout and its directory's identity as this host sees it.

    Raises ``UnknownLifecycle`` when no such attempt exists and ``VerificationFailed`` when the
    way to it is unsafe (a symlink, a foreign owner, not a directory).
    """
    layout = paths.AttemptLayout(workspace.root, lifecycle_id)
    try:
        return layout, workspace.directory_identity(layout.job_dir)
    except NotFound:
        raise unknown_lifecycle(workspace, lifecycle_id) from None
    except WorkspaceError as error:
        raise VerificationFailed(field=error.field, rule=error.rule) from None


def read_submission(workspace: Workspace, lifecycle_id: str) -> SubmissionRecord | None:
    """The attempt's submission record, or None when it was staged but never submitted.

    Raises ``UnknownLifecycle`` when no such attempt exists and ``VerificationFailed`` when the
    record is unreadable, not a regular file, or names another lifecycle.
    """
    layout, identity = attempt_directory(workspace, lifecycle_id)
    try:
        if not workspace.exists(layout.submission_record):
            return None
        data = workspace.read_verified(
            layout.submission_record, max_bytes=RECORD_MAX_BYTES, within=identity
        ).data
    except WorkspaceError as error:
        raise VerificationFailed(field=error.field, rule=error.rule) from None
    try:
        record = load_submission_record(data)
    except DomainError as error:
        raise VerificationFailed(
            field=layout.submission_record, rule=f"{error.field}: {error.rule}"
        ) from None
    if record.lifecycle_id != lifecycle_id:
        raise VerificationFailed(field=layout.submission_record, rule="names another lifecycle id")
    return record


def submission_claimed(workspace: Workspace, lifecycle_id: str) -> bool:
    """Whether a submit of this attempt started (its outcome may be unknown)."""
    layout = paths.AttemptLayout(workspace.root, lifecycle_id)
    try:
        return workspace.exists(layout.submission_claim)
    except WorkspaceError as error:
        raise VerificationFailed(field=error.field, rule=error.rule) from None
