"""Errors the use cases raise themselves, all of them. Each carries the field and the rule."""

from __future__ import annotations

from slurm_image.domain.errors import SlurmImageError


class ApplicationError(SlurmImageError):
    """Base of the use-case errors: ``field`` names what is at fault, ``rule`` says why."""


class VerificationFailed(ApplicationError):
    """A staged file, record or directory is not what was staged: nothing was submitted."""


class LifecycleExists(ApplicationError):
    """An attempt with this lifecycle id already exists in the workspace."""


class UnknownLifecycle(ApplicationError):
    """No staged attempt with this lifecycle id exists in the workspace."""


class AlreadySubmitted(ApplicationError):
    """The attempt was submitted already; an attempt directory is used for one job only."""


class WrongWorkspace(ApplicationError):
    """The plan names another workspace root than the workspace the use case was given."""


class SubmissionInDoubt(AlreadySubmitted):
    """An earlier submit of this attempt started and its outcome is unknown: no job carries
    the attempt's marker, yet one may still reach the scheduler. Never submitted again blindly."""


class AliasExists(ApplicationError):
    """The alias is published already; ``--replace`` rebinds it (the old artifact stays)."""


class UnknownAlias(ApplicationError):
    """No alias of this name is published."""

    @classmethod
    def named(cls, name: str) -> UnknownAlias:
        return cls(field="name", rule=f"no alias {name} is published (see: slurm-image list)")


class JobNotSuccessful(ApplicationError):
    """The lifecycle's job did not complete successfully (or has not finished): nothing to
    publish."""


class NotSubmitted(ApplicationError):
    """The lifecycle has no job to act on (to wait for, or to cancel)."""


class SubmitterMismatch(ApplicationError):
    """The attempt was submitted through another submitter than the profile selects."""


class WaitTimedOut(ApplicationError):
    """``timeout_s`` elapsed while a job was still running (nothing was cancelled)."""


class StillRunning(ApplicationError):
    """The attempt's job may still run, or its submission is unknown: it is kept."""


class NoStore(ApplicationError):
    """The workspace root holds no store (``images/``): nothing was ever staged or published
    under it, or it is not the root the site uses."""
