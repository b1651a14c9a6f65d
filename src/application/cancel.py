"""Cancel a lifecycle's job, and record it in the store's history (``cancelled``)."""

from __future__ import annotations

from slurm_image.application.errors import NotSubmitted
from slurm_image.application.history import RecordHistory, job_end_fields
from slurm_image.application.observe import Observe, require_same_submitter
from slurm_image.application.records import read_submission
from slurm_image.application.status import LifecycleStatus
from slurm_image.domain import paths
from slurm_image.ports.submitter import BatchSubmitter
from slurm_image.ports.workspace import Workspace


class Cancel:
    """Cancel the job of a submitted lifecycle and report the state the scheduler then gives."""

    def __init__(
        self,
        workspace: Workspace,
        submitter: BatchSubmitter,
        *,
        history: RecordHistory | None = None,
    ) -> None:
        self._workspace = workspace
        self._submitter = submitter
        self._history = history

    def __call__(self, lifecycle_id: str) -> LifecycleStatus:
        paths.name(lifecycle_id, "lifecycle_id")
        record = read_submission(self._workspace, lifecycle_id)
        if record is None:
            raise NotSubmitted(
                field="lifecycle_id", rule=f"{lifecycle_id} has no submitted job to cancel"
            )
        require_same_submitter(record, self._submitter)
        self._submitter.cancel(record.job_id)
        status = Observe(self._workspace, self._submitter)([lifecycle_id])[0]
        if self._history is not None:
            self._history.job_end(
                self._workspace, lifecycle_id, "cancelled", **job_end_fields(status)
            )
        return status
