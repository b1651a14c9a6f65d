"""The one table from error types to exit codes (docs/cli.md), and the one line that names an
error's field and rule."""

from __future__ import annotations

from slurm_image.application.errors import (
    AliasExists,
    AlreadySubmitted,
    JobNotSuccessful,
    LifecycleExists,
    NoStore,
    NotSubmitted,
    StillRunning,
    SubmitterMismatch,
    UnknownAlias,
    UnknownLifecycle,
    VerificationFailed,
    WaitTimedOut,
    WrongWorkspace,
)
from slurm_image.domain.errors import (
    Busy,
    DomainError,
    Forbidden,
    InvalidRegistryAnswer,
    NotAuthenticated,
    PlanInvariantViolation,
    SignatureRefused,
    SlurmImageError,
)
from slurm_image.ports.accounts import UnknownAccount
from slurm_image.ports.authentication import AuthenticatorUnavailable, CredentialRefused
from slurm_image.ports.credentials import CredentialsFileError
from slurm_image.ports.hasher import HashError
from slurm_image.ports.history import HistoryError
from slurm_image.ports.lock import LockTimeout
from slurm_image.ports.registry import AnswerRefused, RegistryError, RegistryNotFound
from slurm_image.ports.signatures import KeyFileError
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
from slurm_image.wire.exit_codes import (
    EXIT_BUSY,
    EXIT_CONFLICT,
    EXIT_FORBIDDEN,
    EXIT_INTERNAL,
    EXIT_INVALID,
    EXIT_JOB_FAILED,
    EXIT_NOT_AUTHENTICATED,
    EXIT_OK,
    EXIT_OUTDATED,
    EXIT_REGISTRY_ANSWER,
    EXIT_SCHEDULER,
    EXIT_UNSIGNED,
    EXIT_VERIFICATION,
    EXIT_WAIT_TIMEOUT,
)
from slurm_image.wire.remote_error import RemoteError

__all__ = [
    "EXIT_BUSY",
    "EXIT_CONFLICT",
    "EXIT_FORBIDDEN",
    "EXIT_INTERNAL",
    "EXIT_INVALID",
    "EXIT_JOB_FAILED",
    "EXIT_NOT_AUTHENTICATED",
    "EXIT_OK",
    "EXIT_OUTDATED",
    "EXIT_REGISTRY_ANSWER",
    "EXIT_SCHEDULER",
    "EXIT_UNSIGNED",
    "EXIT_VERIFICATION",
    "EXIT_WAIT_TIMEOUT",
    "describe",
    "exit_code_for",
]

# Most specific first: the first matching row decides. Any other error, ours or not, is an
# internal error (exit 1).
EXIT_CODES: list[tuple[type[SlurmImageError], int]] = [
    # Through the gateway (docs/gateway.md): who is asking, who may do what, its limits.
    (NotAuthenticated, EXIT_NOT_AUTHENTICATED),
    (CredentialRefused, EXIT_NOT_AUTHENTICATED),
    (Forbidden, EXIT_FORBIDDEN),
    (UnknownAccount, EXIT_FORBIDDEN),
    (Busy, EXIT_BUSY),
    (AuthenticatorUnavailable, EXIT_SCHEDULER),
    (PlanInvariantViolation, EXIT_VERIFICATION),
    # A registry's answer that is refused (a digest header that lies, too large, no manifest),
    # whether the domain or the adapter found it.
    (InvalidRegistryAnswer, EXIT_REGISTRY_ANSWER),
    # No signature the site policy accepts (docs/design.md, "Image policy and signatures").
    (SignatureRefused, EXIT_UNSIGNED),
    (DomainError, EXIT_INVALID),
    (CredentialsFileError, EXIT_INVALID),
    # A policy key file others could change, or that is missing: a profile problem.
    (KeyFileError, EXIT_INVALID),
    (SubmitterError, EXIT_SCHEDULER),
    (AnswerRefused, EXIT_REGISTRY_ANSWER),
    # No such tag or repository: like an unknown alias, the input names nothing.
    (RegistryNotFound, EXIT_INVALID),
    # Unreachable after retries, credentials refused or missing, any other refusal.
    (RegistryError, EXIT_SCHEDULER),
    (VerificationFailed, EXIT_VERIFICATION),
    # The workspace is not what it must be (symlinked, foreign-owned, swapped, not regular):
    # refused like a staged file that fails its digest.
    (UnsafePath, EXIT_VERIFICATION),
    (NotRegularFile, EXIT_VERIFICATION),
    (IdentityChanged, EXIT_VERIFICATION),
    (TooLarge, EXIT_VERIFICATION),
    (HashError, EXIT_VERIFICATION),
    # The store's history is not the owner's regular files (a symlink, another owner, too
    # large) or cannot be read: refused like the store's own records.
    (HistoryError, EXIT_VERIFICATION),
    # A read-only or unwritable workspace root is a profile problem; nothing was created.
    (AccessDenied, EXIT_INVALID),
    # Use cases turn a missing staged file or attempt into their own errors; what reaches here
    # is the profile's workspace root (or a directory on the way) that does not exist.
    (NotFound, EXIT_INVALID),
    (UnknownLifecycle, EXIT_INVALID),
    (WrongWorkspace, EXIT_INVALID),
    (NoStore, EXIT_INVALID),
    (LifecycleExists, EXIT_CONFLICT),
    (AlreadySubmitted, EXIT_CONFLICT),
    (NotSubmitted, EXIT_INVALID),
    (SubmitterMismatch, EXIT_INVALID),
    # Publication and the catalog.
    (ChangedWhileRead, EXIT_VERIFICATION),
    (JobNotSuccessful, EXIT_JOB_FAILED),
    (WaitTimedOut, EXIT_WAIT_TIMEOUT),
    (AliasExists, EXIT_CONFLICT),
    (LockTimeout, EXIT_CONFLICT),
    (StillRunning, EXIT_CONFLICT),
    (UnknownAlias, EXIT_INVALID),
]


def exit_code_for(error: BaseException) -> int:
    if isinstance(error, RemoteError):
        return error.exit_code  # the gateway's word, made from this same table
    for kind, code in EXIT_CODES:
        if isinstance(error, kind):
            return code
    return EXIT_INTERNAL


def describe(error: BaseException) -> str:
    """One line naming the field and the rule; never a traceback, never a secret value."""
    if isinstance(error, SlurmImageError) and error.field and error.rule:
        text = f"{error.field}: {error.rule}"
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())
