"""Observe lifecycles: their recorded submission and the scheduler's state, in one call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from slurm_image.application.errors import SubmitterMismatch, VerificationFailed
from slurm_image.application.progress import ReadProgress
from slurm_image.application.records import read_submission, submission_claimed
from slurm_image.application.status import LifecycleStatus
from slurm_image.domain import paths
from slurm_image.domain.attempt import SubmissionRecord
from slurm_image.domain.job import JobState
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.script import EXIT_CODES
from slurm_image.ports.submitter import BatchSubmitter
from slurm_image.ports.workspace import Workspace

if TYPE_CHECKING:
    from slurm_image.application.lifecycle_rights import LifecycleRights


def require_same_submitter(record: SubmissionRecord, submitter: BatchSubmitter) -> None:
    """Job ids mean something only to the scheduler front end that issued them."""
    if record.submitter != submitter.name:
        raise SubmitterMismatch(
            field="submitter.kind",
            rule=f"{record.lifecycle_id} was submitted through {record.submitter!r}, "
            f"but the profile selects {submitter.name!r}",
        )


def explain_exit(exit_code: int | None) -> str | None:
    """The meaning of one of the batch job's own exit codes (README), if it is one."""
    return None if exit_code is None else EXIT_CODES.get(exit_code)


class Observe:
    """State of many lifecycles with ONE scheduler call for all their jobs; with ``rights``,
    a lifecycle the reader may not know of is unknown, as an id no attempt has."""

    def __init__(
        self,
        workspace: Workspace,
        submitter: BatchSubmitter,
        *,
        rights: LifecycleRights | None = None,
    ) -> None:
        self._workspace = workspace
        self._submitter = submitter
        self._progress = ReadProgress(workspace)
        self._rights = rights

    def __call__(self, lifecycle_ids: Sequence[str]) -> list[LifecycleStatus]:
        records: dict[str, SubmissionRecord | None] = {}
        for lifecycle_id in lifecycle_ids:
            paths.name(lifecycle_id, "lifecycle_id")
            if self._rights is not None:
                self._rights.require_seen(lifecycle_id)
            record = read_submission(self._workspace, lifecycle_id)
            if record is not None:
                require_same_submitter(record, self._submitter)
            records[lifecycle_id] = record
        job_ids = sorted({r.job_id for r in records.values() if r is not None}, key=int)
        states = self._submitter.states(job_ids) if job_ids else {}
        result = []
        for lifecycle_id, record in records.items():
            if record is None:
                claimed = submission_claimed(self._workspace, lifecycle_id)
                state = LifecycleState.SUBMISSION_UNKNOWN if claimed else LifecycleState.STAGED
                result.append(LifecycleStatus(lifecycle_id, None, state))
                continue
            status = states.get(record.job_id)
            if status is None:
                observed = LifecycleStatus(
                    lifecycle_id,
                    record.job_id,
                    JobState.LOST,
                    "the scheduler no longer knows the job",
                )
            else:
                reason = status.reason
                meaning = explain_exit(status.exit_code) if status.state.is_terminal else None
                if meaning:
                    reason = f"{reason}: {meaning}" if reason else meaning
                observed = LifecycleStatus(
                    lifecycle_id,
                    record.job_id,
                    status.state,
                    reason,
                    status.exit_code,
                    started_at=status.started_at,
                    ended_at=status.ended_at,
                )
            result.append(self.with_progress(observed))
        return result

    def with_progress(self, status: LifecycleStatus) -> LifecycleStatus:
        """``status`` with its job's progress record as it reads now."""
        try:
            return replace(status, progress=self._progress(status.lifecycle_id))
        except VerificationFailed as error:
            return replace(status, progress=None, progress_error=f"{error.field}: {error.rule}")
