"""What a Slurm command's stderr means: transient, authentication, or a permanent refusal.

The messages are those Slurm 22.05 prints (measured; see docs/local-slurm.md); later releases
keep their wording.
"""

from __future__ import annotations

from slurm_image.adapters.slurm_fields import bounded
from slurm_image.ports.submitter import SchedulerAuthError, SchedulerRejected, SubmitterError
from slurm_image.submitters import TransientFailure

# Trouble reaching the controller: the request never got there.
_UNREACHABLE = (
    "unable to contact slurm controller",
    "connection refused",
    "slurmctld not responding",
    "no route to host",
)
# Trouble after the request may have been received: retry, but look before resubmitting.
_AMBIGUOUS = (
    "socket timed out",
    "communication connection failure",
    "slurm temporarily unable to accept job",
    "zero bytes were transmitted",
    "unexpected message received",
    "insane message length",
)
_AUTH = (
    "invalid authentication credential",
    "authentication failure",
    "protocol authentication error",
    "munge",
    "auth/jwt",
    "invalid user id",
    "access/permission denied",
)
# Permanent refusals, with the JobSpec field they concern.
_FIELDS = (
    ("invalid partition", "partition"),
    ("invalid account", "account"),
    ("invalid qos", "qos"),
    ("job's account not permitted", "account"),
    ("more processors requested than permitted", "cpus_per_task"),
    ("memory required by task is not available", "memory"),
    ("requested node configuration is not available", "resources"),
    ("invalid --time", "time_limit"),
    ("requested time limit is invalid", "time_limit"),
    ("time limit", "time_limit"),
    ("batch script is empty", "script"),
    ("does not look like a batch script", "script"),
    ("invalid job id specified", "job_id"),
)


def classify(
    command: str, stderr: str, returncode: int | None
) -> SubmitterError | TransientFailure:
    """The error a failed ``command`` (sbatch, squeue, scancel) amounts to."""
    message = bounded(stderr) or f"{command} exited with status {returncode}"
    lowered = message.lower()
    reason = message if message.startswith(f"{command}:") else f"{command}: {message}"
    if any(marker in lowered for marker in _UNREACHABLE):
        return TransientFailure(reason, "controller", ambiguous=False)
    if any(marker in lowered for marker in _AMBIGUOUS):
        return TransientFailure(reason, "controller", ambiguous=True)
    if any(marker in lowered for marker in _AUTH):
        return SchedulerAuthError(field="credentials", rule=reason)
    for marker, field in _FIELDS:
        if marker in lowered:
            return SchedulerRejected(field=field, rule=reason)
    return SchedulerRejected(field=command, rule=reason)
