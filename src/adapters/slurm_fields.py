"""What Slurm says about jobs, parsed strictly: job ids, state names, exit statuses.

Shared by the sbatch and slurmrestd adapters so that both report the same ``JobStatus`` for
the same job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from slurm_image.domain.job import JobState
from slurm_image.ports.submitter import SchedulerRejected, SubmissionUnconfirmed

MAX_JOB_ID = 2**32 - 1
_JOB_ID = re.compile(r"[1-9][0-9]{0,9}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_MESSAGE = 2000


def parse_job_id(text: str, *, field: str = "job_id") -> str:
    """A job id as the scheduler printed it: decimal, 1..2^32-1, nothing else.

    ``sbatch --parsable`` prints ``<id>`` or ``<id>;<cluster>`` on a multi-cluster site; the
    second form is refused because the id alone would not name the job.
    """
    value = text.strip("\n")
    if ";" in value:
        raise SchedulerRejected(
            field=field,
            rule=f"the scheduler answered with a cluster-qualified job id {bounded(value)!r}; "
            "multi-cluster submission is not supported",
        )
    if not _JOB_ID.fullmatch(value) or int(value) > MAX_JOB_ID:
        raise SchedulerRejected(field=field, rule=f"not a job id: {bounded(value)!r}")
    return value


def submitted_job_id(text: str, marker: str) -> str:
    """The job id in the answer to a submission the scheduler *accepted*.

    An answer that is not a plain job id is not a refusal: the job may exist (see
    ``unconfirmed``).
    """
    try:
        return parse_job_id(text)
    except SchedulerRejected as unusable:
        raise unconfirmed(unusable, marker) from None


def unconfirmed(unusable: SchedulerRejected, marker: str) -> SubmissionUnconfirmed:
    """The error for an accepted submission whose answer names no usable job id: never
    retried, so the claim on the attempt is kept and only a look-up of ``marker`` settles it."""
    return SubmissionUnconfirmed(
        field="job_id",
        rule=f"the scheduler accepted the submission but its answer names no job id we can use "
        f"({unusable.reason}); a job may be queued: look for the marker {marker!r} before "
        "submitting again",
    )


def is_job_id(text: str) -> bool:
    return bool(_JOB_ID.fullmatch(text)) and int(text) <= MAX_JOB_ID


def bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` safe to put in an error: control characters dropped, newlines joined, bounded."""
    flat = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    flat = _CONTROL.sub("", flat)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# Slurm's base job states, and the state flags and rarer names folded into them.
_BASE = {state.value: state for state in JobState if state not in (JobState.LOST,)}
_FOLDED = {
    "CONFIGURING": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "REQUEUE_HOLD": JobState.REQUEUED,
    "REQUEUE_FED": JobState.REQUEUED,
    "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.COMPLETING,
    "STOPPED": JobState.SUSPENDED,
    "SPECIAL_EXIT": JobState.FAILED,
    "LAUNCH_FAILED": JobState.FAILED,
    "REVOKED": JobState.CANCELLED,
}
_FLAGS = {"COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT"}


def parse_state(name: str) -> JobState:
    """One Slurm state name (``squeue %T``, ``scontrol JobState=``, REST ``job_state``)."""
    word = name.strip().upper().split(" ", 1)[0]  # "CANCELLED by 0" -> "CANCELLED"
    if word in _BASE:
        return _BASE[word]
    return _FOLDED.get(word, JobState.UNKNOWN)


def parse_state_list(names: Iterable[str]) -> JobState:
    """REST v0.0.40+ ``job_state``: a base state plus flags, e.g. ``["RUNNING", "COMPLETING"]``."""
    words = [str(name).strip().upper() for name in names]
    for word in words:
        if word not in _FLAGS and word in _BASE:
            return _BASE[word]
    return parse_state(words[0]) if words else JobState.UNKNOWN


def exit_code_from_wait_status(raw: int) -> int:
    """The job's exit code from a raw wait status (``squeue exit_code``, REST v0.0.38).

    A job killed by signal N reports ``128 + N``, as a shell would.
    """
    signal = raw & 0x7F
    return 128 + signal if signal else (raw >> 8) & 0xFF


_WAIT_STATUS = re.compile(r"[0-9]{1,5}")
_EXIT_SIGNAL = re.compile(r"([0-9]{1,3}):([0-9]{1,3})")


class UnreadableExitCode(ValueError):
    """An exit status in no form Slurm is known to print; ``value`` is what it printed."""

    def __init__(self, value: str) -> None:
        self.value = bounded(value, 80)
        super().__init__(f"exit code unreadable: {self.value!r}")


def exit_code_from_squeue(text: str) -> int:
    """The job's exit code from ``squeue -O exit_code``, in every form squeue prints it.

    Slurm 22.05 prints the raw wait status (exit 3 -> ``768``, killed by signal 9 -> ``9``);
    Slurm 24.11 prints ``exit:signal`` (``3:0``, ``0:9``). A signal reports ``128 + N``.
    Anything else raises ``UnreadableExitCode``: an unknown form is never read as success.
    """
    value = text.strip()
    if _WAIT_STATUS.fullmatch(value) and int(value) <= 0xFFFF:
        return exit_code_from_wait_status(int(value))
    pair = _EXIT_SIGNAL.fullmatch(value)
    if pair is not None:
        code, signal = int(pair.group(1)), int(pair.group(2))
        if code <= 255 and signal <= 127:
            return 128 + signal if signal else code
    raise UnreadableExitCode(text)


def reason_with_unreadable_exit(reason: str | None, error: UnreadableExitCode) -> str:
    """The reason a finished job's status carries when its exit code could not be read."""
    return f"{reason}; {error}" if reason else str(error)


CLIENT_TIME_ZONE = "UTC0"
"""The ``TZ`` the command-line clients run with: Slurm prints times in the client's local time
without an offset, so they are asked to print UTC (a POSIX TZ string: no zoneinfo file needed,
which a client's root may lack)."""
_CLIENT_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")
_LATEST_TIME = 2**40
"""Far beyond any job (the year 36812): a larger number is no time of one."""


def time_from_client(text: str) -> datetime | None:
    """A time as squeue prints it under ``CLIENT_TIME_ZONE`` (``2026-01-31T12:00:00``, UTC); None
    for ``NONE``, ``Unknown``, ``N/A`` or anything else that is no such time."""
    value = text.strip()
    if not _CLIENT_TIME.fullmatch(value):
        return None
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    except ValueError:
        return None


def time_from_epoch(value: object) -> datetime | None:
    """A time slurmrestd gives as seconds since the epoch; None for 0 (Slurm's unset), a
    negative or absurd number, or anything that is no integer."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < _LATEST_TIME:
        return None
    return datetime.fromtimestamp(value, UTC)
