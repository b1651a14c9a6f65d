"""What a slurmrestd answer means: success, transient trouble, auth failure or a refusal.

Measured on slurmrestd 22.05 and 24.11 (docs/local-slurm.md); the error numbers are Slurm's own
and keep their meaning in later releases.
"""

from __future__ import annotations

from slurm_image.adapters.slurm_fields import bounded
from slurm_image.adapters.slurmrest.mapping import RestError
from slurm_image.ports.submitter import (
    SchedulerAuthError,
    SchedulerRejected,
    SubmitterError,
    UnknownJob,
)
from slurm_image.submitters import TransientFailure

CONTROLLER_UNREACHABLE = 1800  # "Unable to contact slurm controller (connect failure)"
_AMBIGUOUS_CODES = {
    1801,  # communications send error
    1802,  # communications receive error
    1803,  # communications shutdown error
    5004,  # socket timed out on send/recv
}
BAD_TOKEN = 5005  # "Zero Bytes were transmitted or received": a refused JWT, measured
AUTHENTICATION_ERROR = 1007  # "Protocol authentication error": a refused JWT on 24.11, HTTP 511
UNSPECIFIED = -1  # 22.05 reads: controller down AND refused token both answer -1
INVALID_JOB_ID = 2017
INVALID_PARTITION = 2000
UNPARSABLE_PATH = 422  # 24.11, error 9000: a job id Slurm reserves (4294967294, 4294967295)
_FIELDS = {
    INVALID_PARTITION: "partition",  # Invalid partition name specified
    2005: "cpus_per_task",  # More processors requested than permitted
    2014: "resources",  # Requested node configuration is not available
    2024: "account",  # Invalid account or account/partition combination
    2030: "qos",  # Invalid qos specification
    2047: "time_limit",  # Requested time limit is invalid
}
_TEXT_FIELDS = (
    ("partition", "partition"),
    ("account", "account"),
    ("qos", "qos"),
    ("time limit", "time_limit"),
    ("processors", "cpus_per_task"),
    ("memory", "memory"),
)


def classify(
    operation: str, status: int, errors: list[RestError], text: str, *, sent: bool = True
) -> SubmitterError | TransientFailure | None:
    """The error for an answer, or None when the answer is a success.

    ``sent`` is false for requests whose repetition is harmless (reads): nothing is ambiguous.
    """
    detail = "; ".join(f"{e.code}: {e.text}" if e.code is not None else e.text for e in errors)
    reason = f"{operation}: HTTP {status}: {bounded(detail or text) or 'no details'}"
    codes = {e.code for e in errors}
    if status in (401, 403, 511):
        return SchedulerAuthError(field="credentials", rule=reason)
    if status in (502, 503, 504):
        return TransientFailure(reason, "slurmrestd", ambiguous=sent)
    if BAD_TOKEN in codes or AUTHENTICATION_ERROR in codes:
        return SchedulerAuthError(field="credentials", rule=reason)
    if CONTROLLER_UNREACHABLE in codes:
        return TransientFailure(reason, "controller", ambiguous=False)
    if codes & _AMBIGUOUS_CODES:
        return TransientFailure(reason, "controller", ambiguous=sent)
    if INVALID_JOB_ID in codes:
        return UnknownJob(field="job_id", rule=reason)
    for code in codes:
        if code in _FIELDS:
            return SchedulerRejected(field=_FIELDS[code], rule=reason)
    if status == 404:
        return SchedulerRejected(field="api_version", rule=f"{reason} (API version not offered?)")
    if UNSPECIFIED in codes:
        return TransientFailure(
            f"{reason} (slurmrestd 22.05 answers this when the controller is down, and when "
            "the token is refused)",
            "controller",
            ambiguous=sent,
        )
    if errors or 400 <= status < 500:
        lowered = detail.lower()
        field = next((f for marker, f in _TEXT_FIELDS if marker in lowered), "job")
        return SchedulerRejected(field=field, rule=reason)
    if status >= 500:
        return TransientFailure(reason, "slurmrestd", ambiguous=sent)
    return None
