"""The BatchSubmitter port: hand verified script bytes to a scheduler, observe and cancel jobs.

Error contract (every adapter):
- ``SchedulerUnavailable``: transient trouble (controller unreachable, timeout, HTTP 502/503/504,
  connection error) that persisted through the adapter's bounded retries.
- ``SchedulerRejected``: the scheduler refused the request for good (bad partition, limits,
  invalid request); never retried. ``field`` names the offending value where known.
- ``SchedulerAuthError``: credentials refused (bad or expired token, no auth).
- ``UnknownJob``: ``cancel`` of a job id the scheduler does not know.
- ``SubmissionUnconfirmed``: the scheduler accepted a submission (sbatch exited 0, slurmrestd
  answered success) but its answer names no usable job id. A job may exist: it is never a
  refusal, never retried, and only a look-up of the marker may settle it.
Adapters never raise anything else for scheduler trouble.

``ping`` and ``partition`` (read-only, for ``doctor``) raise the same errors: unreachable or a
controller that answers DOWN is ``SchedulerUnavailable`` after the retries, refused credentials
``SchedulerAuthError``, a client that cannot be run or an answer that cannot be read
``SchedulerRejected``. An unknown partition is not an error: ``partition`` returns None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from slurm_image.domain.errors import SlurmImageError

if TYPE_CHECKING:  # the errors alone load no model: every failing command maps them to a code
    from slurm_image.domain.job import JobSpec, JobStatus
    from slurm_image.domain.partition import PartitionLimits


class SubmitterError(SlurmImageError):
    """Base of the submitter errors; ``field`` (``submitter`` when no one setting is at fault)
    and ``rule`` say what went wrong."""


class SchedulerUnavailable(SubmitterError):
    """Transient failure that outlived the retries."""


class SchedulerRejected(SubmitterError):
    """Permanent refusal by the scheduler."""


class SchedulerAuthError(SubmitterError):
    """Authentication to the scheduler failed."""


class UnknownJob(SubmitterError):
    """The scheduler does not know the job id."""


class SubmissionUnconfirmed(SubmitterError):
    """The scheduler accepted the submission, but its answer does not name a job we can use
    (e.g. a cluster-qualified id). A job may be queued: look for the marker before any new
    submission, never resubmit blindly."""


@runtime_checkable
class BatchSubmitter(Protocol):
    """A scheduler front end.

    ``submit`` is exactly-once per ``spec.comment`` marker: after an ambiguous failure the
    adapter looks for a job carrying the marker before submitting again, and returns that job's
    id if it finds one.
    """

    name: str

    def submit(self, script: bytes, spec: JobSpec) -> str:
        """Submit the verified ``script`` bytes with ``spec``; return the job id (decimal)."""
        ...

    def states(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        """States of many jobs in one scheduler call. Ids the scheduler does not know are absent."""
        ...

    def cancel(self, job_id: str) -> None:
        """Cancel a job. Raises ``UnknownJob`` when the scheduler does not know it."""
        ...

    def find_by_marker(self, marker: str) -> str | None:
        """The id of a job whose comment equals ``marker``, or None."""
        ...

    def ping(self) -> str:
        """Reach the scheduler's controller once (with the adapter's retries) and say who
        answered, e.g. ``slurmctld vm (primary) UP``. Raises as the module docstring says."""
        ...

    def partition(self, name: str) -> PartitionLimits | None:
        """The limits of partition ``name`` and the size of its largest node, or None when the
        scheduler has no such partition."""
        ...


@runtime_checkable
class Preflight(Protocol):
    """What a submitter may offer besides the port (the kit's ``slurm_image.submitters.Submitter``
    does): a check, before anything is created, that it can work here at all, e.g. that its
    client exists. Sends nothing to the scheduler; raises ``SchedulerRejected`` when it cannot."""

    def preflight(self) -> None: ...
