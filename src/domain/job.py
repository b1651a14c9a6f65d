"""What a batch job asks of the scheduler, and what the scheduler says about it.

``JobSpec`` carries every value of the script's ``#SBATCH`` lines so that a submitter which
ignores them (slurmrestd) can send the same values in its own job description.
"""

from __future__ import annotations

import enum
from datetime import datetime

from pydantic import AwareDatetime, BaseModel, model_validator

from slurm_image.domain import sizes
from slurm_image.domain.model_config import FROZEN

MARKER_PREFIX = "slurm-image:"
REQUESTER_SEPARATOR = ";requester="


def submission_marker(lifecycle_id: str, requester: str | None = None) -> str:
    """The job comment of an attempt, unique to it: ``slurm-image:<lifecycle id>``, followed by
    ``;requester=<user>`` when a request made through the gateway acts for ``requester``, so
    that ``squeue`` shows whose image the service account's job builds (no blank: the comment
    is also an ``#SBATCH`` line's word)."""
    marker = f"{MARKER_PREFIX}{lifecycle_id}"
    return marker if requester is None else f"{marker}{REQUESTER_SEPARATOR}{requester}"


def is_marker_of(marker: str, lifecycle_id: str) -> bool:
    """Whether ``marker`` is a submission marker of ``lifecycle_id`` (for any requester)."""
    own = submission_marker(lifecycle_id)
    return marker == own or marker.startswith(f"{own}{REQUESTER_SEPARATOR}")


class JobSpec(BaseModel):
    """The scheduler-facing description of one lifecycle attempt's batch job."""

    model_config = FROZEN

    name: str
    partition: str
    account: str | None = None
    qos: str | None = None
    nodes: int = 1
    ntasks: int = 1
    cpus_per_task: int
    memory: str
    """Memory per node in Slurm's ``--mem`` form, e.g. ``16G``."""
    time_limit: str
    """``H:MM:SS``."""
    working_directory: str
    standard_output: str
    standard_error: str
    comment: str
    """The submission marker ``slurm-image:<lifecycle id>``; unique per attempt."""
    requeue: bool = False

    def sbatch_options(self) -> list[str]:
        """Every value as an sbatch option, in one fixed order: the script's ``#SBATCH`` lines
        and the sbatch command line are both made from this list."""
        options = [f"--job-name={self.name}"]
        if self.account:
            options.append(f"--account={self.account}")
        if self.qos:
            options.append(f"--qos={self.qos}")
        options += [
            f"--partition={self.partition}",
            f"--nodes={self.nodes}",
            f"--ntasks={self.ntasks}",
            f"--cpus-per-task={self.cpus_per_task}",
            f"--mem={self.memory}",
            f"--time={self.time_limit}",
            f"--chdir={self.working_directory}",
            f"--output={self.standard_output}",
            f"--error={self.standard_error}",
            "--requeue" if self.requeue else "--no-requeue",
            f"--comment={self.comment}",
        ]
        return options

    @property
    def memory_mib(self) -> int:
        """``memory`` in MiB, as slurmrestd's ``memory_per_node`` wants it."""
        return max(1, sizes.size_bytes(self.memory) >> 20)

    @property
    def time_limit_minutes(self) -> int:
        """``time_limit`` rounded up to whole minutes, as slurmrestd's ``time_limit`` wants it."""
        hours, minutes, seconds = (int(part) for part in self.time_limit.split(":"))
        total = hours * 3600 + minutes * 60 + seconds
        return max(1, -(-total // 60))


class JobState(enum.StrEnum):
    """Scheduler states the product distinguishes."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    UNKNOWN = "UNKNOWN"
    LOST = "LOST"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def has_started(self) -> bool:
        """The job got its node and ran (or runs): its start time is a fact, not the
        scheduler's estimate of a pending job's."""
        return self in _STARTED or self.is_terminal


_TERMINAL = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
        JobState.PREEMPTED,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
        JobState.LOST,
    }
)
_STARTED = frozenset({JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED})


def observed_times(
    state: JobState, started: datetime | None, ended: datetime | None
) -> tuple[datetime | None, datetime | None]:
    """What of the scheduler's start and end times is a fact for a job in ``state``: the start
    once the job has started (a pending job's is an estimate), the end once it is terminal (a
    running job's is its time limit's), and neither when the end is before the start. A job
    cancelled while pending has both, equal (Slurm sets them to the time of the cancel). Every
    submitter adapter reports its times through this one rule."""
    start = started if state.has_started else None
    end = ended if state.is_terminal and start is not None else None
    if start is not None and end is not None and end < start:
        return None, None
    return start, end


class JobStatus(BaseModel):
    """One job's state as the scheduler reports it, and when it ran (``observed_times``)."""

    model_config = FROZEN

    job_id: str
    state: JobState
    reason: str | None = None
    exit_code: int | None = None
    """The job's own exit status (not the raw wait status), when known."""
    started_at: AwareDatetime | None = None
    """When the job started (Slurm's ``StartTime``), once it has; None when not known."""
    ended_at: AwareDatetime | None = None
    """When it ended (``EndTime``), once terminal; None when not known."""

    @model_validator(mode="after")
    def _times(self) -> JobStatus:
        if (self.started_at, self.ended_at) != observed_times(
            self.state, self.started_at, self.ended_at
        ):
            raise ValueError(
                "started_at only once the job started, ended_at only once it is terminal and"
                " not before started_at"
            )
        return self

    @property
    def run_seconds(self) -> float | None:
        """How long the job ran, from the scheduler's times; None unless it ended with both."""
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()
