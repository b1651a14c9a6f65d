"""A lifecycle's status as the use cases pass it around, and what it says about the job."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from slurm_image.domain.job import JobState
from slurm_image.domain.lifecycle_state import LifecycleState

if TYPE_CHECKING:
    from slurm_image.domain.progress import JobProgress


@dataclass(frozen=True)
class LifecycleStatus:
    """One lifecycle: its own state (``LifecycleState``) or, once submitted, its job's, and
    the job's own record of how far it got (``progress``; ``progress_error`` when it could
    not be read)."""

    lifecycle_id: str
    job_id: str | None
    state: LifecycleState | JobState
    reason: str | None = None
    exit_code: int | None = None
    progress: JobProgress | None = None
    progress_error: str | None = None

    def as_dict(self) -> dict[str, object]:
        progress = self.progress
        return {
            "lifecycle_id": self.lifecycle_id,
            "job_id": self.job_id,
            "state": self.state,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "phase": progress.phase if progress else None,
            "progress": progress.model_dump(exclude_none=True) if progress else None,
            "progress_error": self.progress_error,
        }


class Statuses(Protocol):
    """The status of each lifecycle, with one scheduler call for all (``Observe`` is one)."""

    def __call__(self, lifecycle_ids: Sequence[str]) -> list[LifecycleStatus]: ...


def is_final(status: LifecycleStatus) -> bool:
    """Nothing more will happen: a terminal job state, or a submission in doubt (there may be
    no job to wait for)."""
    if status.state is LifecycleState.SUBMISSION_UNKNOWN:
        return True
    return isinstance(status.state, JobState) and status.state.is_terminal


def succeeded(status: LifecycleStatus) -> bool:
    return status.state is JobState.COMPLETED and status.exit_code in (0, None)
