"""Where a lifecycle stands, in the words every command prints (standard library only: the
command line names these states without loading the model library)."""

from __future__ import annotations

import enum


class LifecycleState(enum.StrEnum):
    """The states of a lifecycle that are not a job's.

    Between ``SUBMITTED`` and ``PUBLISHED`` a lifecycle reports its job's state as the scheduler
    gives it (``domain.job.JobState``: ``PENDING``, ``RUNNING``, ``COMPLETED``, ..., ``LOST``).
    """

    STAGED = "STAGED"
    """The attempt is staged and was never submitted."""
    SUBMISSION_UNKNOWN = "SUBMISSION_UNKNOWN"
    """A submit started and recorded no job: it may or may not have reached the scheduler."""
    SUBMITTED = "SUBMITTED"
    """The job was handed to the scheduler (an import or inspect that does not wait)."""
    PUBLISHED = "PUBLISHED"
    """The result is bound to its alias in the store."""
