"""What a batch job asks of the scheduler, and what the scheduler says about it.

``JobSpec`` carries every value of the script's ``#SBATCH`` lines so that a submitter which
ignores them (slurmrestd) can send the same values in its own job description.
"""

from __future__ import annotations

import enum

from pydantic import BaseModel

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


class JobStatus(BaseModel):
    """One job's state as the scheduler reports it."""

    model_config = FROZEN

    job_id: str
    state: JobState
    reason: str | None = None
    exit_code: int | None = None
    """The job's own exit status (not the raw wait status), when known."""
