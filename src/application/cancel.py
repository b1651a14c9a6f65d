"""Cancel a lifecycle's job, and record it in the store's history (``cancelled``).

Only the lifecycle's requester, its group and the admins may cancel it (``domain.access``); to
a requester who may not know of it, it is unknown (``application.lifecycle_rights``). A
lifecycle that other requests joined (``domain.orders``) keeps its job for them: cancelling
withdraws the canceller's own orders, and the job is cancelled only when no other order is left.
"""

from __future__ import annotations

from slurm_image.application.coalesce import Coalesce
from slurm_image.application.errors import NotSubmitted
from slurm_image.application.history import RecordHistory, job_end_fields
from slurm_image.application.lifecycle_rights import LifecycleRights
from slurm_image.application.observe import Observe, require_same_submitter
from slurm_image.application.records import read_submission
from slurm_image.application.status import LifecycleStatus
from slurm_image.domain import paths
from slurm_image.domain.access import Access
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
        access: Access | None = None,
        coalesce: Coalesce | None = None,
        rights: LifecycleRights | None = None,
    ) -> None:
        self._workspace = workspace
        self._submitter = submitter
        self._history = history
        self._access = access
        self._coalesce = coalesce
        self._rights = rights

    def __call__(self, lifecycle_id: str) -> LifecycleStatus:
        paths.name(lifecycle_id, "lifecycle_id")
        if self._rights is not None:
            self._rights.require_seen(lifecycle_id)
        record = read_submission(self._workspace, lifecycle_id)
        if record is None:
            raise NotSubmitted(
                field="lifecycle_id", rule=f"{lifecycle_id} has no submitted job to cancel"
            )
        require_same_submitter(record, self._submitter)
        if self._withdrawn(lifecycle_id):
            return Observe(self._workspace, self._submitter)([lifecycle_id])[0]
        self._submitter.cancel(record.job_id)
        status = Observe(self._workspace, self._submitter)([lifecycle_id])[0]
        if self._history is not None:
            self._history.job_end(
                self._workspace, lifecycle_id, "cancelled", **job_end_fields(status)
            )
        return status

    def _withdrawn(self, lifecycle_id: str) -> bool:
        """Check the canceller's rights; True when the canceller only joined the lifecycle
        (``domain.orders``): their orders are withdrawn and the job stays. The lifecycle's own
        requester, its group and the admins cancel the job, for every order."""
        if self._access is None:
            return False
        if self._coalesce is not None and self._coalesce.withdraw(lifecycle_id, self._access):
            return True
        rights = self._rights or LifecycleRights(self._workspace, self._access)
        rights.require_owner(lifecycle_id, what=f"cancelling {lifecycle_id}")
        return False
