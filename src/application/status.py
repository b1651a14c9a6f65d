"""A lifecycle's status as the use cases pass it around, and what it says about the job."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from slurm_image.domain.job import JobState
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.resolution import utc_time_text

if TYPE_CHECKING:
    from slurm_image.domain.progress import JobProgress


@dataclass(frozen=True)
class LifecycleStatus:
    """One lifecycle: its own state (``LifecycleState``) or, once submitted, its job's, when
    the job started and ended (the scheduler's times: ``domain.job.JobStatus``), and the job's
    own record of how far it got (``progress``; ``progress_error`` when it could not be
    read)."""

    lifecycle_id: str
    job_id: str | None
    state: LifecycleState | JobState
    reason: str | None = None
    exit_code: int | None = None
    progress: JobProgress | None = None
    progress_error: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None

    @property
    def job_seconds(self) -> float | None:
        """How long the job ran, by the scheduler's times; None until it ended with both."""
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()

    def as_dict(self) -> dict[str, object]:
        progress = self.progress
        return {
            "lifecycle_id": self.lifecycle_id,
            "job_id": self.job_id,
            "state": self.state,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "started_at": utc_text(self.started_at),
            "ended_at": utc_text(self.ended_at),
            "job_seconds": self.job_seconds,
            "phase": progress.phase if progress else None,
            "progress": progress.model_dump(exclude_none=True) if progress else None,
            "progress_error": self.progress_error,
        }


def utc_text(moment: datetime | None) -> str | None:
    """``moment`` in the one form every recorded time takes (``utc_time_text``), or None."""
    return None if moment is None else utc_time_text(moment)


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
