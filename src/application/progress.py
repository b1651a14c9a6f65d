"""Read a job's progress record (``AttemptLayout.progress_record``): cheap enough for ``wait``
to read every second between its scheduler calls."""

from __future__ import annotations

from slurm_image.application.errors import VerificationFailed
from slurm_image.domain import paths
from slurm_image.domain.errors import DomainError
from slurm_image.domain.progress import PROGRESS_MAX_BYTES, JobProgress, load_progress
from slurm_image.ports.workspace import NotFound, TooLarge, Workspace, WorkspaceError


class ReadProgress:
    """The job's progress, or None while it wrote none (queued, or ended before step 1b).

    Raises ``VerificationFailed`` naming the record and the field when it is malformed, too
    large or not a regular file. What it says is never a reason to publish."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace

    def __call__(self, lifecycle_id: str) -> JobProgress | None:
        path = paths.AttemptLayout(self._workspace.root, lifecycle_id).progress_record
        try:
            data = self._workspace.read_verified(path, max_bytes=PROGRESS_MAX_BYTES).data
        except NotFound:
            return None
        except TooLarge:
            raise VerificationFailed(
                field=f"{path}: progress", rule=f"must be at most {PROGRESS_MAX_BYTES} bytes"
            ) from None
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        try:
            return load_progress(data)
        except DomainError as error:
            raise VerificationFailed(field=f"{path}: {error.field}", rule=error.rule) from None
