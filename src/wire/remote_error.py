"""A refusal a gateway answered with (docs/gateway.md, "Errors"): its field, rule and exit code
as the gateway gave them, so that the command line exits as it would have locally."""

from __future__ import annotations

from slurm_image.domain.errors import SlurmImageError


class RemoteError(SlurmImageError):
    """The gateway refused the request, or could not be asked (``exit_code``: the command
    line's code for it; ``retry_after_s``: when a busy gateway said to ask again)."""

    def __init__(
        self, *, field: str, rule: str, exit_code: int, retry_after_s: int | None = None
    ) -> None:
        super().__init__(field=field, rule=rule)
        self.exit_code = exit_code
        self.retry_after_s = retry_after_s
