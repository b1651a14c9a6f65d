"""The one table from error types to exit codes (cli.md)."""

from __future__ import annotations

from slurm_image.application.cancel import NotSubmitted
from slurm_image.application.errors import (
    AliasExists,
    AlreadySubmitted,
    JobNotSuccessful,
    LifecycleExists,
    StillRunning,
    UnknownAlias,
    UnknownLifecycle,
    VerificationFailed,
    WrongWorkspace,
)
from slurm_image.application.observe import SubmitterMismatch
from slurm_image.application.wait import WaitTimedOut
from slurm_image.domain.errors import DomainError, PlanInvariantViolation
from slurm_image.entrypoints.exit_codes import (
    EXIT_CONFLICT,
    EXIT_INTERNAL,
    EXIT_INVALID,
    EXIT_JOB_FAILED,
    EXIT_OK,
    EXIT_SCHEDULER,
    EXIT_VERIFICATION,
    EXIT_WAIT_TIMEOUT,
)
from slurm_image.ports.credentials import CredentialsFileError
from slurm_image.ports.hasher import HashError
from slurm_image.ports.lock import LockTimeout
from slurm_image.ports.store import ChangedWhileRead
from slurm_image.ports.submitter import SubmitterError
from slurm_image.ports.workspace import (
    AccessDenied,
    IdentityChanged,
    NotFound,
    NotRegularFile,
    TooLarge,
    UnsafePath,
)

__all__ = [
    "EXIT_CONFLICT",
    "EXIT_INTERNAL",
    "EXIT_INVALID",
    "EXIT_JOB_FAILED",
    "EXIT_OK",
    "EXIT_SCHEDULER",
    "EXIT_VERIFICATION",
    "EXIT_WAIT_TIMEOUT",
    "describe",
    "exit_code_for",
]

# Most specific first: the first matching row decides.
EXIT_CODES: list[tuple[type[BaseException], int]] = [
    (PlanInvariantViolation, EXIT_VERIFICATION),
    (DomainError, EXIT_INVALID),
    (CredentialsFileError, EXIT_INVALID),
    (SubmitterError, EXIT_SCHEDULER),
    (VerificationFailed, EXIT_VERIFICATION),
    # The workspace is not what it must be (symlinked, foreign-owned, swapped, not regular):
    # refused like a staged file that fails its digest.
    (UnsafePath, EXIT_VERIFICATION),
    (NotRegularFile, EXIT_VERIFICATION),
    (IdentityChanged, EXIT_VERIFICATION),
    (TooLarge, EXIT_VERIFICATION),
    (HashError, EXIT_VERIFICATION),
    # A read-only or unwritable workspace root is a profile problem; nothing was created.
    (AccessDenied, EXIT_INVALID),
    # Use cases turn a missing staged file or attempt into their own errors; what reaches here
    # is the profile's workspace root (or a directory on the way) that does not exist.
    (NotFound, EXIT_INVALID),
    (UnknownLifecycle, EXIT_INVALID),
    (WrongWorkspace, EXIT_INVALID),
    (LifecycleExists, EXIT_CONFLICT),
    (AlreadySubmitted, EXIT_CONFLICT),
    (NotSubmitted, EXIT_INVALID),
    (SubmitterMismatch, EXIT_INVALID),
    # Publication and the catalog (design §8).
    (ChangedWhileRead, EXIT_VERIFICATION),
    (JobNotSuccessful, EXIT_JOB_FAILED),
    (WaitTimedOut, EXIT_WAIT_TIMEOUT),
    (AliasExists, EXIT_CONFLICT),
    (LockTimeout, EXIT_CONFLICT),
    (StillRunning, EXIT_CONFLICT),
    (UnknownAlias, EXIT_INVALID),
]


def exit_code_for(error: BaseException) -> int:
    for kind, code in EXIT_CODES:
        if isinstance(error, kind):
            return code
    return EXIT_INTERNAL


def describe(error: BaseException) -> str:
    """One line naming the field and the rule; never a traceback, never a secret value."""
    field = getattr(error, "field", None)
    rule = getattr(error, "rule", None) or getattr(error, "reason", None)
    text = f"{field}: {rule}" if field and rule else str(error) or type(error).__name__
    return " ".join(text.split())
