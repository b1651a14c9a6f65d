"""How a command fails: ``CommandFailed`` carries the error, which ``cli.main`` maps to its exit
code, and the hint on what to do next (``next_step``). The use cases' errors are imported only
when a command has failed."""

from __future__ import annotations

from slurm_image.cli.arguments import PROG


class CommandFailed(Exception):
    """An error already mapped to an exit code, with an optional hint on what to do next."""

    def __init__(self, error: BaseException, hint: str | None = None) -> None:
        from slurm_image.wire.errors import describe

        self.error = error
        self.hint = hint
        super().__init__(describe(error))


def next_step(error: BaseException) -> str | None:
    """What to do next, for the errors where the rule alone does not say it."""
    notes = getattr(error, "__notes__", None)
    if notes:
        return "; ".join(str(note) for note in notes)
    from slurm_image.application.errors import (
        JobNotSuccessful,
        UnknownLifecycle,
        VerificationFailed,
    )
    from slurm_image.domain.errors import InvalidProfile
    from slurm_image.ports.lock import LockTimeout
    from slurm_image.ports.submitter import SchedulerUnavailable

    if isinstance(error, InvalidProfile) and error.field == "profile":
        return "pass --profile PATH or set SLURM_IMAGE_PROFILE"
    if isinstance(error, JobNotSuccessful):
        return f"`{PROG} status ID` explains the exit code; `{PROG} logs ID` prints the job's logs"
    if isinstance(error, VerificationFailed):
        return "nothing was published; the attempt is kept as it is for inspection"
    if isinstance(error, UnknownLifecycle):
        return "use an id printed by import or inspect"
    if isinstance(error, LockTimeout):
        return "another publisher holds it; try again later"
    if isinstance(error, SchedulerUnavailable):
        return "check that the cluster is reachable and the [submitter] settings"
    return None
